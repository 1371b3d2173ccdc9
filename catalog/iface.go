package catalog

import (
	"context"
	"time"
)

// Backend is a whole catalog backend: what catalog/postgres and catalog/sqlite each
// implement (and assert at compile time), and what opening a catalog returns, so that
// no caller discovers a capability at run time. The roles and the broker core declare
// the narrow parts they use; a node hands them its Backend.
type Backend interface {
	Catalog
	Groups
	ClassicGroups
	Producers
	Compaction
	Inventory
	Cluster
	Connect
	Security
	Scram
	Transactions
	Registry
	ShareGroups
	Quotas
	Tables
	Usage
	PushSubscriptions
}

// Catalog is the core of the catalog — topics, partitions, the segment commit, chunk
// lookups, notifications — proved by catalog/catalogtest.
//
// Topic names that cannot exist (invalid names) simply are not found: lookups, updates
// and deletes by such a name return ErrTopicNotFound. A deleted topic is gone for every
// method (ErrTopicNotFound by name or id); its rows stay for the compactor to reclaim,
// and a topic recreated under its name gets a new ID and none of its data.
type Catalog interface {
	// CreateTopic validates the name (ValidateTopicName), the partition count
	// (ValidatePartitions) and the configs (ParseConfig: a *ConfigError wrapping
	// ErrInvalidConfig), then creates the topic with every partition at offset 0.
	// A live topic of that name: ErrTopicExists.
	CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (Topic, error)
	Topic(ctx context.Context, name string) (Topic, error)
	TopicByID(ctx context.Context, id int64) (Topic, error)
	// Topics lists the live topics ordered by name.
	Topics(ctx context.Context) ([]Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	// UpdateTopic grows the partition count (0: unchanged; fewer: ErrInvalidPartitions)
	// and sets or (with an empty value) removes configs, validated as a whole.
	UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (Topic, error)
	// Partitions lists a live topic's partitions in order.
	Partitions(ctx context.Context, topicID int64) ([]PartitionInfo, error)

	// Commit commits one flush in one transaction and one round trip, following the
	// rules of the engine's PlanSegment, CheckCommitTime, Plan.CheckRequests and
	// Plan.Assign (catalog/internal/engine; a backend that assigns in SQL must give the
	// same answers).
	//
	// On a nil error, Results[i] answers seg.Requests[i]: either Err is nil and
	// BaseOffsets[j] is the first offset of Requests[i].Batches[j], or Err is the
	// request's own error (ErrTopicNotFound, ErrPartitionOutOfRange,
	// ErrTimestampOutOfRange, wrapped) and the request left no rows and took no
	// offsets. The other requests of the flush commit regardless; a request is atomic
	// across its partitions. The segment row is written (state live) even when every
	// request failed, so the object is accounted for.
	//
	// The error return is for the whole flush. These are definite, nothing was written:
	//   - ErrInvalidSegment: the flush is malformed (see engine.PlanSegment) or its key is not
	//     a segment key;
	//   - ErrCommitTooLate: the key time is older than Options.CommitTimeout by the
	//     database clock;
	//   - ErrCommitAborted: the key was fenced by Settle; it can never commit.
	// Any other error leaves the outcome unknown: settle it with Settle.
	//
	// Committing a key that already committed changes nothing and answers as Settle
	// does (the original offsets; ErrCommitAborted for requests that were refused).
	//
	// Idempotent requests (Request.Producer) are checked with engine.Plan.CheckProducers in the
	// same transaction: a retry of a committed request answers its original offsets with
	// Result.Duplicate set and writes nothing; others may be refused with
	// ErrProducerFenced, ErrUnknownProducer or a *SequenceError (ErrOutOfOrderSequence).
	// A request's GroupOffsets are checked with engine.Plan.CheckGroupOffsets (the group
	// errors of engine.CheckOffsetCommit refuse the request) and stored only if its batches
	// commit. Settle and a repeated Commit answer a duplicate, which has no chunk rows,
	// with ErrCommitAborted (retryable: the retry is recognised again).
	Commit(ctx context.Context, seg Segment) ([]Result, error)
	// Settle settles a commit whose outcome is unknown with the fencing insert on
	// seg.Key: it waits for any in-flight commit of the key, then either finds it
	// (results read back from chunk rows with engine.Plan.ResultsFromChunks: the original
	// offsets, and ErrCommitAborted for requests without rows) or wins — or finds the
	// key already fenced — and returns (nil, ErrCommitAborted). Once Settle has
	// answered, the outcome never changes: a later Commit of the key is refused.
	Settle(ctx context.Context, seg Segment) ([]Result, error)

	// Chunks returns the chunk holding offset and the chunks after it: the first one
	// always, then more while their total Len stays within maxBytes. offset == high
	// watermark returns no chunks and no error; an offset below the log start or above
	// the high watermark returns ErrOffsetOutOfRange (wrapped) with the partition's
	// state filled in. ChunkList.Partition is read in the same snapshot as the chunks,
	// and no chunk reaches the high watermark. An unknown or deleted topic:
	// ErrTopicNotFound; a partition outside the topic: ErrPartitionOutOfRange.
	Chunks(ctx context.Context, topicID int64, partition int32, offset, maxBytes int64) (ChunkList, error)
	// OffsetForTime returns the earliest offset whose record timestamp is at or after
	// ts (unix ms), at chunk granularity (the base offset of the first chunk whose
	// running maximum timestamp reaches ts, raised to the log start offset), or the high
	// watermark when none.
	OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error)

	// Listen calls fn for commit notifications until ctx ends, reconnecting as needed,
	// and then returns nil. Notifications are best effort (a slow listener misses some;
	// one registered after a commit does not see it): readers also poll. fn runs on
	// Listen's goroutine, one call at a time.
	Listen(ctx context.Context, fn func(Watermark)) error
	// Now is the database clock.
	Now(ctx context.Context) (time.Time, error)
	Close() error
}
