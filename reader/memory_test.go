package reader

import (
	"errors"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/segment"
)

// A fetch reserves what it takes in its hold before taking it; the blocks it loads are
// reserved while they are read. With room for part of what it asks, a fetch comes
// back smaller; with none it fails with ErrMemoryExhausted; and everything goes back
// to the budget's idle level once the holds are released.
func TestFetchMemory(t *testing.T) {
	l := newTestLog(t)
	for range 2 { // 2 chunks of 5 batches of 10 records of 1000 bytes: ~10 KiB a batch
		var bs []segment.Batch
		for range 5 {
			bs = append(bs, l.batch(0, 10, 1000, segment.CompressionNone))
		}
		l.flush(bs...)
	}
	cfg := Config{BlockSize: 16 << 10, CacheBytes: 1 << 20, MemoryWait: 1}
	mem := membudget.New(cfg.MemoryBytes()+400<<10, nil)
	if err := mem.Carve(cfg.MemoryBytes(), "cache"); err != nil {
		t.Fatal(err)
	}
	cfg.Memory = mem
	r := newTestReader(t, l, cfg)
	idle := mem.Idle()

	for _, raw := range []bool{false, true} {
		h := mem.NewHold()
		f := Fetch{TopicID: testTopic, MaxRecords: 100, MaxBytes: 1 << 20, Memory: h}
		var got int
		if raw {
			res, err := r.FetchRawShared(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range res.Batches {
				got += len(b)
			}
		} else {
			res, err := r.Fetch(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			got = len(res.Records) * 1000
		}
		if h.Held() < int64(got) {
			t.Errorf("raw %v: %d bytes returned, %d reserved", raw, got, h.Held())
		}
		if mem.Peak() > mem.Limit() {
			t.Fatalf("peak %d above the budget %d", mem.Peak(), mem.Limit())
		}
		h.Release()
		if mem.Used() != idle {
			t.Fatalf("raw %v: %d reserved after the release, idle is %d", raw, mem.Used(), idle)
		}
	}

	// Room for the chunk and a batch or so: the fetch stops there rather than fail.
	squeeze := mem.Limit() - idle - 65<<10 // the chunk's read (50 KiB) and a batch or so
	if !mem.TryReserve(squeeze, membudget.UseProduce) {
		t.Fatal("could not take the budget's room")
	}
	h := mem.NewHold()
	res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, MaxRecords: 100, MaxBytes: 1 << 20, Memory: h})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Records); n == 0 || n >= 100 || res.NextOffset != int64(n) {
		t.Fatalf("squeezed fetch: %d records, next %d; want a short, well-formed answer", n, res.NextOffset)
	}
	h.Release()

	// No room at all: ErrMemoryExhausted, nothing left reserved.
	mem.Release(squeeze)
	if !mem.TryReserve(mem.Limit()-idle, membudget.UseProduce) {
		t.Fatal("could not take the budget's room")
	}
	h = mem.NewHold()
	_, err = r.FetchRawShared(t.Context(), Fetch{TopicID: testTopic, Offset: 50, MaxBytes: 1 << 20, Memory: h})
	if !errors.Is(err, ErrMemoryExhausted) || !errors.Is(err, membudget.ErrExhausted) {
		t.Fatalf("fetch with no room: %v, want ErrMemoryExhausted", err)
	}
	h.Release()
	mem.Release(mem.Limit() - idle)

	// Many fetches at once, every block a miss: the budget is never exceeded.
	r2 := newTestReader(t, l, cfg) // a cold cache
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			h := mem.NewHold()
			defer h.Release()
			_, err := r2.Fetch(t.Context(), Fetch{TopicID: testTopic, Offset: int64(i % 90), MaxRecords: 100, MaxBytes: 1 << 20, Memory: h})
			if err != nil && !errors.Is(err, ErrMemoryExhausted) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if mem.Peak() > mem.Limit() || mem.Used() != idle || mem.Overreleased() != 0 {
		t.Fatalf("after concurrent fetches: peak %d of %d, used %d (idle %d), overreleased %d",
			mem.Peak(), mem.Limit(), mem.Used(), idle, mem.Overreleased())
	}
}

// A compressed batch's records are reserved at their decompressed size, not their
// compressed one.
func TestFetchMemoryCompressed(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 50, 1000, segment.CompressionZstd)) // compresses far below 50 KB
	mem := membudget.New(64<<20, nil)
	r := newTestReader(t, l, Config{Memory: mem})
	h := mem.NewHold()
	res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, MaxRecords: 100, MaxBytes: 1 << 20, Memory: h})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, rec := range res.Records {
		n += recordSize(rec)
	}
	if len(res.Records) != 50 || h.Held() < n {
		t.Fatalf("%d records of %d bytes, %d reserved", len(res.Records), n, h.Held())
	}
	h.Release()
}
