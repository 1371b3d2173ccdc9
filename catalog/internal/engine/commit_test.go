package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// bt is a batch literal: topic, partition, pos, len, records, max timestamp.
func bt(topic int64, part int32, pos, n int64, recs int32, ts int64) catalog.Batch {
	return catalog.Batch{TopicID: topic, Partition: part, Pos: pos, Len: n, Records: recs, MaxTimestamp: ts, BaseSequence: -1}
}

func req(bs ...catalog.Batch) catalog.Request { return catalog.Request{Batches: bs} }

func seg(size int64, rs ...catalog.Request) catalog.Segment {
	return catalog.Segment{Key: "segments/20250101T000000.000Z-0000000000000001", Size: size, Requests: rs}
}

func TestPlanSegmentShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  catalog.Segment
		want string // substring of the error; "" = valid
	}{
		{"valid", seg(100, req(bt(1, 0, 0, 10, 1, 0))), ""},
		{"empty key", catalog.Segment{Size: 10, Requests: []catalog.Request{req(bt(1, 0, 0, 10, 1, 0))}}, "empty key"},
		{"zero size", seg(0, req(bt(1, 0, 0, 10, 1, 0))), "size 0"},
		{"no requests", seg(100), "no requests"},
		{"request without batches", seg(100, req(bt(1, 0, 0, 10, 1, 0)), req()), "request 1 has no batches"},
		{"zero records", seg(100, req(bt(1, 0, 0, 10, 0, 0))), "0 records"},
		{"negative records", seg(100, req(bt(1, 0, 0, 10, -3, 0))), "-3 records"},
		{"zero length", seg(100, req(bt(1, 0, 0, 0, 1, 0))), "outside object"},
		{"negative pos", seg(100, req(bt(1, 0, -1, 10, 1, 0))), "outside object"},
		{"past end", seg(100, req(bt(1, 0, 95, 10, 1, 0))), "outside object"},
		{"exactly to end", seg(100, req(bt(1, 0, 90, 10, 1, 0))), ""},
		{"overflowing range", seg(100, req(bt(1, 0, 50, 1<<62+(1<<62-1), 1, 0))), "outside object"},
		{"overlap within request", seg(100, req(bt(1, 0, 0, 10, 1, 0), bt(1, 1, 5, 10, 1, 0))), "overlaps"},
		{"overlap across requests", seg(100, req(bt(1, 0, 0, 10, 1, 0)), req(bt(2, 0, 9, 10, 1, 0))), "overlaps"},
		{"same start", seg(100, req(bt(1, 0, 0, 10, 1, 0)), req(bt(1, 0, 0, 10, 1, 0))), "overlaps"},
		{"request's partition batches adjacent", seg(100, req(bt(1, 0, 0, 10, 1, 0), bt(1, 0, 10, 10, 1, 0))), ""},
		{"request's partition batches listed backwards", seg(100, req(bt(1, 0, 10, 10, 1, 0), bt(1, 0, 0, 10, 1, 0))), ""},
		{"request's partition batches with a gap", seg(100, req(bt(1, 0, 0, 10, 1, 0), bt(1, 0, 11, 10, 1, 0))), "not adjacent"},
		{"request straddles another's batch", seg(100,
			req(bt(1, 0, 0, 10, 1, 0), bt(1, 0, 20, 10, 1, 0)),
			req(bt(1, 0, 10, 10, 1, 0))), "not adjacent"},
		{"other partition between a request's batches", seg(100,
			req(bt(1, 0, 0, 10, 1, 0), bt(1, 0, 20, 10, 1, 0)),
			req(bt(1, 1, 10, 10, 1, 0))), "not adjacent"},
		{"unknown topic and bad partition are not shape errors", seg(100, req(bt(-5, -1, 0, 10, 1, 0))), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PlanSegment(tc.seg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("PlanSegment: %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, catalog.ErrInvalidSegment) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PlanSegment: %v, want ErrInvalidSegment containing %q", err, tc.want)
			}
		})
	}
}

