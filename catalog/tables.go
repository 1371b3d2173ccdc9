package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Tables is the state of the table topics (issue 35: a topic with iceberg.enabled is
// also an Apache Iceberg table in its bucket): per table, the location of its current
// metadata file; per partition, the next offset the table does not hold yet; and the
// tables role's per-partition leases, with fencing tokens as the compactor's.
//
// Exactly once rests on CommitTable: it moves a table's metadata location from the
// one the commit was built on to the new one and advances each partition's next
// offset from the start of the range the commit's data files cover to its end, all in
// one transaction, or changes nothing. A worker that crashed after writing files but
// before this step left orphans, never rows; a second worker that converted the same
// range finds the partition's next offset moved and its commit refused. The same
// ranges are written in the snapshot's summary (package tables), so the table itself
// says which offsets each snapshot added. The rules are the engine's
// (engine.Tables), once for both backends; proved by catalogtest's "tables" suite.
type Tables interface {
	// AcquireTableLease leases one partition's conversion to holder for ttl, timed by
	// the database clock: when no one holds it, its lease expired, or holder holds it
	// already (then the lease is extended, its token unchanged). A new holder gets a
	// token one above the last. ok false: someone else holds it.
	AcquireTableLease(ctx context.Context, topicID int64, partition int32, holder string, ttl time.Duration) (l TableLease, ok bool, err error)
	// ReleaseTableLease frees l, if it is still l (a lease taken over meanwhile stays
	// the new holder's).
	ReleaseTableLease(ctx context.Context, l TableLease) error
	// TableState reads a table's metadata location ("" before its first commit) and
	// its partitions' next offsets.
	TableState(ctx context.Context, topicID int64) (TableState, error)
	// CommitTable applies c in one transaction, or refuses it with ErrTableConflict
	// (wrapped, saying what moved) and changes nothing: the table's metadata location
	// must still be c.Prev; every range's partition must be held under one of c.Leases
	// (holder and token, not expired); each range must start at its partition's next
	// offset. A bad commit (a range ending before it starts, Prev "" with ranges, a
	// partition twice): ErrInvalidTableCommit.
	CommitTable(ctx context.Context, c TableCommit) error
}

// ErrTableConflict: a table commit built on state that moved (another commit landed,
// or the lease was lost): rebuild from TableState, or give the partition up.
var ErrTableConflict = errors.New("table commit conflict")

// ErrInvalidTableCommit: a table commit that no state could accept.
var ErrInvalidTableCommit = errors.New("invalid table commit")

// TableLease is a worker's claim on converting one partition of a table topic.
type TableLease struct {
	TopicID   int64
	Partition int32
	Holder    string
	// Token grows with every new holder: a commit names it, so a holder whose lease
	// was taken over commits nothing.
	Token int64
}

// TableState is a table's committed state.
type TableState struct {
	TopicID int64
	// MetadataLocation is the URI of the current metadata file, "" before the first
	// commit (the table does not exist yet).
	MetadataLocation string
	// Next is, per partition, the first offset the table does not cover; a partition
	// absent has none covered (0).
	Next map[int32]int64
}

// NextOffset is p's next offset to convert.
func (s TableState) NextOffset(p int32) int64 { return s.Next[p] }

// TableRange is the offsets [From, To) of one partition that a commit's data files
// cover: every committed record in it, each once (aborted records and transaction
// markers hold offsets and no row).
type TableRange struct {
	Partition int32
	From, To  int64
}

// TableCommit moves a table from the metadata file Prev to Metadata.
type TableCommit struct {
	TopicID  int64
	Prev     string
	Metadata string
	Ranges   []TableRange
	Leases   []TableLease
}

// Check refuses a commit no state could accept (ErrInvalidTableCommit): no new
// metadata, the table's creation (Prev "") carrying ranges, a range that ends before
// it starts or starts below 0, a partition twice, or a range without its lease.
func (c TableCommit) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidTableCommit}, args...)...)
	}
	switch {
	case c.Metadata == "" || c.Metadata == c.Prev:
		return bad("no new metadata location")
	case c.Prev == "" && len(c.Ranges) > 0:
		return bad("the table's first commit creates it and covers no offsets")
	}
	seen := map[int32]bool{}
	for _, r := range c.Ranges {
		if r.From < 0 || r.To < r.From {
			return bad("partition %d: range [%d, %d)", r.Partition, r.From, r.To)
		}
		if seen[r.Partition] {
			return bad("partition %d twice", r.Partition)
		}
		seen[r.Partition] = true
		if !slices.ContainsFunc(c.Leases, func(l TableLease) bool { return l.Partition == r.Partition && l.TopicID == c.TopicID }) {
			return bad("partition %d without its lease", r.Partition)
		}
	}
	return nil
}
