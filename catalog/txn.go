package catalog

import (
	"context"
	"errors"
	"time"
)

// Kafka transactions (docs/design.md "Transactions"): the coordinator's state, kept per
// transactional id, and the calls that move it. The rules are the engine's
// (catalog/internal/engine/txn*.go), each call one catalog transaction; the broker core
// authorizes and bounds what the calls take (the timeout's maximum).

// Transactions is the coordinator's part of the catalog, implemented by both backends
// and proved by catalogtest.RunTransactions.
//
// Every call naming a producer checks it first, before it changes anything: a producer
// id that is not the transactional id's current one (or a transactional id without a
// producer) is ErrInvalidProducerIDMapping; another epoch is ErrProducerFenced.
type Transactions interface {
	// InitTxnProducer hands the transactional id an identity: a new producer id at epoch
	// 0, or the id's next epoch, which fences the instance that held it (a new producer
	// id when the epoch is exhausted). An ongoing transaction is aborted in the same
	// catalog transaction. Current, when set, is the identity the caller holds (KIP-360):
	// it must be the id's current one, or the one before the last bump (a bump the
	// caller did not see), else ErrProducerFenced; a transactional id that has expired
	// is then ErrUnknownProducer. The transaction's timeout is req.Timeout.
	InitTxnProducer(ctx context.Context, req InitTxn) (Producer, error)
	// AddTxnPartitions adds partitions to the producer's transaction, which begins if it
	// was not ongoing. A topic that does not exist (or a partition out of range) refuses
	// the whole call with ErrTopicNotFound (ErrPartitionOutOfRange).
	AddTxnPartitions(ctx context.Context, req TxnPartitions) error
	// AddTxnGroup adds a consumer group to the transaction (AddOffsetsToTxn), which
	// begins if it was not ongoing.
	AddTxnGroup(ctx context.Context, req TxnGroup) error
	// TxnCommitOffsets stores offsets that reach the group only when the transaction
	// commits. The group must be in the transaction (ErrInvalidTxnState), unless
	// req.AddGroup (TxnOffsetCommit v5+, which adds it and begins the transaction); the
	// transaction must be ongoing unless req.AddGroup. The group's member rules are the
	// caller's to check first (Groups, ClassicGroups with CheckOnly).
	TxnCommitOffsets(ctx context.Context, req TxnOffsetCommit) error
	// EndTxn commits or aborts the producer's ongoing transaction: one marker per
	// partition at its high watermark, the pending offsets moved into their groups (on
	// commit) or dropped, and with req.BumpEpoch (transactions v2) the epoch bumped.
	// With no transaction ongoing it is ErrInvalidTxnState — except a retry of the last
	// decision (at the epoch it was taken at, before its bump, or with BumpEpoch unset
	// at the same epoch), which answers it again, and, with BumpEpoch, an abort of an
	// empty transaction, which bumps the epoch.
	EndTxn(ctx context.Context, req EndTxn) (EndTxnResult, error)
	// AbortExpiredTxns aborts, with an epoch bump (fencing the late producer), up to
	// limit transactions ongoing past their timeout by the database clock, and lists
	// them. Two callers racing abort each transaction once.
	AbortExpiredTxns(ctx context.Context, limit int) ([]TxnDescription, error)
	// DescribeTxns describes transactional ids, in order; an unknown one comes back with
	// State empty and ProducerID -1.
	DescribeTxns(ctx context.Context, ids []string) ([]TxnDescription, error)
	// ListTxns lists the transactional ids that pass f, by id.
	ListTxns(ctx context.Context, f TxnFilter) ([]TxnDescription, error)
	// PendingTxnOffsets lists the partitions of group with offsets waiting in an ongoing
	// transaction (OffsetFetch's require_stable), by topic name (live topics only).
	PendingTxnOffsets(ctx context.Context, group string) ([]TopicPartitions, error)
	// TxnStats counts the ongoing transactions and the oldest one's start.
	TxnStats(ctx context.Context) (TxnStats, error)
}