func TestPlanSegmentGroups(t *testing.T) {
	// Object order: t2/p0 @0, t1/p1 @10 (r1), t1/p1 @20 (r0), t1/p0 @30 (r0), gap, t1/p0 @45 (r1).
	s := seg(100,
		req(bt(1, 1, 20, 10, 3, 0), bt(1, 0, 30, 10, 2, 0)),
		req(bt(1, 0, 45, 5, 1, 0), bt(2, 0, 0, 10, 4, 0), bt(1, 1, 10, 10, 5, 0)),
	)
	p, err := PlanSegment(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []PartitionBatches{
		{catalog.TopicPartition{TopicID: 1, Partition: 0}, []BatchRef{
			{Request: 0, Batch: 1, Pos: 30, Len: 10, Records: 2},
			{Request: 1, Batch: 0, Pos: 45, Len: 5, Records: 1, Adjacent: false},
		}},
		{catalog.TopicPartition{TopicID: 1, Partition: 1}, []BatchRef{
			{Request: 1, Batch: 2, Pos: 10, Len: 10, Records: 5},
			{Request: 0, Batch: 0, Pos: 20, Len: 10, Records: 3, Adjacent: true},
		}},
		{catalog.TopicPartition{TopicID: 2, Partition: 0}, []BatchRef{
			{Request: 1, Batch: 1, Pos: 0, Len: 10, Records: 4},
		}},
	}
	if !reflect.DeepEqual(p.Partitions, want) {
		t.Errorf("Partitions =\n%+v\nwant\n%+v", p.Partitions, want)
	}
	if !reflect.DeepEqual(p.Topics, []int64{1, 2}) {
		t.Errorf("Topics = %v, want [1 2]", p.Topics)
	}
}

func TestCheckRequests(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	topics := map[int64]TopicState{
		1: {Partitions: 2},
		2: {Partitions: 1, LogAppendTime: true},
	}
	for _, tc := range []struct {
		name string
		req  catalog.Request
		want error
	}{
		{"ok", req(bt(1, 1, 0, 1, 1, 0)), nil},
		{"unknown topic", req(bt(3, 0, 0, 1, 1, 0)), catalog.ErrTopicNotFound},
		{"partition = count", req(bt(1, 2, 0, 1, 1, 0)), catalog.ErrPartitionOutOfRange},
		{"negative partition", req(bt(1, -1, 0, 1, 1, 0)), catalog.ErrPartitionOutOfRange},
		{"first failing batch decides", req(bt(1, 0, 0, 1, 1, 0), bt(1, 5, 1, 1, 1, 0), bt(9, 0, 2, 1, 1, 0)), catalog.ErrPartitionOutOfRange},
		{"CreateTime far ahead is not the catalog's to refuse", req(bt(1, 0, 0, 1, 1, 9_000_000)), nil},
		{"LogAppendTime exactly one second ahead", req(bt(2, 0, 0, 1, 1, 1_001_000)), nil},
		{"LogAppendTime a millisecond more", req(bt(2, 0, 0, 1, 1, 1_001_001)), catalog.ErrTimestampOutOfRange},
		{"LogAppendTime in the past", req(bt(2, 0, 0, 1, 1, 1)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plan{Segment: seg(10, tc.req)}
			errs := p.CheckRequests(topics, now)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1", len(errs))
			}
			if (tc.want == nil) != (errs[0] == nil) || (tc.want != nil && !errors.Is(errs[0], tc.want)) {
				t.Fatalf("CheckRequests = %v, want %v", errs[0], tc.want)
			}
		})
	}
}

// errRefused is a request's refusal by an earlier check.
var errRefused = errors.New("refused")

