package writer

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

// The flush rule for a buffer that is not full: it leaves once its oldest request has
// waited Linger and a slot would take it at once; before that it says how long to wait;
// lingered with every slot busy it stays (and goes on filling) until a slot frees.
func TestLingerCut(t *testing.T) {
	const linger = 50 * time.Millisecond
	for _, tc := range []struct {
		waited   time.Duration
		slotFree bool
		cut      bool
		wait     time.Duration
	}{
		{0, true, false, linger},
		{20 * time.Millisecond, true, false, 30 * time.Millisecond},
		{20 * time.Millisecond, false, false, 30 * time.Millisecond},
		{linger, true, true, 0},
		{time.Second, true, true, 0},
		{linger, false, false, 0},      // lingered, no slot: keep filling
		{time.Second, false, false, 0}, // however long: it could not leave anyway
	} {
		cut, wait := lingerCut(tc.waited, linger, tc.slotFree)
		if cut != tc.cut || wait != tc.wait {
			t.Errorf("lingerCut(waited %s, slot free %v) = %v, %s; want %v, %s", tc.waited, tc.slotFree, cut, wait, tc.cut, tc.wait)
		}
	}
}

// Requests that arrive while every in-flight slot is busy join one flush, cut when a
// slot frees, however long they have lingered: not one small flush each queued behind
// the busy ones.
func TestLingeredBufferFillsWhileSlotsBusy(t *testing.T) {
	one := req(rec(1, 1, 0, "", strings.Repeat("v", 1000)))
	h := start(t, Config{Linger: time.Nanosecond, MaxInflight: 1}, true)
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the harness's stop, which waits for the flush
	h.store.block = func(n int) {
		if n == 1 {
			<-gate
		}
	}
	chs := h.enqueueInOrder(t, one)
	testwait.Until(t, 20*time.Second, "the first flush's put to start", func() bool { puts, _, _ := h.store.counts(); return puts == 1 })
	chs = append(chs, h.enqueueInOrder(t, one, one, one)...)
	// Only Run's linger rule could cut them (they are far from MaxFlushBytes), and it
	// does not while the slot is busy.
	if got := h.w.flushesCut(); got != 1 {
		t.Fatalf("%d flushes cut with the only slot busy, want 1 (the three lingered requests wait for it together)", got)
	}
	if got := h.w.bufferedRequests(); got != 3 {
		t.Fatalf("%d requests buffered, want 3", got)
	}
	release()
	for _, c := range chs {
		mustOK(t, await(t, c))
	}
	if got := h.w.flushesCut(); got != 2 {
		t.Errorf("%d flushes, want 2: the first, then the three lingered requests together", got)
	}
	if puts, _, _ := h.store.counts(); puts != 2 {
		t.Errorf("%d puts, want 2", puts)
	}
}
