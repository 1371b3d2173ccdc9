package reader

import (
	"context"
	"time"
)

// WatchPartition names a partition a Watch waits on, and the offset it waits past.
type WatchPartition struct {
	TopicID   int64
	Partition int32
	Offset    int64
}

// Watch is a long-poll over several partitions at once (a Kafka fetch asks for many): it
// is woken when a commit notification shows any of them holding data at or past its
// offset. Notifications are best effort, so Wait also returns at the poll interval: the
// caller then looks again.
type Watch struct {
	r    *Reader
	ws   []*waiter
	wake chan string
}

// Watch starts watching ps. Start it before the first look at the partitions, so that a
// commit landing between that look and Wait still wakes it; Stop it when done.
func (r *Reader) Watch(ps []WatchPartition) *Watch {
	w := &Watch{r: r, wake: make(chan string, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ps {
		k := partKey{p.TopicID, p.Partition}
		wt := &waiter{key: k, offset: p.Offset, wake: w.wake}
		ws := r.waiters[k]
		if ws == nil {
			ws = make(map[*waiter]struct{})
			r.waiters[k] = ws
		}
		ws[wt] = struct{}{}
		w.ws = append(w.ws, wt)
	}
	return w
}

// Wait returns when a watched partition may have data (true), at the next poll (true:
// look again), at deadline (false), or when ctx ends (its error).
func (w *Watch) Wait(ctx context.Context, deadline time.Time) (bool, error) {
	d := time.Until(deadline)
	if d <= 0 {
		return false, nil
	}
	timer := time.NewTimer(min(d, jitter(w.r.cfg.PollInterval)))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case by := <-w.wake:
		if by == "notify" {
			w.r.m.wakeupsNotify.Inc()
		}
		return true, nil
	case <-timer.C:
		return time.Now().Before(deadline), nil
	}
}

// Stop ends the watch.
func (w *Watch) Stop() {
	for _, wt := range w.ws {
		w.r.removeWaiter(wt)
	}
}
