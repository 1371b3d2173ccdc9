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
	r.lastWaiter.Store(time.Now().UnixNano())
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

// Written is told of an object this node's writer has just put, before its commit
// (writer.Config.Written): while long-polls or tails read this node at the high
// watermark (one waited in the last tailWindow), its bytes go into the block cache, so
// that they read what is about to be committed without a GET. Otherwise it costs
// nothing: fetches from behind the high watermark read through the cache as ever.
func (r *Reader) Written(key string, parts [][]byte) {
	if last := r.lastWaiter.Load(); last != 0 && time.Since(time.Unix(0, last)) < tailWindow {
		r.cache.offer(key, parts)
	}
}

// tailWindow is how long after the last long-poll Written still caches objects: a
// tail busy sending a batch is not waiting at the moment of a flush, but will be.
const tailWindow = 10 * time.Second
