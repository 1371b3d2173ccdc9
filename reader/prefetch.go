package reader

import (
	"context"
	"sync/atomic"

	"github.com/strata-io/strata/catalog"
)

// prefetcher loads, in the background, the bytes a sequential reader will ask for
// next, so its next fetch finds them cached instead of waiting for a GET: a consumer
// reading a partition from the start overlaps the object store's latency with its
// own processing. It reads through the block cache, so a prefetch merges with fetches
// of the same blocks, never GETs a block twice, and costs no GET a sequential reader
// would not have caused anyway (at most one per reader that stops reading).
//
// Work comes through a small queue served by one goroutine that Reader.Run owns;
// without Run (Lambda, where nothing runs between invocations) offers are dropped.
type prefetcher struct {
	cache   *blockCache
	m       *metrics
	queue   chan prefetchReq
	running atomic.Bool
}

type prefetchReq struct {
	obj          string
	objSize, off int64
	n            int64
}

// prefetchQueue bounds waiting prefetches: past it, readers are outrunning the store
// and a prefetch would only compete with their own GETs.
const prefetchQueue = 8

func newPrefetcher(c *blockCache, m *metrics) *prefetcher {
	return &prefetcher{cache: c, m: m, queue: make(chan prefetchReq, prefetchQueue)}
}

// offer queues req unless it is cached already, the queue is full, or nothing runs it.
func (p *prefetcher) offer(req prefetchReq) {
	if p == nil || !p.running.Load() || req.n <= 0 || p.cache.cached(req.obj, req.off, req.n) {
		return
	}
	select {
	case p.queue <- req:
	default:
		p.m.prefetches.WithLabelValues("dropped").Inc()
	}
}

// run serves the queue until ctx ends.
func (p *prefetcher) run(ctx context.Context) {
	p.running.Store(true)
	defer p.running.Store(false)
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-p.queue:
			if p.cache.cached(req.obj, req.off, req.n) {
				continue
			}
			if _, err := p.cache.read(ctx, req.obj, req.objSize, req.off, req.n); err != nil {
				// The fetch that needs these bytes will try again and report it.
				p.m.prefetches.WithLabelValues("error").Inc()
				continue
			}
			p.m.prefetches.WithLabelValues("ok").Inc()
		}
	}
}

// prefetchAfter offers what follows a fetch that stopped in chunks[i] after the batch
// ending at byte end: the next block's worth of the same chunk, or, when the fetch
// ended with the chunk, the head of the next chunk (the whole of it when it is small
// enough to be read whole, as chunkBatches reads it). hw is the lookup's high
// watermark: nothing at or beyond it is committed.
func (r *Reader) prefetchAfter(chunks []catalog.Chunk, i int, end, hw int64) {
	if r.prefetch == nil {
		return
	}
	ch := chunks[i]
	if chunkEnd := ch.Pos + ch.Len; end < chunkEnd {
		r.prefetch.offer(prefetchReq{obj: ch.SegmentKey, objSize: ch.SegmentSize, off: end, n: min(r.cfg.BlockSize, chunkEnd-end)})
		return
	}
	if i+1 >= len(chunks) {
		return
	}
	next := chunks[i+1]
	if next.LastOffset >= hw {
		return
	}
	n := next.Len
	if next.RealOffsets || n > r.narrowAbove {
		n = min(n, r.cfg.BlockSize) // read through the footer: only its first batches are sure to be wanted
	}
	r.prefetch.offer(prefetchReq{obj: next.SegmentKey, objSize: next.SegmentSize, off: next.Pos, n: n})
}
