package membudget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

// One owner's bytes still arriving stop at its share of what the standing reservations
// leave (a first reservation excepted); other owners, and the anonymous owner, are not
// held back by it; bytes that have arrived no longer count.
func TestOwnerShare(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := New(1100, reg)
	if err := b.Carve(100, "cache"); err != nil {
		t.Fatal(err)
	}
	if got := b.ShareOf(); got != 250 {
		t.Fatalf("share %d, want 250 (a quarter of the 1000 beside the carve-out)", got)
	}
	ctx := t.Context()
	// Holding nothing, an owner may reserve more than its share: slowed, not starved.
	big := b.NewHold()
	if err := big.ReserveInbound(ctx, "User:a", 400, 0, UseProduce); err != nil {
		t.Fatalf("a first reservation above the share: %v", err)
	}
	if err := b.NewHold().ReserveInbound(ctx, "User:a", 1, 10*time.Millisecond, UseProduce); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a second one beside it: %v, want ErrExhausted", err)
	}
	other := b.NewHold()
	if err := other.ReserveInbound(ctx, "User:b", 250, 0, UseProduce); err != nil {
		t.Fatalf("another owner's: %v", err)
	}
	anon := b.NewHold()
	if err := anon.ReserveInbound(ctx, "", 300, 0, UseProduce); err != nil {
		t.Fatalf("no owner: %v", err)
	}
	if b.Arriving("User:a") != 400 || b.Arriving("User:b") != 250 || b.Used() != 1050 {
		t.Fatalf("arriving a %d b %d, used %d", b.Arriving("User:a"), b.Arriving("User:b"), b.Used())
	}

	// A waiting reservation gets in once the owner's bytes have arrived: they stay
	// reserved, but no longer count against the share.
	anon.Release()
	got := make(chan error, 1)
	waiting := b.NewHold()
	go func() { got <- waiting.ReserveInbound(context.Background(), "User:a", 200, time.Minute, UseProduce) }()
	testwait.Until(t, 5*time.Second, "the reservation to wait for User:a's share", func() bool { return testutil.ToFloat64(b.m.share.WithLabelValues("produce")) == 2 })
	big.Arrived()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.Used() != 100+400+250+200 || b.Arriving("User:a") != 200 {
		t.Fatalf("used %d, arriving %d", b.Used(), b.Arriving("User:a"))
	}
	for _, h := range []*Hold{big, other, waiting} {
		h.Release()
	}
	if b.Used() != b.Idle() || b.Arriving("User:a") != 0 || b.Arriving("User:b") != 0 || len(b.owners) != 0 {
		t.Fatalf("used %d, owners %v after every release", b.Used(), b.owners)
	}

	// A reservation that waits for its share, and then finds the budget full, gives
	// its share back.
	h := b.NewHold()
	if !b.TryReserve(1000, UseFetch) {
		t.Fatal("could not fill the budget")
	}
	if err := h.ReserveInbound(ctx, "User:c", 10, time.Millisecond, UseProduce); !errors.Is(err, ErrExhausted) {
		t.Fatalf("no room in the budget: %v", err)
	}
	if b.Arriving("User:c") != 0 {
		t.Fatal("a refused reservation kept its share")
	}
	b.Release(1000)
	ctx2, cancel := context.WithCancel(ctx)
	if err := h.ReserveInbound(ctx2, "User:c", 300, 0, UseProduce); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := b.NewHold().ReserveInbound(ctx2, "User:c", 1, time.Minute, UseProduce); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	h.Release()
	if b.Used() != b.Idle() || b.Overreleased() != 0 {
		t.Fatalf("used %d, overreleased %d", b.Used(), b.Overreleased())
	}
}

// A pool is carved out of its budget and accounts on its own: filling it takes nothing
// more from the budget, and its counters are the budget's, by use.
func TestPool(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := New(1000, reg)
	p, err := b.Pool(100, 0.5, "pre-authentication frames", reg)
	if err != nil {
		t.Fatal(err)
	}
	if b.Idle() != 100 || p.Limit() != 100 {
		t.Fatalf("idle %d, pool %d", b.Idle(), p.Limit())
	}
	h, err := p.Frame(t.Context(), "10.0.0.1", 50, 0, UseKafkaPreAuth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Frame(t.Context(), "10.0.0.1", 1, 0, UseKafkaPreAuth); !errors.Is(err, ErrExhausted) {
		t.Fatalf("an owner beyond its share of the pool: %v", err)
	}
	h2, err := p.Frame(t.Context(), "10.0.0.2", 50, 0, UseKafkaPreAuth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Frame(t.Context(), "10.0.0.3", 1, 0, UseKafkaPreAuth); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a full pool: %v", err)
	}
	if b.Used() != 100 || b.Peak() != 100 {
		t.Fatalf("the budget moved with the pool: used %d, peak %d", b.Used(), b.Peak())
	}
	if got := testutil.ToFloat64(b.m.refused.WithLabelValues(string(UseKafkaPreAuth))); got != 2 {
		t.Fatalf("pool refusals in the budget's counter: %v", got)
	}
	h.Release()
	h2.Release()
	if p.Used() != 0 {
		t.Fatalf("pool used %d", p.Used())
	}
	if _, err := b.Pool(901, 0.5, "too much", nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a pool beyond the budget: %v", err)
	}
	var none *Budget
	if p, err := none.Pool(10, 1, "x", nil); err != nil || p.Limit() != 10 {
		t.Fatalf("a pool of no budget: %v", err)
	}
}

// BenchmarkInbound is what the per-owner share adds to a request's reservation: a
// body or frame reserved, arrived and released with an owner, against the same
// without one (what every request did before the share).
//
//	go test ./internal/membudget -run '^$' -bench '^BenchmarkInbound$' -count 8
func BenchmarkInbound(b *testing.B) {
	bud := New(1<<30, nil)
	ctx := context.Background()
	for _, owner := range []string{"", "User:app"} {
		name := "owner"
		if owner == "" {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h := bud.NewHold()
				if err := h.ReserveInbound(ctx, owner, 1<<20, time.Second, UseProduce); err != nil {
					b.Fatal(err)
				}
				h.Arrived()
				h.Release()
			}
		})
	}
}
