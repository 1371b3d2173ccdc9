package writer

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/strata-io/strata/objstore"
)

// Hedged PUTs: object stores have long tails (a PUT now and then takes many times the
// median), and every flush behind a slow one waits for it to commit in order. Once a
// PUT has taken longer than HedgeQuantile of the recent ones, the same bytes go again
// under a fresh key; the first to succeed is the one committed, the other is cancelled
// (or, if it landed meanwhile, left to the orphan sweep like any object never
// committed). A second PUT of the same key could not help: create-only PUTs of one
// key refuse each other while the first is in flight.

// Hedging defaults.
const (
	// DefaultHedgeQuantile is the PUT latency quantile past which a flush hedges.
	DefaultHedgeQuantile = 0.95
	// hedgeWindow is how many recent PUT latencies the quantile is taken over, and
	// hedgeMinSamples how many it needs before any hedge.
	hedgeWindow     = 512
	hedgeMinSamples = 64
	// hedgeFloor is the least delay before a hedge: below it a second PUT saves too
	// little to pay for.
	hedgeFloor = 20 * time.Millisecond
	// hedgePUTs is the PUTs that earn one hedge and hedgeBurst the most hedges saved
	// up: over time at most one PUT in twenty is hedged, what the default quantile
	// (0.95) hedges while latencies hold still.
	//
	// A quantile alone hedges whatever is slow. When the store is slow for every PUT
	// (overloaded, not a tail) that sent it more PUTs just when it could least take
	// them: the bench's half-load phase saw 40 hedges in 230 PUTs during a stall of the
	// store, and a PUT p99 of 365 ms. And the quantile is of the recent PUTs, so while
	// they grow slower it hedges more than 5%: with one in ten, the first budget, the
	// bench's maximum-load phases hedged 7 to 8.5% of their PUTs, taking PUTs per GiB
	// past 1.1x the least.
	hedgePUTs  = 20
	hedgeBurst = 10
)

// hedger keeps the recent PUT latencies and the hedges not yet spent.
type hedger struct {
	q      float64 // 0: never hedge
	mu     sync.Mutex
	ring   []time.Duration
	next   int
	credit int // PUTs' credit toward hedges: hedgePUTs buy one, at most hedgeBurst saved
}

func newHedger(q float64) *hedger { return &hedger{q: q, credit: hedgeBurst * hedgePUTs} }

// earn credits one PUT toward the hedge budget.
func (h *hedger) earn() {
	h.mu.Lock()
	h.credit = min(hedgeBurst*hedgePUTs, h.credit+1)
	h.mu.Unlock()
}

// spend takes one hedge from the budget; false: none left, do not hedge.
func (h *hedger) spend() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.credit < hedgePUTs {
		return false
	}
	h.credit -= hedgePUTs
	return true
}

func (h *hedger) observe(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) < hedgeWindow {
		h.ring = append(h.ring, d)
		return
	}
	h.ring[h.next] = d
	h.next = (h.next + 1) % hedgeWindow
}

// delay answers how long a PUT may take before it is hedged; ok false: do not hedge
// (off, or too few samples yet).
func (h *hedger) delay() (time.Duration, bool) {
	if h.q <= 0 {
		return 0, false
	}
	h.mu.Lock()
	if len(h.ring) < hedgeMinSamples {
		h.mu.Unlock()
		return 0, false
	}
	s := slices.Clone(h.ring)
	h.mu.Unlock()
	slices.Sort(s)
	return max(s[min(len(s)-1, int(h.q*float64(len(s))))], hedgeFloor), true
}

// put stores obj under a new key, hedged, and answers the key stored and the PUT
// requests it took (2 when it hedged: the object store bills both). It returns only
// when no PUT of obj is in flight any more, so the caller may release obj's buffers.
func (w *Writer) put(ctx context.Context, now time.Time, obj object) (key string, puts int, err error) {
	key = w.newKey(now)
	start := time.Now()
	w.hedge.earn()
	after, hedge := w.hedge.delay()
	if !hedge {
		err := objstore.PutPartsCRC32C(ctx, w.store, key, obj.parts, obj.crc)
		if err == nil {
			w.hedge.observe(time.Since(start))
		}
		return key, 1, err
	}
	type result struct {
		key string
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, 2)
	send := func(k string) {
		go func() { results <- result{k, objstore.PutPartsCRC32C(ctx, w.store, k, obj.parts, obj.crc)} }()
	}
	send(key)
	timer := time.NewTimer(after)
	defer timer.Stop()
	running, puts := 1, 1
	var first error
	for running > 0 {
		select {
		case r := <-results:
			running--
			if r.err == nil {
				w.hedge.observe(time.Since(start))
				if r.key != key {
					w.m.hedges.WithLabelValues("won").Inc()
				}
				cancel()
				for ; running > 0; running-- {
					<-results // the other is cancelled: wait for it to let go of obj
				}
				return r.key, puts, nil
			}
			if first == nil {
				first = r.err
			}
		case <-timer.C:
			if running == 1 && first == nil && !w.hedge.spend() {
				w.m.hedges.WithLabelValues("over_budget").Inc()
			} else if running == 1 && first == nil {
				w.m.hedges.WithLabelValues("sent").Inc()
				send(w.newKey(now))
				running++
				puts++
			}
		}
	}
	return key, puts, first
}
