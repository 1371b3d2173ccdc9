package reader

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-io/strata/internal/membudget"
)

// diskTier is the block cache's second level: blocks evicted from memory are written
// to files in a local directory, and a memory miss looks there before it GETs. Local
// disk is an order of magnitude cheaper than memory and, unlike a GET, costs nothing per
// request, so a node whose working set outgrows its memory keeps serving it without
// going back to the object store.
//
// Objects are immutable and their keys never reused, so a block file never goes stale:
// files left by an earlier run are indexed at start-up and served. A file that is
// damaged is caught where every block is (the batches' and footer's CRCs) and dropped
// with the rest of its object's blocks (blockCache.evict).
//
// Writes happen on Reader.Run's goroutine, fed by a bounded queue: eviction, under the
// cache's lock, never waits for a disk, and without Run (Lambda) the tier only reads.
type diskTier struct {
	dir string
	max int64
	m   *metrics
	log *slog.Logger

	queue chan cached // evicted blocks waiting to be written
	mem   *membudget.Budget

	mu sync.Mutex
	// pending holds the queued blocks until they are on disk, so a block is served
	// between its eviction and its write too.
	pending map[blockKey][]byte
	size    int64
	items   map[blockKey]*list.Element // values *diskEntry
	lru     list.List                  // front: most recently used
}

type diskEntry struct {
	key  blockKey
	size int64
	name string // file name in dir
}

// diskQueue bounds the evicted blocks waiting to be written: beyond it evictions are
// not kept (an overloaded disk must not hold memory).
const diskQueue = 16

// blockSuffix names block files, so start-up indexes and removes only the tier's own.
const blockSuffix = ".blk"

// openDiskTier opens the tier in dir (created if missing), indexing block files left by
// an earlier run, most recently modified first, and removing what does not fit in max.
func openDiskTier(dir string, max int64, m *metrics, log *slog.Logger) (*diskTier, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("reader: disk cache %s: %w", dir, err)
	}
	d := &diskTier{dir: dir, max: max, m: m, log: log, queue: make(chan cached, diskQueue),
		pending: make(map[blockKey][]byte), items: make(map[blockKey]*list.Element)}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reader: disk cache %s: %w", dir, err)
	}
	type found struct {
		e     diskEntry
		mtime int64
	}
	var fs []found
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(filepath.Join(dir, name)) // a write cut short
			continue
		}
		if !strings.HasSuffix(name, blockSuffix) || !de.Type().IsRegular() {
			continue
		}
		k, ok := parseBlockName(name)
		info, err := de.Info()
		if !ok || err != nil {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		fs = append(fs, found{diskEntry{key: k, size: info.Size(), name: name}, info.ModTime().UnixNano()})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].mtime > fs[j].mtime })
	for _, f := range fs {
		if d.size+f.e.size > max {
			_ = os.Remove(filepath.Join(dir, f.e.name))
			continue
		}
		e := f.e
		d.items[e.key] = d.lru.PushBack(&e)
		d.size += e.size
	}
	m.diskBytes.Set(float64(d.size))
	if len(d.items) > 0 {
		log.Info("disk block cache: kept blocks of an earlier run", "dir", dir, "blocks", len(d.items), "bytes", d.size)
	}
	return d, nil
}

// blockName is a block's file name: the object key escaped into one path element, the
// block index, the suffix. Start-up reads keys back from names, so the cache survives
// a restart.
func blockName(k blockKey) string {
	return url.PathEscape(k.obj) + "." + strconv.FormatInt(k.idx, 10) + blockSuffix
}

func parseBlockName(name string) (blockKey, bool) {
	base := strings.TrimSuffix(name, blockSuffix)
	dot := strings.LastIndexByte(base, '.')
	if dot < 0 {
		return blockKey{}, false
	}
	idx, err := strconv.ParseInt(base[dot+1:], 10, 64)
	obj, uerr := url.PathUnescape(base[:dot])
	if err != nil || uerr != nil || idx < 0 || obj == "" {
		return blockKey{}, false
	}
	return blockKey{obj, idx}, true
}

