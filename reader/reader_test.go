package reader

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/segment"
)

func newTestReader(t testing.TB, l *testLog, cfg Config) *Reader {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return New(l.store, l.cat, cfg, nil, nil)
}

// waiting counts the long-polls registered on a partition.
func (r *Reader) waiting(topicID int64, p int32) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waiters[partKey{topicID, p}])
}

// rawBases returns the base offsets the batches carry, checking that each still
// decodes (its CRC still holds) and that its bytes past the base offset are those of
// a stored object.
func rawBases(t *testing.T, l *testLog, batches [][]byte) []int64 {
	t.Helper()
	var bases []int64
	for _, raw := range batches {
		db, err := segment.DecodeBatch(raw)
		if err != nil {
			t.Fatalf("raw batch does not decode: %v", err)
		}
		found := false
		for _, obj := range l.store.objects {
			found = found || bytes.Contains(obj, raw[8:])
		}
		if !found {
			t.Fatalf("raw batch at offset %d: bytes past the base offset differ from the stored batch", db.BaseOffset)
		}
		bases = append(bases, db.BaseOffset)
	}
	return bases
}

func TestFetchRewritesOffsets(t *testing.T) {
	for _, narrow := range []bool{false, true} {
		t.Run(fmt.Sprintf("footer=%v", narrow), func(t *testing.T) {
			l := newTestLog(t)
			// One flush with two requests, each with a batch for partitions 0 and 1:
			// partition 0 gets offsets 0-2 and 3-4, partition 1 gets 0-1 and 2.
			a0, a1 := l.batch(0, 3, 0, segment.CompressionNone), l.batch(1, 2, 0, segment.CompressionNone)
			b0, b1 := l.batch(0, 2, 0, segment.CompressionGzip), l.batch(1, 1, 0, segment.CompressionNone)
			l.flush(a0, a1, b0, b1)
			l.flush(l.batch(0, 4, 0, segment.CompressionLZ4), l.batch(1, 1, 0, segment.CompressionZstd)) // 5-8; 3
			// A compacted chunk with real offsets and gaps: batches 9,11 and 12,14.
			l.compacted(0, []int64{9, 11, 12, 14}, 2, 0, 0)
			l.flush(l.batch(0, 2, 0, segment.CompressionSnappy)) // 15-16
			r := newTestReader(t, l, Config{})
			if narrow {
				r.narrowAbove = 0 // read every chunk through its footer
			}

			for _, tc := range []struct {
				name       string
				p          int32
				offset     int64
				maxRecords int
				want       []int64
				next       int64
				rawBases   []int64
			}{
				{"all of partition 0", 0, 0, 0, append(span(0, 9), 11, 12, 14, 15, 16), 17, []int64{0, 3, 5, 9, 12, 15}},
				{"all of partition 1", 1, 0, 0, span(0, 3), 4, []int64{0, 2, 3}},
				{"middle of a batch, across chunks", 0, 2, 5, span(2, 6), 7, []int64{0, 3, 5}},
				{"from a compacted gap", 0, 10, 0, []int64{11, 12, 14, 15, 16}, 17, []int64{9, 12, 15}},
				{"compacted batch ends the fetch", 0, 10, 1, []int64{11}, 12, []int64{9}},
				{"gap at a batch's start", 0, 13, 0, []int64{14, 15, 16}, 17, []int64{12, 15}},
				{"last record", 0, 16, 0, []int64{16}, 17, []int64{15}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					f := Fetch{TopicID: testTopic, Partition: tc.p, Offset: tc.offset, MaxRecords: tc.maxRecords}
					res, err := r.Fetch(t.Context(), f)
					if err != nil {
						t.Fatal(err)
					}
					checkRecords(t, tc.p, res.Records, tc.want)
					if res.NextOffset != tc.next || res.HighWatermark != l.hw[tc.p] || res.LogStartOffset != 0 {
						t.Errorf("next %d hw %d lso %d, want %d %d 0", res.NextOffset, res.HighWatermark, res.LogStartOffset, tc.next, l.hw[tc.p])
					}
					raw, err := r.FetchRaw(t.Context(), f)
					if err != nil {
						t.Fatal(err)
					}
					if got := rawBases(t, l, raw.Batches); fmt.Sprint(got) != fmt.Sprint(tc.rawBases) {
						t.Errorf("raw batch base offsets %v, want %v", got, tc.rawBases)
					}
					wantNext := tc.next
					if tc.maxRecords != 0 { // raw batches are whole: next is past the last one
						db, _ := segment.DecodeBatch(raw.Batches[len(raw.Batches)-1])
						wantNext = db.BaseOffset + int64(db.LastOffsetDelta) + 1
					}
					if raw.NextOffset != wantNext || raw.HighWatermark != l.hw[tc.p] {
						t.Errorf("raw: next %d hw %d, want %d %d", raw.NextOffset, raw.HighWatermark, wantNext, l.hw[tc.p])
					}
					// Shared: the same batches, uncopied and untouched, with the
					// real base offsets beside them.
					sh, err := r.FetchRawShared(t.Context(), f)
					if err != nil {
						t.Fatal(err)
					}
					if len(sh.Batches) != len(raw.Batches) || len(sh.BaseOffsets) != len(sh.Batches) || sh.NextOffset != raw.NextOffset {
						t.Fatalf("shared: %d batches, %d bases, next %d; raw %d batches, next %d", len(sh.Batches), len(sh.BaseOffsets), sh.NextOffset, len(raw.Batches), raw.NextOffset)
					}
					for i, b := range sh.Batches {
						stored, _ := segment.ParseBatchHeader(b)
						if sh.BaseOffsets[i] != tc.rawBases[i] || !bytes.Equal(b[8:], raw.Batches[i][8:]) || stored.BaseOffset != storedBase(t, l, b) {
							t.Errorf("shared batch %d: base %d (stored %d), want %d", i, sh.BaseOffsets[i], stored.BaseOffset, tc.rawBases[i])
						}
					}
				})
			}
		})
	}
}

