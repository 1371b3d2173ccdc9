package writer

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

// prime runs n one-record flushes so that the hedger has its samples.
func (h *harness) prime(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		mustOK(t, await(t, h.produceAsync(req(rec(1, 1, 0, "k", "prime-"+string(rune('a'+i%26)))))))
	}
}

// TestHedgedPut: a PUT that hangs past the recent PUTs' 95th percentile is sent again
// under a fresh key; the flush commits that one, its request is answered, and the
// hanging PUT is cancelled before the flush lets go of the bytes.
//
// The flush's usage counts both PUTs: the object store bills the hedge too.
func TestHedgedPut(t *testing.T) {
	var lastPuts atomic.Int32
	h := start(t, Config{Linger: time.Millisecond, Usage: func(us []TopicUsage) {
		for _, u := range us {
			lastPuts.Store(int32(u.Counts().PutRequests / u.Share))
		}
	}}, true)
	h.prime(t, hedgeMinSamples)
	var stuck atomic.Int32
	first := int32(hedgeMinSamples + 1)
	h.store.mu.Lock()
	h.store.block = func(n int) {
		if int32(n) == first {
			stuck.Store(int32(n))
		}
	}
	h.store.delay = func(n int) time.Duration {
		if int32(n) == first {
			return time.Hour // until cancelled: memStore then returns ctx.Err()
		}
		return 0
	}
	h.store.mu.Unlock()
	mustOK(t, await(t, h.produceAsync(req(rec(1, 1, 0, "k", "hedged")))))
	if stuck.Load() != first {
		t.Fatalf("PUT %d never started", first)
	}
	puts, stored, _ := h.store.counts()
	if puts != hedgeMinSamples+2 || stored != hedgeMinSamples+1 {
		t.Fatalf("%d PUTs, %d stored; want the stuck one and its hedge (%d PUTs), one stored (%d)", puts, stored, hedgeMinSamples+2, hedgeMinSamples+1)
	}
	segs := h.cat.commitCalls()
	last := segs[len(segs)-1]
	if _, ok := h.store.get(last.Key); !ok {
		t.Fatalf("committed %s, which is not in the store", last.Key)
	}
	if got := metricValue(t, h.w.m.hedges.WithLabelValues("won")); got != 1 {
		t.Fatalf("hedges won = %v, want 1", got)
	}
	// Usage is told after the commit that answered the request: wait for it.
	testwait.Until(t, 10*time.Second, "the hedged flush's usage to count both PUTs", func() bool { return lastPuts.Load() == 2 })
	h.store.mu.Lock()
	inFlight := h.store.inFlight
	h.store.mu.Unlock()
	if inFlight != 0 {
		t.Fatal("the stuck PUT was still in flight after the flush was answered")
	}
}

// TestHedgeOff: with HedgeQuantile below 0 a slow PUT is waited for (here until
// PutTimeout fails the flush), never sent twice.
func TestHedgeOff(t *testing.T) {
	h := start(t, Config{Linger: time.Millisecond, HedgeQuantile: -1, PutTimeout: 300 * time.Millisecond}, true)
	h.prime(t, hedgeMinSamples)
	h.store.mu.Lock()
	h.store.delay = func(n int) time.Duration {
		if n == hedgeMinSamples+1 {
			return time.Hour
		}
		return 0
	}
	h.store.mu.Unlock()
	o := await(t, h.produceAsync(req(rec(1, 1, 0, "k", "slow"))))
	if !errors.Is(o.err, ErrStore) {
		t.Fatalf("a PUT past PutTimeout: %v, want ErrStore", o.err)
	}
	if puts, _, _ := h.store.counts(); puts != hedgeMinSamples+1 {
		t.Fatalf("%d PUTs, want %d: no hedge", puts, hedgeMinSamples+1)
	}
}

// TestHedgeBothFail: when the PUT and its hedge both fail, the flush fails with the
// first error.
func TestHedgeBothFail(t *testing.T) {
	h := start(t, Config{Linger: time.Millisecond}, true)
	h.prime(t, hedgeMinSamples)
	first := hedgeMinSamples + 1
	h.store.mu.Lock()
	h.store.delay = func(n int) time.Duration {
		if n == first {
			return 500 * time.Millisecond // past the hedge delay, then fails
		}
		return 0
	}
	h.store.fail = func(n int) error {
		if n >= first {
			return errors.New("injected")
		}
		return nil
	}
	h.store.mu.Unlock()
	o := await(t, h.produceAsync(req(rec(1, 1, 0, "k", "doomed"))))
	if !errors.Is(o.err, ErrStore) {
		t.Fatalf("both PUTs failed: %v, want ErrStore", o.err)
	}
	if puts, _, _ := h.store.counts(); puts != first+1 {
		t.Fatalf("%d PUTs, want %d (the PUT and its hedge)", puts, first+1)
	}
}

// TestHedgerDelay: no hedge before enough samples, then the quantile, never below
// the floor.
func TestHedgerDelay(t *testing.T) {
	h := newHedger(0.95)
	for range hedgeMinSamples - 1 {
		h.observe(time.Second)
	}
	if _, ok := h.delay(); ok {
		t.Fatal("hedged before enough samples")
	}
	for i := range hedgeWindow {
		h.observe(time.Duration(i+1) * time.Millisecond)
	}
	d, ok := h.delay()
	if !ok || d < 480*time.Millisecond || d > 490*time.Millisecond {
		t.Fatalf("delay %s %v, want the 95th percentile of 1..512ms", d, ok)
	}
	h = newHedger(0.95)
	for range hedgeMinSamples {
		h.observe(time.Millisecond)
	}
	if d, _ := h.delay(); d != hedgeFloor {
		t.Fatalf("delay %s, want the floor %s", d, hedgeFloor)
	}
	if _, ok := newHedger(-1).delay(); ok {
		t.Fatal("a hedger turned off hedged")
	}
}

// TestHedgeBudget: hedges are spent from a budget that each PUT adds a twentieth of a
// hedge to, saved up to ten: a store slow for every PUT is not sent twice the load.
func TestHedgeBudget(t *testing.T) {
	h := newHedger(0.95)
	for i := range hedgeBurst {
		if !h.spend() {
			t.Fatalf("hedge %d refused with the budget saved up", i+1)
		}
	}
	if h.spend() {
		t.Fatal("a hedge was sent with the budget spent")
	}
	for range hedgePUTs - 1 {
		h.earn()
	}
	if h.spend() {
		t.Fatalf("%d PUTs earned a whole hedge", hedgePUTs-1)
	}
	h.earn()
	if !h.spend() {
		t.Fatalf("%d PUTs did not earn a hedge", hedgePUTs)
	}
	for range 1000 {
		h.earn()
	}
	n := 0
	for h.spend() {
		n++
	}
	if n != hedgeBurst {
		t.Fatalf("%d hedges saved up after 1000 PUTs, want at most %d", n, hedgeBurst)
	}
}
