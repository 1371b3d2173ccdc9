package catalog

import (
	"errors"
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
