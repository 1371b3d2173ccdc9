package catalog

import (
	"context"
	"errors"
	"time"
)

// This file is the catalog's side of the compactor (docs/design.md "Compactor"): work found
// by due time and leased with fencing tokens, the compare-and-swap that replaces chunk
// rows with rows over a merged object, log start advances (retention and
// delete-records), and the row side of safe deletion and of the orphan sweep. It is a
// separate interface from Catalog so that the writer and reader roles, and catalogs
// that predate it, are untouched.
//
// The rules every backend keeps:
//
//   - Every partition has a due time: when it next needs the compactor (none: not
//     until something changes). Whatever makes work keeps it current — a flush makes
//     its partitions due once their new rows settle or retention.ms expires them
//     (engine.CommitDue), a config change, a deletion or a delete-records makes them due at
//     once, and a pass records the next time it found (engine.ReleaseDue) — so the
//     compactor leases only partitions that are due, most overdue first, through an
//     index: the cost of finding work does not grow with the partitions that have
//     none.
//   - Chunk rows of a segment are rewritten or dropped only once the segment is settled:
//     committed more than SettleAge(commit timeout) ago by the database clock. Settle
//     reads a flush's results back from its chunk rows, so rewriting them earlier could
//     make a committed flush settle as aborted.
//   - A segment whose last chunk row is gone turns 'deleting' (marked_at = now); its
//     object is deleted after a grace period, and its row only once the store has
//     confirmed the object gone (ForgetSegments).
//   - Time is the database clock's.

// SettleAge is how long after its commit a segment's chunk rows stay untouched, and how
// old (by key time) an object without a live row must be before the orphan sweep may
// claim it: twice the commit timeout. A commit is refused once its key is one commit
// timeout old, so by then nothing can still land in the object.
func SettleAge(commitTimeout time.Duration) time.Duration { return 2 * commitTimeout }

// ErrCompactionConflict: a swap's compare-and-swap failed — the chunk rows or the log
// start moved since they were read, or the partition's lease was lost (its fencing
// token changed). Nothing was written; the caller abandons its new object.
var ErrCompactionConflict = errors.New("compaction conflict: rows, log start or lease changed")

// PartitionLease is a compactor's exclusive claim on one partition's compaction work
// until Until (database clock). Token is the fencing token: it grows with every grant,
// and every write made under the lease checks it, so a compactor whose lease expired
// and was taken over cannot write.
type PartitionLease struct {
	TopicID   int64
	Partition int32
	Holder    string
	Token     int64
	Until     time.Time
	// Due is when the partition became due: how overdue its work was when leased.
	Due time.Time
}

// JobLease is a claim on a named whole-catalog job (the deletion of expired objects, the
// orphan sweep), with a fencing token like PartitionLease.
type JobLease struct {
	Name   string
	Holder string
	Token  int64
	Until  time.Time
}

// Compaction job names for AcquireJob.
const (
	JobDelete = "delete" // delete objects whose grace period has passed
	JobSweep  = "sweep"  // orphan sweep, and live segments left without chunk rows
)

// CompactionState is what a compactor needs to plan work on one partition, read in one
// snapshot.
type CompactionState struct {
	Now       time.Time // database clock
	Topic     Topic     // its configs; Name may be stale for a deleted topic
	Deleted   bool      // the topic was deleted: everything is reclaimed
	Partition PartitionInfo
	// SettledBefore: chunk rows of segments committed before this may be rewritten or
	// dropped (Now - SettleAge).
	SettledBefore time.Time
	// Checkpoint is what earlier passes recorded for the partition.
	Checkpoint PartitionCheckpoint
}

// PartitionCheckpoint is what a compactor records for a partition when it releases its
// lease, read back by the next pass whoever runs it.
type PartitionCheckpoint struct {
	// CleanOffset: key compaction has cleaned every offset below it.
	CleanOffset int64
	// TombstoneDue (unix ms, 0: none) is when the earliest tombstone or transaction
	// marker kept by key compaction passes delete.retention.ms, so a pass with no new
	// data still runs then.
	TombstoneDue int64
	// CompactedAt is when key compaction last completed (zero: never).
	CompactedAt time.Time
}

// CompactionChunk is a chunk row as the compactor sees it.
type CompactionChunk struct {
	Chunk
	RunningMaxTimestamp int64
	// SegmentCreated is when the row's segment was committed (database clock).
	SegmentCreated time.Time
	// AppendTime (unix ms, database clock) is when the row's records were appended:
	// its flush's commit; for a merged row, the latest of the rows it replaced.
	AppendTime int64
}

