package catalogtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// seedTen commits ten flushes of 10 records and 1,000 bytes each to partition 0, with
// max timestamps 1000, 2000, ...: chunk i holds offsets [10i, 10i+9].
func seedTen(t *testing.T, c catalog.Catalog) (catalog.Topic, []catalog.Segment) {
	tp := SeedTopic(t, c, "chunks", 2, nil)
	segs := make([]catalog.Segment, 10)
	for i := range segs {
		segs[i] = Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 10, Len: 1000, MaxTimestamp: int64(i+1) * 1000}))
		MustCommit(t, c, segs[i])
	}
	return tp, segs
}

func testChunksBudget(t *testing.T, c catalog.Catalog) {
	tp, segs := seedTen(t, c)
	for _, tc := range []struct {
		offset, maxBytes int64
		bases            []int64
	}{
		{0, 2500, []int64{0, 10}},
		{0, 3000, []int64{0, 10, 20}},
		{0, 0, []int64{0}}, // at least one chunk
		{0, 1 << 40, []int64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}},
		{9, 1, []int64{0}},
		{10, 1, []int64{10}},
		{15, 1999, []int64{10}},
		{15, 2000, []int64{10, 20}},
		{99, 1 << 40, []int64{90}},
		{100, 1 << 40, nil}, // the high watermark: nothing yet, no error
	} {
		l, err := c.Chunks(t.Context(), tp.ID, 0, tc.offset, tc.maxBytes)
		if err != nil {
			t.Fatalf("Chunks(%d, %d): %v", tc.offset, tc.maxBytes, err)
		}
		var bases []int64
		for _, ch := range l.Chunks {
			bases = append(bases, ch.BaseOffset)
			i := ch.BaseOffset / 10
			want := catalog.Chunk{
				TopicID: tp.ID, Partition: 0, BaseOffset: 10 * i, LastOffset: 10*i + 9,
				SegmentKey: segs[i].Key, SegmentSize: segs[i].Size, Pos: 0, Len: 1000, MaxTimestamp: (i + 1) * 1000,
			}
			if ch != want {
				t.Fatalf("Chunks(%d, %d): chunk %+v, want %+v", tc.offset, tc.maxBytes, ch, want)
			}
		}
		if !slices.Equal(bases, tc.bases) {
			t.Fatalf("Chunks(%d, %d) base offsets %v, want %v", tc.offset, tc.maxBytes, bases, tc.bases)
		}
		// No transaction is open: the last stable offset is the high watermark.
		want := catalog.PartitionInfo{TopicID: tp.ID, Partition: 0, HighWatermark: 100, Bytes: 10000, LastStableOffset: 100}
		if l.Partition != want {
			t.Fatalf("Chunks(%d, %d) partition %+v, want %+v", tc.offset, tc.maxBytes, l.Partition, want)
		}
	}
	// An empty partition: offset 0 is its high watermark.
	l, err := c.Chunks(t.Context(), tp.ID, 1, 0, 1<<20)
	if err != nil || len(l.Chunks) != 0 || l.Partition.HighWatermark != 0 {
		t.Fatalf("empty partition: %+v, %v", l, err)
	}
}

func testChunksOutOfRange(t *testing.T, c catalog.Catalog) {
	tp, _ := seedTen(t, c)
	for _, off := range []int64{-1, 101, 1 << 40} {
		l, err := c.Chunks(t.Context(), tp.ID, 0, off, 1<<20)
		wantErr(t, "Chunks out of range", err, catalog.ErrOffsetOutOfRange)
		if l.Partition.HighWatermark != 100 || l.Partition.LogStartOffset != 0 || len(l.Chunks) != 0 {
			t.Fatalf("Chunks(%d) out of range answered %+v", off, l)
		}
	}
	l, err := c.Chunks(t.Context(), tp.ID, 1, 1, 1<<20)
	wantErr(t, "Chunks past an empty partition", err, catalog.ErrOffsetOutOfRange)
	if l.Partition.HighWatermark != 0 {
		t.Fatalf("partition state %+v", l.Partition)
	}
}

func testChunksUnknown(t *testing.T, c catalog.Catalog) {
	tp := SeedTopic(t, c, "chunks-unknown", 2, nil)
	for _, p := range []int32{2, -1, 1000} {
		_, err := c.Chunks(t.Context(), tp.ID, p, 0, 1)
		wantErr(t, "Chunks of a partition outside the topic", err, catalog.ErrPartitionOutOfRange)
		_, err = c.OffsetForTime(t.Context(), tp.ID, p, 0)
		wantErr(t, "OffsetForTime of a partition outside the topic", err, catalog.ErrPartitionOutOfRange)
	}
}