// assignCases are TestAssign's: a flush, the checks' answers and the partitions'
// state, and what Assign must answer.
var assignCases = []struct {
	name     string
	seg      catalog.Segment
	errs     []error
	state    map[catalog.TopicPartition]PartitionState
	offsets  [][]int64 // per request; nil = refused
	chunks   []catalog.ChunkRow
	advances []Advance
}{
	{
		name:    "one batch from zero",
		seg:     seg(100, req(bt(1, 0, 0, 10, 5, 7))),
		errs:    []error{nil},
		state:   map[catalog.TopicPartition]PartitionState{{TopicID: 1, Partition: 0}: {0, catalog.NoTimestamp}},
		offsets: [][]int64{{0}},
		chunks:  []catalog.ChunkRow{{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 4, Pos: 0, Len: 10, MaxTimestamp: 7, RunningMaxTimestamp: 7}},
		advances: []Advance{
			{catalog.TopicPartition{TopicID: 1, Partition: 0}, 5, 7, 10},
		},
	},
	{
		// Laid out as the segment encoder does: partitions ascending, requests in
		// order within a partition. A/0: r0 @0 (2), r1 @10 (4); A/1: r0 @20 (3),
		// r2 @30 (5); B/0: r2 @40 (2); B/1: r1 @50 (1).
		name: "multi-partition multi-request from existing watermarks",
		seg: seg(60,
			req(bt(1, 0, 0, 10, 2, 100), bt(1, 1, 20, 10, 3, 300)),
			req(bt(1, 0, 10, 10, 4, 50), bt(2, 1, 50, 10, 1, 10)),
			req(bt(1, 1, 30, 10, 5, 200), bt(2, 0, 40, 10, 2, 20)),
		),
		errs: []error{nil, nil, nil},
		state: map[catalog.TopicPartition]PartitionState{
			{TopicID: 1, Partition: 0}: {100, 500}, {TopicID: 1, Partition: 1}: {0, catalog.NoTimestamp}, {TopicID: 2, Partition: 0}: {7, 5}, {TopicID: 2, Partition: 1}: {0, catalog.NoTimestamp},
		},
		offsets: [][]int64{{100, 0}, {102, 0}, {3, 7}},
		chunks: []catalog.ChunkRow{
			{TopicID: 1, Partition: 0, BaseOffset: 100, LastOffset: 105, Pos: 0, Len: 20, MaxTimestamp: 100, RunningMaxTimestamp: 500},
			{TopicID: 1, Partition: 1, BaseOffset: 0, LastOffset: 7, Pos: 20, Len: 20, MaxTimestamp: 300, RunningMaxTimestamp: 300},
			{TopicID: 2, Partition: 0, BaseOffset: 7, LastOffset: 8, Pos: 40, Len: 10, MaxTimestamp: 20, RunningMaxTimestamp: 20},
			{TopicID: 2, Partition: 1, BaseOffset: 0, LastOffset: 0, Pos: 50, Len: 10, MaxTimestamp: 10, RunningMaxTimestamp: 10},
		},
		advances: []Advance{
			{catalog.TopicPartition{TopicID: 1, Partition: 0}, 106, 500, 20},
			{catalog.TopicPartition{TopicID: 1, Partition: 1}, 8, 300, 20},
			{catalog.TopicPartition{TopicID: 2, Partition: 0}, 9, 20, 10},
			{catalog.TopicPartition{TopicID: 2, Partition: 1}, 1, 10, 10},
		},
	},
	{
		// A/0: r0 @0 (2), r1 @10 (3), r2 @20 (4); r1 also has A/1 @30 and fails:
		// A/0 gets two chunks around r1's bytes, A/1 nothing.
		name: "refused request in the middle splits the run",
		seg: seg(40,
			req(bt(1, 0, 0, 10, 2, 1)),
			req(bt(1, 0, 10, 10, 3, 1), bt(1, 1, 30, 10, 1, 1)),
			req(bt(1, 0, 20, 10, 4, 2)),
		),
		errs:    []error{nil, errRefused, nil},
		state:   map[catalog.TopicPartition]PartitionState{{TopicID: 1, Partition: 0}: {0, catalog.NoTimestamp}},
		offsets: [][]int64{{0}, nil, {2}},
		chunks: []catalog.ChunkRow{
			{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 1, Pos: 0, Len: 10, MaxTimestamp: 1, RunningMaxTimestamp: 1},
			{TopicID: 1, Partition: 0, BaseOffset: 2, LastOffset: 5, Pos: 20, Len: 10, MaxTimestamp: 2, RunningMaxTimestamp: 2},
		},
		advances: []Advance{{catalog.TopicPartition{TopicID: 1, Partition: 0}, 6, 2, 20}},
	},
	{
		name: "refused request first and last",
		seg: seg(40,
			req(bt(1, 0, 0, 10, 2, 1)),
			req(bt(1, 0, 10, 10, 3, 1)),
			req(bt(1, 0, 20, 10, 4, 2)),
		),
		errs:     []error{errRefused, nil, errRefused},
		state:    map[catalog.TopicPartition]PartitionState{{TopicID: 1, Partition: 0}: {10, 9}},
		offsets:  [][]int64{nil, {10}, nil},
		chunks:   []catalog.ChunkRow{{TopicID: 1, Partition: 0, BaseOffset: 10, LastOffset: 12, Pos: 10, Len: 10, MaxTimestamp: 1, RunningMaxTimestamp: 9}},
		advances: []Advance{{catalog.TopicPartition{TopicID: 1, Partition: 0}, 13, 9, 10}},
	},
	{
		name:    "a byte gap splits the run too",
		seg:     seg(40, req(bt(1, 0, 0, 10, 2, 1)), req(bt(1, 0, 15, 10, 3, 5))),
		errs:    []error{nil, nil},
		state:   map[catalog.TopicPartition]PartitionState{{TopicID: 1, Partition: 0}: {0, catalog.NoTimestamp}},
		offsets: [][]int64{{0}, {2}},
		chunks: []catalog.ChunkRow{
			{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 1, Pos: 0, Len: 10, MaxTimestamp: 1, RunningMaxTimestamp: 1},
			{TopicID: 1, Partition: 0, BaseOffset: 2, LastOffset: 4, Pos: 15, Len: 10, MaxTimestamp: 5, RunningMaxTimestamp: 5},
		},
		advances: []Advance{{catalog.TopicPartition{TopicID: 1, Partition: 0}, 5, 5, 20}},
	},
	{
		name:    "a request's adjacent batches for one partition",
		seg:     seg(40, req(bt(1, 0, 10, 10, 3, 4), bt(1, 0, 0, 10, 2, 9))),
		errs:    []error{nil},
		state:   map[catalog.TopicPartition]PartitionState{{TopicID: 1, Partition: 0}: {0, catalog.NoTimestamp}},
		offsets: [][]int64{{2, 0}},
		chunks:  []catalog.ChunkRow{{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 4, Pos: 0, Len: 20, MaxTimestamp: 9, RunningMaxTimestamp: 9}},
		advances: []Advance{
			{catalog.TopicPartition{TopicID: 1, Partition: 0}, 5, 9, 20},
		},
	},
	{
		name:     "everything refused",
		seg:      seg(40, req(bt(1, 0, 0, 10, 2, 1)), req(bt(3, 0, 10, 10, 2, 1))),
		errs:     []error{errRefused, errRefused},
		state:    map[catalog.TopicPartition]PartitionState{},
		offsets:  [][]int64{nil, nil},
		chunks:   nil,
		advances: nil,
	},
}

