package broker

import (
	"context"
	"errors"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// The transaction coordinator (docs/design.md "Transactions"): Kafka's transactional
// calls, authorized and bounded here, their state the catalog's (catalog.Transactions,
// one catalog transaction each). Every node coordinates every transactional id.

// Transactions is the coordinator's part of the catalog (both backends).
type Transactions = catalog.Transactions

var _ Transactions = catalog.Transactions(nil)

// DefaultTxnMaxTimeout is Config.TxnMaxTimeout when it is zero: Kafka's
// transaction.max.timeout.ms.
const DefaultTxnMaxTimeout = 15 * time.Minute

// InitTxnRequest asks for a transactional producer's identity (InitProducerId with a
// transactional id).
type InitTxnRequest struct {
	TransactionalID string
	// Timeout is the transaction's timeout: positive, at most Config.TxnMaxTimeout.
	Timeout time.Duration
	// Current is the identity the caller holds (KIP-360), nil for none.
	Current *catalog.Producer
}

// InitTxnProducer hands out a transactional producer's identity: a new instance fences
// the old one and aborts its ongoing transaction.
func (b *Broker) InitTxnProducer(ctx context.Context, who Principal, req InitTxnRequest) (catalog.Producer, error) {
	if e := b.check(CapTransactions); e != nil {
		return catalog.Producer{}, e
	}
	if e := b.authorize(ctx, who, acl.OpWrite, acl.TransactionalID(req.TransactionalID)); e != nil {
		return catalog.Producer{}, e
	}
	if err := catalog.ValidateTransactionalID(req.TransactionalID); err != nil {
		return catalog.Producer{}, newError(CodeInvalidTransactionalID, "%s", err.Error()).with("field", "transactional_id")
	}
	if req.Timeout <= 0 || req.Timeout > b.txnMaxTimeout {
		return catalog.Producer{}, newError(CodeInvalidTransactionTimeout, "transaction timeout %s: it must be positive and at most %s (the node's transaction.max.timeout.ms)",
			req.Timeout, b.txnMaxTimeout).with("max_timeout_ms", b.txnMaxTimeout.Milliseconds())
	}
	if c := req.Current; c != nil && (c.ID < 0 || c.Epoch < 0) {
		return catalog.Producer{}, newError(CodeInvalidRequest, "producer: id %d epoch %d: use what InitProducer answered", c.ID, c.Epoch)
	}
	p, err := b.d.Transactions.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: req.TransactionalID, Timeout: req.Timeout, Current: req.Current, Owner: who.Name})
	if err != nil {
		return catalog.Producer{}, txnError("init producer", err)
	}
	b.rememberProducer(p.ID, catalog.ProducerOwner{TransactionalID: req.TransactionalID})
	return p, nil
}

// TxnPartitionsRequest adds partitions to a transaction (AddPartitionsToTxn).
type TxnPartitionsRequest struct {
	TransactionalID string
	Producer        catalog.Producer
	Partitions      []catalog.TopicPartitions
}

// PartitionError is one partition's refusal.
type PartitionError struct {
	Topic     string
	Partition int32
	Err       *Error
}

// AddTxnPartitions adds partitions to the producer's transaction, which begins if it
// was not ongoing. A partition the principal may not write, or that does not exist,
// refuses the call with failed naming each such partition: then none was added.
func (b *Broker) AddTxnPartitions(ctx context.Context, who Principal, req TxnPartitionsRequest) (failed []PartitionError, err error) {
	if e := b.txnCall(ctx, who, req.TransactionalID); e != nil {
		return nil, e
	}
	var tps []catalog.TopicPartition
	for _, t := range req.Partitions {
		if e := b.authorize(ctx, who, acl.OpWrite, acl.Topic(t.Topic)); e != nil {
			for _, p := range t.Partitions {
				failed = append(failed, PartitionError{Topic: t.Topic, Partition: p, Err: e})
			}
			continue
		}
		for _, p := range t.Partitions {
			ti, e := b.lookupPartition(ctx, t.Topic, p)
			if e != nil {
				failed = append(failed, PartitionError{Topic: t.Topic, Partition: p, Err: e})
				continue
			}
			tps = append(tps, catalog.TopicPartition{TopicID: ti.ID, Partition: p})
		}
	}
	if len(failed) > 0 {
		return failed, nil
	}
	if len(tps) == 0 {
		return nil, newError(CodeInvalidRequest, "no partitions to add to the transaction")
	}
	err = b.d.Transactions.AddTxnPartitions(ctx, catalog.TxnPartitions{TransactionalID: req.TransactionalID, Producer: req.Producer, Partitions: tps})
	if err != nil {
		return nil, txnError("add partitions to the transaction", err)
	}
	return nil, nil
}

// TxnGroupRequest adds a consumer group's offsets to a transaction (AddOffsetsToTxn).
type TxnGroupRequest struct {
	TransactionalID string
	Producer        catalog.Producer
	Group           string
}

