// Package catalog owns the order of the log: topics and their configs, partitions and
// their watermarks, segments and chunk rows, and the one-transaction segment commit that
// assigns offsets; beside them consumer groups, idempotent producers, the compactor's
// leases and swaps, and the Kafka node registry. It has two backends behind the same
// behaviour, each a Backend: Postgres (catalog/postgres) and SQLite for the embedded
// mode (catalog/sqlite); catalog/open opens either from a DSN.
//
// This package is what callers see: the domain types, the interfaces (Backend and its
// parts), the errors, topic configs, and the checks of a request's shape (names,
// partition counts, configs, group requests, transactional ids) that a front end may
// run before it calls. The rules the backends share — commit planning and offset
// assignment, the producer checks, the heartbeat state machine and the assignors, the
// offset-commit checks, the compaction swap and due times, node ids — are the engine,
// catalog/internal/engine, which only the backends and their conformance suites
// (catalog/catalogtest) can import: callers depend on the behaviour, not on how a
// backend reaches it.
//
// The engine's Go rules and the backends' SQL are twins. SQLite runs the Go rules
// inside its transactions. Postgres runs the flush commit in plpgsql, in one round trip
// (strata_commit: shape, topics, partitions, LogAppendTime, producer sequences, offset
// assignment, due times; strata_commit_groups: the flush's group offsets), and the Go
// rules only before the call (PlanSegment) and around it (mapping its answers back); its
// groups, swaps and node registry run the Go rules in Go transactions as SQLite's do.
// Whoever changes a rule changes both twins: the conformance suites in catalogtest run
// the same cases on both backends, and compare the SQL's refusals with the Go rule's
// directly where Postgres answers by code, so that a twin left behind fails them.
package catalog

import (
	"log/slog"
	"time"
)

// Options configure either backend.
type Options struct {
	// CommitTimeout bounds how old a segment (by its key time, on the database clock)
	// may be when committed; the orphan sweep only touches objects older than twice
	// this. Default 30s.
	CommitTimeout time.Duration
	// ProducerExpiry is how long an idempotent producer (and a transactional id) may
	// stay idle — no commit, no InitProducer — before its id, epoch and sequence state
	// are forgotten; it then gets ErrUnknownProducer and must initialise again. Default
	// DefaultProducerExpiry (7 days, Kafka's transactional.id.expiration.ms).
	ProducerExpiry time.Duration
	Logger         *slog.Logger

	// MaxTimestampAfterMs is the largest message.timestamp.after.max.ms a topic may set
	// (CheckConfigLimits): 0 means DefaultMaxTimestampAfterMs (one day), -1 no limit.
	MaxTimestampAfterMs int64
}

// DefaultCommitTimeout is Options.CommitTimeout when it is zero.
const DefaultCommitTimeout = 30 * time.Second

