// Package membudget accounts a node's large allocations against one memory budget
// (docs/design.md "Memory"): request bodies, buffered records and the objects they
// become, blocks read into the cache, responses being written, Kafka frames. Whatever
// is large is reserved here before it is allocated and released when it is no longer
// referenced, so that no client — overload, slow readers, thousands of streams — can
// take the node past its limit: when the budget is spent, a reservation waits (for a
// bounded time) or is refused, and the caller answers with back-pressure instead of
// allocating.
//
// The budget is a fraction of the process's memory limit (GOMEMLIMIT), the rest being
// the collector's headroom and what is too small to account (goroutines, connection
// buffers, catalog rows). Sub-budgets held for the node's whole life, such as the block
// cache, are carved out once (Carve); they make the idle level, the reserved bytes of a
// node that serves nothing, to which the budget returns once every request is done.
//
// A nil *Budget accounts nothing and grants everything: roles built without one (unit
// tests, tools) need no special case.
package membudget

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"
)

var (
	// ErrExhausted: the budget had no room within the wait allowed; retry later.
	ErrExhausted = errors.New("memory budget exhausted")
	// ErrTooLarge: the reservation is larger than the budget could ever grant.
	ErrTooLarge = errors.New("larger than the memory budget")
)

// Use names what a reservation is for, in the metrics.
type Use string

// The uses of a node's budget.
const (
	UseProduce Use = "produce" // request bodies being read or waiting for their flush
	UseWriter  Use = "writer"  // buffered records and the objects they become
	UseCache   Use = "cache"   // blocks being read into the cache, or queued for its disk tier
	UseFetch   Use = "fetch"   // fetch and SSE responses being built and written
	UseKafka   Use = "kafka"   // Kafka request frames and their responses
	// UseKafkaPreAuth: Kafka frames before authentication, from the listener's pool
	// (Pool), never from the node's budget.
	UseKafkaPreAuth Use = "kafka_preauth"
)

// Budget is a node's memory budget. It is safe for concurrent use.
type Budget struct {
	limit int64
	share float64 // of limit-idle, per owner, in bytes still arriving (share.go)
	m     *metrics

	mu      sync.Mutex
	used    int64
	idle    int64
	peak    int64
	over    int64     // bytes released without a reservation (Overreleased)
	waiters list.List // *waiter, first come first served
	// Per owner, bytes still arriving (share.go), and a channel closed when they fall,
	// made while someone waits for that.
	owners map[string]int64
	wakes  map[string]chan struct{}
}

type waiter struct {
	n       int64
	ready   chan struct{} // closed once granted
	granted bool
}

// New returns a budget of limit bytes. reg may be nil.
func New(limit int64, reg prometheus.Registerer) *Budget {
	b := &Budget{limit: limit, share: OwnerShare, owners: map[string]int64{}, wakes: map[string]chan struct{}{}}
	b.m = newMetrics(reg, b, true)
	return b
}

// Limit is the budget's size.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used is what is reserved now, carve-outs included.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Idle is the idle level: the carve-outs, which a node serving nothing still holds.
func (b *Budget) Idle() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.idle
}

// Peak is the most ever reserved at once.
func (b *Budget) Peak() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Overreleased is how many bytes were released beyond what was reserved: an accounting
// bug when not 0.
func (b *Budget) Overreleased() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

// Carve reserves n bytes for the node's whole life (a sub-budget held whole, such as
// the block cache) and raises the idle level by them. It fails when they do not fit.
func (b *Budget) Carve(n int64, what string) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return fmt.Errorf("membudget: %s needs %d bytes, and %d of the %d-byte budget are taken: %w", what, n, b.used, b.limit, ErrTooLarge)
	}
	b.grantLocked(n)
	b.idle += n
	return nil
}

// TryReserve reserves n bytes if they fit now and no reservation is waiting ahead.
func (b *Budget) TryReserve(n int64, use Use) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	ok := b.waiters.Len() == 0 && b.used+n <= b.limit
	if ok {
		b.grantLocked(n)
	}
	b.mu.Unlock()
	if !ok {
		b.m.refused.WithLabelValues(string(use)).Inc()
	}
	return ok
}

