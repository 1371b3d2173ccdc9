package catalogtest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// offsets returns each result's base offsets, nil for a refused request.
func offsets(res []catalog.Result) [][]int64 {
	out := make([][]int64, len(res))
	for i, r := range res {
		if r.Err == nil {
			out[i] = r.BaseOffsets
		}
	}
	return out
}

func wantOffsets(t testing.TB, what string, res []catalog.Result, want [][]int64) {
	t.Helper()
	if len(res) != len(want) {
		t.Fatalf("%s: %d results, want %d", what, len(res), len(want))
	}
	for i := range want {
		if want[i] == nil {
			continue
		}
		if res[i].Err != nil || !slices.Equal(res[i].BaseOffsets, want[i]) {
			t.Fatalf("%s: request %d: offsets %v err %v, want offsets %v", what, i, res[i].BaseOffsets, res[i].Err, want[i])
		}
	}
}

func wantWatermarks(t testing.TB, c catalog.Catalog, topicID int64, want ...int64) {
	t.Helper()
	ps, err := c.Partitions(t.Context(), topicID)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int64, len(ps))
	for i, p := range ps {
		got[i] = p.HighWatermark
	}
	if !slices.Equal(got, want) {
		t.Fatalf("topic %d high watermarks %v, want %v", topicID, got, want)
	}
}

func testDenseFromZero(t *testing.T, c catalog.Catalog) {
	tp := SeedTopic(t, c, "dense", 2, nil)
	var got []int64
	for _, n := range []int32{5, 3, 7, 1} {
		res := MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 1, Records: n})))
		got = append(got, res[0].BaseOffsets[0])
	}
	if !slices.Equal(got, []int64{0, 5, 8, 15}) {
		t.Fatalf("base offsets %v, want [0 5 8 15]", got)
	}
	wantWatermarks(t, c, tp.ID, 0, 16)
	if p := Partition(t, c, tp.ID, 1); p.Bytes != 1600 || p.LogStartOffset != 0 {
		t.Fatalf("partition %+v, want 1600 bytes from offset 0", p)
	}
	chunks := CheckDense(t, c, tp.ID, 1)
	if len(chunks) != 4 {
		t.Fatalf("%d chunks, want 4", len(chunks))
	}
}

func testMultiPartitionMultiRequest(t *testing.T, c catalog.Catalog) {
	a := SeedTopic(t, c, "multi-a", 3, nil)
	b := SeedTopic(t, c, "multi-b", 2, nil)
	SeedRecords(t, c, a.ID, 0, 1, 10) // A/0 starts at 10

	// Object order (Flush): A/0 r0 r1 | A/1 r0 r2 | B/0 r2 | B/1 r1.
	seg := Flush(NewKey(t),
		Req(B{TopicID: a.ID, Partition: 0, Records: 2}, B{TopicID: a.ID, Partition: 1, Records: 3}),
		Req(B{TopicID: a.ID, Partition: 0, Records: 4}, B{TopicID: b.ID, Partition: 1, Records: 1}),
		Req(B{TopicID: a.ID, Partition: 1, Records: 5}, B{TopicID: b.ID, Partition: 0, Records: 2}),
	)
	res := MustCommit(t, c, seg)
	wantOffsets(t, "flush", res, [][]int64{{10, 0}, {12, 0}, {3, 0}})
	wantWatermarks(t, c, a.ID, 16, 8, 0)
	wantWatermarks(t, c, b.ID, 2, 1)

	// One chunk per partition, each covering its partition's run of the object.
	for _, tc := range []struct {
		topic     int64
		partition int32
		base      int64
		last      int64
		pos, len  int64
	}{
		{a.ID, 0, 10, 15, 0, 600},
		{a.ID, 1, 0, 7, 600, 800},
		{b.ID, 0, 0, 1, 1400, 200},
		{b.ID, 1, 0, 0, 1600, 100},
	} {
		chunks := CheckDense(t, c, tc.topic, tc.partition)
		ch := chunks[len(chunks)-1]
		if ch.BaseOffset != tc.base || ch.LastOffset != tc.last || ch.Pos != tc.pos || ch.Len != tc.len ||
			ch.SegmentKey != seg.Key || ch.SegmentSize != seg.Size {
			t.Fatalf("topic %d partition %d: chunk %+v, want [%d, %d] at [%d, +%d) of %s", tc.topic, tc.partition, ch, tc.base, tc.last, tc.pos, tc.len, seg.Key)
		}
	}
}

