package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/segment"
)

const testBlock = 4 << 10

// patterned returns n bytes whose value depends on the position, so a wrong range
// reads back wrong.
func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func TestCacheReadsRanges(t *testing.T) {
	obj := patterned(4*testBlock + 100)
	s := newFakeStore()
	s.put("o", obj)
	c := newBlockCache(s, testBlock, 1<<20, newMetrics(nil))
	for _, tc := range []struct{ off, n int64 }{
		{0, 1},
		{0, testBlock},
		{testBlock - 3, 7},               // straddles two blocks
		{100, 3*testBlock + 5},           // four blocks
		{4 * testBlock, 100},             // the short last block
		{0, int64(len(obj))},             // everything
		{int64(len(obj)) - 16, 16},       // a trailer
		{2*testBlock + 1, testBlock - 2}, // inside one block
	} {
		got, err := c.read(t.Context(), "o", int64(len(obj)), tc.off, tc.n)
		if err != nil {
			t.Fatalf("read [%d,+%d): %v", tc.off, tc.n, err)
		}
		if !bytes.Equal(got, obj[tc.off:tc.off+tc.n]) {
			t.Fatalf("read [%d,+%d): wrong bytes", tc.off, tc.n)
		}
	}
	// Five blocks, the first of them fetched by the first read alone; every later read
	// fetched only blocks not yet seen, in one GET per run of adjacent blocks.
	if got := s.gets.Load(); got != 4 {
		t.Errorf("GETs = %d, want 4 (block 0; block 1; blocks 2-3; block 4)", got)
	}
	if _, err := c.read(t.Context(), "o", int64(len(obj)), int64(len(obj))-10, 11); err == nil {
		t.Error("read past the object's end: no error")
	}
}

func TestCacheEvictsLRUByBytes(t *testing.T) {
	// Blocks 0-3 are whole; block 4 holds 1 KiB.
	size := int64(4*testBlock + 1024)
	s := newFakeStore()
	s.put("o", patterned(int(size)))
	m := newMetrics(nil)
	c := newBlockCache(s, testBlock, 3*testBlock, m)
	read := func(block int64) {
		t.Helper()
		n := min(int64(testBlock), size-block*testBlock)
		if _, err := c.read(t.Context(), "o", size, block*testBlock, n); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		block   int64
		gets    int64 // total GETs after the step
		blocks  int
		bytes   int64
		comment string
	}{
		{0, 1, 1, testBlock, "cold"},
		{1, 2, 2, 2 * testBlock, "cold"},
		{2, 3, 3, 3 * testBlock, "cold: the cache is full"},
		{0, 3, 3, 3 * testBlock, "hit: 0 becomes the most recent"},
		{3, 4, 3, 3 * testBlock, "cold: evicts 1, the least recent"},
		{0, 4, 3, 3 * testBlock, "hit: 0 survived"},
		{1, 5, 3, 3 * testBlock, "evicted earlier: GET again, evicting 2"},
		{4, 6, 3, 2*testBlock + 1024, "the short block evicts 3 only: 0, 1, 4 fit"},
		{3, 7, 3, 2*testBlock + 1024, "GET again: evicts 0 (the least recent) by bytes"},
		{1, 7, 3, 2*testBlock + 1024, "hit"},
		{4, 7, 3, 2*testBlock + 1024, "hit"},
		{0, 8, 3, 2*testBlock + 1024, "GET again: evicts 3, the least recent"},
		{2, 9, 3, 2*testBlock + 1024, "GET again: evicts 1"},
		{1, 10, 3, 3 * testBlock, "GET again: evicts 4, the short block"},
	}
	for i, st := range steps {
		read(st.block)
		blocks, bytes := c.stats()
		if got := s.gets.Load(); got != st.gets || blocks != st.blocks || bytes != st.bytes {
			t.Fatalf("step %d (block %d, %s): GETs %d, blocks %d, bytes %d; want %d, %d, %d",
				i, st.block, st.comment, got, blocks, bytes, st.gets, st.blocks, st.bytes)
		}
		if g := testutil.ToFloat64(m.cacheBytes); int64(g) != st.bytes {
			t.Fatalf("step %d: cache bytes gauge %v, want %d", i, g, st.bytes)
		}
	}
	if hits, misses := testutil.ToFloat64(m.cacheHits), testutil.ToFloat64(m.cacheMisses); hits != 4 || misses != 10 {
		t.Errorf("hits %v misses %v, want 4 and 10", hits, misses)
	}
}

