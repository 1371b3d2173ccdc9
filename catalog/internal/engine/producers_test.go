package engine

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

func TestAddSequence(t *testing.T) {
	for _, tc := range []struct {
		seq, n, want int32
	}{
		{0, 0, 0},
		{5, 3, 8},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 3, 1},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32 - 1},
	} {
		if got := AddSequence(tc.seq, tc.n); got != tc.want {
			t.Errorf("AddSequence(%d, %d) = %d, want %d", tc.seq, tc.n, got, tc.want)
		}
	}
}

func TestNextEpoch(t *testing.T) {
	for _, tc := range []struct {
		e, want int16
		newID   bool
	}{
		{0, 1, false},
		{41, 42, false},
		{math.MaxInt16 - 1, math.MaxInt16, false},
		{math.MaxInt16, 0, true},
	} {
		if got, newID := NextEpoch(tc.e); got != tc.want || newID != tc.newID {
			t.Errorf("NextEpoch(%d) = %d, %v; want %d, %v", tc.e, got, newID, tc.want, tc.newID)
		}
	}
}

func TestProducerExpired(t *testing.T) {
	now := time.Date(2026, 1, 8, 0, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	if producerExpired(now.Add(-week+time.Millisecond), now, week) {
		t.Error("expired a millisecond before its time")
	}
	if !producerExpired(now.Add(-week), now, week) {
		t.Error("not expired at its time")
	}
	if got := ProducerTouchInterval(week); got != week/100 {
		t.Errorf("touch interval %v, want %v", got, week/100)
	}
	if got := ProducerTouchInterval(time.Second); got != time.Second {
		t.Errorf("touch interval %v, want at least a second", got)
	}
}

// pb is an idempotent batch: topic 1, partition, records, base sequence. Positions are
// laid out by pseg.
type pb struct {
	part int32
	recs int32
	seq  int32
}

// preq is one idempotent request (producer nil: not idempotent).
type preq struct {
	prod    *catalog.Producer
	batches []pb
}

func prod(id int64, epoch int16) *catalog.Producer { return &catalog.Producer{ID: id, Epoch: epoch} }

// pseg lays requests out as the encoder does: by partition, then request order, 10
// bytes a record.
func pseg(t *testing.T, rs ...preq) *Plan {
	t.Helper()
	s := catalog.Segment{Key: "segments/20250101T000000.000Z-0000000000000001", Requests: make([]catalog.Request, len(rs))}
	type ref struct{ r, b int }
	var refs []ref
	for ri, r := range rs {
		s.Requests[ri] = catalog.Request{Producer: r.prod, Batches: make([]catalog.Batch, len(r.batches))}
		for bi := range r.batches {
			refs = append(refs, ref{ri, bi})
		}
	}
	slices.SortStableFunc(refs, func(a, b ref) int {
		return int(rs[a.r].batches[a.b].part - rs[b.r].batches[b.b].part)
	})
	var pos int64
	for _, f := range refs {
		b := rs[f.r].batches[f.b]
		seq := b.seq
		if rs[f.r].prod == nil {
			seq = -1
		}
		s.Requests[f.r].Batches[f.b] = catalog.Batch{TopicID: 1, Partition: b.part, Pos: pos, Len: 10 * int64(b.recs), Records: b.recs, BaseSequence: seq}
		pos += 10 * int64(b.recs)
	}
	s.Size = pos + 1
	p, err := PlanSegment(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func key(id int64, part int32) ProducerPartition {
	return ProducerPartition{id, catalog.TopicPartition{TopicID: 1, Partition: part}}
}

// outcome is one request's expected answer: offsets (with dup), or an error to match.
type outcome struct {
	offsets []int64
	dup     bool
	err     error
	expect  int32 // for ErrOutOfOrderSequence: the expected sequence
}

func ok(offs ...int64) outcome { return outcome{offsets: offs} }

func dup(offs ...int64) outcome { return outcome{offsets: offs, dup: true} }

func bad(err error) outcome { return outcome{err: err} }

func gap(expected int32) outcome {
	return outcome{err: catalog.ErrOutOfOrderSequence, expect: expected}
}

// State of producer 7 on partition 0 at epoch 1: batches [0,9] at offset 100 and
// [10,14] at offset 110; partition 0's high watermark is 200, partition 1's 50.
var p7 = ProducerState{Epoch: 1, Batches: []ProducerBatch{{0, 9, 100}, {10, 14, 110}}}

// checkProducersCases are TestCheckProducers'.
var checkProducersCases = []struct {
	name     string
	reqs     []preq
	errs     []error // pre-existing refusals; nil: none
	registry map[int64]int16
	state    map[ProducerPartition]ProducerState
	want     []outcome
	rows     []ProducerStateRow
	bumps    []ProducerEpoch
}{
	{
		name:     "next sequence accepted",
		reqs:     []preq{{prod(7, 1), []pb{{0, 3, 15}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{ok(200)},
		rows:     []ProducerStateRow{{key(7, 0), ProducerState{1, []ProducerBatch{{0, 9, 100}, {10, 14, 110}, {15, 17, 200}}}}},
	},
	{
		name:     "retry of the last batch is a duplicate",
		reqs:     []preq{{prod(7, 1), []pb{{0, 5, 10}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{dup(110)},
	},
	{
		name:     "retry of an older kept batch is a duplicate",
		reqs:     []preq{{prod(7, 1), []pb{{0, 10, 0}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{dup(100)},
	},
	{
		name:     "same first sequence, other length: out of order",
		reqs:     []preq{{prod(7, 1), []pb{{0, 4, 10}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{gap(15)},
	},
	{
		name:     "gap",
		reqs:     []preq{{prod(7, 1), []pb{{0, 1, 16}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{gap(15)},
	},
	{
		name:     "new partition starts at 0",
		reqs:     []preq{{prod(7, 1), []pb{{1, 2, 3}}}, {prod(7, 1), []pb{{1, 2, 0}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{gap(0), ok(50)},
		rows:     []ProducerStateRow{{key(7, 1), ProducerState{1, []ProducerBatch{{0, 1, 50}}}}},
	},
	{
		name:     "stale epoch fenced",
		reqs:     []preq{{prod(7, 0), []pb{{0, 1, 0}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{bad(catalog.ErrProducerFenced)},
	},
	{
		name:     "epoch ahead, not at 0: out of order",
		reqs:     []preq{{prod(7, 2), []pb{{0, 1, 15}}}, {prod(7, 4), []pb{{0, 1, 15}}}},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{gap(0), gap(0)},
	},
	{
		name:     "epoch several ahead at 0: a bump too",
		reqs:     []preq{{prod(7, 4), []pb{{0, 1, 0}}}, {prod(7, 2), []pb{{1, 1, 0}}}},
		registry: map[int64]int16{7: 1},
		want:     []outcome{ok(200), bad(catalog.ErrProducerFenced)},
		rows:     []ProducerStateRow{{key(7, 0), ProducerState{4, []ProducerBatch{{0, 0, 200}}}}},
		bumps:    []ProducerEpoch{{7, 4}},
	},
	{
		name: "epoch ahead at 0: the producer's bump, fencing the old epoch after it",
		reqs: []preq{
			{prod(7, 1), []pb{{0, 1, 15}}}, // before the bump: accepted
			{prod(7, 2), []pb{{0, 1, 0}}},  // the bump
			{prod(7, 1), []pb{{0, 1, 16}}}, // after it: fenced
			{prod(7, 2), []pb{{1, 2, 0}}},  // epoch 2 elsewhere, from 0
		},
		registry: map[int64]int16{7: 1},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{ok(200), ok(201), bad(catalog.ErrProducerFenced), ok(50)},
		rows: []ProducerStateRow{
			{key(7, 0), ProducerState{2, []ProducerBatch{{0, 0, 201}}}},
			{key(7, 1), ProducerState{2, []ProducerBatch{{0, 1, 50}}}},
		},
		bumps: []ProducerEpoch{{7, 2}},
	},
	{
		name:     "id never handed out",
		reqs:     []preq{{prod(8, 0), []pb{{0, 1, 0}}}},
		registry: map[int64]int16{7: 1},
		want:     []outcome{bad(catalog.ErrUnknownProducer)},
	},
	{
		name:     "new epoch resets the state and starts at 0",
		reqs:     []preq{{prod(7, 2), []pb{{0, 1, 15}}}, {prod(7, 2), []pb{{0, 1, 0}}}},
		registry: map[int64]int16{7: 2},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{gap(0), ok(200)},
		rows:     []ProducerStateRow{{key(7, 0), ProducerState{2, []ProducerBatch{{0, 0, 200}}}}},
	},
	{
		name: "a fenced retry of a committed batch is still its duplicate",
		reqs: []preq{{prod(7, 1), []pb{{0, 5, 10}}}},
		// The producer moved to epoch 2, but this batch committed at 1.
		registry: map[int64]int16{7: 2},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{dup(110)},
	},
	{
		name: "duplicates, a gap and a fenced request in one flush",
		reqs: []preq{
			{prod(9, 0), []pb{{0, 2, 0}}},  // accepted: 200
			{prod(9, 0), []pb{{0, 3, 2}}},  // accepted: 202
			{prod(9, 0), []pb{{0, 2, 0}}},  // duplicate of request 0
			{prod(7, 0), []pb{{0, 1, 15}}}, // fenced
			{prod(9, 0), []pb{{0, 3, 2}}},  // duplicate of request 1
			{prod(9, 0), []pb{{0, 1, 9}}},  // gap: expected 5
			{nil, []pb{{0, 4, 0}}},         // not idempotent: 205
		},
		registry: map[int64]int16{7: 1, 9: 0},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{ok(200), ok(202), dup(200), bad(catalog.ErrProducerFenced), dup(202), gap(5), ok(205)},
		rows:     []ProducerStateRow{{key(9, 0), ProducerState{0, []ProducerBatch{{0, 1, 200}, {2, 4, 202}}}}},
	},
	{
		name: "a request refused on one partition advances none",
		reqs: []preq{
			{prod(9, 0), []pb{{0, 2, 0}, {1, 2, 5}}}, // partition 1 expects 0
			{prod(9, 0), []pb{{0, 2, 2}}},            // so partition 0 still expects 0
			{prod(9, 0), []pb{{0, 2, 0}, {1, 1, 0}}}, // accepted: 200, 50
		},
		registry: map[int64]int16{9: 0},
		want:     []outcome{gap(0), gap(0), ok(200, 50)},
		rows: []ProducerStateRow{
			{key(9, 0), ProducerState{0, []ProducerBatch{{0, 1, 200}}}},
			{key(9, 1), ProducerState{0, []ProducerBatch{{0, 0, 50}}}},
		},
	},
	{
		name:     "refused by an earlier check: no state change, but a duplicate still answers",
		reqs:     []preq{{prod(9, 0), []pb{{0, 2, 0}}}, {prod(7, 1), []pb{{0, 5, 10}}}},
		errs:     []error{catalog.ErrNotOwner, catalog.ErrStaleMemberEpoch},
		registry: map[int64]int16{7: 1, 9: 0},
		state:    map[ProducerPartition]ProducerState{key(7, 0): p7},
		want:     []outcome{bad(catalog.ErrNotOwner), dup(110)},
	},
	{
		name: "only the last five batches are kept",
		reqs: []preq{
			{prod(9, 0), []pb{{0, 1, 5}}},
			{prod(9, 0), []pb{{0, 1, 0}}}, // the oldest kept before: forgotten now
			{prod(9, 0), []pb{{0, 1, 1}}}, // still kept: a duplicate
		},
		registry: map[int64]int16{9: 0},
		state: map[ProducerPartition]ProducerState{key(9, 0): {0, []ProducerBatch{
			{0, 0, 10}, {1, 1, 11}, {2, 2, 12}, {3, 3, 13}, {4, 4, 14},
		}}},
		want: []outcome{ok(200), gap(6), dup(11)},
		rows: []ProducerStateRow{{key(9, 0), ProducerState{0, []ProducerBatch{
			{1, 1, 11}, {2, 2, 12}, {3, 3, 13}, {4, 4, 14}, {5, 5, 200},
		}}}},
	},
	{
		name:     "sequences wrap",
		reqs:     []preq{{prod(9, 0), []pb{{0, 2, 0}}}},
		registry: map[int64]int16{9: 0},
		state: map[ProducerPartition]ProducerState{key(9, 0): {0, []ProducerBatch{
			{math.MaxInt32 - 1, math.MaxInt32, 10},
		}}},
		want: []outcome{ok(200)},
		rows: []ProducerStateRow{{key(9, 0), ProducerState{0, []ProducerBatch{
			{math.MaxInt32 - 1, math.MaxInt32, 10}, {0, 1, 200},
		}}}},
	},
	{
		name:     "a batch that wraps",
		reqs:     []preq{{prod(9, 0), []pb{{0, 3, math.MaxInt32 - 1}}}, {prod(9, 0), []pb{{0, 1, 1}}}},
		registry: map[int64]int16{9: 0},
		state: map[ProducerPartition]ProducerState{key(9, 0): {0, []ProducerBatch{
			{0, math.MaxInt32 - 2, 10},
		}}},
		want: []outcome{ok(200), ok(203)},
		rows: []ProducerStateRow{{key(9, 0), ProducerState{0, []ProducerBatch{
			{0, math.MaxInt32 - 2, 10}, {math.MaxInt32 - 1, 0, 200}, {1, 1, 203},
		}}}},
	},
}

func TestCheckProducers(t *testing.T) {
	hw := map[catalog.TopicPartition]PartitionState{{TopicID: 1, Partition: 0}: {HighWatermark: 200, MaxTimestamp: catalog.NoTimestamp}, {TopicID: 1, Partition: 1}: {HighWatermark: 50, MaxTimestamp: catalog.NoTimestamp}}
	for _, tc := range checkProducersCases {
		t.Run(tc.name, func(t *testing.T) {
			p := pseg(t, tc.reqs...)
			errs := tc.errs
			if errs == nil {
				errs = make([]error, len(tc.reqs))
			}
			pc := p.CheckProducers(errs, tc.registry, tc.state)
			a, err := p.Assign(pc.Errs, hw)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := pc.Finish(&a)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				r := a.Results[i]
				switch {
				case w.err != nil:
					if !errors.Is(r.Err, w.err) {
						t.Errorf("request %d: err %v, want %v", i, r.Err, w.err)
					}
					var se *catalog.SequenceError
					if w.err == catalog.ErrOutOfOrderSequence && (!errors.As(r.Err, &se) || se.Expected != w.expect) {
						t.Errorf("request %d: %v, want expected sequence %d", i, r.Err, w.expect)
					}
					if w.err != catalog.ErrNotOwner && RequestErrorCode(r.Err) == "" {
						t.Errorf("request %d: %v has no request error code", i, r.Err)
					}
				case r.Err != nil || !slices.Equal(r.BaseOffsets, w.offsets) || r.Duplicate != w.dup:
					t.Errorf("request %d: offsets %v dup %v err %v; want offsets %v dup %v", i, r.BaseOffsets, r.Duplicate, r.Err, w.offsets, w.dup)
				}
			}
			if !reflect.DeepEqual(rows, tc.rows) && !(len(rows) == 0 && len(tc.rows) == 0) {
				t.Errorf("state rows\n got %+v\nwant %+v", rows, tc.rows)
			}
			if !slices.Equal(pc.Bumps, tc.bumps) {
				t.Errorf("bumps %+v, want %+v", pc.Bumps, tc.bumps)
			}
			if len(tc.bumps) > 0 && tc.registry[7] != 1 {
				t.Errorf("CheckProducers changed the caller's registry map")
			}
		})
	}
}

func TestPlanSegmentIdempotentShape(t *testing.T) {
	base := func() catalog.Segment {
		return catalog.Segment{Key: "segments/20250101T000000.000Z-0000000000000001", Size: 100, Requests: []catalog.Request{
			{Producer: prod(1, 0), Batches: []catalog.Batch{{TopicID: 1, Partition: 0, Pos: 0, Len: 10, Records: 1, BaseSequence: 0}}},
			{Producer: prod(1, 0), Batches: []catalog.Batch{{TopicID: 1, Partition: 0, Pos: 10, Len: 10, Records: 1, BaseSequence: 1}}},
		}}
	}
	for _, tc := range []struct {
		name   string
		change func(s *catalog.Segment)
		want   string
	}{
		{"valid", func(*catalog.Segment) {}, ""},
		{"negative sequence", func(s *catalog.Segment) { s.Requests[1].Batches[0].BaseSequence = -1 }, "base sequence -1"},
		{"negative id", func(s *catalog.Segment) { s.Requests[0].Producer = prod(-1, 0) }, "producer id -1"},
		{"negative epoch", func(s *catalog.Segment) { s.Requests[0].Producer = prod(1, -1) }, "epoch -1"},
		{"requests of one producer out of order", func(s *catalog.Segment) {
			s.Requests[0].Batches[0].Pos, s.Requests[1].Batches[0].Pos = 10, 0
		}, "out of request order"},
		{"requests of two producers in any order", func(s *catalog.Segment) {
			s.Requests[1].Producer = prod(2, 0)
			s.Requests[0].Batches[0].Pos, s.Requests[1].Batches[0].Pos = 10, 0
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.change(&s)
			_, err := PlanSegment(s)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("PlanSegment: %v", err)
				}
				return
			}
			if !errors.Is(err, catalog.ErrInvalidSegment) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PlanSegment: %v, want ErrInvalidSegment with %q", err, tc.want)
			}
		})
	}
}

func TestCheckGroupOffsets(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := NewGroupState("g", "", now)
	st.Epoch = 3
	st.Members["m"] = &GroupMember{ID: "m", Epoch: 3, ExpiresAt: now.Add(time.Minute)}
	st.Owners[catalog.TopicPartition{TopicID: 5, Partition: 0}] = &Ownership{Owner: "m", Target: "m", Epoch: 3}
	topics := map[string]TopicMeta{"in": {ID: 5, Name: "in", Partitions: 2}}
	hws := map[catalog.TopicPartition]int64{{TopicID: 5, Partition: 0}: 100, {TopicID: 5, Partition: 1}: 100}
	oc := func(epoch int32, part int32, off int64) *catalog.OffsetCommit {
		return &catalog.OffsetCommit{Group: "g", MemberID: "m", MemberEpoch: epoch, Offsets: []catalog.CommitOffset{{Topic: "in", Partition: part, Offset: off}}}
	}
	p := pseg(t, preq{nil, []pb{{0, 1, 0}}}, preq{nil, []pb{{0, 1, 0}}}, preq{nil, []pb{{0, 1, 0}}}, preq{nil, []pb{{0, 1, 0}}}, preq{nil, []pb{{0, 1, 0}}})
	p.Segment.Requests[0].GroupOffsets = oc(3, 0, 10)
	p.Segment.Requests[1].GroupOffsets = oc(2, 0, 11) // before the partition was granted
	p.Segment.Requests[2].GroupOffsets = oc(3, 1, 12) // not owner
	p.Segment.Requests[3].GroupOffsets = oc(3, 0, 13) // later: wins over request 0
	p.Segment.Requests[4].GroupOffsets = &catalog.OffsetCommit{Group: "other", MemberID: "m", MemberEpoch: 1, Offsets: []catalog.CommitOffset{{Topic: "in", Offset: 1}}}
	gc := p.CheckGroupOffsets(make([]error, 5), map[string]*GroupState{"g": st}, now, topics, hws)
	for i, want := range []error{nil, catalog.ErrStaleMemberEpoch, catalog.ErrNotOwner, nil, catalog.ErrGroupNotFound} {
		if (want == nil) != (gc.Errs[i] == nil) || (want != nil && !errors.Is(gc.Errs[i], want)) {
			t.Errorf("request %d: %v, want %v", i, gc.Errs[i], want)
		}
	}
	if names := p.GroupNames(); !slices.Equal(names, []string{"g", "other"}) {
		t.Errorf("GroupNames = %v", names)
	}
	results := make([]catalog.Result, 5)
	for i := range results {
		results[i].Err = gc.Errs[i]
	}
	rows := gc.Rows(results)
	want := []GroupOffsetRow{{Group: "g", TopicPartition: catalog.TopicPartition{TopicID: 5, Partition: 0}, Offset: 13, MemberID: "m", MemberEpoch: 3}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows %+v, want %+v", rows, want)
	}
	results[3].Duplicate = true // a duplicate stored its offsets the first time
	if rows := gc.Rows(results); len(rows) != 1 || rows[0].Offset != 10 {
		t.Errorf("rows with request 3 a duplicate: %+v, want request 0's offset 10", rows)
	}
}
