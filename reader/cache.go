package reader

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/segment"
)

// blockKey names one cache block: the idx-th BlockSize-aligned range of an object.
// Objects are immutable and their keys never reused, so a block never goes stale.
type blockKey struct {
	obj string
	idx int64
}

type cached struct {
	key  blockKey
	data []byte
}

// load is one block being fetched. Whoever created it (the leader) completes it;
// others needing the block meanwhile (followers) wait on done instead of sending their
// own GET.
type load struct {
	done chan struct{}
	data []byte
	err  error
	// leaderGone says err came from the leader's own context ending: a follower whose
	// context is still alive retries instead of failing with someone else's cancellation.
	leaderGone bool
}

// blockCache is an LRU of object blocks sized in bytes, with concurrent misses for
// one block merged into one GET. golang.org/x/sync/singleflight would merge calls by
// key, but a miss here GETs a run of adjacent blocks in one request while other
// fetches wait on single blocks of that run, and each block must be in the cache
// before its waiters are released; a small map of loads does both.
type blockCache struct {
	store     rangeGetter
	blockSize int64
	max       int64
	m         *metrics
	// wholeObject: objects up to this size are fetched whole on their first miss.
	wholeObject int64
	// disk, when set, keeps blocks evicted from memory and is read before a GET.
	disk *diskTier
	// mem is the node's memory budget (nil: not accounted).
	mem *membudget.Budget
	// got is Config.Got; footer looks an object's footer up in the footer cache.
	got    func(topicID int64, share float64)
	footer func(obj string) (segment.Footer, bool)

	mu      sync.Mutex
	size    int64
	items   map[blockKey]*list.Element // values *cached
	lru     list.List                  // front: most recently used
	loading map[blockKey]*load
}

func newBlockCache(store rangeGetter, blockSize, maxBytes int64, m *metrics) *blockCache {
	return &blockCache{
		store:     store,
		blockSize: blockSize,
		max:       maxBytes,
		m:         m,
		items:     make(map[blockKey]*list.Element),
		loading:   make(map[blockKey]*load),
	}
}

// acct says how a read is accounted in the node's memory budget: a range copied out of
// several blocks is reserved in hold (the fetch's: it lives as long as the fetch's
// answer); a block loaded from the store waits up to wait for room (0: only room there
// is, for reads nobody waits on, the prefetcher's).
type acct struct {
	hold  *membudget.Hold
	wait  time.Duration
	topic int64 // the fetch's, for Config.Got; 0: none
}

// read returns bytes [off, off+n) of object obj, whose whole size is objSize. They
// may be the cache's own (a range inside one block is not copied): read-only.
func (c *blockCache) read(ctx context.Context, obj string, objSize, off, n int64) ([]byte, error) {
	return c.readFor(ctx, acct{}, obj, objSize, off, n)
}

// readFor is read, accounted by a.
func (c *blockCache) readFor(ctx context.Context, a acct, obj string, objSize, off, n int64) ([]byte, error) {
	if off < 0 || n <= 0 || off+n > objSize {
		return nil, fmt.Errorf("read %s [%d,+%d): range outside the object's %d bytes", obj, off, n, objSize)
	}
	first, last := off/c.blockSize, (off+n-1)/c.blockSize
	for {
		blocks, retry, err := c.blocks(ctx, a, obj, objSize, first, last)
		if retry {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, ErrMemoryExhausted) {
				err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
			}
			return nil, fmt.Errorf("read %s [%d,+%d): %w", obj, off, n, err)
		}
		if len(blocks) == 1 {
			lo := off - first*c.blockSize
			return blocks[0][lo : lo+n : lo+n], nil
		}
		if err := a.hold.Reserve(ctx, n, a.wait, membudget.UseFetch); err != nil {
			return nil, fmt.Errorf("read %s [%d,+%d): %w", obj, off, n, memoryError(ctx, err))
		}
		out := make([]byte, n)
		w := 0
		for i, b := range blocks {
			start := (first + int64(i)) * c.blockSize
			lo := max(off-start, 0)
			hi := min(off+n-start, int64(len(b)))
			w += copy(out[w:], b[lo:hi])
		}
		return out, nil
	}
}