func testFailingRequestsFailAlone(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	a := SeedTopic(t, c, "alone", 2, nil)
	gone := SeedTopic(t, c, "alone-gone", 1, nil)
	if err := c.DeleteTopic(ctx, gone.Name); err != nil {
		t.Fatal(err)
	}
	seg := Flush(NewKey(t),
		Req(B{TopicID: a.ID, Partition: 0, Records: 2}),
		Req(B{TopicID: a.ID, Partition: 1, Records: 1}, B{TopicID: gone.ID, Partition: 0, Records: 1}),
		Req(B{TopicID: a.ID, Partition: 2, Records: 1}),
		Req(B{TopicID: a.ID, Partition: -1, Records: 1}),
		Req(B{TopicID: notFoundID, Partition: 0, Records: 1}),
		Req(B{TopicID: a.ID, Partition: 1, Records: 3}, B{TopicID: a.ID, Partition: 0, Records: 1}),
	)
	res, err := c.Commit(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, "flush", res, [][]int64{{0}, nil, nil, nil, nil, {0, 2}})
	for i, want := range []error{nil, catalog.ErrTopicNotFound, catalog.ErrPartitionOutOfRange, catalog.ErrPartitionOutOfRange, catalog.ErrTopicNotFound, nil} {
		if want == nil {
			continue
		}
		wantErr(t, "request", res[i].Err, want)
		if res[i].BaseOffsets != nil {
			t.Fatalf("refused request %d has offsets %v", i, res[i].BaseOffsets)
		}
	}
	// Request 1 is atomic across partitions: nothing of it in A/1.
	wantWatermarks(t, c, a.ID, 3, 3)
	CheckDense(t, c, a.ID, 0)
	CheckDense(t, c, a.ID, 1)
}

func testRefusedRequestSplitsRun(t *testing.T, c catalog.Catalog) {
	a := SeedTopic(t, c, "split", 2, nil)
	// A/0 holds r0 (2), r1 (3), r2 (4) back to back; r1 also names partition 5 and is
	// refused, so its bytes in A/0 must never be served. r3 is A/1 plus partition 9.
	seg := Flush(NewKey(t),
		Req(B{TopicID: a.ID, Partition: 0, Records: 2, MaxTimestamp: 10}),
		Req(B{TopicID: a.ID, Partition: 0, Records: 3, MaxTimestamp: 20}, B{TopicID: a.ID, Partition: 5, Records: 1}),
		Req(B{TopicID: a.ID, Partition: 0, Records: 4, MaxTimestamp: 30}),
		Req(B{TopicID: a.ID, Partition: 1, Records: 1}, B{TopicID: a.ID, Partition: 9, Records: 1}),
	)
	res, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, "flush", res, [][]int64{{0}, nil, {2}, nil})
	wantErr(t, "request 1", res[1].Err, catalog.ErrPartitionOutOfRange)
	wantErr(t, "request 3", res[3].Err, catalog.ErrPartitionOutOfRange)
	wantWatermarks(t, c, a.ID, 6, 0)

	chunks := CheckDense(t, c, a.ID, 0)
	want := []catalog.Chunk{
		{TopicID: a.ID, Partition: 0, BaseOffset: 0, LastOffset: 1, SegmentKey: seg.Key, SegmentSize: seg.Size, Pos: 0, Len: 200, MaxTimestamp: 10},
		{TopicID: a.ID, Partition: 0, BaseOffset: 2, LastOffset: 5, SegmentKey: seg.Key, SegmentSize: seg.Size, Pos: 500, Len: 400, MaxTimestamp: 30},
	}
	if !slices.Equal(chunks, want) {
		t.Fatalf("chunks\n%+v\nwant\n%+v", chunks, want)
	}
	refused := seg.Requests[1].Batches[0]
	for _, ch := range chunks {
		if refused.Pos < ch.Pos+ch.Len && ch.Pos < refused.Pos+refused.Len {
			t.Fatalf("chunk %+v serves bytes of the refused request [%d, +%d)", ch, refused.Pos, refused.Len)
		}
	}
	if p := Partition(t, c, a.ID, 0); p.Bytes != 600 {
		t.Fatalf("partition bytes %d, want 600", p.Bytes)
	}
}

