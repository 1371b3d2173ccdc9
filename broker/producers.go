package broker

import (
	"context"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// InitProducerRequest asks for a producer identity.
type InitProducerRequest struct {
	// TransactionalID, when set, names a producer that outlives its instances: a known
	// one gets its id again at the next epoch, which fences the instance that held it.
	// nil: a new id at epoch 0 (a plain idempotent producer).
	TransactionalID *string
	// Current is the identity the caller holds: with TransactionalID, an instance
	// bumping its own epoch, which must not fence a newer instance that has taken the id
	// over; without one, a producer restarting its sequences at the next epoch under
	// the same id (KIP-360), or, if that identity is not current, getting a new one
	// (catalog.Producers.InitProducer).
	Current *catalog.Producer
}

// InitProducer hands out a producer identity for idempotent (and transactional)
// produce.
func (b *Broker) InitProducer(ctx context.Context, who Principal, req InitProducerRequest) (catalog.Producer, error) {
	if e := b.check(CapProducers); e != nil {
		return catalog.Producer{}, e
	}
	tid := ""
	if req.TransactionalID != nil {
		tid = *req.TransactionalID
		if e := b.authorize(ctx, who, acl.OpWrite, acl.TransactionalID(tid)); e != nil {
			return catalog.Producer{}, e
		}
		if err := catalog.ValidateTransactionalID(tid); err != nil {
			return catalog.Producer{}, newError(CodeInvalidTransactionalID, "%s", err.Error()).with("field", "transactional_id")
		}
	} else if e := b.authorizeProducer(ctx, who, req.Current); e != nil {
		// A plain producer restarting its sequences (KIP-360) must not bump another
		// principal's producer, nor another's transactional producer.
		return catalog.Producer{}, e
	}
	if c := req.Current; c != nil {
		if c.ID < 0 || c.Epoch < 0 {
			return catalog.Producer{}, newError(CodeInvalidRequest, "producer: id %d epoch %d: use what InitProducer answered", c.ID, c.Epoch).
				with("field", "producer_id")
		}
	}
	p, err := b.d.Producers.InitProducer(ctx, tid, req.Current, who.Name)
	if err == nil && tid == "" {
		// A plain producer's id is who's: a new one was created as its, and a bumped
		// one passed authorizeProducer. A transactional id's may be older than who.
		b.rememberProducer(p.ID, catalog.ProducerOwner{Principal: who.Name})
	} else if err == nil {
		b.rememberProducer(p.ID, catalog.ProducerOwner{TransactionalID: tid})
	}
	if err != nil {
		if e, ok := producerError(err, nil); ok {
			return catalog.Producer{}, e
		}
		if isGroupError(err) {
			return catalog.Producer{}, groupError("init producer", err)
		}
		return catalog.Producer{}, catalogError("init producer", err)
	}
	return p, nil
}