func TestAssign(t *testing.T) {
	for _, tc := range assignCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanSegment(tc.seg)
			if err != nil {
				t.Fatal(err)
			}
			a, err := p.Assign(tc.errs, tc.state)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range a.Results {
				if tc.offsets[i] == nil {
					if r.Err != tc.errs[i] || r.BaseOffsets != nil {
						t.Errorf("request %d: %+v, want refused with %v", i, r, tc.errs[i])
					}
					continue
				}
				if r.Err != nil || !reflect.DeepEqual(r.BaseOffsets, tc.offsets[i]) {
					t.Errorf("request %d: %+v, want offsets %v", i, r, tc.offsets[i])
				}
			}
			if !reflect.DeepEqual(a.Chunks, tc.chunks) {
				t.Errorf("Chunks =\n%+v\nwant\n%+v", a.Chunks, tc.chunks)
			}
			if !reflect.DeepEqual(a.Advances, tc.advances) {
				t.Errorf("Advances =\n%+v\nwant\n%+v", a.Advances, tc.advances)
			}

			// Reading the rows back gives the same offsets; refused requests read back
			// as aborted.
			back, err := p.ResultsFromChunks(a.Chunks)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range back {
				if tc.offsets[i] == nil {
					if !errors.Is(r.Err, catalog.ErrCommitAborted) {
						t.Errorf("read back request %d: %+v, want ErrCommitAborted", i, r)
					}
				} else if r.Err != nil || !reflect.DeepEqual(r.BaseOffsets, tc.offsets[i]) {
					t.Errorf("read back request %d: %+v, want offsets %v", i, r, tc.offsets[i])
				}
			}
		})
	}
}

