package engine

import (
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The compaction rules the backends share (catalog.Compaction): a swap's shape and the
// rows it writes, and the due times a commit and a release record. strata_commit and
// the release SQL hold their twins.

// CheckSwap validates a swap's shape (ErrInvalidSegment), before any SQL.
func CheckSwap(s *catalog.Swap) error {
	if len(s.Old) == 0 || len(s.New) == 0 {
		return fmt.Errorf("%w: swap %s: %d old rows, %d new", catalog.ErrInvalidSegment, s.Key, len(s.Old), len(s.New))
	}
	if _, err := KeyTime(s.Key); err != nil {
		return err
	}
	if s.Size <= 0 {
		return fmt.Errorf("%w: swap %s: size %d", catalog.ErrInvalidSegment, s.Key, s.Size)
	}
	for i, o := range s.Old {
		if o.TopicID != s.Lease.TopicID || o.Partition != s.Lease.Partition {
			return fmt.Errorf("%w: swap %s: old row %d is topic %d partition %d, the lease is for %d/%d",
				catalog.ErrInvalidSegment, s.Key, i, o.TopicID, o.Partition, s.Lease.TopicID, s.Lease.Partition)
		}
		if o.LastOffset < o.BaseOffset || (i > 0 && o.BaseOffset <= s.Old[i-1].LastOffset) {
			// Gaps are allowed: markers' offsets (catalog.Swap).
			return fmt.Errorf("%w: swap %s: old rows not ascending at %d", catalog.ErrInvalidSegment, s.Key, o.BaseOffset)
		}
	}
	next := s.Old[0].BaseOffset
	for i, n := range s.New {
		switch {
		case n.TopicID != s.Lease.TopicID || n.Partition != s.Lease.Partition:
			return fmt.Errorf("%w: swap %s: new row %d is for another partition", catalog.ErrInvalidSegment, s.Key, i)
		case n.BaseOffset != next || n.LastOffset < n.BaseOffset:
			return fmt.Errorf("%w: swap %s: new row %d offsets [%d, %d] do not continue at %d", catalog.ErrInvalidSegment, s.Key, i, n.BaseOffset, n.LastOffset, next)
		case n.Pos < 0 || n.Len <= 0 || n.Len > s.Size-n.Pos:
			return fmt.Errorf("%w: swap %s: new row %d bytes [%d, +%d) outside object of %d", catalog.ErrInvalidSegment, s.Key, i, n.Pos, n.Len, s.Size)
		}
		next = n.LastOffset + 1
	}
	if last := s.Old[len(s.Old)-1].LastOffset; next != last+1 {
		return fmt.Errorf("%w: swap %s: new rows end at %d, old rows at %d", catalog.ErrInvalidSegment, s.Key, next-1, last)
	}
	return nil
}

// SwapRunningMax fills the new rows' running maximum timestamps, continuing from prev (the
// running maximum of the row before them; NoTimestamp when none).
func SwapRunningMax(s *catalog.Swap, prev int64) []catalog.ChunkRow {
	out := make([]catalog.ChunkRow, len(s.New))
	for i, n := range s.New {
		prev = max(prev, n.MaxTimestamp)
		n.RunningMaxTimestamp = prev
		out[i] = n
	}
	return out
}

// SwapAppendTimes returns the new rows' append times, given old[i], the append time of
// s.Old[i]: each new row takes the latest of the old rows it overlaps, so a merge never
// makes a record look older to retention than its flush.
func SwapAppendTimes(s *catalog.Swap, old []int64) []int64 {
	out := make([]int64, len(s.New))
	j := 0
	for i, n := range s.New {
		for j < len(s.Old) && s.Old[j].LastOffset < n.BaseOffset {
			j++
		}
		t := catalog.NoTimestamp
		for k := j; k < len(s.Old) && s.Old[k].BaseOffset <= n.LastOffset; k++ {
			t = max(t, old[k])
		}
		out[i] = t
	}
	return out
}

// CheckSwapOld compares the rows found in the swap's transaction with s.Old, wrapping
// ErrCompactionConflict when they differ.
func CheckSwapOld(s *catalog.Swap, found []catalog.Chunk) error {
	if len(found) != len(s.Old) {
		return fmt.Errorf("%w: swap %s: %d rows in the range, planned on %d", catalog.ErrCompactionConflict, s.Key, len(found), len(s.Old))
	}
	for i := range found {
		if !catalog.SameChunk(found[i], s.Old[i]) {
			return fmt.Errorf("%w: swap %s: row at offset %d changed", catalog.ErrCompactionConflict, s.Key, s.Old[i].BaseOffset)
		}
	}
	return nil
}

// ReleaseDue is the due time a release records (zero: none), given cur, the partition
// and its topic as they are now: r.Due, brought forward when they changed after the
// pass read r.Seen — to now for a moved log start, new configs or a deleted topic; for
// new commits to what CommitDue says of a chunk appended now, as a commit would have.
func ReleaseDue(r catalog.PartitionRelease, cur catalog.CompactionState, settle time.Duration) time.Time {
	if r.Reclaimed {
		return time.Time{}
	}
	due := r.Due
	if r.Seen == nil {
		return due
	}
	by := func(t time.Time) {
		if due.IsZero() || t.Before(due) {
			due = t
		}
	}
	seen := r.Seen
	switch {
	case cur.Deleted != seen.Deleted || cur.Partition.LogStartOffset != seen.Partition.LogStartOffset ||
		!maps.Equal(cur.Topic.Configs, seen.Topic.Configs):
		by(cur.Now)
	case cur.Partition.HighWatermark != seen.Partition.HighWatermark:
		cfg, err := catalog.ParseConfig(cur.Topic.Configs)
		if err != nil {
			cfg = catalog.DefaultConfig()
		}
		by(CommitDue(cur.Now, settle, catalog.NoTimestamp, TimeRetentionMs(cfg)))
	}
	return due
}

// TimeRetentionMs is a topic's time retention: retention.ms when its cleanup.policy
// deletes, else -1 (none).
func TimeRetentionMs(cfg catalog.Config) int64 {
	if !strings.Contains(cfg.CleanupPolicy, "delete") {
		return -1
	}
	return cfg.RetentionMs
}

// CommitDue is when a flush makes a partition due (unless due sooner): once its new rows
// settle (settle after now), or sooner when retention.ms (retentionMs; negative: none)
// expires the new chunk first, judged by its retention time — the flush's maximum
// timestamp for the partition clamped to now, as CompactionChunk.RetentionTime. Where
// the chunk is not the partition's oldest this may be early: a visit too many, never
// one too few. strata_commit holds its SQL twin (catalog/postgres migrations).
func CommitDue(now time.Time, settle time.Duration, maxTimestamp, retentionMs int64) time.Time {
	due := now.Add(settle)
	if retentionMs < 0 {
		return due
	}
	rt := catalog.CompactionChunk{Chunk: catalog.Chunk{MaxTimestamp: maxTimestamp}, AppendTime: now.UnixMilli()}.RetentionTime()
	if rt <= math.MaxInt64-retentionMs {
		if t := time.UnixMilli(rt + retentionMs); t.Before(due) {
			due = t
		}
	}
	return due
}