// storedBase finds b in the stored objects and returns the base offset stored there,
// so a shared batch is known to be the cache's bytes, not a rewritten copy.
func storedBase(t *testing.T, l *testLog, b []byte) int64 {
	t.Helper()
	for _, obj := range l.store.objects {
		if i := bytes.Index(obj, b); i >= 0 {
			return int64(binary.BigEndian.Uint64(obj[i:]))
		}
	}
	t.Fatal("shared batch not found byte for byte in any stored object")
	return 0
}

func TestFetchSkipsCompactedHoles(t *testing.T) {
	l := newTestLog(t)
	// Offsets 2, 4 and 5 were compacted away, 4 and 5 with their batch.
	l.compacted(0, []int64{0, 1, 3}, 2, 0, 2)
	l.flush(l.batch(0, 2, 0, segment.CompressionNone)) // 6-7
	r := newTestReader(t, l, Config{})
	for _, tc := range []struct {
		offset, maxBytes int64
		want             []int64
		next             int64
		bases            []int64
	}{
		{0, 0, []int64{0, 1, 3, 6, 7}, 8, []int64{0, 3, 6}},
		{2, 0, []int64{3, 6, 7}, 8, []int64{3, 6}},
		{4, 0, []int64{6, 7}, 8, []int64{6}},
		// The lookup returns the compacted chunk alone: nothing to return, but the
		// next fetch starts past the hole.
		{4, 1, nil, 6, nil},
		{5, 1, nil, 6, nil},
	} {
		f := Fetch{TopicID: testTopic, Offset: tc.offset, MaxBytes: tc.maxBytes}
		res, err := r.Fetch(t.Context(), f)
		if err != nil {
			t.Fatalf("offset %d: %v", tc.offset, err)
		}
		checkRecords(t, 0, res.Records, tc.want)
		if res.NextOffset != tc.next {
			t.Errorf("offset %d: next %d, want %d", tc.offset, res.NextOffset, tc.next)
		}
		raw, err := r.FetchRaw(t.Context(), f)
		if err != nil {
			t.Fatalf("raw, offset %d: %v", tc.offset, err)
		}
		if got := rawBases(t, l, raw.Batches); fmt.Sprint(got) != fmt.Sprint(tc.bases) || raw.NextOffset != tc.next {
			t.Errorf("raw, offset %d: bases %v next %d, want %v %d", tc.offset, got, raw.NextOffset, tc.bases, tc.next)
		}
	}
}