// GrowShare is how much of the budget a reservation that only grows a request's answer
// may fill (TryGrow): the rest stays for the first bytes of other requests, so that a
// few clients asking for large answers — and not reading them — cannot take all of
// it, and every other client still gets an answer, smaller.
const GrowShare = 0.75

// TryGrow is TryReserve for bytes a request can do without (more of an answer that
// already has some): it succeeds only while the budget stays within GrowShare.
func (b *Budget) TryGrow(n int64, use Use) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	ok := b.waiters.Len() == 0 && b.used+n <= b.idle+int64(GrowShare*float64(b.limit-b.idle))
	if ok {
		b.grantLocked(n)
	}
	b.mu.Unlock()
	return ok
}

// Reserve reserves n bytes, waiting up to wait for room, in turn with other waiting
// reservations. It returns ErrExhausted when wait passes first, ErrTooLarge at once
// when n could never fit beside the carve-outs, or ctx's error.
func (b *Budget) Reserve(ctx context.Context, n int64, wait time.Duration, use Use) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	if n > b.limit-b.idle {
		b.mu.Unlock()
		b.m.refused.WithLabelValues(string(use)).Inc()
		return fmt.Errorf("membudget: %d bytes for %s, above the %d bytes the budget has beside its standing reservations: %w", n, use, b.limit-b.idle, ErrTooLarge)
	}
	if b.waiters.Len() == 0 && b.used+n <= b.limit {
		b.grantLocked(n)
		b.mu.Unlock()
		return nil
	}
	if wait <= 0 {
		b.mu.Unlock()
		b.m.refused.WithLabelValues(string(use)).Inc()
		return fmt.Errorf("membudget: %d bytes for %s: %w", n, use, ErrExhausted)
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()
	b.m.waits.WithLabelValues(string(use)).Inc()

	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-t.C:
		err = fmt.Errorf("membudget: %d bytes for %s: none free within %s: %w", n, use, wait, ErrExhausted)
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	if w.granted { // granted while timing out: keep it
		b.mu.Unlock()
		return nil
	}
	b.waiters.Remove(e)
	b.wakeLocked() // a large waiter leaving may let smaller ones behind it in
	b.mu.Unlock()
	b.m.refused.WithLabelValues(string(use)).Inc()
	return err
}

// Release gives back n bytes reserved before.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < b.idle {
		// A release without its reservation: an accounting bug, which tests catch
		// through Overreleased. Clamped, so the budget never grants more than it has.
		b.over += b.idle - b.used
		b.used = b.idle
	}
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *Budget) grantLocked(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// wakeLocked grants waiting reservations in order while the first one fits.
func (b *Budget) wakeLocked() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*waiter)
		if b.used+w.n > b.limit {
			return
		}
		b.waiters.Remove(e)
		b.grantLocked(w.n)
		w.granted = true
		close(w.ready)
	}
}

// Frame is the hook of a front end that reads length-prefixed requests (the Kafka
// listener): call it with a frame's declared size once the size is read and checked,
// before the frame's body is allocated or read. The frame is reserved in a new hold,
// counted against owner's share until it has arrived (ReserveInbound; the listener
// calls Arrived once the body is read), waiting up to wait (a listener that waits stops
// reading that connection: TCP pushes back on the client); the request's answer joins
// the hold (broker.FetchRequest.Memory for its fetches, its response buffer), and the
// listener releases it once the answer is written.
func (b *Budget) Frame(ctx context.Context, owner string, size int64, wait time.Duration, use Use) (*Hold, error) {
	h := b.NewHold()
	if err := h.ReserveInbound(ctx, owner, size, wait, use); err != nil {
		return nil, err
	}
	return h, nil
}

