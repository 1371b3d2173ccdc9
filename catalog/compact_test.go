package catalog

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/segment"
)

func TestNewLogStart(t *testing.T) {
	p := PartitionInfo{TopicID: 1, Partition: 0, LogStartOffset: 10, HighWatermark: 50}
	for _, tc := range []struct {
		offset, want int64
		err          error
	}{
		{20, 20, nil},
		{50, 50, nil}, // everything
		{10, 10, nil}, // no change
		{3, 10, nil},  // never backwards
		{0, 10, nil},
		{51, 10, ErrOffsetOutOfRange},
		{-1, 10, ErrOffsetOutOfRange},
	} {
		got, err := NewLogStart(p, tc.offset)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("NewLogStart(%d) = %d, %v; want %d, %v", tc.offset, got, err, tc.want, tc.err)
		}
	}
}

func TestSwapCheck(t *testing.T) {
	key := segment.NewKey(time.Now())
	l := PartitionLease{TopicID: 7, Partition: 2, Holder: "h", Token: 3}
	old := []Chunk{
		{TopicID: 7, Partition: 2, BaseOffset: 10, LastOffset: 19},
		{TopicID: 7, Partition: 2, BaseOffset: 20, LastOffset: 24},
	}
	good := func() Swap {
		return Swap{Lease: l, Old: append([]Chunk(nil), old...), Key: key, Size: 1000, New: []ChunkRow{
			{TopicID: 7, Partition: 2, BaseOffset: 10, LastOffset: 17, Pos: 0, Len: 400, MaxTimestamp: 5},
			{TopicID: 7, Partition: 2, BaseOffset: 18, LastOffset: 24, Pos: 400, Len: 500, MaxTimestamp: 3},
		}}
	}
	for _, tc := range []struct {
		name string
		mod  func(s *Swap)
		ok   bool
	}{
		{"valid", func(s *Swap) {}, true},
		{"one new row", func(s *Swap) {
			s.New = []ChunkRow{{TopicID: 7, Partition: 2, BaseOffset: 10, LastOffset: 24, Len: 900}}
		}, true},
		{"no old rows", func(s *Swap) { s.Old = nil }, false},
		{"no new rows", func(s *Swap) { s.New = nil }, false},
		{"bad key", func(s *Swap) { s.Key = "segments/x" }, false},
		{"empty object", func(s *Swap) { s.Size = 0 }, false},
		{"old row of another partition", func(s *Swap) { s.Old[1].Partition = 3 }, false},
		{"old rows with a gap", func(s *Swap) { s.Old[1].BaseOffset = 21 }, false},
		{"new rows start late", func(s *Swap) { s.New[0].BaseOffset = 11 }, false},
		{"new rows overlap", func(s *Swap) { s.New[1].BaseOffset = 17 }, false},
		{"new rows end early", func(s *Swap) { s.New[1].LastOffset = 23 }, false},
		{"new rows end late", func(s *Swap) { s.New[1].LastOffset = 25 }, false},
		{"new row inverted", func(s *Swap) { s.New[0].LastOffset = 9 }, false},
		{"new row of another topic", func(s *Swap) { s.New[0].TopicID = 8 }, false},
		{"new row empty", func(s *Swap) { s.New[0].Len = 0 }, false},
		{"new row past the object", func(s *Swap) { s.New[1].Len = 601 }, false},
		{"new row before the object", func(s *Swap) { s.New[0].Pos = -1 }, false},
	} {
		s := good()
		tc.mod(&s)
		err := s.Check()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidSegment)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Running maxima continue from the row before the swapped range.
	s := good()
	rows := s.RunningMax(4)
	if rows[0].RunningMaxTimestamp != 5 || rows[1].RunningMaxTimestamp != 5 {
		t.Errorf("running maxima %d, %d; want 5, 5", rows[0].RunningMaxTimestamp, rows[1].RunningMaxTimestamp)
	}
	if rows = s.RunningMax(9); rows[0].RunningMaxTimestamp != 9 || rows[1].RunningMaxTimestamp != 9 {
		t.Errorf("running maxima %d, %d; want 9, 9", rows[0].RunningMaxTimestamp, rows[1].RunningMaxTimestamp)
	}
	// CheckOld: exactly the planned rows, unchanged.
	if err := s.CheckOld(old); err != nil {
		t.Errorf("same rows: %v", err)
	}
	changed := append([]Chunk(nil), old...)
	changed[0].SegmentKey = "segments/other"
	for _, found := range [][]Chunk{old[:1], changed, append(old, old[0])} {
		if err := s.CheckOld(found); !errors.Is(err, ErrCompactionConflict) {
			t.Errorf("rows %+v: %v, want ErrCompactionConflict", found, err)
		}
	}
}