func TestAssignMissingState(t *testing.T) {
	p, err := PlanSegment(seg(10, req(bt(1, 0, 0, 10, 1, 0))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Assign([]error{nil}, nil); err == nil {
		t.Fatal("Assign without partition state succeeded")
	}
	if _, err := p.Assign(nil, nil); err == nil {
		t.Fatal("Assign with a short error list succeeded")
	}
}

func TestResultsFromChunksInconsistent(t *testing.T) {
	p, err := PlanSegment(seg(40,
		req(bt(1, 0, 0, 10, 2, 0), bt(1, 1, 20, 10, 1, 0)),
		req(bt(1, 0, 10, 10, 3, 0)),
	))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rows []catalog.ChunkRow
	}{
		{"chunk starts inside a batch", []catalog.ChunkRow{{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 1, Pos: 5, Len: 10}}},
		{"chunk ends inside a batch", []catalog.ChunkRow{{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 1, Pos: 0, Len: 15}}},
		{"record count differs", []catalog.ChunkRow{{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 2, Pos: 0, Len: 10}}},
		{"unknown partition", []catalog.ChunkRow{{TopicID: 1, Partition: 7, BaseOffset: 0, LastOffset: 1, Pos: 0, Len: 10}}},
		{"request covered in part", []catalog.ChunkRow{{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 4, Pos: 0, Len: 20}}},
		{"batch covered twice", []catalog.ChunkRow{
			{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 1, Pos: 0, Len: 10},
			{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 1, Pos: 0, Len: 10},
			{TopicID: 1, Partition: 1, BaseOffset: 0, LastOffset: 0, Pos: 20, Len: 10},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res, err := p.ResultsFromChunks(tc.rows); err == nil {
				t.Fatalf("ResultsFromChunks = %+v, want an error", res)
			}
		})
	}
	// And the consistent answer, known: r0 at 0 (partition 0) and 4 (partition 1), r1 at 2.
	res, err := p.ResultsFromChunks([]catalog.ChunkRow{
		{TopicID: 1, Partition: 1, BaseOffset: 4, LastOffset: 4, Pos: 20, Len: 10},
		{TopicID: 1, Partition: 0, BaseOffset: 0, LastOffset: 4, Pos: 0, Len: 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res[0].BaseOffsets, []int64{0, 4}) || !reflect.DeepEqual(res[1].BaseOffsets, []int64{2}) {
		t.Fatalf("ResultsFromChunks = %+v", res)
	}
}

func TestCheckCommitTime(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		age  time.Duration
		late bool
	}{
		{0, false},
		{-time.Hour, false}, // key from the future
		{30 * time.Second, false},
		{30*time.Second + time.Millisecond, true},
		{time.Hour, true},
	} {
		err := CheckCommitTime(now.Add(-tc.age), now, 30*time.Second)
		if tc.late != errors.Is(err, catalog.ErrCommitTooLate) || (!tc.late && err != nil) {
			t.Errorf("age %s: %v, want late=%v", tc.age, err, tc.late)
		}
	}
}

func TestRequestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{nil, ""},
		{catalog.ErrTopicNotFound, "topic_not_found"},
		{catalog.ErrPartitionOutOfRange, "partition_out_of_range"},
		{catalog.ErrTimestampOutOfRange, "timestamp_out_of_range"},
		{catalog.ErrCommitAborted, "commit_aborted"},
		{errors.New("other"), ""},
	} {
		if got := RequestErrorCode(tc.err); got != tc.code {
			t.Errorf("RequestErrorCode(%v) = %q, want %q", tc.err, got, tc.code)
		}
		if tc.err == nil || tc.code == "" {
			continue
		}
		back := RequestError(tc.code, "topic id 7")
		if !errors.Is(back, tc.err) || !strings.Contains(back.Error(), "topic id 7") {
			t.Errorf("RequestError(%q) = %v", tc.code, back)
		}
	}
	if RequestError("", "x") != nil {
		t.Error(`RequestError("") is not nil`)
	}
	if err := RequestError("bogus", ""); err == nil || RequestErrorCode(err) != "" {
		t.Errorf("RequestError(bogus) = %v", err)
	}
}