// get returns the block from disk, if it is there.
func (d *diskTier) get(k blockKey) ([]byte, bool) {
	d.mu.Lock()
	if data, ok := d.pending[k]; ok {
		d.mu.Unlock()
		d.m.diskHits.Inc()
		return data, true
	}
	e, ok := d.items[k]
	if ok {
		d.lru.MoveToFront(e)
	}
	d.mu.Unlock()
	if !ok {
		d.m.diskMisses.Inc()
		return nil, false
	}
	name := e.Value.(*diskEntry).name
	data, err := os.ReadFile(filepath.Join(d.dir, name))
	if err != nil {
		d.log.Warn("disk block cache: read failed; the block is dropped", "file", name, "err", err)
		d.remove(k)
		d.m.diskMisses.Inc()
		return nil, false
	}
	d.m.diskHits.Inc()
	return data, true
}

// offer queues a block evicted from memory for writing, unless the queue is full.
func (d *diskTier) offer(b cached) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.items[b.key]; ok {
		return // on disk already: it came from there
	}
	if _, ok := d.pending[b.key]; ok {
		return
	}
	// Evicted, the block is no longer in the cache's standing reservation: it is
	// reserved while it waits, or not kept.
	if !d.mem.TryReserve(int64(len(b.data)), membudget.UseCache) {
		d.m.diskDropped.Inc()
		return
	}
	select {
	case d.queue <- b:
		d.pending[b.key] = b.data
	default:
		d.mem.Release(int64(len(b.data)))
		d.m.diskDropped.Inc()
	}
}

// run writes queued blocks until ctx ends.
func (d *diskTier) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-d.queue:
			if err := d.write(b, true); err != nil {
				d.log.Warn("disk block cache: write failed", "err", err)
			}
			d.mu.Lock()
			delete(d.pending, b.key)
			d.mu.Unlock()
			d.mem.Release(int64(len(b.data)))
		}
	}
}

// write stores one block: a temporary file renamed into place, so a crash leaves a
// whole file or none. A queued block removed while it waited (blockCache.evict: its
// bytes may be damaged) is not kept.
func (d *diskTier) write(b cached, queued bool) error {
	size := int64(len(b.data))
	if size > d.max {
		return nil
	}
	d.mu.Lock()
	_, have := d.items[b.key]
	d.mu.Unlock()
	if have {
		return nil
	}
	name := blockName(b.key)
	if len(name) > 240 { // past most file systems' name limit: not worth a scheme of its own
		return nil
	}
	f, err := os.CreateTemp(d.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b.data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(d.dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	var drop []string
	d.mu.Lock()
	if _, ok := d.pending[b.key]; queued && !ok {
		d.mu.Unlock()
		_ = os.Remove(filepath.Join(d.dir, name))
		return nil
	}
	d.m.diskWrites.Inc()
	if _, ok := d.items[b.key]; !ok {
		d.items[b.key] = d.lru.PushFront(&diskEntry{key: b.key, size: size, name: name})
		d.size += size
	}
	for d.size > d.max {
		e := d.lru.Back()
		de := e.Value.(*diskEntry)
		d.lru.Remove(e)
		delete(d.items, de.key)
		d.size -= de.size
		drop = append(drop, de.name)
	}
	d.m.diskBytes.Set(float64(d.size))
	d.mu.Unlock()
	for _, n := range drop {
		if err := os.Remove(filepath.Join(d.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("disk block cache: remove failed", "file", n, "err", err)
		}
	}
	return nil
}

// remove drops a block's entry and file.
func (d *diskTier) remove(k blockKey) {
	d.mu.Lock()
	delete(d.pending, k) // and a queued write of it is dropped
	e, ok := d.items[k]
	if ok {
		de := e.Value.(*diskEntry)
		d.lru.Remove(e)
		delete(d.items, k)
		d.size -= de.size
		d.m.diskBytes.Set(float64(d.size))
	}
	d.mu.Unlock()
	if ok {
		_ = os.Remove(filepath.Join(d.dir, e.Value.(*diskEntry).name))
	}
}

// stats reports the tier's contents, for tests.
func (d *diskTier) stats() (blocks int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.items), d.size
}