func TestFetchLimits(t *testing.T) {
	l := newTestLog(t)
	// 100 records of 100 bytes: 2 chunks of 5 batches of 10.
	for range 2 {
		var bs []segment.Batch
		for range 5 {
			bs = append(bs, l.batch(0, 10, 100, segment.CompressionNone))
		}
		l.flush(bs...)
	}
	r := newTestReader(t, l, Config{DefaultMaxRecords: 25, MaxRecords: 30})
	for _, tc := range []struct {
		name       string
		offset     int64
		maxRecords int
		maxBytes   int64
		from, to   int64
	}{
		{"default max records", 0, 0, 0, 0, 24},
		{"one record", 0, 1, 0, 0, 0},
		{"across batches", 0, 15, 0, 0, 14},
		{"across chunks", 45, 10, 0, 45, 54},
		{"max records capped", 0, 1000, 0, 0, 29},
		{"max bytes", 0, 0, 250, 0, 1},
		{"max bytes exactly", 0, 0, 300, 0, 2},
		{"at least one record", 0, 0, 50, 0, 0},
		{"at least one record mid-batch", 37, 0, 1, 37, 37},
		{"middle of a batch", 13, 4, 0, 13, 16},
		{"to the end", 95, 30, 0, 95, 99},
		{"last record", 99, 0, 0, 99, 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Offset: tc.offset, MaxRecords: tc.maxRecords, MaxBytes: tc.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, 0, res.Records, span(tc.from, tc.to))
			if res.NextOffset != tc.to+1 || res.HighWatermark != 100 {
				t.Errorf("next %d hw %d, want %d 100", res.NextOffset, res.HighWatermark, tc.to+1)
			}
		})
	}
	for _, tc := range []struct {
		name       string
		offset     int64
		maxRecords int
		maxBytes   int64
		bases      []int64
	}{
		{"records count from the offset", 0, 15, 0, []int64{0, 10}},
		{"records below the offset do not count", 13, 7, 0, []int64{10}},
		{"records below the offset do not count, more", 13, 8, 0, []int64{10, 20}},
		{"at least one batch", 0, 0, 1, []int64{0}},
		{"across chunks", 45, 10, 0, []int64{40, 50}},
	} {
		t.Run("raw "+tc.name, func(t *testing.T) {
			res, err := r.FetchRaw(t.Context(), Fetch{TopicID: testTopic, Offset: tc.offset, MaxRecords: tc.maxRecords, MaxBytes: tc.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			if got := rawBases(t, l, res.Batches); fmt.Sprint(got) != fmt.Sprint(tc.bases) {
				t.Fatalf("base offsets %v, want %v", got, tc.bases)
			}
			if want := tc.bases[len(tc.bases)-1] + 10; res.NextOffset != want {
				t.Errorf("next %d, want %d", res.NextOffset, want)
			}
		})
	}
	t.Run("raw max bytes", func(t *testing.T) {
		one, err := r.FetchRaw(t.Context(), Fetch{TopicID: testTopic, MaxBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(one.Batches[0])) // every batch here has the same size
		for _, tc := range []struct {
			maxBytes int64
			batches  int
		}{{n, 1}, {2*n - 1, 1}, {2 * n, 2}, {3*n + 1, 3}} {
			res, err := r.FetchRaw(t.Context(), Fetch{TopicID: testTopic, MaxBytes: tc.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Batches) != tc.batches {
				t.Errorf("max bytes %d (batches of %d): %d batches, want %d", tc.maxBytes, n, len(res.Batches), tc.batches)
			}
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for _, f := range []Fetch{{MaxRecords: -1}, {MaxBytes: -1}, {Wait: -time.Second}} {
			f.TopicID = testTopic
			if _, err := r.Fetch(t.Context(), f); !errors.Is(err, ErrInvalidFetch) {
				t.Errorf("%+v: err %v, want ErrInvalidFetch", f, err)
			}
		}
	})
}

func TestFetchOutOfRange(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 10, 0, segment.CompressionNone))
	l.cat.setLogStart(partKey{testTopic, 0}, 5)
	r := newTestReader(t, l, Config{})
	for _, offset := range []int64{-1, 0, 4, 11, 1000} {
		// A long-poll does not wait on an offset out of range.
		f := Fetch{TopicID: testTopic, Offset: offset, Wait: time.Hour}
		_, err := r.Fetch(t.Context(), f)
		var oor *OutOfRangeError
		if !errors.As(err, &oor) || *oor != (OutOfRangeError{Offset: offset, LogStartOffset: 5, HighWatermark: 10}) {
			t.Fatalf("offset %d: err %v, want offset %d out of range [5, 10]", offset, err, offset)
		}
		if !errors.Is(err, ErrOffsetOutOfRange) || !errors.Is(err, catalog.ErrOffsetOutOfRange) {
			t.Errorf("offset %d: %v does not match ErrOffsetOutOfRange", offset, err)
		}
		if _, err := r.FetchRaw(t.Context(), f); !errors.As(err, &oor) {
			t.Errorf("raw, offset %d: err %v, want *OutOfRangeError", offset, err)
		}
	}
	res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Offset: 5})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, 0, res.Records, span(5, 9))
	if res.LogStartOffset != 5 {
		t.Errorf("log start %d, want 5", res.LogStartOffset)
	}
	if _, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Partition: 3}); !errors.Is(err, catalog.ErrPartitionOutOfRange) {
		t.Errorf("unknown partition: err %v, want ErrPartitionOutOfRange", err)
	}
}

