package catalogtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// testConcurrentHeartbeats runs many members at once, spread over several catalogs on
// one database, joining and leaving while they heartbeat as fast as they can. Each
// member records, per partition, when it started holding it (after the answer granting
// it) and when it stopped (before the heartbeat acknowledging its revocation), on one
// counter shared by all: no two members' intervals for a partition may overlap, and at
// the end every partition has exactly one owner and the counts are balanced.
func testConcurrentHeartbeats(t *testing.T, open func(t *testing.T) GroupCatalog) {
	const (
		catalogs   = 3
		members    = 12
		partitions = 16
	)
	cats := make([]GroupCatalog, catalogs)
	for i := range cats {
		cats[i] = open(t)
	}
	tp := seedGroupTopic(t, cats[0], partitions)
	g := Name(t, "g")
	h := &holdings{intervals: map[int32][]interval{}}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, members)
	final := make([]*member, members)
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := newMember(cats[i%catalogs], g, fmt.Sprintf("m%02d", i), tp.Name)
			final[i] = m
			// Members join staggered; the first three leave half-way and join again.
			time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			if err := h.run(ctx, m, tp.Name, i < 3); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h.checkNoOverlap(t, partitions)
	// Settle and check the end state.
	settle(t, final...)
	checkBalanced(t, final, tp.Name, partitions)
	t.Logf("%d members, %d holding intervals over %d partitions", members, sumLen(h.intervals), partitions)
}

// interval is one member's holding of a partition, on the holdings' clock.
type interval struct {
	member     string
	start, end int64
}

// holdings records the members' holding intervals on one shared counter.
type holdings struct {
	clock     atomic.Int64
	mu        sync.Mutex
	intervals map[int32][]interval
}

// stop ends, at the clock's next tick, the holdings in started that keep says no to.
func (h *holdings) stop(id string, started map[int32]int64, keep func(int32) bool) {
	at := h.clock.Add(1)
	for p, s := range started {
		if keep(p) {
			continue
		}
		h.mu.Lock()
		h.intervals[p] = append(h.intervals[p], interval{id, s, at})
		h.mu.Unlock()
		delete(started, p)
	}
}

// run heartbeats m as fast as it can until ctx ends, recording what it holds; a member
// that leaves does so once, half-way, and joins again.
func (h *holdings) run(ctx context.Context, m *member, topic string, leaves bool) error {
	none := func(int32) bool { return false }
	started := map[int32]int64{}
	left := false
	for ctx.Err() == nil {
		if leaves && !left && h.clock.Load() > 0 && time.Until(deadlineOf(ctx)) < 1500*time.Millisecond {
			left = true
			h.stop(m.id, started, none)
			m.epoch, m.owned = catalog.LeaveEpoch, nil
			if _, err := m.heartbeat(context.Background()); err != nil {
				return fmt.Errorf("leave of %s: %w", m.id, err)
			}
			m.epoch = 0
			continue
		}
		// Stop what the last answer revoked before acknowledging it.
		now := map[int32]bool{}
		for _, p := range partitionsOf(m.owned, topic) {
			now[p] = true
		}
		h.stop(m.id, started, func(p int32) bool { return now[p] })
		if _, err := m.heartbeat(context.Background()); err != nil {
			return fmt.Errorf("heartbeat of %s: %w", m.id, err)
		}
		at := h.clock.Add(1)
		for _, p := range partitionsOf(m.owned, topic) {
			if _, ok := started[p]; !ok {
				started[p] = at
			}
		}
	}
	h.stop(m.id, started, none)
	return nil
}

// checkNoOverlap fails when two members held a partition at once, or when a partition
// was never held.
func (h *holdings) checkNoOverlap(t *testing.T, partitions int) {
	t.Helper()
	for p, ivs := range h.intervals {
		slices.SortFunc(ivs, func(a, b interval) int { return int(a.start - b.start) })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].start < ivs[i-1].end {
				t.Fatalf("partition %d: %s held it during [%d, %d] and %s from %d", p, ivs[i-1].member, ivs[i-1].start, ivs[i-1].end, ivs[i].member, ivs[i].start)
			}
		}
	}
	if len(h.intervals) != partitions {
		t.Fatalf("only %d of %d partitions were ever held", len(h.intervals), partitions)
	}
}

// checkBalanced fails unless every partition has exactly one owner among ms and their
// counts differ by at most one.
func checkBalanced(t *testing.T, ms []*member, topic string, partitions int) {
	t.Helper()
	owners := map[int32]string{}
	counts := map[string]int{}
	for _, m := range ms {
		for _, p := range partitionsOf(m.owned, topic) {
			if o, ok := owners[p]; ok {
				t.Fatalf("partition %d owned by %s and %s", p, o, m.id)
			}
			owners[p] = m.id
			counts[m.id]++
		}
	}
	if len(owners) != partitions {
		t.Fatalf("%d partitions owned at the end, want %d", len(owners), partitions)
	}
	lo, hi := partitions, 0
	for _, m := range ms {
		lo, hi = min(lo, counts[m.id]), max(hi, counts[m.id])
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced: %v", counts)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func sumLen[K comparable, V any](m map[K][]V) int {
	n := 0
	for v := range maps.Values(m) {
		n += len(v)
	}
	return n
}
