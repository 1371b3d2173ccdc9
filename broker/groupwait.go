package broker

import (
	"context"
	"errors"
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

// awaitClassic holds a request on group until ready says it is answered: it reads the
// group after each wake, deadline or poll, applying a due transition first.
func (b *Broker) awaitClassic(ctx context.Context, group string, wake <-chan struct{}, ready func(g *catalog.ClassicGroup) (bool, error)) error {
	for {
		g, now, err := b.d.Classic.ClassicGroup(ctx, group)
		if err == nil && g.Due(now) {
			g, now, err = b.d.Classic.TickClassic(ctx, group)
		}
		if errors.Is(err, catalog.ErrNotClassicGroup) {
			// Deleted, or turned into a consumer group, while held: the member is gone.
			return groupError("join group", catalog.ErrUnknownMember)
		}
		if err != nil {
			return groupError("join group", err)
		}
		if done, err := ready(g); done {
			return err
		}
		delay := classicPoll
		if next := g.NextDeadline(); !next.IsZero() {
			// A few ms past it: the database clock must have reached it.
			delay = min(delay, max(next.Sub(now)+5*time.Millisecond, time.Millisecond))
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