func TestCacheMergesConcurrentMisses(t *testing.T) {
	const readers = 8
	obj := patterned(3 * testBlock)
	s := newFakeStore()
	s.put("o", obj)
	m := newMetrics(nil)
	c := newBlockCache(s, testBlock, 1<<20, m)
	// The GET is held until every reader has looked the block up and missed, so they
	// are all in flight at once; without merging each would send its own GET.
	s.setHook(func(ctx context.Context, key string, off, n int64) error {
		deadline := time.Now().Add(10 * time.Second)
		for testutil.ToFloat64(m.cacheMisses) < readers {
			if time.Now().After(deadline) {
				return errors.New("not every reader missed")
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Go(func() {
			got, err := c.read(context.Background(), "o", int64(len(obj)), testBlock+10, 100)
			if err == nil && !bytes.Equal(got, obj[testBlock+10:testBlock+110]) {
				err = errors.New("wrong bytes")
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
	if got := s.gets.Load(); got != 1 {
		t.Errorf("%d concurrent readers of one cold block sent %d GETs, want 1", readers, got)
	}
	if got := testutil.ToFloat64(m.gets); got != 1 {
		t.Errorf("gets metric %v, want 1", got)
	}
}

func TestCacheErrorIsNotCached(t *testing.T) {
	obj := patterned(testBlock)
	s := newFakeStore()
	s.put("o", obj)
	c := newBlockCache(s, testBlock, 1<<20, newMetrics(nil))
	boom := errors.New("boom")
	fail := true
	s.setHook(func(context.Context, string, int64, int64) error {
		if fail {
			return boom
		}
		return nil
	})
	if _, err := c.read(t.Context(), "o", testBlock, 0, 10); !errors.Is(err, boom) {
		t.Fatalf("read with a failing store: err %v, want %v", err, boom)
	}
	if blocks, _ := c.stats(); blocks != 0 {
		t.Fatalf("a failed GET left %d blocks cached", blocks)
	}
	fail = false
	for range 2 {
		got, err := c.read(t.Context(), "o", testBlock, 0, 10)
		if err != nil || !bytes.Equal(got, obj[:10]) {
			t.Fatalf("read after recovery: %v", err)
		}
	}
	if got := s.gets.Load(); got != 2 {
		t.Errorf("GETs = %d, want 2 (the failure, then one that is cached)", got)
	}
}

func TestCacheFollowerRetriesWhenLeaderCancels(t *testing.T) {
	obj := patterned(testBlock)
	s := newFakeStore()
	s.put("o", obj)
	m := newMetrics(nil)
	c := newBlockCache(s, testBlock, 1<<20, m)
	release := make(chan struct{})
	first := true
	var mu sync.Mutex
	s.setHook(func(ctx context.Context, _ string, _, _ int64) error {
		mu.Lock()
		leader := first
		first = false
		mu.Unlock()
		if leader { // the leader's GET hangs until its caller gives up
			<-ctx.Done()
			return fmt.Errorf("fake: %w", ctx.Err())
		}
		<-release
		return nil
	})
	leaderCtx, cancel := context.WithCancel(t.Context())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.read(leaderCtx, "o", testBlock, 0, 10)
		leaderErr <- err
	}()
	testwait.Until(t, 10*time.Second, "the leader's GET", func() bool { return s.gets.Load() == 1 })
	followerDone := make(chan error, 1)
	go func() {
		got, err := c.read(t.Context(), "o", testBlock, 0, 10)
		if err == nil && !bytes.Equal(got, obj[:10]) {
			err = errors.New("wrong bytes")
		}
		followerDone <- err
	}()
	testwait.Until(t, 10*time.Second, "the follower to miss", func() bool { return testutil.ToFloat64(m.cacheMisses) == 2 })
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-followerDone; err != nil {
		t.Fatalf("follower: %v: a leader's cancellation must not fail the follower", err)
	}
	if got := s.gets.Load(); got != 2 {
		t.Errorf("GETs = %d, want 2", got)
	}
}

func TestFooterCacheEvictsLRUBySize(t *testing.T) {
	ft := func(n int) segment.Footer { return segment.Footer{Version: 1, Batches: make([]segment.BatchInfo, n)} }
	one := footerSize(ft(10))
	c := newFooterCache(3 * one)
	c.put("a", ft(10))
	c.put("b", ft(10))
	c.put("c", ft(10))
	if _, ok := c.get("a"); !ok { // a becomes the most recent
		t.Fatal("a missing")
	}
	c.put("d", ft(10)) // evicts b
	c.put("huge", ft(1000))
	for key, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true, "huge": false} {
		if _, ok := c.get(key); ok != want {
			t.Errorf("%s cached: %v, want %v", key, ok, want)
		}
	}
	if c.size != 3*one {
		t.Errorf("size %d, want %d", c.size, 3*one)
	}
}

func TestCacheReadsSmallObjectsWhole(t *testing.T) {
	small := patterned(2*testBlock + testBlock/2) // three blocks: read whole
	large := patterned(4 * testBlock)             // four: block by block
	s := newFakeStore()
	s.put("small", small)
	s.put("large", large)
	c := newBlockCache(s, testBlock, 1<<20, newMetrics(nil))
	c.wholeObject = 3 * testBlock
	read := func(obj string, body []byte, off, n int64) {
		t.Helper()
		got, err := c.read(t.Context(), obj, int64(len(body)), off, n)
		if err != nil || !bytes.Equal(got, body[off:off+n]) {
			t.Fatalf("read %s [%d,+%d): %v", obj, off, n, err)
		}
	}
	read("small", small, testBlock+10, 100) // the middle block first
	if got := s.gets.Load(); got != 1 {
		t.Fatalf("first read of a small object: %d GETs, want 1 for the whole object", got)
	}
	read("small", small, 0, 10)
	read("small", small, 2*testBlock, testBlock/2)
	if got := s.gets.Load(); got != 1 {
		t.Errorf("the rest of a small object: %d GETs in all, want still 1", got)
	}
	read("large", large, 10, 10)
	read("large", large, 3*testBlock, 10)
	if got := s.gets.Load(); got != 3 {
		t.Errorf("two blocks of a large object: %d GETs in all, want 3 (1 + one per block)", got)
	}
	if blocks, _ := c.stats(); blocks != 5 {
		t.Errorf("%d blocks cached, want 5", blocks)
	}
}
