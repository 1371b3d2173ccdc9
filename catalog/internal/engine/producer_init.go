package engine

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/catalog"
)

// InitProducer (catalog.Producers.InitProducer) as one script for both backends: the
// expiry pass, then either the transaction coordinator's init (a transactional id) or
// an idempotent producer's id and epoch, over the statements a backend gives.

// ProducerStmts are the statements of an idempotent producer's init, in one write
// transaction.
type ProducerStmts interface {
	// ProducerRow reads producer id's epoch and whether it has a transactional id,
	// holding the row (where the database has row locks) until the transaction ends;
	// found is false when there is none.
	ProducerRow(ctx context.Context, id int64) (epoch int16, transactional, found bool, err error)
	// NewProducer inserts a producer at epoch 0 owned by owner and answers its id.
	NewProducer(ctx context.Context, owner string) (int64, error)
	// BumpProducer moves producer id to epoch and marks it used now.
	BumpProducer(ctx context.Context, id int64, epoch int16) error
}

// ProducerBackend runs producer inits.
type ProducerBackend interface {
	// Name is the backend's name, for errors ("postgres", "sqlite").
	Name() string
	// ExpireProducers forgets the producers idle past the catalog's expiry
	// (catalog.Options.ProducerExpiry), with their state.
	ExpireProducers(ctx context.Context) error
	// ProducerTx runs fn in a write transaction and commits it when fn returns nil.
	ProducerTx(ctx context.Context, fn func(ProducerStmts) error) error
}

// InitProducer hands out a producer identity (see catalog.Producers): for a
// transactional id, the coordinator's InitTxnProducer over txn; otherwise the current
// identity at its next epoch when NextIdempotentEpoch allows (KIP-360), or a new id.
func InitProducer(ctx context.Context, db ProducerBackend, txn TxnBackend, tid string, current *catalog.Producer, owner string) (catalog.Producer, error) {
	p, err := initProducer(ctx, db, txn, tid, current, owner)
	if err != nil {
		if tid == "" {
			return catalog.Producer{}, fmt.Errorf("%s: init producer: %w", db.Name(), err)
		}
		return catalog.Producer{}, fmt.Errorf("%s: init producer %q: %w", db.Name(), tid, err)
	}
	return p, nil
}

func initProducer(ctx context.Context, db ProducerBackend, txn TxnBackend, tid string, current *catalog.Producer, owner string) (catalog.Producer, error) {
	if tid != "" {
		if err := catalog.ValidateTransactionalID(tid); err != nil {
			return catalog.Producer{}, err
		}
	}
	if err := db.ExpireProducers(ctx); err != nil {
		return catalog.Producer{}, fmt.Errorf("expire idle producers: %w", err)
	}
	if tid != "" {
		// A transactional id is the coordinator's (an ongoing transaction is aborted,
		// the epoch bumped).
		return InitTxnProducer(ctx, txn, catalog.InitTxn{TransactionalID: tid, Timeout: catalog.DefaultTxnTimeout, Current: current, Owner: owner})
	}
	var p catalog.Producer
	err := db.ProducerTx(ctx, func(q ProducerStmts) error {
		if current != nil {
			epoch, txnal, found, err := q.ProducerRow(ctx, current.ID)
			if err != nil {
				return err
			}
			if next, ok := NextIdempotentEpoch(*current, found, txnal, epoch); ok {
				p = catalog.Producer{ID: current.ID, Epoch: next}
				return q.BumpProducer(ctx, p.ID, next)
			}
		}
		id, err := q.NewProducer(ctx, owner)
		p = catalog.Producer{ID: id}
		return err
	})
	return p, err
}
