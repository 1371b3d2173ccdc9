package membudget

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OwnerShare is the most of a budget, beside its standing reservations, that one owner
// — a principal, or before Kafka authentication a client's address — may hold at once
// in bytes still arriving: request bodies and Kafka frames declared but not yet read.
// Such bytes are reserved by their declared size before a byte is read, so a client
// that declares large requests and then stalls holds what it declared until a timeout
// ends it; the share keeps one client doing that from taking the budget from everyone
// else. Bytes that have arrived are the request's, accounted as before. An owner that
// holds nothing may always reserve, so a request larger than the share is slowed,
// never starved.
const OwnerShare = 0.25

// ReserveInbound is Reserve for n bytes still to arrive from owner (a request body or a
// frame declared, not yet read): they count against owner's share (OwnerShare) as well
// as the budget, until Arrived or Release. It waits up to wait in all, first for the
// share, then for the budget, so a reservation held back by its owner's share never
// stands in the budget's queue ahead of other owners'. An empty owner has no share
// (a node without authentication, where every client is the same anonymous caller).
// A hold counts one owner's bytes at a time: reserving for another first ends the
// first one's count (as Arrived).
func (h *Hold) ReserveInbound(ctx context.Context, owner string, n int64, wait time.Duration, use Use) error {
	if h == nil || h.b == nil || n <= 0 {
		return nil
	}
	if owner == "" {
		return h.Reserve(ctx, n, wait, use)
	}
	start := time.Now()
	if err := h.b.reserveShare(ctx, owner, n, start.Add(wait), use); err != nil {
		return err
	}
	if err := h.b.Reserve(ctx, n, wait-time.Since(start), use); err != nil {
		h.b.releaseShare(owner, n)
		return err
	}
	h.mu.Lock()
	prev, was := h.owner, h.arriving
	if prev != owner {
		h.owner, h.arriving = owner, 0
	} else {
		was = 0
	}
	h.n += n
	h.arriving += n
	h.mu.Unlock()
	if was > 0 {
		h.b.releaseShare(prev, was)
	}
	return nil
}

// Arrived says the bytes reserved with ReserveInbound have been read (or never will
// be): they stop counting against their owner's share and stay reserved in the budget,
// the request's, until Release.
func (h *Hold) Arrived() {
	if h == nil || h.b == nil {
		return
	}
	h.mu.Lock()
	owner, n := h.owner, h.arriving
	h.arriving = 0
	h.mu.Unlock()
	if n > 0 {
		h.b.releaseShare(owner, n)
	}
}

// ShareOf is what one owner may hold in bytes still arriving (OwnerShare of what the
// standing reservations leave).
func (b *Budget) ShareOf() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.shareLocked()
}

func (b *Budget) shareLocked() int64 { return int64(b.share * float64(b.limit-b.idle)) }

// Arriving is what owner holds now in bytes still arriving.
func (b *Budget) Arriving(owner string) int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owners[owner]
}

// reserveShare counts n bytes against owner's share, waiting until deadline for room.
func (b *Budget) reserveShare(ctx context.Context, who string, n int64, deadline time.Time, use Use) error {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	counted := false
	b.mu.Lock()
	for {
		held := b.owners[who]
		if held == 0 || held+n <= b.shareLocked() {
			b.owners[who] = held + n
			b.mu.Unlock()
			return nil
		}
		// A channel to wait on is made only when someone waits: the common case, an
		// owner within its share, allocates nothing.
		wake := b.wakes[who]
		if wake == nil {
			wake = make(chan struct{})
			b.wakes[who] = wake
		}
		share := b.shareLocked()
		b.mu.Unlock()
		if !counted {
			counted = true
			b.m.share.WithLabelValues(string(use)).Inc()
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			b.m.refused.WithLabelValues(string(use)).Inc()
			return fmt.Errorf("membudget: %d bytes for %s: %s holds its share (%d bytes) in bytes still arriving: %w", n, use, who, share, ErrExhausted)
		}
		if t == nil {
			t = time.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			b.m.refused.WithLabelValues(string(use)).Inc()
			return ctx.Err()
		}
		b.mu.Lock()
	}
}

func (b *Budget) releaseShare(who string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if held := b.owners[who] - n; held > 0 {
		b.owners[who] = held
	} else {
		delete(b.owners, who)
	}
	if wake := b.wakes[who]; wake != nil {
		close(wake)
		delete(b.wakes, who)
	}
}

// Pool carves n bytes out of b for the node's whole life and returns them as a budget
// of their own, for reservations that must never take b's room nor queue behind its
// reservations: the Kafka listener's frames before authentication, from clients not
// yet known. One owner may hold share of the pool in bytes still arriving (b's owners
// hold OwnerShare of b). A nil b gives a pool that only it accounts. The pool's
// counters are b's (labelled by use); it has no gauges.
func (b *Budget) Pool(n int64, share float64, what string, reg prometheus.Registerer) (*Budget, error) {
	if err := b.Carve(n, what); err != nil {
		return nil, err
	}
	p := &Budget{limit: n, share: share, owners: map[string]int64{}, wakes: map[string]chan struct{}{}}
	p.m = newMetrics(reg, p, false)
	return p, nil
}
