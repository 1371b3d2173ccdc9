package engine

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

func TestSwapCheck(t *testing.T) {
	key := segment.NewKey(time.Now())
	l := catalog.PartitionLease{TopicID: 7, Partition: 2, Holder: "h", Token: 3}
	old := []catalog.Chunk{
		{TopicID: 7, Partition: 2, BaseOffset: 10, LastOffset: 19},
		{TopicID: 7, Partition: 2, BaseOffset: 20, LastOffset: 24},
	}
	good := func() catalog.Swap {
		return catalog.Swap{Lease: l, Old: append([]catalog.Chunk(nil), old...), Key: key, Size: 1000, New: []catalog.ChunkRow{
			{TopicID: 7, Partition: 2, BaseOffset: 10, LastOffset: 17, Pos: 0, Len: 400, MaxTimestamp: 5},
			{TopicID: 7, Partition: 2, BaseOffset: 18, LastOffset: 24, Pos: 400, Len: 500, MaxTimestamp: 3},
		}}
	}
	for _, tc := range []struct {
		name string
		mod  func(s *catalog.Swap)
		ok   bool
	}{
		{"valid", func(s *catalog.Swap) {}, true},
		{"one new row", func(s *catalog.Swap) {
			s.New = []catalog.ChunkRow{{TopicID: 7, Partition: 2, BaseOffset: 10, LastOffset: 24, Len: 900}}
		}, true},
		{"no old rows", func(s *catalog.Swap) { s.Old = nil }, false},
		{"no new rows", func(s *catalog.Swap) { s.New = nil }, false},
		{"bad key", func(s *catalog.Swap) { s.Key = "segments/x" }, false},
		{"empty object", func(s *catalog.Swap) { s.Size = 0 }, false},
		{"old row of another partition", func(s *catalog.Swap) { s.Old[1].Partition = 3 }, false},
		// A gap between old rows is markers' offsets (catalog.Swap); an overlap is not.
		{"old rows with a gap", func(s *catalog.Swap) { s.Old[1].BaseOffset = 21 }, true},
		{"old rows overlap", func(s *catalog.Swap) { s.Old[1].BaseOffset = 19 }, false},
		{"old row inverted", func(s *catalog.Swap) { s.Old[0].LastOffset = 9 }, false},
		{"new rows start late", func(s *catalog.Swap) { s.New[0].BaseOffset = 11 }, false},
		{"new rows overlap", func(s *catalog.Swap) { s.New[1].BaseOffset = 17 }, false},
		{"new rows end early", func(s *catalog.Swap) { s.New[1].LastOffset = 23 }, false},
		{"new rows end late", func(s *catalog.Swap) { s.New[1].LastOffset = 25 }, false},
		{"new row inverted", func(s *catalog.Swap) { s.New[0].LastOffset = 9 }, false},
		{"new row of another topic", func(s *catalog.Swap) { s.New[0].TopicID = 8 }, false},
		{"new row empty", func(s *catalog.Swap) { s.New[0].Len = 0 }, false},
		{"new row past the object", func(s *catalog.Swap) { s.New[1].Len = 601 }, false},
		{"new row before the object", func(s *catalog.Swap) { s.New[0].Pos = -1 }, false},
	} {
		s := good()
		tc.mod(&s)
		err := CheckSwap(&s)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, catalog.ErrInvalidSegment)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Running maxima continue from the row before the swapped range.
	s := good()
	rows := SwapRunningMax(&s, 4)
	if rows[0].RunningMaxTimestamp != 5 || rows[1].RunningMaxTimestamp != 5 {
		t.Errorf("running maxima %d, %d; want 5, 5", rows[0].RunningMaxTimestamp, rows[1].RunningMaxTimestamp)
	}
	if rows = SwapRunningMax(&s, 9); rows[0].RunningMaxTimestamp != 9 || rows[1].RunningMaxTimestamp != 9 {
		t.Errorf("running maxima %d, %d; want 9, 9", rows[0].RunningMaxTimestamp, rows[1].RunningMaxTimestamp)
	}
	// CheckOld: exactly the planned rows, unchanged.
	if err := CheckSwapOld(&s, old); err != nil {
		t.Errorf("same rows: %v", err)
	}
	changed := append([]catalog.Chunk(nil), old...)
	changed[0].SegmentKey = "segments/other"
	for _, found := range [][]catalog.Chunk{old[:1], changed, append(old, old[0])} {
		if err := CheckSwapOld(&s, found); !errors.Is(err, catalog.ErrCompactionConflict) {
			t.Errorf("rows %+v: %v, want ErrCompactionConflict", found, err)
		}
	}
}

