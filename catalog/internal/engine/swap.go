package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The compaction swap (catalog.Compaction.SwapChunks) as one script for both backends:
// the steps, their order and every check are here; a backend gives the statements
// (SwapStmts) and the write transaction they run in (SwapBackend).

// SwapOldRow is a chunk row the swap replaces, as the backend read it.
type SwapOldRow struct {
	catalog.Chunk
	SegmentID int64
	// AppendTime is the row's append time (unix ms; the segment's creation for a row
	// written before the column existed).
	AppendTime int64
	// Settled: the row's segment is older than the settle age asked for.
	Settled bool
}

// SwapStmts are the statements of one swap, all inside one write transaction.
type SwapStmts interface {
	// LockPartition takes the partition row first (the lock order), which also orders
	// the swap after any commit or log start advance in flight on it, and answers the
	// database clock and the log start offset.
	LockPartition(ctx context.Context, tp catalog.TopicPartition) (now time.Time, logStart int64, err error)
	// LeaseHeld answers whether l still holds its partition, holding the lease row
	// (where the database has row locks) until the transaction ends.
	LeaseHeld(ctx context.Context, l catalog.PartitionLease) (bool, error)
	// RangeRows reads the chunk rows of tp overlapping [first, last], by last offset;
	// settle is the age a row's segment must have to count as settled.
	RangeRows(ctx context.Context, tp catalog.TopicPartition, first, last int64, settle time.Duration) ([]SwapOldRow, error)
	// PrevRunningMax answers the running maximum timestamp of tp's row before offset
	// first (catalog.NoTimestamp when none).
	PrevRunningMax(ctx context.Context, tp catalog.TopicPartition, first int64) (int64, error)
	// DeleteRange deletes the chunk rows of tp overlapping [first, last].
	DeleteRange(ctx context.Context, tp catalog.TopicPartition, first, last int64) error
	// InsertSegment inserts a live segment row made at now; ok is false when the key
	// already has one.
	InsertSegment(ctx context.Context, key string, size int64, now time.Time) (id int64, ok bool, err error)
	// InsertChunks inserts rows (real offsets) over segment segID, with their append
	// times.
	InsertChunks(ctx context.Context, segID int64, rows []catalog.ChunkRow, appendTimes []int64) error
	// AddBytes adds delta to tp's byte count.
	AddBytes(ctx context.Context, tp catalog.TopicPartition, delta int64) error
	// MarkDeleting turns the segments ids (in the order given) 'deleting' at now when no
	// chunk row refers to them any more.
	MarkDeleting(ctx context.Context, ids []int64, now time.Time) error
}

// SwapBackend runs a swap's statements in one write transaction.
type SwapBackend interface {
	// Name is the backend's name, for errors ("postgres", "sqlite").
	Name() string
	// CommitTimeout is the catalog's commit timeout (catalog.Options).
	CommitTimeout() time.Duration
	// SwapTx runs fn in a write transaction and commits it when fn returns nil.
	SwapTx(ctx context.Context, fn func(SwapStmts) error) error
}

// SwapChunks replaces s.Old with s.New over a new object, as a compare-and-swap in one
// transaction: the partition row, the commit time of the new key, the lease, the log
// start and the old rows must all be as planned, and the old rows' segments settled.
func SwapChunks(ctx context.Context, db SwapBackend, s catalog.Swap) error {
	if err := CheckSwap(&s); err != nil {
		return err
	}
	keyTime, _ := KeyTime(s.Key) // checked by CheckSwap
	l := s.Lease
	tp := catalog.TopicPartition{TopicID: l.TopicID, Partition: l.Partition}
	first, last := s.Old[0].BaseOffset, s.Old[len(s.Old)-1].LastOffset
	timeout := db.CommitTimeout()
	err := db.SwapTx(ctx, func(q SwapStmts) error {
		now, logStart, err := q.LockPartition(ctx, tp)
		if err != nil {
			return fmt.Errorf("lock partition: %w", err)
		}
		if err := CheckCommitTime(keyTime, now, timeout); err != nil {
			return err
		}
		held, err := q.LeaseHeld(ctx, l)
		if err != nil {
			return fmt.Errorf("check lease: %w", err)
		}
		if !held {
			return fmt.Errorf("lease token %d of %s lost: %w", l.Token, l.Holder, catalog.ErrCompactionConflict)
		}
		if logStart != s.LogStart {
			return fmt.Errorf("log start moved from %d to %d: %w", s.LogStart, logStart, catalog.ErrCompactionConflict)
		}
		rows, err := q.RangeRows(ctx, tp, first, last, catalog.SettleAge(timeout))
		if err != nil {
			return fmt.Errorf("read rows: %w", err)
		}
		var (
			found    = make([]catalog.Chunk, len(rows))
			appended = make([]int64, len(rows))
			segIDs   []int64
			seen     = map[int64]bool{}
			unsettle bool
			oldBytes int64
		)
		for i, r := range rows {
			found[i], appended[i] = r.Chunk, r.AppendTime
			if !seen[r.SegmentID] {
				seen[r.SegmentID] = true
				segIDs = append(segIDs, r.SegmentID)
			}
			unsettle = unsettle || !r.Settled
			if r.LastOffset >= logStart {
				oldBytes += r.Len
			}
		}
		if err := CheckSwapOld(&s, found); err != nil {
			return err
		}
		if unsettle {
			return fmt.Errorf("a replaced row's segment is younger than %s: %w", catalog.SettleAge(timeout), catalog.ErrCompactionConflict)
		}
		prev, err := q.PrevRunningMax(ctx, tp, first)
		if err != nil {
			return fmt.Errorf("previous row: %w", err)
		}
		if err := q.DeleteRange(ctx, tp, first, last); err != nil {
			return fmt.Errorf("delete rows: %w", err)
		}
		segID, ok, err := q.InsertSegment(ctx, s.Key, s.Size, now)
		if err != nil {
			return fmt.Errorf("insert segment: %w", err)
		}
		if !ok {
			return fmt.Errorf("key %s already has a row (fenced by the sweep?): %w", s.Key, catalog.ErrCompactionConflict)
		}
		rowsNew := SwapRunningMax(&s, prev)
		var newBytes int64
		for _, r := range rowsNew {
			if r.LastOffset >= logStart {
				newBytes += r.Len
			}
		}
		if err := q.InsertChunks(ctx, segID, rowsNew, SwapAppendTimes(&s, appended)); err != nil {
			return fmt.Errorf("insert rows: %w", err)
		}
		if err := q.AddBytes(ctx, tp, newBytes-oldBytes); err != nil {
			return fmt.Errorf("update bytes: %w", err)
		}
		return q.MarkDeleting(ctx, segIDs, now) // its errors say which step
	})
	if err != nil {
		return fmt.Errorf("%s: swap topic id %d partition %d offsets [%d, %d] into %s: %w", db.Name(), l.TopicID, l.Partition, first, last, s.Key, err)
	}
	return nil
}