// FuzzPlanSegment lays out arbitrary flushes: PlanSegment never panics, and on a valid
// plan with every request accepted the chunk rows tile the batches, offsets are dense
// from the watermark, and reading them back gives Assign's answers.
func FuzzPlanSegment(f *testing.F) {
	f.Add([]byte{0, 0, 10, 2, 1, 0, 10, 3, 0, 1, 5, 1})
	f.Add([]byte{1, 1, 4, 1, 0, 1, 4, 1, 1, 0, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Each 4 bytes: request (0-3), partition (0-3), len, records (signed); pos follows.
		s := catalog.Segment{Key: "k", Size: 1}
		var pos int64
		for len(data) >= 4 {
			r, part, n, recs := int(data[0]%4), int32(data[1]%4), int64(data[2]), int32(int8(data[3]))
			data = data[4:]
			for len(s.Requests) <= r {
				s.Requests = append(s.Requests, catalog.Request{})
			}
			s.Requests[r].Batches = append(s.Requests[r].Batches, catalog.Batch{TopicID: 1, Partition: part, Pos: pos, Len: n, Records: recs})
			pos += n
		}
		s.Size = pos
		p, err := PlanSegment(s)
		if err != nil {
			if !errors.Is(err, catalog.ErrInvalidSegment) {
				t.Fatalf("PlanSegment error %v is not ErrInvalidSegment", err)
			}
			return
		}
		state := map[catalog.TopicPartition]PartitionState{}
		for _, pb := range p.Partitions {
			state[pb.TopicPartition] = PartitionState{HighWatermark: 1000, MaxTimestamp: catalog.NoTimestamp}
		}
		a, err := p.Assign(make([]error, len(s.Requests)), state)
		if err != nil {
			t.Fatal(err)
		}
		next := map[catalog.TopicPartition]int64{}
		var bytes int64
		for _, c := range a.Chunks {
			tp := catalog.TopicPartition{TopicID: c.TopicID, Partition: c.Partition}
			if want := max(next[tp], 1000); c.BaseOffset != want || c.LastOffset < c.BaseOffset {
				t.Fatalf("chunk %+v: want base %d", c, want)
			}
			next[tp] = c.LastOffset + 1
			bytes += c.Len
		}
		if bytes != s.Size {
			t.Fatalf("chunks cover %d bytes of %d", bytes, s.Size)
		}
		back, err := p.ResultsFromChunks(a.Chunks)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, a.Results) {
			t.Fatalf("read back %+v, assigned %+v", back, a.Results)
		}
	})
}

func TestKeyTime(t *testing.T) {
	got, err := KeyTime("segments/20250102T030405.678Z-00000000000000ff")
	if want := time.Date(2025, 1, 2, 3, 4, 5, 678e6, time.UTC); err != nil || !got.Equal(want) {
		t.Fatalf("KeyTime = %s, %v; want %s", got, err, want)
	}
	for _, key := range []string{"", "objects/1", "segments/20250102T030405.678Z", "segments/2025-01-02-00000000000000ff"} {
		if _, err := KeyTime(key); !errors.Is(err, catalog.ErrInvalidSegment) {
			t.Errorf("KeyTime(%q) = %v, want ErrInvalidSegment", key, err)
		}
	}
}