// startFetch runs a fetch in the background.
func startFetch(ctx context.Context, r *Reader, f Fetch) <-chan fetchResult {
	ch := make(chan fetchResult, 1)
	go func() {
		start := time.Now()
		res, err := r.Fetch(ctx, f)
		ch <- fetchResult{res, err, time.Since(start)}
	}()
	return ch
}

type fetchResult struct {
	res     Result
	err     error
	elapsed time.Duration
}

// waitParked waits until a long-poll on partition p has looked at the catalog once
// (after calls earlier lookups) and is registered to be woken.
func waitParked(t *testing.T, r *Reader, l *testLog, p int32, calls int64) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "the fetch to wait", func() bool { return l.cat.served.Load() > calls && r.waiting(testTopic, p) == 1 })
}

func TestLongPollWokenByNotify(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 2, 0, segment.CompressionNone))
	l.flush(l.batch(1, 2, 0, segment.CompressionNone))
	r := newTestReader(t, l, Config{PollInterval: time.Hour}) // no poll will come
	done := startFetch(t.Context(), r, Fetch{TopicID: testTopic, Offset: 2, Wait: 20 * time.Second})
	waitParked(t, r, l, 0, 0)

	l.flush(l.batch(0, 3, 0, segment.CompressionNone))
	l.flush(l.batch(1, 3, 0, segment.CompressionNone))
	// Notifications that do not take partition 0 past offset 2 wake nobody.
	calls := l.cat.calls.Load()
	r.Notify(catalog.Watermark{TopicID: testTopic, Partition: 0, HighWatermark: 2})
	r.Notify(catalog.Watermark{TopicID: testTopic, Partition: 1, HighWatermark: 5})
	r.Notify(catalog.Watermark{TopicID: testTopic + 1, Partition: 0, HighWatermark: 5})
	time.Sleep(200 * time.Millisecond) // an absence: a wrongly woken fetch would look at once
	if got := l.cat.calls.Load(); got != calls {
		t.Fatalf("a notification for another partition or below the offset woke the fetch (%d lookups)", got-calls)
	}
	r.Notify(catalog.Watermark{TopicID: testTopic, Partition: 0, HighWatermark: 5})
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	checkRecords(t, 0, got.res.Records, span(2, 4))
	if got.elapsed > 10*time.Second {
		t.Errorf("woken after %s: the notification did not end the wait", got.elapsed)
	}
	if n, p := testutil.ToFloat64(r.m.wakeupsNotify), testutil.ToFloat64(r.m.wakeupsPoll); n != 1 || p != 0 {
		t.Errorf("wakeups by notify %v, by poll %v; want 1, 0", n, p)
	}
	if r.waiting(testTopic, 0) != 0 {
		t.Error("the waiter was not removed")
	}
}

func TestLongPollWokenByPolling(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 2, 0, segment.CompressionNone))
	r := newTestReader(t, l, Config{PollInterval: 20 * time.Millisecond})
	done := startFetch(t.Context(), r, Fetch{TopicID: testTopic, Offset: 2, Wait: 20 * time.Second})
	waitParked(t, r, l, 0, 0)
	l.flush(l.batch(0, 3, 0, segment.CompressionNone)) // and no notification
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	checkRecords(t, 0, got.res.Records, span(2, 4))
	if got.elapsed > 10*time.Second {
		t.Errorf("found after %s: polling did not end the wait", got.elapsed)
	}
	if n, p := testutil.ToFloat64(r.m.wakeupsNotify), testutil.ToFloat64(r.m.wakeupsPoll); n != 0 || p != 1 {
		t.Errorf("wakeups by notify %v, by poll %v; want 0, 1", n, p)
	}
}