// Retention judges a row by its records' time clamped to their append time.
func TestRetentionTime(t *testing.T) {
	for _, tc := range []struct {
		maxTS, appended, want int64
	}{
		{1000, 2000, 1000},            // honest clocks: the records' time (old data goes early, as in Kafka)
		{3000, 2000, 2000},            // a clock ahead: no later than the append
		{253402300799000, 2000, 2000}, // year 9999
		{NoTimestamp, 2000, 2000},     // no timestamps: the append
		{2000, 2000, 2000},
	} {
		c := CompactionChunk{Chunk: Chunk{MaxTimestamp: tc.maxTS}, AppendTime: tc.appended}
		if got := c.RetentionTime(); got != tc.want {
			t.Errorf("max timestamp %d appended at %d: retention time %d, want %d", tc.maxTS, tc.appended, got, tc.want)
		}
	}
}

// A merged row's append time is the latest of the rows it overlaps.
func TestSwapAppendTimes(t *testing.T) {
	old := []Chunk{{BaseOffset: 0, LastOffset: 9}, {BaseOffset: 10, LastOffset: 19}, {BaseOffset: 20, LastOffset: 29}, {BaseOffset: 30, LastOffset: 39}}
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
		s := Swap{Old: old}
		for _, n := range tc.new {
			s.New = append(s.New, ChunkRow{BaseOffset: n[0], LastOffset: n[1]})
		}
		if got := s.AppendTimes(times); !slices.Equal(got, tc.want) {
			t.Errorf("%s: append times %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A release records the pass's due time, brought forward by what changed meanwhile.
func TestReleaseDue(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	settle := 60 * time.Second
	seenAt := func(retention string) *CompactionState {
		return &CompactionState{Now: now.Add(-time.Second), Topic: Topic{Configs: map[string]string{"retention.ms": retention}},
			Partition: PartitionInfo{LogStartOffset: 5, HighWatermark: 10}}
	}
	seen, short := seenAt("3600000"), seenAt("1000")
	later := now.Add(time.Hour)
	for _, tc := range []struct {
		name string
		r    PartitionRelease
		cur  func(c *CompactionState)
		want time.Time
	}{
		{"unchanged", PartitionRelease{Due: later, Seen: seen}, func(*CompactionState) {}, later},
		{"unchanged, nothing due", PartitionRelease{Seen: seen}, func(*CompactionState) {}, time.Time{}},
		{"no state seen", PartitionRelease{Due: later}, func(c *CompactionState) { c.Partition.HighWatermark = 99 }, later},
		{"committed", PartitionRelease{Due: later, Seen: seen}, func(c *CompactionState) { c.Partition.HighWatermark = 12 }, now.Add(settle)},
		{"committed, retention.ms sooner", PartitionRelease{Due: later, Seen: short}, func(c *CompactionState) { c.Partition.HighWatermark = 12 }, now.Add(time.Second)},
		{"committed, due sooner anyway", PartitionRelease{Due: now, Seen: seen}, func(c *CompactionState) { c.Partition.HighWatermark = 12 }, now},
		{"committed, nothing due", PartitionRelease{Seen: seen}, func(c *CompactionState) { c.Partition.HighWatermark = 12 }, now.Add(settle)},
		{"log start moved", PartitionRelease{Due: later, Seen: seen}, func(c *CompactionState) { c.Partition.LogStartOffset = 7 }, now},
		{"configs changed", PartitionRelease{Seen: seen}, func(c *CompactionState) { c.Topic.Configs = map[string]string{"retention.ms": "10"} }, now},
		{"configs removed", PartitionRelease{Seen: seen}, func(c *CompactionState) { c.Topic.Configs = nil }, now},
		{"topic deleted", PartitionRelease{Due: later, Seen: seen}, func(c *CompactionState) { c.Deleted = true }, now},
		{"reclaimed", PartitionRelease{Reclaimed: true, Due: later, Seen: seen}, func(c *CompactionState) { c.Partition.HighWatermark = 12 }, time.Time{}},
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

func TestCheckConfigLimits(t *testing.T) {
	const key = "message.timestamp.after.max.ms"
	for _, tc := range []struct {
		set   map[string]string
		limit int64
		ok    bool
	}{
		{nil, DefaultMaxTimestampAfterMs, true},
		{map[string]string{"retention.ms": "1"}, DefaultMaxTimestampAfterMs, true},
		{map[string]string{key: "86400000"}, DefaultMaxTimestampAfterMs, true},
		{map[string]string{key: "86400001"}, DefaultMaxTimestampAfterMs, false},
		{map[string]string{key: "9223372036854775807"}, DefaultMaxTimestampAfterMs, false},
		{map[string]string{key: "9223372036854775807"}, -1, true}, // the operator lifted the limit
		{map[string]string{key: "3600001"}, 3600000, false},
		{map[string]string{key: ""}, 1, true}, // removing it (back to the default)
	} {
		err := CheckConfigLimits(tc.set, tc.limit)
		var ce *ConfigError
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &ce) || ce.Key != key || !errors.Is(err, ErrInvalidConfig))) {
			t.Errorf("%v with limit %d: %v", tc.set, tc.limit, err)
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
		{"short retention, no timestamps", NoTimestamp, 1000, now.Add(time.Second)},
		{"retention too long to add", ms, 1<<63 - 1, now.Add(settle)},
	} {
		if got := CommitDue(now, settle, tc.maxTS, tc.retention); !got.Equal(tc.want) {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}