// A merged row's append time is the latest of the rows it overlaps.
func TestSwapAppendTimes(t *testing.T) {
	old := []catalog.Chunk{{BaseOffset: 0, LastOffset: 9}, {BaseOffset: 10, LastOffset: 19}, {BaseOffset: 20, LastOffset: 29}, {BaseOffset: 30, LastOffset: 39}}
	times := []int64{500, 300, 400, 100}
	for _, tc := range []struct {
		name string
		new  [][2]int64
		want []int64
	}{
		{"one row", [][2]int64{{0, 39}}, []int64{500}},
		{"along the old bounds", [][2]int64{{0, 9}, {10, 19}, {20, 29}, {30, 39}}, times},
		{"across them", [][2]int64{{0, 14}, {15, 24}, {25, 39}}, []int64{500, 400, 400}},
		{"inside one", [][2]int64{{0, 11}, {12, 13}, {14, 39}}, []int64{500, 300, 400}},
	} {
		s := catalog.Swap{Old: old}
		for _, n := range tc.new {
			s.New = append(s.New, catalog.ChunkRow{BaseOffset: n[0], LastOffset: n[1]})
		}
		if got := SwapAppendTimes(&s, times); !slices.Equal(got, tc.want) {
			t.Errorf("%s: append times %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A release records the pass's due time, brought forward by what changed meanwhile.
func TestReleaseDue(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	settle := 60 * time.Second
	seenAt := func(retention string) *catalog.CompactionState {
		return &catalog.CompactionState{Now: now.Add(-time.Second), Topic: catalog.Topic{Configs: map[string]string{"retention.ms": retention}},
			Partition: catalog.PartitionInfo{LogStartOffset: 5, HighWatermark: 10}}
	}
	seen, short := seenAt("3600000"), seenAt("1000")
	later := now.Add(time.Hour)
	for _, tc := range []struct {
		name string
		r    catalog.PartitionRelease
		cur  func(c *catalog.CompactionState)
		want time.Time
	}{
		{"unchanged", catalog.PartitionRelease{Due: later, Seen: seen}, func(*catalog.CompactionState) {}, later},
		{"unchanged, nothing due", catalog.PartitionRelease{Seen: seen}, func(*catalog.CompactionState) {}, time.Time{}},
		{"no state seen", catalog.PartitionRelease{Due: later}, func(c *catalog.CompactionState) { c.Partition.HighWatermark = 99 }, later},
		{"committed", catalog.PartitionRelease{Due: later, Seen: seen}, func(c *catalog.CompactionState) { c.Partition.HighWatermark = 12 }, now.Add(settle)},
		{"committed, retention.ms sooner", catalog.PartitionRelease{Due: later, Seen: short}, func(c *catalog.CompactionState) { c.Partition.HighWatermark = 12 }, now.Add(time.Second)},
		{"committed, due sooner anyway", catalog.PartitionRelease{Due: now, Seen: seen}, func(c *catalog.CompactionState) { c.Partition.HighWatermark = 12 }, now},
		{"committed, nothing due", catalog.PartitionRelease{Seen: seen}, func(c *catalog.CompactionState) { c.Partition.HighWatermark = 12 }, now.Add(settle)},
		{"log start moved", catalog.PartitionRelease{Due: later, Seen: seen}, func(c *catalog.CompactionState) { c.Partition.LogStartOffset = 7 }, now},
		{"configs changed", catalog.PartitionRelease{Seen: seen}, func(c *catalog.CompactionState) { c.Topic.Configs = map[string]string{"retention.ms": "10"} }, now},
		{"configs removed", catalog.PartitionRelease{Seen: seen}, func(c *catalog.CompactionState) { c.Topic.Configs = nil }, now},
		{"topic deleted", catalog.PartitionRelease{Due: later, Seen: seen}, func(c *catalog.CompactionState) { c.Deleted = true }, now},
		{"reclaimed", catalog.PartitionRelease{Reclaimed: true, Due: later, Seen: seen}, func(c *catalog.CompactionState) { c.Partition.HighWatermark = 12 }, time.Time{}},
	} {
		cur := *seen
		if tc.r.Seen != nil {
			cur = *tc.r.Seen
		}
		cur.Now = now
		cur.Topic.Configs = maps.Clone(cur.Topic.Configs)
		tc.cur(&cur)
		if got := ReleaseDue(tc.r, cur, settle); !got.Equal(tc.want) {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A flush makes a partition due when its rows settle, or sooner when retention.ms
// expires its chunk first.
func TestCommitDue(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ms := now.UnixMilli()
	settle := time.Minute
	for _, tc := range []struct {
		name             string
		maxTS, retention int64
		want             time.Time
	}{
		{"no retention", ms, -1, now.Add(settle)},
		{"retention longer than the settle age", ms, time.Hour.Milliseconds(), now.Add(settle)},
		{"short retention", ms, 1000, now.Add(time.Second)},
		{"short retention, old records", ms - 5000, 1000, now.Add(-4 * time.Second)},
		{"short retention, records in year 9999", 253402300799000, 1000, now.Add(time.Second)},
		{"short retention, no timestamps", catalog.NoTimestamp, 1000, now.Add(time.Second)},
		{"retention too long to add", ms, 1<<63 - 1, now.Add(settle)},
	} {
		if got := CommitDue(now, settle, tc.maxTS, tc.retention); !got.Equal(tc.want) {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}