func TestLongPollTimesOut(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 2, 0, segment.CompressionNone))
	l.cat.setLogStart(partKey{testTopic, 0}, 1)
	r := newTestReader(t, l, Config{PollInterval: 10 * time.Millisecond, MaxWait: 300 * time.Millisecond})
	for _, tc := range []struct {
		wait, atLeast time.Duration
	}{
		{100 * time.Millisecond, 100 * time.Millisecond},
		{time.Hour, 300 * time.Millisecond}, // capped by MaxWait
	} {
		got := <-startFetch(t.Context(), r, Fetch{TopicID: testTopic, Offset: 2, Wait: tc.wait})
		if got.err != nil {
			t.Fatalf("wait %s: %v, want an empty result", tc.wait, got.err)
		}
		if want := (Result{NextOffset: 2, HighWatermark: 2, LogStartOffset: 1}); fmt.Sprint(got.res) != fmt.Sprint(want) {
			t.Errorf("wait %s: %+v, want %+v", tc.wait, got.res, want)
		}
		if got.elapsed < tc.atLeast || got.elapsed > 10*time.Second {
			t.Errorf("wait %s: returned after %s, want about %s", tc.wait, got.elapsed, tc.atLeast)
		}
	}
	if n := testutil.ToFloat64(r.m.wakeupsPoll); n != 0 {
		t.Errorf("%v poll wakeups counted without data", n)
	}
	// Without Wait, the high watermark answers at once.
	got := <-startFetch(t.Context(), r, Fetch{TopicID: testTopic, Offset: 2})
	if got.err != nil || len(got.res.Records) != 0 || got.res.NextOffset != 2 {
		t.Errorf("no wait at the high watermark: %+v, %v", got.res, got.err)
	}
}

func TestLongPollCancelled(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 2, 0, segment.CompressionNone))
	r := newTestReader(t, l, Config{PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	done := startFetch(ctx, r, Fetch{TopicID: testTopic, Offset: 2, Wait: 30 * time.Second})
	waitParked(t, r, l, 0, 0)
	start := time.Now()
	cancel()
	got := <-done
	if !errors.Is(got.err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", got.err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the long-poll ended %s after its context", d)
	}
	if r.waiting(testTopic, 0) != 0 {
		t.Error("the waiter was not removed")
	}
}

