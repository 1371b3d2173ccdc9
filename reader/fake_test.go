package reader

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore"
)

// fakeStore is an in-memory rangeGetter that counts GETs and can be given a hook that
// runs before each one (to block it or fail it).
type fakeStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	gets    atomic.Int64
	bytes   atomic.Int64
	hook    func(ctx context.Context, key string, off, n int64) error
}

var _ rangeGetter = (*fakeStore)(nil)

func newFakeStore() *fakeStore { return &fakeStore{objects: make(map[string][]byte)} }

func (s *fakeStore) put(key string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = body
}

func (s *fakeStore) setHook(h func(ctx context.Context, key string, off, n int64) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

func (s *fakeStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	s.gets.Add(1)
	s.mu.Lock()
	obj, ok := s.objects[key]
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, key, off, n); err != nil {
			return nil, err
		}
	}
	if !ok {
		return nil, fmt.Errorf("fake: get %s: %w", key, objstore.ErrNotExist)
	}
	if off < 0 || n < 0 || off+n > int64(len(obj)) {
		return nil, fmt.Errorf("fake: get %s [%d,+%d) of %d: %w", key, off, n, len(obj), objstore.ErrRange)
	}
	s.bytes.Add(n)
	return append([]byte(nil), obj[off:off+n]...), nil
}

// fakeCatalog is an in-memory chunkSource following catalog.Catalog's contract for
// Chunks and Listen.
type fakeCatalog struct {
	mu     sync.Mutex
	parts  map[partKey]*fakePart
	calls  atomic.Int64 // Chunks calls begun
	served atomic.Int64 // Chunks calls that have read the partition's state
	listen func(ctx context.Context, fn func(catalog.Watermark)) error
}

type fakePart struct {
	lso, hw int64
	chunks  []catalog.Chunk
}

var _ chunkSource = (*fakeCatalog)(nil)

func newFakeCatalog() *fakeCatalog { return &fakeCatalog{parts: make(map[partKey]*fakePart)} }

// add appends chunks to their partitions, advancing the high watermark past them.
func (c *fakeCatalog) add(chunks ...catalog.Chunk) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range chunks {
		p := c.part(partKey{ch.TopicID, ch.Partition})
		p.chunks = append(p.chunks, ch)
		p.hw = max(p.hw, ch.LastOffset+1)
	}
}

func (c *fakeCatalog) setLogStart(k partKey, lso int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.part(k).lso = lso
}

func (c *fakeCatalog) part(k partKey) *fakePart {
	p := c.parts[k]
	if p == nil {
		p = &fakePart{}
		c.parts[k] = p
	}
	return p
}

func (c *fakeCatalog) Chunks(ctx context.Context, topicID int64, partition int32, offset, maxBytes int64) (catalog.ChunkList, error) {
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return catalog.ChunkList{}, err
	}
	defer c.served.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.parts[partKey{topicID, partition}]
	if !ok {
		return catalog.ChunkList{}, fmt.Errorf("fake: topic %d partition %d: %w", topicID, partition, catalog.ErrPartitionOutOfRange)
	}
	list := catalog.ChunkList{Partition: catalog.PartitionInfo{
		TopicID: topicID, Partition: partition, LogStartOffset: p.lso, HighWatermark: p.hw,
	}}
	if offset < p.lso || offset > p.hw {
		return list, fmt.Errorf("fake: offset %d: %w", offset, catalog.ErrOffsetOutOfRange)
	}
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].LastOffset >= offset })
	var n int64
	for ; i < len(p.chunks) && (len(list.Chunks) == 0 || n+p.chunks[i].Len <= maxBytes); i++ {
		list.Chunks = append(list.Chunks, p.chunks[i])
		n += p.chunks[i].Len
	}
	return list, nil
}

func (c *fakeCatalog) Listen(ctx context.Context, fn func(catalog.Watermark)) error {
	if c.listen != nil {
		return c.listen(ctx, fn)
	}
	<-ctx.Done()
	return nil
}