// AddTxnGroup adds a group to the producer's transaction, which begins if needed.
func (b *Broker) AddTxnGroup(ctx context.Context, who Principal, req TxnGroupRequest) error {
	if e := b.txnCall(ctx, who, req.TransactionalID); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(req.Group)); e != nil {
		return e
	}
	if err := catalog.ValidateGroupName(req.Group); err != nil {
		return newError(CodeInvalidGroupName, "%s", err.Error())
	}
	if err := b.d.Transactions.AddTxnGroup(ctx, catalog.TxnGroup{TransactionalID: req.TransactionalID, Producer: req.Producer, Group: req.Group}); err != nil {
		return txnError("add the group to the transaction", err)
	}
	return nil
}

// TxnOffsetsRequest is a transaction's offset commit (TxnOffsetCommit).
type TxnOffsetsRequest struct {
	TransactionalID string
	Producer        catalog.Producer
	Group           string
	// MemberID, InstanceID and Generation name the committing member (KIP-447); ""
	// and -1 commit without member checks, as pre-KIP-447 clients do.
	MemberID   string
	InstanceID string
	Generation int32
	// AddGroup: KIP-890's TxnOffsetCommit v5, which adds the group and begins the
	// transaction itself.
	AddGroup bool
	Offsets  []catalog.CommitOffset
}

// TxnCommitOffsets stores offsets that reach the group when the transaction commits. A
// member's commit is checked against the group's rules now (as its commit alone would
// be: the member, its generation or epoch, its partitions), nothing stored by that
// check.
func (b *Broker) TxnCommitOffsets(ctx context.Context, who Principal, req TxnOffsetsRequest) error {
	if e := b.txnCall(ctx, who, req.TransactionalID); e != nil {
		return e
	}
	oc := catalog.OffsetCommit{Group: req.Group, Offsets: req.Offsets}
	if e := b.authorizeCommit(ctx, who, &oc); e != nil {
		return e
	}
	if err := catalog.ValidateOffsetCommit(oc); err != nil {
		return groupError("commit offsets", err, onGroup(req.Group, ""))
	}
	if req.MemberID != "" || req.Generation >= 0 {
		if e := b.checkMemberCommit(ctx, req); e != nil {
			return e
		}
	}
	err := b.d.Transactions.TxnCommitOffsets(ctx, catalog.TxnOffsetCommit{TransactionalID: req.TransactionalID, Producer: req.Producer,
		Group: req.Group, AddGroup: req.AddGroup, MemberID: req.MemberID, MemberEpoch: req.Generation, Offsets: req.Offsets})
	if err != nil {
		return txnError("commit offsets in the transaction", err, onGroup(req.Group, req.MemberID))
	}
	return nil
}

// checkMemberCommit checks a transactional commit's member by its group's type, storing
// nothing: a classic member at its generation, a consumer-group member at its epoch.
func (b *Broker) checkMemberCommit(ctx context.Context, req TxnOffsetsRequest) *Error {
	if b.d.Classic != nil {
		err := b.d.Classic.CommitClassicOffsets(ctx, catalog.ClassicCommit{Group: req.Group, MemberID: req.MemberID,
			InstanceID: req.InstanceID, Generation: req.Generation, Offsets: req.Offsets, CheckOnly: true})
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, catalog.ErrNotClassicGroup):
			return groupError("commit offsets", err, onGroup(req.Group, req.MemberID))
		}
	}
	if b.d.Groups == nil {
		return nil
	}
	err := b.d.Groups.CommitOffsets(ctx, catalog.OffsetCommit{Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.Generation,
		Offsets: req.Offsets, Released: true, CheckOnly: true})
	if err != nil {
		return groupError("commit offsets", err, onGroup(req.Group, req.MemberID))
	}
	return nil
}

// EndTxnRequest commits or aborts a transaction (EndTxn).
type EndTxnRequest struct {
	TransactionalID string
	Producer        catalog.Producer
	Commit          bool
	// BumpEpoch: transactions v2 (EndTxn v5+): the epoch moves with every decision.
	BumpEpoch bool
}

// EndTxn decides the producer's transaction. It answers once the decision, its
// markers and the transaction's group offsets have committed.
func (b *Broker) EndTxn(ctx context.Context, who Principal, req EndTxnRequest) (catalog.EndTxnResult, error) {
	if e := b.txnCall(ctx, who, req.TransactionalID); e != nil {
		return catalog.EndTxnResult{}, e
	}
	action := "txn.abort"
	if req.Commit {
		action = "txn.commit"
	}
	ctx = withAudit(ctx, who, action, acl.TransactionalID(req.TransactionalID),
		map[string]any{"producer_id": req.Producer.ID, "epoch": req.Producer.Epoch})
	res, err := b.d.Transactions.EndTxn(ctx, catalog.EndTxn{TransactionalID: req.TransactionalID, Producer: req.Producer,
		Commit: req.Commit, BumpEpoch: req.BumpEpoch})
	if err != nil {
		return catalog.EndTxnResult{}, txnError("end the transaction", err)
	}
	if !res.Retry {
		b.txnMetrics.decided(req.Commit, "client")
	}
	if res.Producer.ID != req.Producer.ID {
		b.rememberProducer(res.Producer.ID, catalog.ProducerOwner{TransactionalID: req.TransactionalID})
	}
	return res, nil
}