// RetentionTime is the time (unix ms) retention.ms judges a row by: its records'
// maximum timestamp clamped to their append time, so that a producer's clock — or one
// record stamped in year 9999 — cannot keep the row beyond retention.ms after it was
// appended; the append time when the records carry no timestamp.
func (c CompactionChunk) RetentionTime() int64 {
	if c.MaxTimestamp == NoTimestamp || c.MaxTimestamp > c.AppendTime {
		return c.AppendTime
	}
	return c.MaxTimestamp
}

// Swap replaces a run of a partition's chunk rows with rows over one new object (already
// durable in the store) whose batches carry their real offsets. The run may step over
// transaction markers' offsets, which no row covers: the new rows cover them, and the
// reader still renders the markers in their places.
type Swap struct {
	Lease PartitionLease
	// LogStart is the log start offset the rows were planned against: if it moved,
	// the swap is refused.
	LogStart int64
	// Old are the rows replaced, ascending and not overlapping, exactly as read: every
	// row of the partition overlapping [Old[0].BaseOffset, Old[last].LastOffset] must
	// be one of them, unchanged. Below the high watermark an offset no row covers is a
	// marker's (or was one: DropMarkers), so the offsets between two of them are too.
	Old []Chunk
	// Key and Size name the new object. Its key time is checked like a commit's: a
	// swap later than the commit timeout is refused (ErrCommitTooLate), so the orphan
	// sweep can never have taken the object.
	Key  string
	Size int64
	// New are the new rows, ascending, tiling Old's offset range exactly: the first
	// starts at Old[0].BaseOffset, the last ends at Old[last].LastOffset, each starts
	// after the previous ends. Their running maximum timestamps are computed by the
	// catalog.
	New []ChunkRow
}

// SameChunk reports whether a row read in the swap's transaction is the row the swap
// was planned on.
func SameChunk(a, b Chunk) bool {
	return a.TopicID == b.TopicID && a.Partition == b.Partition && a.BaseOffset == b.BaseOffset &&
		a.LastOffset == b.LastOffset && a.SegmentKey == b.SegmentKey && a.Pos == b.Pos && a.Len == b.Len &&
		a.RealOffsets == b.RealOffsets
}

// NewLogStart applies delete-records: the log start moves to offset, never backwards;
// an offset above the high watermark is an *OffsetRangeError. It returns the new log
// start, equal to the current one when nothing changes.
func NewLogStart(p PartitionInfo, offset int64) (int64, error) {
	if offset < 0 || offset > p.HighWatermark {
		return p.LogStartOffset, &OffsetRangeError{Offset: offset, LogStartOffset: p.LogStartOffset, HighWatermark: p.HighWatermark}
	}
	return max(p.LogStartOffset, offset), nil
}

// PartitionRelease is what a pass leaves on a partition when it frees the lease.
type PartitionRelease struct {
	Checkpoint PartitionCheckpoint
	// Reclaimed marks a deleted topic's partition as fully reclaimed: nothing is due on
	// it again.
	Reclaimed bool
	// Due is when the partition next needs a pass, judged from Seen (zero: not until
	// something changes it).
	Due time.Time
	// Seen is the state Due was judged from; nil keeps Due as given. What changed since
	// (engine.ReleaseDue) brings the due time forward: during the lease, the partition was
	// already due, so the changes could not.
	Seen *CompactionState
}

// CompactionBacklog is the due work of all compactors together.
type CompactionBacklog struct {
	Now time.Time // database clock
	// Due counts the partitions whose due time has passed, leased ones included.
	Due int64
	// Oldest is the earliest due time among them (zero when none): Now - Oldest is how
	// long the most overdue partition has waited.
	Oldest time.Time
}

// SegmentState is a segment row's state.
type SegmentState string

const (
	SegmentLive     SegmentState = "live"
	SegmentAborted  SegmentState = "aborted"
	SegmentDeleting SegmentState = "deleting"
)

