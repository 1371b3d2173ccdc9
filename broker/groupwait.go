package broker

import (
	"context"
	"sync"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Held JoinGroup and SyncGroup requests (docs/design.md "Kafka front end"). A classic
// request that must wait for other members is held by the node it reached: it reads the
// group from the catalog whenever the group changes — a notification from any node
// (LISTEN/NOTIFY on Postgres, in-process on SQLite), relayed by RunGroups — or its next
// deadline passes (then it applies the due transition itself, in one transaction under
// the group's lock), and at least every classicPoll in case a notification was lost. A
// node that dies drops the requests it held; their clients time out and join again.

// classicPoll bounds how long a held request goes without reading its group.
const classicPoll = time.Second

// groupWaits wakes the held requests of a group.
type groupWaits struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newGroupWaits() *groupWaits {
	return &groupWaits{subs: map[string]map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives after each change of group, and the
// function that ends the subscription.
func (w *groupWaits) subscribe(group string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.subs[group] == nil {
		w.subs[group] = map[chan struct{}]struct{}{}
	}
	w.subs[group][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.subs[group], ch)
		if len(w.subs[group]) == 0 {
			delete(w.subs, group)
		}
		w.mu.Unlock()
	}
}

// notify wakes the held requests of group; it never blocks.
func (w *groupWaits) notify(group string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs[group] {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}

// RunGroups relays the catalog's classic-group notifications to the requests held on
// this node, until ctx ends. Without it held requests still progress, by polling.
func (b *Broker) RunGroups(ctx context.Context) error {
	if b.d.Classic == nil {
		<-ctx.Done()
		return nil
	}
	return b.d.Classic.ListenGroups(ctx, b.waits.notify)
}

// awaitClassic holds a request on group until poll says it is answered (the catalog
// applies a due transition first): after each wake, at the group's next deadline, and
// at least every classicPoll.
func (b *Broker) awaitClassic(ctx context.Context, wake <-chan struct{}, poll func(ctx context.Context) (catalog.ClassicPoll, error)) error {
	for {
		p, err := poll(ctx)
		if err != nil || p.Done {
			return err
		}
		delay := classicPoll
		if p.Wait > 0 {
			// A few ms past it: the database clock must have reached it.
			delay = min(delay, p.Wait+5*time.Millisecond)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}