// Hold is the reservations of one request, released together once it is done. Its
// methods are safe for concurrent use; a Hold of a nil Budget accounts nothing.
type Hold struct {
	b  *Budget
	mu sync.Mutex
	n  int64
	// owner's share holds arriving of n until Arrived (ReserveInbound).
	owner    string
	arriving int64
}

// NewHold returns an empty hold on b.
func (b *Budget) NewHold() *Hold { return &Hold{b: b} }

// Reserve is Budget.Reserve, held until Release.
func (h *Hold) Reserve(ctx context.Context, n int64, wait time.Duration, use Use) error {
	if h == nil || h.b == nil {
		return nil
	}
	if err := h.b.Reserve(ctx, n, wait, use); err != nil {
		return err
	}
	h.add(n)
	return nil
}

// TryReserve is Budget.TryReserve, held until Release.
func (h *Hold) TryReserve(n int64, use Use) bool {
	if h == nil || h.b == nil {
		return true
	}
	if !h.b.TryReserve(n, use) {
		return false
	}
	h.add(n)
	return true
}

func (h *Hold) add(n int64) {
	if n <= 0 {
		return
	}
	h.mu.Lock()
	h.n += n
	h.mu.Unlock()
}

// TryGrow is Budget.TryGrow, held until Release.
func (h *Hold) TryGrow(n int64, use Use) bool {
	if h == nil || h.b == nil {
		return true
	}
	if !h.b.TryGrow(n, use) {
		return false
	}
	h.add(n)
	return true
}

// Held is what the hold has reserved.
func (h *Hold) Held() int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Release gives back everything held (Arrived included); the hold may be used again.
func (h *Hold) Release() {
	if h == nil {
		return
	}
	h.Arrived()
	h.mu.Lock()
	n := h.n
	h.n = 0
	h.mu.Unlock()
	h.b.Release(n)
}

type metrics struct {
	refused *prometheus.CounterVec
	waits   *prometheus.CounterVec
	share   *prometheus.CounterVec
}

// newMetrics registers the budget's counters, and with gauges its gauges (a pool's
// share the node's counters, labelled by use, and has no gauges).
func newMetrics(reg prometheus.Registerer, b *Budget, gauges bool) *metrics {
	m := &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_memory_refusals_total",
			Help: "Reservations against the node's memory budget refused (no room within the wait allowed), by use.",
		}, []string{"use"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_memory_waits_total",
			Help: "Reservations against the node's memory budget that had to wait for room, by use.",
		}, []string{"use"}),
	}
	m.share = prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_memory_share_waits_total",
		Help: "Reservations of request bodies or Kafka frames still to arrive that had to wait, or were refused, because their principal (before Kafka authentication: their address) held its share of the budget in such bytes, by use.",
	}, []string{"use"}))
	m.refused = prom.Register(reg, m.refused)
	m.waits = prom.Register(reg, m.waits)
	if reg != nil && gauges {
		// Gauges read the budget at scrape time. One node per registry: a second budget
		// on the same registry (tests) keeps its gauges unregistered.
		for _, g := range []prometheus.Collector{
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_memory_budget_bytes",
				Help: "The node's memory budget: the accounted share of --memory-limit."}, func() float64 { return float64(b.Limit()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_memory_reserved_bytes",
				Help: "Bytes reserved against the node's memory budget now, standing reservations (the block cache) included."}, func() float64 { return float64(b.Used()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_memory_reserved_peak_bytes",
				Help: "The most bytes ever reserved at once against the node's memory budget."}, func() float64 { return float64(b.Peak()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_memory_idle_bytes",
				Help: "The memory budget's idle level: its standing reservations."}, func() float64 { return float64(b.Idle()) }),
		} {
			_ = reg.Register(g)
		}
	}
	return m
}

// Sibling is a new, empty hold on h's budget (nil for a nil hold): for a request that
// reserves a stretch of work at a time and releases each before the next.
func (h *Hold) Sibling() *Hold {
	if h == nil {
		return nil
	}
	return &Hold{b: h.b}
}