// Transaction states. Kafka's PrepareCommit and PrepareAbort are never stored: the
// decision and its completion are one catalog transaction.
const (
	TxnEmpty          = "empty"
	TxnOngoing        = "ongoing"
	TxnCompleteCommit = "complete_commit"
	TxnCompleteAbort  = "complete_abort"
)

// DefaultTxnTimeout is a transaction's timeout when the caller gives none (an HTTP
// producer's transactional id): Kafka's producer default, transaction.timeout.ms.
const DefaultTxnTimeout = 60 * time.Second

// InitTxn asks for a transactional producer's identity.
type InitTxn struct {
	TransactionalID string
	Timeout         time.Duration // > 0
	Current         *Producer
	// Owner is the principal asking ("" for Anonymous), recorded as a new producer
	// id's creator (Security.ProducerOwner); an existing id keeps its own.
	Owner string
}

// TxnPartitions names partitions to add to a transaction.
type TxnPartitions struct {
	TransactionalID string
	Producer        Producer
	Partitions      []TopicPartition
}

// TxnGroup names a group to add to a transaction.
type TxnGroup struct {
	TransactionalID string
	Producer        Producer
	Group           string
}

// TxnOffsetCommit is a transaction's offset commit (TxnOffsetCommit).
type TxnOffsetCommit struct {
	TransactionalID string
	Producer        Producer
	Group           string
	// AddGroup adds the group (and begins the transaction) if needed: KIP-890's
	// TxnOffsetCommit v5.
	AddGroup bool
	// MemberID and MemberEpoch are stored with the offsets ("" and -1: none).
	MemberID    string
	MemberEpoch int32
	Offsets     []CommitOffset
}

// EndTxn decides a transaction.
type EndTxn struct {
	TransactionalID string
	Producer        Producer
	Commit          bool
	// BumpEpoch: transactions v2 (EndTxn v5+), which bumps the epoch with every
	// decision and answers the new one.
	BumpEpoch bool
}

// EndTxnResult answers EndTxn: the producer's identity after it (the bumped one with
// BumpEpoch), and the markers written (none for a retry answered again).
type EndTxnResult struct {
	Producer Producer
	Markers  int
	Retry    bool
}

// TxnDescription is a transactional id's state.
type TxnDescription struct {
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	State           string
	Timeout         time.Duration
	StartedAt       time.Time // zero unless ongoing
	Partitions      []TopicPartitions
	Groups          []string
}

// TxnFilter narrows ListTxns: states and producer ids (none: any), and transactions
// ongoing for at least OngoingFor.
type TxnFilter struct {
	States      []string
	ProducerIDs []int64
	OngoingFor  time.Duration
}

// TxnStats is TxnStats' answer.
type TxnStats struct {
	Open         int
	OldestOpen   time.Time // zero when none
	DatabaseTime time.Time
}

// TxnWrite marks a flush request as a transactional producer's (Kafka's transactional
// batches): the commit checks it against the transaction (engine.Plan.CheckTxns).
type TxnWrite struct {
	// TransactionalID is the one the request names: the producer must be its current one.
	TransactionalID string
	// ImplicitAdd: transactions v2 (Produce v12+), whose produce begins the transaction
	// and adds the partition itself. Without it a partition not added is refused.
	ImplicitAdd bool
}

// Marker is a transaction marker row: the control batch that takes one offset of a
// partition (segment.ControlBatch renders it).
type Marker struct {
	Offset        int64
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	Timestamp     int64 // unix ms, the database clock at the decision
}

// AbortedTxn is an aborted transaction's range on a partition: its first offset there,
// and its abort marker's offset.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

var (
	// ErrInvalidTxnState: the call does not fit the transaction's state (EndTxn with no
	// transaction, a transactional batch for a partition not added, a group not in the
	// transaction, a transactional batch from a producer without a transactional id).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrInvalidProducerIDMapping: the producer id is not the transactional id's.
	ErrInvalidProducerIDMapping = errors.New("producer id is not the transactional id's")
	// ErrInvalidTxnTimeout: a transaction timeout out of range.
	ErrInvalidTxnTimeout = errors.New("invalid transaction timeout")
)