func testEveryRequestRefused(t *testing.T, c catalog.Catalog) {
	a := SeedTopic(t, c, "none", 1, nil)
	seg := Flush(NewKey(t),
		Req(B{TopicID: a.ID, Partition: 1, Records: 1}),
		Req(B{TopicID: notFoundID, Partition: 0, Records: 1}),
	)
	res, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "request 0", res[0].Err, catalog.ErrPartitionOutOfRange)
	wantErr(t, "request 1", res[1].Err, catalog.ErrTopicNotFound)
	wantWatermarks(t, c, a.ID, 0)
	// The flush committed (with nothing in it): Settle finds it, not a fence.
	back, err := c.Settle(t.Context(), seg)
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	for i, r := range back {
		wantErr(t, "settled request", r.Err, catalog.ErrCommitAborted)
		if r.BaseOffsets != nil {
			t.Fatalf("settled request %d has offsets %v", i, r.BaseOffsets)
		}
	}
}

func testTooLate(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	a := SeedTopic(t, c, "late", 1, nil)
	now, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seg := Flush(KeyAt(t, now.Add(-time.Hour)), Req(B{TopicID: a.ID, Partition: 0, Records: 1}))
	res, err := c.Commit(ctx, seg)
	wantErr(t, "commit an hour late", err, catalog.ErrCommitTooLate)
	if res != nil {
		t.Fatalf("late commit answered %+v", res)
	}
	wantWatermarks(t, c, a.ID, 0)
	// Nothing was written: the key is unknown, so Settle wins the fence.
	_, err = c.Settle(ctx, seg)
	wantErr(t, "settle a late commit", err, catalog.ErrCommitAborted)

	// A key a little old, or from the future, commits.
	for _, at := range []time.Time{now.Add(-5 * time.Second), now.Add(time.Hour)} {
		MustCommit(t, c, Flush(KeyAt(t, at), Req(B{TopicID: a.ID, Partition: 0, Records: 1})))
	}
	wantWatermarks(t, c, a.ID, 2)
}

func testInvalidSegment(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	a := SeedTopic(t, c, "shape", 2, nil)
	ok := B{TopicID: a.ID, Partition: 0, Records: 1}
	for _, tc := range []struct {
		name string
		seg  func() catalog.Segment
	}{
		{"not a segment key", func() catalog.Segment { return Flush("objects/1", Req(ok)) }},
		{"empty key", func() catalog.Segment { return Flush("", Req(ok)) }},
		{"no requests", func() catalog.Segment { return catalog.Segment{Key: NewKey(t), Size: 10} }},
		{"empty request", func() catalog.Segment { return Flush(NewKey(t), Req(ok), Req()) }},
		{"no records", func() catalog.Segment {
			return Flush(NewKey(t), Req(B{TopicID: a.ID, Partition: 0, Records: 0, Len: 10}))
		}},
		{"past the end", func() catalog.Segment {
			s := Flush(NewKey(t), Req(ok))
			s.Size = s.Requests[0].Batches[0].Len - 1
			return s
		}},
		{"overlapping batches", func() catalog.Segment {
			s := Flush(NewKey(t), Req(ok), Req(B{TopicID: a.ID, Partition: 1, Records: 1}))
			s.Requests[1].Batches[0].Pos = 50
			return s
		}},
		{"a request's batches for a partition apart", func() catalog.Segment {
			// Laid out p0 p0 p1, then the second p0 batch swapped with p1's.
			s := Flush(NewKey(t), Req(ok, ok), Req(B{TopicID: a.ID, Partition: 1, Records: 1}))
			s.Requests[0].Batches[1].Pos, s.Requests[1].Batches[0].Pos = s.Requests[1].Batches[0].Pos, s.Requests[0].Batches[1].Pos
			return s
		}},
	} {
		_, err := c.Commit(ctx, tc.seg())
		wantErr(t, tc.name, err, catalog.ErrInvalidSegment)
	}
	wantWatermarks(t, c, a.ID, 0, 0)
}

func testLogAppendTime(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	lat := SeedTopic(t, c, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	ct := SeedTopic(t, c, "ct", 1, nil)
	now, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms := now.UnixMilli()
	seg := Flush(NewKey(t),
		Req(B{TopicID: lat.ID, Partition: 0, Records: 1, MaxTimestamp: ms}),
		Req(B{TopicID: lat.ID, Partition: 0, Records: 1, MaxTimestamp: ms + time.Minute.Milliseconds()}),
		Req(B{TopicID: ct.ID, Partition: 0, Records: 1, MaxTimestamp: ms + time.Minute.Milliseconds()}),
		Req(B{TopicID: lat.ID, Partition: 0, Records: 1, MaxTimestamp: ms - time.Hour.Milliseconds()}),
	)
	res, err := c.Commit(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, "flush", res, [][]int64{{0}, nil, {0}, {1}})
	wantErr(t, "LogAppendTime a minute ahead", res[1].Err, catalog.ErrTimestampOutOfRange)
	wantWatermarks(t, c, lat.ID, 2)
}

func testCommitSameKeyAgain(t *testing.T, c catalog.Catalog) {
	a := SeedTopic(t, c, "again", 1, nil)
	seg := Flush(NewKey(t),
		Req(B{TopicID: a.ID, Partition: 0, Records: 2}),
		Req(B{TopicID: a.ID, Partition: 3, Records: 1}),
	)
	first, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatalf("commit the same key again: %v", err)
	}
	wantOffsets(t, "again", again, offsets(first))
	wantErr(t, "refused request, again", again[1].Err, catalog.ErrCommitAborted)
	wantWatermarks(t, c, a.ID, 2)
	CheckDense(t, c, a.ID, 0)
}