type pending struct {
	idx int64
	l   *load
}

// blocks returns blocks first..last of obj. retry reports that a block this call
// waited for failed only because its leader's context ended.
func (c *blockCache) blocks(ctx context.Context, a acct, obj string, objSize, first, last int64) (blocks [][]byte, retry bool, err error) {
	blocks = make([][]byte, last-first+1)
	var mine, theirs []pending
	var hits, misses int
	c.mu.Lock()
	for i := first; i <= last; i++ {
		k := blockKey{obj, i}
		if e, ok := c.items[k]; ok {
			c.lru.MoveToFront(e)
			blocks[i-first] = e.Value.(*cached).data
			hits++
			continue
		}
		misses++
		if l, ok := c.loading[k]; ok {
			theirs = append(theirs, pending{i, l})
			continue
		}
		l := &load{done: make(chan struct{})}
		c.loading[k] = l
		mine = append(mine, pending{i, l})
	}
	// A small object about to be fetched anyway is fetched whole, in the same GET: a
	// writer object holds every partition of its flush, and the readers of the other
	// partitions come for the rest soon. It makes a first reader's cost one GET per
	// object, whatever block boundaries its chunks straddle.
	if len(mine) > 0 && objSize <= c.wholeObject {
		n := len(mine)
		for i := int64(0); i*c.blockSize < objSize; i++ {
			if i >= first && i <= last {
				continue
			}
			k := blockKey{obj, i}
			if _, ok := c.items[k]; ok {
				continue
			}
			if _, ok := c.loading[k]; ok {
				continue
			}
			l := &load{done: make(chan struct{})}
			c.loading[k] = l
			mine = append(mine, pending{i, l})
		}
		if len(mine) > n {
			slices.SortFunc(mine, func(a, b pending) int { return cmp.Compare(a.idx, b.idx) })
		}
	}
	c.mu.Unlock()
	c.m.cacheHits.Add(float64(hits))
	c.m.cacheMisses.Add(float64(misses))

	// Every load this call leads completes before it waits on anyone else's, so two
	// fetches that each lead a block the other needs cannot deadlock.
	if err := c.fetch(ctx, a, obj, objSize, mine); err != nil {
		return nil, false, err
	}
	for _, p := range mine {
		if p.idx >= first && p.idx <= last {
			blocks[p.idx-first] = p.l.data
		}
	}
	for _, p := range theirs {
		select {
		case <-p.l.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if p.l.err != nil {
			return nil, p.l.leaderGone, p.l.err
		}
		blocks[p.idx-first] = p.l.data
	}
	return blocks, false, nil
}

// fetch GETs the blocks of mine (ascending), one GET per run of adjacent blocks, and
// completes every one of their loads, whatever happens. Each GET's bytes are reserved
// in the node's budget first (waiting up to wait), until they are in the cache — whose
// bytes are a standing reservation — or dropped.
func (c *blockCache) fetch(ctx context.Context, a acct, obj string, objSize int64, mine []pending) (err error) {
	if c.disk != nil {
		mine = c.fromDisk(obj, objSize, mine)
	}
	next := 0 // mine[:next] are completed
	defer func() {
		if next < len(mine) {
			e := err
			if e == nil { // a panic below: release the waiters, then let it unwind
				e = errors.New("block load abandoned")
			}
			c.complete(obj, mine[next:], nil, e, ctx.Err() != nil)
		}
	}()
	for next < len(mine) {
		end := next + 1
		for end < len(mine) && mine[end].idx == mine[end-1].idx+1 {
			end++
		}
		run := mine[next:end]
		off := run[0].idx * c.blockSize
		n := min((run[len(run)-1].idx+1)*c.blockSize, objSize) - off
		if err = c.mem.Reserve(ctx, n, a.wait, membudget.UseCache); err != nil {
			return memoryError(ctx, err)
		}
		var data []byte
		data, err = c.store.GetRange(ctx, obj, off, n)
		c.m.gets.Inc()
		c.m.getBytes.Add(float64(len(data)))
		if c.got != nil && a.topic != 0 && err == nil {
			c.attribute(a.topic, obj, objSize, off, data)
		}
		if err == nil && int64(len(data)) != n {
			err = fmt.Errorf("get range %s [%d,+%d): got %d bytes", obj, off, n, len(data))
		}
		if err != nil {
			c.mem.Release(n)
			return err
		}
		c.complete(obj, run, data, nil, false)
		c.mem.Release(n) // in the cache now (its standing reservation), or garbage
		next = end
	}
	return nil
}

// attribute tells Config.Got whose GET of [off, off+len(data)) of obj this was: the
// topics of the batches in the range by bytes, when the footer is in the range read
// (an object read whole) or in the footer cache; else wholly topic, the fetch's.
func (c *blockCache) attribute(topic int64, obj string, objSize, off int64, data []byte) {
	ft, ok := c.footer(obj)
	if !ok && off+int64(len(data)) == objSize && len(data) >= segment.TrailerSize {
		if n, err := segment.ParseTrailer(data[len(data)-segment.TrailerSize:]); err == nil && n > 0 && n <= int64(len(data))-segment.TrailerSize {
			end := int64(len(data)) - segment.TrailerSize
			ft, err = segment.DecodeFooter(data[end-n : end])
			ok = err == nil
		}
	}
	if !ok {
		c.got(topic, 1)
		return
	}
	var (
		topics []int64
		bytes  []int64
		total  int64
	)
	end := off + int64(len(data))
	for _, b := range ft.Batches {
		n := min(b.Pos+b.Len, end) - max(b.Pos, off)
		if n <= 0 {
			continue
		}
		total += n
		if k := len(topics) - 1; k >= 0 && topics[k] == b.TopicID {
			bytes[k] += n
			continue
		}
		if i := slices.Index(topics, b.TopicID); i >= 0 {
			bytes[i] += n
			continue
		}
		topics, bytes = append(topics, b.TopicID), append(bytes, n)
	}
	if total == 0 { // only the footer read: the fetch's
		c.got(topic, 1)
		return
	}
	for i, t := range topics {
		c.got(t, float64(bytes[i])/float64(total))
	}
}

// fromDisk completes the loads of mine whose blocks the disk tier holds and returns
// the others, still to GET.
func (c *blockCache) fromDisk(obj string, objSize int64, mine []pending) []pending {
	rest := mine[:0:0]
	for _, p := range mine {
		k := blockKey{obj, p.idx}
		data, ok := c.disk.get(k)
		if ok && int64(len(data)) != min((p.idx+1)*c.blockSize, objSize)-p.idx*c.blockSize {
			c.disk.remove(k) // not this object's block: never trust it
			ok = false
		}
		if !ok {
			rest = append(rest, p)
			continue
		}
		c.complete(obj, []pending{p}, data, nil, false)
	}
	return rest
}

// cached reports whether every block holding [off, off+n) of obj is in memory. It
// counts neither a hit nor a miss: the prefetcher asks before deciding to read.
func (c *blockCache) cached(obj string, off, n int64) bool {
	if n <= 0 {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := off / c.blockSize; i <= (off+n-1)/c.blockSize; i++ {
		if _, ok := c.items[blockKey{obj, i}]; !ok {
			return false
		}
	}
	return true
}

// complete caches the blocks of run (cut from data, which starts at run[0]'s block)
// or, on err, drops their loads so the next lookup tries again; then wakes waiters.
func (c *blockCache) complete(obj string, run []pending, data []byte, err error, leaderGone bool) {
	c.mu.Lock()
	for i, p := range run {
		k := blockKey{obj, p.idx}
		delete(c.loading, k)
		if err != nil {
			p.l.err, p.l.leaderGone = err, leaderGone
			continue
		}
		lo := int64(i) * c.blockSize
		hi := min(lo+c.blockSize, int64(len(data)))
		p.l.data = data[lo:hi:hi]
		c.insert(k, p.l.data)
	}
	c.m.cacheBytes.Set(float64(c.size))
	c.mu.Unlock()
	for _, p := range run {
		close(p.l.done)
	}
}

// memoryError is err from a reservation that failed, as the reader reports it.
func memoryError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %w", ErrMemoryExhausted, err)
}

// evict drops the cached blocks holding [off, off+n) of obj: a range that failed to
// decode may have been damaged on the way (a flipped bit in a GET) and must be read
// again rather than served from the cache until it ages out.
func (c *blockCache) evict(obj string, off, n int64) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := off / c.blockSize; i <= (off+n-1)/c.blockSize; i++ {
		k := blockKey{obj, i}
		if e, ok := c.items[k]; ok {
			c.lru.Remove(e)
			delete(c.items, k)
			c.size -= int64(len(e.Value.(*cached).data))
		}
		if c.disk != nil {
			c.disk.remove(k) // the damage may have come from the disk
		}
	}
	c.m.cacheBytes.Set(float64(c.size))
}