// Compaction is the part of the catalog the compactor role drives, implemented by
// catalog/postgres and catalog/sqlite and proved by catalogtest.RunCompaction. Any
// number of compactors may use one catalog at once: partitions and jobs are leased
// (FOR UPDATE SKIP LOCKED on Postgres), and every write re-checks what it was planned
// on.
type Compaction interface {
	// AcquirePartitions leases to holder for ttl up to max partitions that are due
	// and not leased (or whose lease expired), most overdue first. A partition's due
	// time is unchanged by the lease: a holder that dies leaves it due, to be leased
	// again once the lease expires.
	AcquirePartitions(ctx context.Context, holder string, ttl time.Duration, max int) ([]PartitionLease, error)
	// ReleasePartition records r's checkpoint and due time (engine.ReleaseDue) and frees the
	// lease. A lease lost meanwhile: ErrCompactionConflict, nothing recorded.
	ReleasePartition(ctx context.Context, l PartitionLease, r PartitionRelease) error
	// CompactionBacklog counts the partitions due now and finds the most overdue.
	CompactionBacklog(ctx context.Context) (CompactionBacklog, error)
	// AcquireJob leases the named job when it is free and last completed at least
	// every ago; ok is false otherwise.
	AcquireJob(ctx context.Context, name, holder string, ttl, every time.Duration) (l JobLease, ok bool, err error)
	// ReleaseJob frees the job; done records it as completed now.
	ReleaseJob(ctx context.Context, l JobLease, done bool) error

	// CompactionState reads a leased partition's state, whether or not its topic was
	// deleted.
	CompactionState(ctx context.Context, l PartitionLease) (CompactionState, error)
	// CompactionChunks returns up to limit chunk rows of the partition in offset order,
	// from the one holding offset from (or the first after it), with their append
	// times.
	CompactionChunks(ctx context.Context, topicID int64, partition int32, from int64, limit int) ([]CompactionChunk, error)
	// SwapChunks applies s in one transaction: checks (lease token, log start, old rows,
	// the old rows' segments settled, key time), deletes the old rows, inserts the new
	// object's segment row (live) and rows (RealOffsets; append times by
	// engine.SwapAppendTimes), adjusts the partition's bytes, and marks old segments left
	// without rows 'deleting'. Errors:
	// ErrInvalidSegment (shape), ErrCommitTooLate, ErrCompactionConflict; anything
	// else leaves nothing written (one transaction).
	SwapChunks(ctx context.Context, s Swap) error
	// DeleteRecords advances a live topic's partition's log start offset to offset
	// (Kafka's DeleteRecords; retention uses it too): never backwards, and an offset
	// above the high watermark is ErrOffsetOutOfRange. Bytes drop by the rows now
	// wholly below the log start; the partition is due at once when the log start
	// moved. Rows and objects go later, through DropChunks and the deletion job.
	// Unknown topic: ErrTopicNotFound; partition: ErrPartitionOutOfRange.
	DeleteRecords(ctx context.Context, topicID int64, partition int32, offset int64) (PartitionInfo, error)
	// DropChunks deletes the leased partition's settled rows wholly below its log start
	// — every settled row when its topic was deleted — and marks segments left without
	// rows 'deleting'. Transaction markers below the log start (all of a deleted
	// topic's) go with them: every transaction they close is below it. It returns the rows dropped and the rows that remain (below the
	// log start, or all when the topic was deleted) because they are not settled yet.
	DropChunks(ctx context.Context, l PartitionLease) (dropped, pending int, err error)
	// AbortedTxns returns the partition's aborted transactions whose records may lie in
	// [from, to] — abort marker at or after from, first offset at or before to — in
	// marker offset order: what a rewrite of that range drops.
	AbortedTxns(ctx context.Context, topicID int64, partition int32, from, to int64) ([]AbortedTxn, error)
	// DropMarkers deletes the leased partition's transaction markers below offset below
	// that were decided before before: a compacted topic's, once key compaction has
	// removed the records they close and delete.retention.ms has passed (Kafka's rule).
	// It returns how many, and the decision time (unix ms, 0: none) of the earliest
	// marker left below below. A lease lost: ErrCompactionConflict.
	DropMarkers(ctx context.Context, l PartitionLease, below int64, before time.Time) (dropped int, next int64, err error)

	// MarkUnreferenced marks up to limit settled live segments without chunk rows
	// 'deleting' (flushes whose every request was refused; rows dropped concurrently by
	// two partitions' swaps). It returns how many.
	MarkUnreferenced(ctx context.Context, limit int) (int, error)
	// DeletableSegments lists up to limit keys of 'deleting' segments marked more than
	// grace ago.
	DeletableSegments(ctx context.Context, grace time.Duration, limit int) ([]string, error)
	// ForgetSegments drops the rows of 'deleting' or 'aborted' segments without chunk
	// rows — call it only for objects the store confirmed gone. It returns how many.
	ForgetSegments(ctx context.Context, keys []string) (int, error)
	// OrphanHorizon is the database clock minus SettleAge: objects whose key time is
	// before it, and that have no live row, are orphans.
	OrphanHorizon(ctx context.Context) (time.Time, error)
	// SegmentStates returns the state of each key that has a row.
	SegmentStates(ctx context.Context, keys []string) (map[string]SegmentState, error)
	// FenceOrphans claims keys older than the orphan horizon that have no row, with the
	// fencing insert of an 'aborted' row (as Settle does), and returns the keys that
	// are now 'aborted' — claimed here or before — whose objects may be deleted. A key
	// whose commit landed first stays live and is not returned.
	FenceOrphans(ctx context.Context, keys []string) ([]string, error)
	// AbortedSegments lists up to limit 'aborted' keys whose key time is before the
	// orphan horizon (their objects may be deleted, then the rows forgotten).
	AbortedSegments(ctx context.Context, limit int) ([]string, error)
}
