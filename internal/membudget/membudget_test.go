package membudget

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

func TestReserveRelease(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := New(100, reg)
	if err := b.Carve(30, "cache"); err != nil {
		t.Fatal(err)
	}
	if err := b.Carve(80, "too much"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a carve-out beyond the budget: %v", err)
	}
	if !b.TryReserve(50, UseFetch) {
		t.Fatal("50 of the 70 free bytes refused")
	}
	if b.TryReserve(21, UseFetch) {
		t.Fatal("21 bytes granted with 20 free")
	}
	if err := b.Reserve(t.Context(), 21, 0, UseProduce); !errors.Is(err, ErrExhausted) {
		t.Fatalf("no wait and no room: %v", err)
	}
	if err := b.Reserve(t.Context(), 71, time.Hour, UseProduce); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("more than the budget beside its carve-outs: %v", err)
	}
	start := time.Now()
	if err := b.Reserve(t.Context(), 21, 20*time.Millisecond, UseProduce); !errors.Is(err, ErrExhausted) {
		t.Fatalf("no room within the wait: %v", err)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Error("gave up before its wait")
	}
	b.Release(50)
	if got := b.Used(); got != 30 || b.Idle() != 30 || b.Peak() != 80 {
		t.Fatalf("used %d idle %d peak %d, want 30 30 80", got, b.Idle(), b.Peak())
	}
	if got := testutil.ToFloat64(b.m.refused.WithLabelValues("fetch")); got != 1 {
		t.Errorf("fetch refusals %v, want 1", got)
	}
	b.Release(10) // never reserved
	if b.Used() != 30 || b.Overreleased() != 10 {
		t.Fatalf("a stray release: used %d, overreleased %d", b.Used(), b.Overreleased())
	}
}

// A waiting reservation is granted when room is released, in arrival order: a large
// one is not starved by small ones arriving after it.
func TestReserveWaitsInTurn(t *testing.T) {
	b := New(100, nil)
	if !b.TryReserve(90, UseFetch) {
		t.Fatal("refused")
	}
	got := make(chan error, 1)
	go func() { got <- b.Reserve(context.Background(), 60, time.Minute, UseProduce) }()
	testwait.Until(t, 5*time.Second, "the reservation to wait", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiters.Len() == 1 })
	if b.TryReserve(5, UseFetch) {
		t.Fatal("a small reservation overtook a waiting one")
	}
	b.Release(20) // 30 free of the 60 it waits for
	select {
	case err := <-got:
		t.Fatalf("granted before there was room: %v", err)
	case <-time.After(100 * time.Millisecond): // an absence: a grant would come at once
	}
	b.Release(70)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.Used() != 60 {
		t.Fatalf("used %d, want 60", b.Used())
	}
}

func TestReserveContext(t *testing.T) {
	b := New(10, nil)
	b.TryReserve(10, UseFetch)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancelled while it waits (or, if that never shows, after all).
		testwait.Within(5*time.Second, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.waiters.Len() == 1 })
		cancel()
	}()
	if err := b.Reserve(ctx, 5, time.Minute, UseFetch); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	b.Release(10)
	if b.Used() != 0 {
		t.Fatalf("a cancelled wait left %d bytes reserved", b.Used())
	}
}

// Under many concurrent users reserving, waiting, giving up and releasing, the
// budget never grants more than its limit and returns to its idle level.
func TestNeverExceeds(t *testing.T) {
	const limit = 1 << 20
	b := New(limit, nil)
	if err := b.Carve(100<<10, "cache"); err != nil {
		t.Fatal(err)
	}
	var inUse, maxInUse atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for range 300 {
				h := b.NewHold()
				n := int64(1 + r.IntN(200<<10))
				var err error
				if r.IntN(2) == 0 {
					err = h.Reserve(context.Background(), n, time.Duration(r.IntN(3))*time.Millisecond, UseFetch)
				} else if !h.TryReserve(n, UseProduce) {
					err = ErrExhausted
				}
				if err == nil {
					v := inUse.Add(n)
					for m := maxInUse.Load(); v > m && !maxInUse.CompareAndSwap(m, v); m = maxInUse.Load() {
					}
					if r.IntN(4) == 0 {
						time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond) // held a while
					}
					inUse.Add(-n)
				}
				h.Release()
			}
		})
	}
	wg.Wait()
	if m := maxInUse.Load(); m > limit-100<<10 {
		t.Errorf("%d bytes in use at once, above the %d the budget has beside its carve-out", m, limit-100<<10)
	}
	if b.Peak() > limit {
		t.Errorf("peak %d above the limit %d", b.Peak(), limit)
	}
	if b.Used() != b.Idle() || b.Overreleased() != 0 {
		t.Errorf("used %d, idle %d, overreleased %d: a reservation was lost", b.Used(), b.Idle(), b.Overreleased())
	}
}

// Growing an answer stops at GrowShare of what the carve-outs leave; a first
// reservation may use the rest.
func TestTryGrow(t *testing.T) {
	b := New(1100, nil)
	if err := b.Carve(100, "cache"); err != nil {
		t.Fatal(err)
	}
	h := b.NewHold()
	if !h.TryGrow(700, UseFetch) || h.TryGrow(51, UseFetch) || !h.TryGrow(50, UseFetch) {
		t.Fatalf("growth to 750 of the 1000 free: held %d", h.Held())
	}
	if !b.TryReserve(250, UseFetch) {
		t.Fatal("the share kept for first reservations was taken")
	}
	b.Release(250)
	h.Release()
	if b.Used() != b.Idle() {
		t.Fatalf("used %d", b.Used())
	}
}

// The Kafka listener's hook: a frame is reserved before it is read, and released with
// its answer.
func TestFrame(t *testing.T) {
	b := New(1000, nil)
	h, err := b.Frame(t.Context(), "", 600, 0, UseKafka)
	if err != nil || b.Used() != 600 {
		t.Fatalf("frame: %v, used %d", err, b.Used())
	}
	if !h.TryReserve(300, UseFetch) { // its answer joins it
		t.Fatal("the answer refused")
	}
	if _, err := b.Frame(t.Context(), "", 200, time.Millisecond, UseKafka); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a frame with no room: %v", err)
	}
	h.Release()
	if b.Used() != 0 {
		t.Fatalf("used %d after the answer was written", b.Used())
	}
}

func TestNilBudget(t *testing.T) {
	var b *Budget
	h := b.NewHold()
	if !h.TryReserve(1<<40, UseFetch) || h.Reserve(t.Context(), 1<<40, 0, UseFetch) != nil || b.Carve(1<<40, "x") != nil {
		t.Fatal("a nil budget refused")
	}
	h.Release()
	if b.Used() != 0 || b.Limit() != 0 {
		t.Fatal("a nil budget counted")
	}
}

func TestDefaultLimit(t *testing.T) {
	limit, source, err := DefaultLimit()
	if err != nil {
		t.Skip(err) // a platform without either source
	}
	if limit <= 0 || source == "" {
		t.Fatalf("limit %d from %q", limit, source)
	}
	if got := BudgetFor(1000); got != 600 {
		t.Fatalf("budget of 1000: %d", got)
	}
}