// insert adds a block and evicts least recently used ones beyond max. c.mu is held.
func (c *blockCache) insert(k blockKey, data []byte) {
	if int64(len(data)) > c.max {
		return
	}
	c.items[k] = c.lru.PushFront(&cached{key: k, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		e := c.lru.Back()
		b := e.Value.(*cached)
		c.lru.Remove(e)
		delete(c.items, b.key)
		c.size -= int64(len(b.data))
		if c.disk != nil {
			c.disk.offer(*b)
		}
	}
}

// stats reports the cache's contents, for tests.
func (c *blockCache) stats() (blocks int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}

// footerCache keeps decoded footers, so fetches from a large compacted object do not
// decode its footer (thousands of entries) every time. It is an LRU by approximate
// size; the footer's bytes themselves live in the block cache.
type footerCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	items map[string]*list.Element // values *footerEntry
	lru   list.List
}

type footerEntry struct {
	key  string
	ft   segment.Footer
	size int64
}

func newFooterCache(maxBytes int64) *footerCache {
	return &footerCache{max: maxBytes, items: make(map[string]*list.Element)}
}

func footerSize(ft segment.Footer) int64 {
	return int64(len(ft.Batches))*int64(unsafe.Sizeof(segment.BatchInfo{})) +
		int64(len(ft.Index))*int64(unsafe.Sizeof(segment.IndexEntry{})) + 64
}