func testSettleAfterCommit(t *testing.T, c catalog.Catalog) {
	a := SeedTopic(t, c, "settled", 2, nil)
	SeedRecords(t, c, a.ID, 1, 1, 7)
	seg := Flush(NewKey(t),
		Req(B{TopicID: a.ID, Partition: 0, Records: 2}, B{TopicID: a.ID, Partition: 1, Records: 1}),
		Req(B{TopicID: a.ID, Partition: 4, Records: 1}),
		Req(B{TopicID: a.ID, Partition: 1, Records: 3}),
	)
	res, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, "commit", res, [][]int64{{0, 7}, nil, {8}})
	for range 2 { // settling is idempotent
		back, err := c.Settle(t.Context(), seg)
		if err != nil {
			t.Fatalf("settle: %v", err)
		}
		wantOffsets(t, "settle", back, [][]int64{{0, 7}, nil, {8}})
		wantErr(t, "settle the refused request", back[1].Err, catalog.ErrCommitAborted)
	}
	wantWatermarks(t, c, a.ID, 2, 11)
}

func testSettleNeverCommitted(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	a := SeedTopic(t, c, "fenced", 1, nil)
	seg := Flush(NewKey(t), Req(B{TopicID: a.ID, Partition: 0, Records: 2}))
	for range 2 {
		res, err := c.Settle(ctx, seg)
		wantErr(t, "settle", err, catalog.ErrCommitAborted)
		if res != nil {
			t.Fatalf("settle answered %+v", res)
		}
	}
	// The fence holds: the commit arriving late can never land.
	res, err := c.Commit(ctx, seg)
	wantErr(t, "commit after the fence", err, catalog.ErrCommitAborted)
	if res != nil {
		t.Fatalf("fenced commit answered %+v", res)
	}
	wantWatermarks(t, c, a.ID, 0)
	// Other keys still commit.
	MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: a.ID, Partition: 0, Records: 2})))
	wantWatermarks(t, c, a.ID, 2)
}

// testSettleRacesCommit runs Commit and Settle of one key at once: whichever wins, both
// answers agree and the partition shows exactly that.
func testSettleRacesCommit(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	a := SeedTopic(t, c, "race", 1, nil)
	var hw int64
	for i := range 20 {
		seg := Flush(NewKey(t), Req(B{TopicID: a.ID, Partition: 0, Records: 3}))
		var (
			wg         sync.WaitGroup
			start      = make(chan struct{})
			cres, sres []catalog.Result
			cerr, serr error
		)
		wg.Add(2)
		go func() { defer wg.Done(); <-start; cres, cerr = c.Commit(ctx, seg) }()
		go func() { defer wg.Done(); <-start; sres, serr = c.Settle(ctx, seg) }()
		close(start)
		wg.Wait()
		switch {
		case cerr == nil:
			if serr != nil || len(sres) != 1 || sres[0].Err != nil || sres[0].BaseOffsets[0] != cres[0].BaseOffsets[0] {
				t.Fatalf("round %d: commit gave %+v but settle gave %+v, %v", i, cres, sres, serr)
			}
			if cres[0].BaseOffsets[0] != hw {
				t.Fatalf("round %d: base offset %d, want %d", i, cres[0].BaseOffsets[0], hw)
			}
			hw += 3
		case errors.Is(cerr, catalog.ErrCommitAborted):
			if !errors.Is(serr, catalog.ErrCommitAborted) {
				t.Fatalf("round %d: commit fenced but settle gave %+v, %v", i, sres, serr)
			}
		default:
			t.Fatalf("round %d: commit: %v", i, cerr)
		}
		wantWatermarks(t, c, a.ID, hw)
	}
	CheckDense(t, c, a.ID, 0)
}