func TestRunListens(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 2, 0, segment.CompressionNone))
	deliver := make(chan catalog.Watermark)
	var listens sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	listens.Add(2)
	l.cat.listen = func(ctx context.Context, fn func(catalog.Watermark)) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= 2 {
			listens.Done()
		}
		if n == 1 {
			return errors.New("connection lost") // Run must come back
		}
		for {
			select {
			case <-ctx.Done():
				return nil
			case w := <-deliver:
				fn(w)
			}
		}
	}
	r := newTestReader(t, l, Config{PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	listens.Wait()

	done := startFetch(t.Context(), r, Fetch{TopicID: testTopic, Offset: 2, Wait: 20 * time.Second})
	waitParked(t, r, l, 0, 0)
	l.flush(l.batch(0, 1, 0, segment.CompressionNone))
	deliver <- catalog.Watermark{TopicID: testTopic, Partition: 0, HighWatermark: 3}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	checkRecords(t, 0, got.res.Records, []int64{2})
	if n := testutil.ToFloat64(r.m.wakeupsNotify); n != 1 {
		t.Errorf("wakeups by notify %v, want 1", n)
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v, want nil after its context ends", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestFetchErrors(t *testing.T) {
	setup := func(t *testing.T) (*testLog, *Reader, catalog.Chunk) {
		l := newTestLog(t)
		ch := l.flush(l.batch(0, 5, 0, segment.CompressionNone))[0]
		return l, newTestReader(t, l, Config{}), ch
	}
	fetch := func(r *Reader) error {
		_, err := r.Fetch(context.Background(), Fetch{TopicID: testTopic})
		return err
	}

	t.Run("get error is returned, not cached", func(t *testing.T) {
		l, r, _ := setup(t)
		boom := errors.New("boom")
		l.store.setHook(func(context.Context, string, int64, int64) error { return boom })
		if err := fetch(r); !errors.Is(err, boom) {
			t.Fatalf("err %v, want %v", err, boom)
		}
		l.store.setHook(nil)
		for range 2 {
			if err := fetch(r); err != nil {
				t.Fatalf("after the store recovered: %v", err)
			}
		}
		if got := l.store.gets.Load(); got != 2 {
			t.Errorf("GETs %d, want 2: the failure, then one cached", got)
		}
	})
	t.Run("missing object", func(t *testing.T) {
		l, r, ch := setup(t)
		delete(l.store.objects, ch.SegmentKey)
		if err := fetch(r); !errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("err %v, want ErrNotExist", err)
		}
	})
	t.Run("corrupt batch", func(t *testing.T) {
		l, r, ch := setup(t)
		l.store.objects[ch.SegmentKey][ch.Pos+ch.Len-3] ^= 0xff
		if err := fetch(r); !errors.Is(err, segment.ErrCorrupt) {
			t.Errorf("err %v, want ErrCorrupt", err)
		}
	})
	t.Run("catalog row disagrees with the batches", func(t *testing.T) {
		for _, narrow := range []bool{false, true} {
			l, r, _ := setup(t)
			if narrow {
				r.narrowAbove = 0
			}
			p := l.cat.parts[partKey{testTopic, 0}]
			p.chunks[0].LastOffset++ // the row claims 6 offsets for 5 records
			p.hw++
			if err := fetch(r); !errors.Is(err, segment.ErrCorrupt) {
				t.Errorf("footer=%v: err %v, want ErrCorrupt", narrow, err)
			}
		}
	})
	t.Run("chunk outside its object", func(t *testing.T) {
		l, r, _ := setup(t)
		l.cat.parts[partKey{testTopic, 0}].chunks[0].Len += 1000
		if err := fetch(r); err == nil {
			t.Error("no error")
		}
	})
}

func TestConcurrentFetchesOneGet(t *testing.T) {
	const readers = 8
	l := newTestLog(t)
	l.flush(l.batch(0, 50, 100, segment.CompressionLZ4), l.batch(1, 50, 100, segment.CompressionNone))
	r := newTestReader(t, l, Config{})
	l.store.setHook(func(context.Context, string, int64, int64) error {
		for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(r.m.cacheMisses) < readers; {
			if time.Now().After(deadline) {
				return errors.New("not every fetch missed")
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Go(func() {
			p := int32(i % 2)
			res, err := r.Fetch(context.Background(), Fetch{TopicID: testTopic, Partition: p, Offset: int64(i)})
			if err == nil && (len(res.Records) != 50-i || !bytes.HasPrefix(res.Records[0].Value, []byte(label(p, int64(i))))) {
				err = fmt.Errorf("fetch %d: wrong records", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := l.store.gets.Load(); got != 1 {
		t.Errorf("%d concurrent fetches of one cold block sent %d GETs, want 1", readers, got)
	}
}

func TestFooterReadsOnlyWhatIsNeeded(t *testing.T) {
	for _, compacted := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacted=%v", compacted), func(t *testing.T) {
			l := newTestLog(t)
			var ch catalog.Chunk
			if compacted {
				ch = l.compacted(0, span(0, 1999), 10, 1000, 0)
			} else {
				var bs []segment.Batch
				for range 200 {
					bs = append(bs, l.batch(0, 10, 1000, segment.CompressionNone))
				}
				ch = l.flush(bs...)[0]
			}
			r := newTestReader(t, l, Config{BlockSize: 4 << 10, CacheBytes: 1 << 20})
			res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Offset: 1005, MaxBytes: 8 << 10})
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, 0, res.Records, span(1005, 1012))
			if got := l.store.bytes.Load(); got > ch.Len/20 {
				t.Errorf("read %d bytes of a %d-byte chunk for 8 records", got, ch.Len)
			}
		})
	}
}

func TestMetricsRegistered(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 3, 100, segment.CompressionNone))
	reg := prometheus.NewRegistry()
	r := New(l.store, l.cat, Config{}, nil, reg)
	for range 2 {
		if _, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic}); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, lp := range m.GetLabel() {
				name += "{" + lp.GetName() + "=" + lp.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[name] = m.Counter.GetValue()
			case m.Gauge != nil:
				got[name] = m.Gauge.GetValue()
			case m.Histogram != nil:
				got[name] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	objSize := float64(len(l.store.objects["seg/000001"]))
	for name, want := range map[string]float64{
		"strata_reader_cache_hits_total":                  1,
		"strata_reader_cache_misses_total":                1,
		"strata_reader_cache_bytes":                       objSize,
		"strata_reader_gets_total":                        1,
		"strata_reader_get_bytes_total":                   objSize,
		"strata_reader_fetch_seconds":                     2,
		"strata_reader_longpoll_wakeups_total{by=notify}": 0,
		"strata_reader_longpoll_wakeups_total{by=poll}":   0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