func (c *footerCache) get(key string) (segment.Footer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return segment.Footer{}, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*footerEntry).ft, true
}

func (c *footerCache) put(key string, ft segment.Footer) {
	n := footerSize(ft)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok || n > c.max {
		return
	}
	c.items[key] = c.lru.PushFront(&footerEntry{key: key, ft: ft, size: n})
	c.size += n
	for c.size > c.max {
		e := c.lru.Back()
		fe := e.Value.(*footerEntry)
		c.lru.Remove(e)
		delete(c.items, fe.key)
		c.size -= fe.size
	}
}

// offer caches obj (laid out as parts, end to end) whole, block by block, copied: the
// writer of this node hands over each object it has just put, so that its tails and
// long-polls read what was just committed without a GET. Blocks cached or loading
// already are left alone.
func (c *blockCache) offer(obj string, parts [][]byte) {
	var size int64
	for _, p := range parts {
		size += int64(len(p))
	}
	if size == 0 || size > c.max/2 {
		return // it would push out most of the cache
	}
	part, at := 0, 0 // the next byte to copy: parts[part][at]
	for idx := int64(0); idx*c.blockSize < size; idx++ {
		n := min(c.blockSize, size-idx*c.blockSize)
		block := make([]byte, 0, n)
		for int64(len(block)) < n {
			k := min(int(n)-len(block), len(parts[part])-at)
			block = append(block, parts[part][at:at+k]...)
			if at += k; at == len(parts[part]) {
				part, at = part+1, 0
			}
		}
		k := blockKey{obj, idx}
		c.mu.Lock()
		_, have := c.items[k]
		_, loading := c.loading[k]
		if !have && !loading {
			c.insert(k, block)
		}
		c.m.cacheBytes.Set(float64(c.size))
		c.mu.Unlock()
	}
}
