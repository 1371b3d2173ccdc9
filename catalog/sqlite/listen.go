package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/strata-io/strata/catalog"
)

// listenBuffer is how many commits a listener may fall behind before it misses some.
const listenBuffer = 256

var errClosed = errors.New("sqlite: catalog closed")

// hub broadcasts commit notifications in-process. SQLite has no LISTEN; every commit on
// this file that matters to this process's readers went through this Catalog. (Commits
// by another process on the same file are not seen: readers poll.)
type hub struct {
	log    *slog.Logger
	mu     sync.Mutex
	subs   map[chan []catalog.Watermark]struct{}
	closed chan struct{}
}

func newHub(log *slog.Logger) *hub {
	return &hub{log: log, subs: map[chan []catalog.Watermark]struct{}{}, closed: make(chan struct{})}
}

// publish never blocks the committer: a listener whose buffer is full misses this
// commit and catches up by polling.
func (h *hub) publish(ws []catalog.Watermark) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ws:
		default:
			h.log.Debug("dropped a commit notification for a slow listener", "partitions", len(ws))
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
}

// Listen calls fn for every watermark this Catalog commits until ctx ends (then it
// returns nil) or the Catalog is closed (an error).
func (c *Catalog) Listen(ctx context.Context, fn func(catalog.Watermark)) error {
	ch := make(chan []catalog.Watermark, listenBuffer)
	c.hub.mu.Lock()
	c.hub.subs[ch] = struct{}{}
	c.hub.mu.Unlock()
	defer func() {
		c.hub.mu.Lock()
		delete(c.hub.subs, ch)
		c.hub.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.hub.closed:
			return errClosed
		case ws := <-ch:
			for _, w := range ws {
				fn(w)
			}
		}
	}
}