func testOffsetForTime(t *testing.T, c catalog.Catalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "times", 2, nil)
	// Chunks of 10 records with max timestamps 1000, 3000, 2000, 5000: running maxima
	// 1000, 3000, 3000, 5000.
	for _, ts := range []int64{1000, 3000, 2000, 5000} {
		MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 10, MaxTimestamp: ts})))
	}
	for _, tc := range []struct{ ts, want int64 }{
		{-1, 0}, {0, 0}, {999, 0}, {1000, 0},
		{1001, 10}, {2000, 10}, {2500, 10}, {3000, 10},
		{3001, 30}, {5000, 30},
		{5001, 40}, {1 << 50, 40}, // none reaches ts: the high watermark
	} {
		got, err := c.OffsetForTime(ctx, tp.ID, 0, tc.ts)
		if err != nil || got != tc.want {
			t.Errorf("OffsetForTime(%d) = %d, %v; want %d", tc.ts, got, err, tc.want)
		}
	}
	if got, err := c.OffsetForTime(ctx, tp.ID, 1, 0); err != nil || got != 0 {
		t.Errorf("OffsetForTime of an empty partition = %d, %v; want 0", got, err)
	}
}

func testListen(t *testing.T, c catalog.Catalog) {
	tp := SeedTopic(t, c, "listen", 3, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan catalog.Watermark, 1024)
	done := make(chan error, 1)
	go func() {
		done <- c.Listen(ctx, func(w catalog.Watermark) {
			if w.TopicID == tp.ID {
				select {
				case got <- w:
				default:
				}
			}
		})
	}()

	// Notifications are best effort and the listener may not be registered yet: commit
	// until one arrives, each time waiting a while for the watermark it made.
	var hw int64
	heard := false
	for attempt := 0; attempt < 50 && !heard; attempt++ {
		MustCommit(t, c, Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 1, Records: 2}, B{TopicID: tp.ID, Partition: 2, Records: 1})))
		hw += 2
		deadline := time.After(200 * time.Millisecond)
	wait:
		for {
			select {
			case w := <-got:
				if w.Partition == 0 || w.HighWatermark > hw {
					t.Fatalf("notified %+v; only partitions 1 and 2 moved, partition 1 to %d", w, hw)
				}
				if w.Partition == 1 && w.HighWatermark == hw {
					heard = true
					break wait
				}
			case <-deadline:
				break wait
			}
		}
	}
	if !heard {
		t.Fatal("Listen heard no commit in 50 tries")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Listen returned %v after its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return after its context ended")
	}
}

func testNow(t *testing.T, c catalog.Catalog) {
	a, err := c.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(a); d < -time.Minute || d > time.Minute {
		t.Fatalf("database clock %s is %s from this one", a, d)
	}
	time.Sleep(5 * time.Millisecond)
	b, err := c.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !b.After(a) {
		t.Fatalf("database clock did not advance: %s then %s", a, b)
	}
}

// testConcurrentCommits runs o.Committers goroutines committing o.CommitsEach flushes
// each over o.Partitions partitions; every partition must end dense from 0, with no gap
// or duplicate, and agree with every answer given.
func testConcurrentCommits(t *testing.T, c catalog.Catalog, o Options) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	tp := SeedTopic(t, c, "concurrent", o.Partitions, nil)

	type span struct{ base, n int64 }
	var (
		mu    sync.Mutex
		spans = make([][]span, o.Partitions)
		wg    sync.WaitGroup
		errs  = make(chan error, o.Committers)
	)
	for g := range o.Committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for range o.CommitsEach {
				// Two requests: one over two distinct partitions, one over a third.
				perm := rng.Perm(int(o.Partitions))
				r0 := Req(
					B{TopicID: tp.ID, Partition: int32(perm[0]), Records: 1 + rng.Int32N(4)},
					B{TopicID: tp.ID, Partition: int32(perm[1]), Records: 1 + rng.Int32N(4)},
				)
				r1 := Req(B{TopicID: tp.ID, Partition: int32(perm[2]), Records: 1 + rng.Int32N(4)})
				seg := Flush(NewKey(t), r0, r1)
				res, err := c.Commit(ctx, seg)
				for _, r := range res {
					if err == nil && r.Err != nil {
						err = r.Err
					}
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for i, r := range res {
					for j, b := range seg.Requests[i].Batches {
						spans[b.Partition] = append(spans[b.Partition], span{r.BaseOffsets[j], int64(b.Records)})
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent commit: %v", err)
	}

	total := 0
	for p, ss := range spans {
		slices.SortFunc(ss, func(a, b span) int { return compare(a.base, b.base) })
		var next int64
		for _, s := range ss {
			if s.base != next {
				t.Fatalf("partition %d: batch at %d where %d was next (gap or duplicate)", p, s.base, next)
			}
			next += s.n
		}
		if info := Partition(t, c, tp.ID, int32(p)); info.HighWatermark != next {
			t.Fatalf("partition %d: high watermark %d, answers add up to %d", p, info.HighWatermark, next)
		}
		CheckDense(t, c, tp.ID, int32(p))
		total += len(ss)
	}
	if want := o.Committers * o.CommitsEach * 3; total != want {
		t.Fatalf("%d batches answered, want %d", total, want)
	}
}