// TxnDescription is a transactional id's state as DescribeTxns answers it; Err is set
// when it may not be described.
type TxnDescription struct {
	catalog.TxnDescription
	Err *Error
}

// DescribeTxns describes transactional ids, in order: each needs describe on its id,
// and its partitions are listed only for topics the principal may describe.
func (b *Broker) DescribeTxns(ctx context.Context, who Principal, ids []string) ([]TxnDescription, error) {
	if e := b.check(CapTransactions); e != nil {
		return nil, e
	}
	out := make([]TxnDescription, len(ids))
	var allowed []string
	for i, id := range ids {
		out[i].TransactionalID = id
		if e := b.authorize(ctx, who, acl.OpDescribe, acl.TransactionalID(id)); e != nil {
			out[i].Err = e
			continue
		}
		allowed = append(allowed, id)
	}
	ds, err := b.d.Transactions.DescribeTxns(ctx, allowed)
	if err != nil {
		return nil, txnError("describe transactions", err)
	}
	byID := make(map[string]catalog.TxnDescription, len(ds))
	for _, d := range ds {
		byID[d.TransactionalID] = d
	}
	for i := range out {
		if out[i].Err != nil {
			continue
		}
		d := byID[out[i].TransactionalID]
		if d.State == "" {
			out[i].Err = newError(CodeInvalidRequest, "transactional id %q is not known", d.TransactionalID).with("unknown", true)
			continue
		}
		var parts []catalog.TopicPartitions
		for _, tp := range d.Partitions {
			if b.may(who, acl.OpDescribe, acl.Topic(tp.Topic)) {
				parts = append(parts, tp)
			}
		}
		d.Partitions = parts
		out[i].TxnDescription = d
	}
	return out, nil
}

// ListTxns lists the transactional ids that pass f and that the principal may
// describe.
func (b *Broker) ListTxns(ctx context.Context, who Principal, f catalog.TxnFilter) ([]catalog.TxnDescription, error) {
	if e := b.check(CapTransactions); e != nil {
		return nil, e
	}
	ds, err := b.d.Transactions.ListTxns(ctx, f)
	if err != nil {
		return nil, txnError("list transactions", err)
	}
	out := ds[:0]
	for _, d := range ds {
		if b.may(who, acl.OpDescribe, acl.TransactionalID(d.TransactionalID)) {
			out = append(out, d)
		}
	}
	return out, nil
}

// PendingTxnOffsets lists the partitions of group whose offsets wait in an ongoing
// transaction (OffsetFetch's require_stable), by topic name.
func (b *Broker) PendingTxnOffsets(ctx context.Context, who Principal, group string) ([]catalog.TopicPartitions, error) {
	if b.check(CapTransactions) != nil {
		return nil, nil // no transactions here: nothing pending
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return nil, e
	}
	tps, err := b.d.Transactions.PendingTxnOffsets(ctx, group)
	if err != nil {
		return nil, txnError("list pending transactional offsets", err, onGroup(group, ""))
	}
	return tps, nil
}

// txnCall is every coordinator call's first step: the node serves transactions, and
// the principal may write the transactional id.
func (b *Broker) txnCall(ctx context.Context, who Principal, tid string) *Error {
	if e := b.check(CapTransactions); e != nil {
		return e
	}
	return b.authorize(ctx, who, acl.OpWrite, acl.TransactionalID(tid))
}

// txnError maps a coordinator call's refusal.
func txnError(op string, err error, about ...subject) *Error {
	if e, ok := producerError(err, nil); ok {
		return e
	}
	if isGroupError(err) {
		return groupError(op, err, about...)
	}
	return catalogError(op, err, about...)
}

// txnBatches makes a produce of transactional batches (Kafka's transactional attribute)
// a transactional request: one transactional id named, write on it, a producer id in
// the batches — all before anything is buffered. The commit then checks them against
// the producer's transaction.
func (b *Broker) txnBatches(ctx context.Context, who Principal, req BatchesRequest, wreq *writer.Request) *Error {
	some, all := segment.Transactional(req.Batches)
	switch {
	case !some:
		return nil
	case !all:
		return newError(CodeInvalidRecord, "record batches: some are transactional, some not: one kind per request")
	case req.TransactionalID == "":
		// Kafka's answer: no transactional id is no write on one.
		return newError(CodeForbidden, "transactional record batches without a transactional id: initialise the producer with one").
			with("operation", acl.OpWrite.String()).with("resource_type", acl.TypeTransactionalID.String())
	case wreq.Producer == nil:
		return newError(CodeInvalidProducerIDMapping, "transactional record batches without a producer id")
	}
	if e := b.authorize(ctx, who, acl.OpWrite, acl.TransactionalID(req.TransactionalID)); e != nil {
		return e
	}
	wreq.Txn = &catalog.TxnWrite{TransactionalID: req.TransactionalID, ImplicitAdd: req.ImplicitTxnAdd}
	return nil
}