// WithDefaults returns o with zero fields set to their defaults (a nil Logger discards).
func (o Options) WithDefaults() Options {
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = DefaultCommitTimeout
	}
	if o.ProducerExpiry <= 0 {
		o.ProducerExpiry = DefaultProducerExpiry
	}
	if o.MaxTimestampAfterMs == 0 {
		o.MaxTimestampAfterMs = DefaultMaxTimestampAfterMs
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Topic is a topic as the catalog knows it. ID is immutable and never reused: a topic
// deleted and recreated under the same name gets a new ID and never sees old data.
type Topic struct {
	ID int64
	// UUID is random, made at creation and never reused (Kafka's topic id).
	UUID       UUID
	Name       string
	Partitions int32
	Configs    map[string]string // only explicitly set keys; see Config for effective values
	CreatedAt  time.Time
}

// PartitionInfo is one partition's state.
type PartitionInfo struct {
	TopicID        int64
	Partition      int32
	LogStartOffset int64
	HighWatermark  int64 // next offset to be assigned
	Bytes          int64 // bytes of chunks at or above the log start offset
	// LastStableOffset is the first offset of the partition's earliest ongoing
	// transaction, or the high watermark when none: read_committed readers stop there.
	LastStableOffset int64
}

// Segment is one flush to commit: an object already durable in the store, and the
// requests whose batches it holds.
type Segment struct {
	Key      string // unique object key (segment.NewKey); its time bounds the commit
	Size     int64
	Requests []Request
}

// Request is one produce request's share of a flush. It commits atomically: all its
// batches or none.
type Request struct {
	Producer *Producer // nil: not idempotent
	Batches  []Batch
	// GroupOffsets, when set, commits consumer-group offsets in the same transaction:
	// they are stored only if the request's batches commit, and a refused offset
	// commit (stale member epoch, not the owner, ...) refuses the whole request. This
	// is the single-request transaction of exactly-once consume-transform-produce.
	GroupOffsets *OffsetCommit
	// Source, when set, commits a connector task's source offsets in the same
	// transaction, checked against the task's generation (Plan.CheckSources): a stale
	// one refuses the whole request, and the offsets are stored only if its batches
	// commit. A request carries Source or GroupOffsets, not both.
	Source *SourceCommit
	// Txn, when set, marks a transactional producer's batches (Kafka's transactional
	// attribute): the commit checks them against the producer's transaction
	// (engine.Plan.CheckTxns) and records where the transaction begins on each
	// partition. It needs Producer, and carries neither GroupOffsets nor Source.
	Txn *TxnWrite
	// ShareDLQ, when set, makes the request's batches dead-letter copies of a
	// share-partition's pending records: the commit checks its lease and that the
	// records are pending, refusing the whole request otherwise, and archives them in
	// the same transaction. It carries nothing else (no producer, offsets or Txn).
	ShareDLQ *ShareDLQCommit
}

// Producer identifies an idempotent producer instance.
type Producer struct {
	ID    int64
	Epoch int16
}

// Batch is one record batch of a request, for one partition, at a byte range of the
// segment object. A request's batches for one partition are adjacent in the object.
type Batch struct {
	TopicID      int64
	Partition    int32
	Pos, Len     int64 // byte range in the object
	Records      int32 // offsets this batch takes (LastOffsetDelta+1)
	MaxTimestamp int64 // unix ms
	BaseSequence int32 // -1 when not idempotent
}

// Result answers one Request.
type Result struct {
	// Err is the request's own error (ErrTopicNotFound, ErrPartitionOutOfRange, ...);
	// nil when its batches committed.
	Err error
	// BaseOffsets[i] is the first offset assigned to Request.Batches[i].
	BaseOffsets []int64
	// Duplicate is set when an idempotent retry matched an earlier commit: BaseOffsets
	// are the original ones and nothing new was written (group offsets included).
	Duplicate bool
}

// Chunk is one catalog chunk row: a contiguous offset range of one partition stored at
// a byte range of one object.
type Chunk struct {
	TopicID      int64
	Partition    int32
	BaseOffset   int64
	LastOffset   int64
	SegmentKey   string
	SegmentSize  int64 // the whole object's size, so a reader can align cache blocks
	Pos, Len     int64
	MaxTimestamp int64
	// RealOffsets is set for compactor objects whose batches carry their real base
	// offsets (possibly with gaps); otherwise the reader rewrites base offsets from
	// BaseOffset.
	RealOffsets bool
}

// ChunkList answers a chunk lookup.
type ChunkList struct {
	Partition PartitionInfo
	Chunks    []Chunk // ascending; the first holds the requested offset
	// Markers are the transaction markers from the requested offset up to the offset
	// before the first chunk the answer leaves out (or the high watermark), ascending:
	// each takes an offset no chunk's batches cover.
	Markers []Marker
	// Aborted are the aborted transactions whose range overlaps the same offsets: abort
	// markers at or after the requested offset whose transaction began at or before
	// that end, by abort marker offset.
	Aborted []AbortedTxn
}

// Watermark is a commit notification: a partition's high watermark after a commit.
type Watermark struct {
	TopicID       int64
	Partition     int32
	HighWatermark int64
}

// TopicPartition names a partition.
type TopicPartition struct {
	TopicID   int64
	Partition int32
}

// NoTimestamp is the running maximum timestamp of a partition without chunks.
const NoTimestamp int64 = -1

// ChunkRow is a chunk row as a commit writes it and Settle reads it back; the segment it
// belongs to is implied.
type ChunkRow struct {
	TopicID             int64
	Partition           int32
	BaseOffset          int64
	LastOffset          int64
	Pos, Len            int64
	MaxTimestamp        int64
	RunningMaxTimestamp int64
}
