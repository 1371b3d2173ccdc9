package reader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/segment"
)

// rangeGetter is the part of the object store the reader uses.
type rangeGetter interface {
	// GetRange returns exactly n bytes of key starting at off.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
}

// chunkSource is the part of the catalog the reader uses.
type chunkSource interface {
	Chunks(ctx context.Context, topicID int64, partition int32, offset, maxBytes int64) (catalog.ChunkList, error)
	Listen(ctx context.Context, fn func(catalog.Watermark)) error
}

var (
	_ rangeGetter = (objstore.Store)(nil)
	_ chunkSource = (catalog.Catalog)(nil)
)

// Reader serves fetches. It is safe for concurrent use.
type Reader struct {
	cat      chunkSource
	cfg      Config
	log      *slog.Logger
	m        *metrics
	cache    *blockCache
	prefetch *prefetcher // nil with Config.NoPrefetch
	footers  *footerCache
	// narrowAbove: chunks longer than this are read through the object's footer, so a
	// fetch GETs only the batches it needs from a large compacted chunk.
	narrowAbove int64

	mu      sync.Mutex
	waiters map[partKey]map[*waiter]struct{}
	// lastWaiter is when a long-poll last waited (unix ns; 0: never), for Written.
	lastWaiter atomic.Int64
}

type partKey struct {
	topicID   int64
	partition int32
}

// waiter is one long-poll waiting for its partition's high watermark to pass offset.
type waiter struct {
	key    partKey
	offset int64
	wake   chan string // buffered 1: why it was woken ("notify" or "poll")
}

// Backoff between Listen attempts.
const (
	minListenBackoff = 100 * time.Millisecond
	maxListenBackoff = 10 * time.Second
)

// New returns a Reader. cfg's zero fields take their defaults; an invalid cfg panics,
// so call cfg.Validate at start-up to report it properly. A nil reg registers no
// metrics.
func New(store rangeGetter, cat chunkSource, cfg Config, log *slog.Logger, reg prometheus.Registerer) *Reader {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := newMetrics(reg)
	r := &Reader{
		cat:         cat,
		cfg:         cfg,
		log:         log.With("component", "reader"),
		m:           m,
		cache:       newBlockCache(store, cfg.BlockSize, cfg.CacheBytes, m),
		footers:     newFooterCache(cfg.CacheBytes / 16),
		narrowAbove: 2 * cfg.BlockSize,
		waiters:     make(map[partKey]map[*waiter]struct{}),
	}
	r.cache.wholeObject = cfg.WholeObjectBytes
	r.cache.mem = cfg.Memory
	r.cache.got = cfg.Got
	r.cache.footer = r.footers.get
	if cfg.DiskCacheDir != "" {
		d, err := openDiskTier(cfg.DiskCacheDir, cfg.DiskCacheBytes, m, r.log)
		if err != nil {
			// Validate made and wrote to the directory a moment ago: serving from
			// memory alone beats not serving.
			r.log.Error("disk block cache unavailable: serving from memory only", "err", err)
		} else {
			d.mem = cfg.Memory
			r.cache.disk = d
		}
	}
	if !cfg.NoPrefetch {
		r.prefetch = newPrefetcher(r.cache, m)
	}
	return r
}

// Run receives commit notifications and wakes the long-polls of their partitions,
// until ctx ends. When Listen fails it retries with backoff; long-polls meanwhile rely
// on polling. It also runs the prefetcher and the disk tier's writes. It returns nil
// when ctx ends, once those have stopped.
func (r *Reader) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.prefetch != nil {
		wg.Go(func() { r.prefetch.run(ctx) })
	}
	if r.cache.disk != nil {
		wg.Go(func() { r.cache.disk.run(ctx) })
	}
	backoff := minListenBackoff
	for {
		start := time.Now()
		err := r.cat.Listen(ctx, r.Notify)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > maxListenBackoff {
			backoff = minListenBackoff
		}
		r.log.Warn("commit notifications interrupted; long-polls poll until they resume", "err", err, "retry_in", backoff)
		// Commits made while nobody listened went unannounced: have every waiter look
		// now instead of at its next poll.
		r.wakeAll()
		if ctxwait.Sleep(ctx, jitter(backoff)) != nil {
			return nil
		}
		backoff = min(2*backoff, maxListenBackoff)
	}
}

// Notify wakes the long-polls of w's partition that wait below w.HighWatermark. Run
// calls it for catalog notifications; in-process writers may call it directly.
func (r *Reader) Notify(w catalog.Watermark) {
	r.wake(partKey{w.TopicID, w.Partition}, w.HighWatermark, "notify")
}

func (r *Reader) wake(k partKey, hw int64, by string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.waiters[k] {
		if hw > w.offset {
			select {
			case w.wake <- by:
			default:
			}
		}
	}
}

func (r *Reader) wakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ws := range r.waiters {
		for w := range ws {
			select {
			case w.wake <- "poll":
			default:
			}
		}
	}
}

func (r *Reader) addWaiter(k partKey, offset int64) *waiter {
	w := &waiter{key: k, offset: offset, wake: make(chan string, 1)}
	r.lastWaiter.Store(time.Now().UnixNano())
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.waiters[k]
	if ws == nil {
		ws = make(map[*waiter]struct{})
		r.waiters[k] = ws
	}
	ws[w] = struct{}{}
	return w
}

func (r *Reader) removeWaiter(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.waiters[w.key]
	delete(ws, w)
	if len(ws) == 0 {
		delete(r.waiters, w.key)
	}
}

// Fetch returns records of one partition from f.Offset, waiting up to f.Wait when
// f.Offset is the high watermark. Errors: *OutOfRangeError, ErrInvalidFetch, the
// catalog's ErrTopicNotFound / ErrPartitionOutOfRange (wrapped), ctx's error;
// anything else is a server error (a missing object, a corrupt batch), never wrong
// data. Record bytes are the caller's.
func (r *Reader) Fetch(ctx context.Context, f Fetch) (Result, error) {
	f, err := r.normalize(f)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	list, waited, err := r.lookup(ctx, f)
	if err != nil {
		return Result{}, err
	}
	defer func() { r.m.fetchSeconds.Observe((time.Since(start) - waited).Seconds()) }()
	res := Result{
		NextOffset:       f.Offset,
		HighWatermark:    list.Partition.HighWatermark,
		LastStableOffset: list.Partition.LastStableOffset,
		LogStartOffset:   list.Partition.LogStartOffset,
	}
	if n := min(int64(f.MaxRecords), limit(f, list.Partition)-f.Offset); n > 0 {
		res.Records = make([]segment.DecodedRecord, 0, n)
	}
	var size int64
	err = r.scan(ctx, f, list, func(b rawBatch) (bool, error) {
		if b.data == nil || b.control { // a hole left by key compaction, a marker, an aborted batch
			res.NextOffset = max(res.NextOffset, b.last+1)
			return true, nil
		}
		// The copy (or the decompressed records) and the records' slice headers are
		// reserved before they are made.
		if ok, err := r.take(ctx, f, int64(len(b.data))+int64(b.records)*decodedOverhead, len(res.Records) == 0); !ok {
			return false, err
		}
		// Records of an uncompressed batch alias its bytes: decode a private copy so
		// the caller owns them. A compressed one decompresses into a new buffer
		// anyway, and is decoded where it lies, its offsets shifted after.
		raw := b.data
		if !b.compressed {
			raw = b.own()
		}
		db, err := segment.DecodeBatch(raw)
		if err != nil {
			return false, fmt.Errorf("decode batch at offset %d: %w", b.base, err)
		}
		if b.compressed {
			// Its records' size is known only once decompressed: what they take beyond
			// the compressed bytes reserved above is reserved now, or the batch is dropped
			// (garbage at once) and the fetch ends before it.
			var n int64
			for _, rec := range db.Records {
				n += recordSize(rec)
			}
			if ok, err := r.take(ctx, f, n-int64(len(b.data)), len(res.Records) == 0); !ok {
				return false, err
			}
		}
		shift := b.base - db.BaseOffset
		for _, rec := range db.Records {
			rec.Offset += shift
			if rec.Offset < res.NextOffset {
				continue
			}
			if rec.Offset > b.last {
				return false, fmt.Errorf("decode batch at offset %d: record offset %d beyond the batch's last %d: %w", b.base, rec.Offset, b.last, segment.ErrCorrupt)
			}
			n := recordSize(rec)
			if len(res.Records) > 0 && (len(res.Records) >= f.MaxRecords || size+n > f.MaxBytes) {
				return false, nil
			}
			res.Records = append(res.Records, rec)
			size += n
			res.NextOffset = rec.Offset + 1
		}
		// Offsets past the last record but inside the batch were removed by key
		// compaction: the next fetch starts after them.
		res.NextOffset = max(res.NextOffset, b.last+1)
		return len(res.Records) < f.MaxRecords && size < f.MaxBytes, nil
	})
	if err == nil && res.NextOffset == f.Offset && f.Offset < limit(f, list.Partition) {
		err = fmt.Errorf("no batch holds offset %d below the high watermark %d: %w", f.Offset, res.HighWatermark, segment.ErrCorrupt)
	}
	if err != nil {
		return Result{}, fmt.Errorf("reader: fetch topic %d partition %d offset %d: %w", f.TopicID, f.Partition, f.Offset, err)
	}
	return res, nil
}

// FetchRaw is Fetch for callers that serve Kafka v2 batches as they are: it returns
// whole batches with their base offsets rewritten.
func (r *Reader) FetchRaw(ctx context.Context, f Fetch) (RawResult, error) {
	res, err := r.fetchRaw(ctx, f, false)
	if err != nil {
		return RawResult{}, err
	}
	return res.RawResult, nil
}

// FetchRawShared is FetchRaw without a copy of each batch, for callers that write the
// batches out at once (the HTTP API): on a cached fetch the copies are most of the
// cost. Batches alias the reader's cache and must not be modified; their first 8 bytes
// still hold the base offset as stored, and BaseOffsets[i] is the real one, to be
// written in their place. Holding them is safe: blocks are immutable, and evicting one
// only drops the cache's reference.
func (r *Reader) FetchRawShared(ctx context.Context, f Fetch) (SharedRawResult, error) {
	return r.fetchRaw(ctx, f, true)
}

func (r *Reader) fetchRaw(ctx context.Context, f Fetch, shared bool) (SharedRawResult, error) {
	f, err := r.normalize(f)
	if err != nil {
		return SharedRawResult{}, err
	}
	start := time.Now()
	list, waited, err := r.lookup(ctx, f)
	if err != nil {
		return SharedRawResult{}, err
	}
	defer func() { r.m.fetchSeconds.Observe((time.Since(start) - waited).Seconds()) }()
	res := SharedRawResult{RawResult: RawResult{
		NextOffset:       f.Offset,
		HighWatermark:    list.Partition.HighWatermark,
		LastStableOffset: list.Partition.LastStableOffset,
		LogStartOffset:   list.Partition.LogStartOffset,
	}}
	if f.Markers {
		res.Aborted = list.Aborted
	}
	var size int64
	var records int
	err = r.scan(ctx, f, list, func(b rawBatch) (bool, error) {
		if b.data == nil { // a hole left by key compaction
			res.NextOffset = max(res.NextOffset, b.last+1)
			return true, nil
		}
		n := int64(len(b.data))
		if len(res.Batches) > 0 && size+n > f.MaxBytes {
			return false, nil
		}
		// Shared or copied, the batch is held until the caller has written it.
		if ok, err := r.take(ctx, f, n, len(res.Batches) == 0); !ok {
			return false, err
		}
		switch {
		case b.control: // rendered for this fetch, its offset already in place
			res.Batches = append(res.Batches, b.data)
			if shared {
				res.BaseOffsets = append(res.BaseOffsets, b.base)
			}
		case shared:
			res.Batches = append(res.Batches, b.data)
			res.BaseOffsets = append(res.BaseOffsets, b.base)
		default:
			res.Batches = append(res.Batches, b.own())
		}
		size += n
		// Records below the fetch offset in the first batch do not count.
		records += int(min(b.last+1-res.NextOffset, int64(b.records)))
		res.NextOffset = b.last + 1
		return records < f.MaxRecords && size < f.MaxBytes, nil
	})
	if err == nil && res.NextOffset == f.Offset && f.Offset < limit(f, list.Partition) {
		err = fmt.Errorf("no batch holds offset %d below the high watermark %d: %w", f.Offset, res.HighWatermark, segment.ErrCorrupt)
	}
	if err != nil {
		return SharedRawResult{}, fmt.Errorf("reader: fetch raw topic %d partition %d offset %d: %w", f.TopicID, f.Partition, f.Offset, err)
	}
	return res, nil
}

// decodedOverhead is what a decoded record costs beside its bytes: its struct in the
// result and its headers' slice, about.
const decodedOverhead = int64(unsafe.Sizeof(segment.DecodedRecord{})) + 32

// take reserves n bytes of a fetch's result in f.Memory before they are taken: the
// first batch of the result waits up to MemoryWait for room (ErrMemoryExhausted
// after), a later one takes only room there is below membudget.GrowShare — without it,
// ok is false and the fetch ends there, smaller: under memory pressure fetches shrink
// before they fail, and a few large ones leave room for everyone else's first batch.
func (r *Reader) take(ctx context.Context, f Fetch, n int64, first bool) (ok bool, err error) {
	if f.Memory == nil {
		return true, nil
	}
	if !first {
		return f.Memory.TryGrow(n, membudget.UseFetch), nil
	}
	if err := f.Memory.Reserve(ctx, n, r.cfg.MemoryWait, membudget.UseFetch); err != nil {
		return false, memoryError(ctx, err)
	}
	return true, nil
}

// recordSize is what a record counts against Fetch.MaxBytes: the bytes a response
// carries for it.
func recordSize(rec segment.DecodedRecord) int64 {
	n := int64(len(rec.Key) + len(rec.Value))
	for _, h := range rec.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// normalize applies defaults and caps.
func (r *Reader) normalize(f Fetch) (Fetch, error) {
	if f.MaxRecords < 0 || f.MaxBytes < 0 || f.Wait < 0 {
		return f, fmt.Errorf("%w: max records %d, max bytes %d, wait %s: none may be negative", ErrInvalidFetch, f.MaxRecords, f.MaxBytes, f.Wait)
	}
	if f.MaxRecords == 0 {
		f.MaxRecords = r.cfg.DefaultMaxRecords
	}
	if f.MaxBytes == 0 {
		f.MaxBytes = r.cfg.DefaultMaxBytes
	}
	f.MaxRecords = min(f.MaxRecords, r.cfg.MaxRecords)
	f.MaxBytes = min(f.MaxBytes, r.cfg.MaxBytes)
	f.Wait = min(f.Wait, r.cfg.MaxWait)
	return f, nil
}

// lookup finds the chunks from f.Offset. At the high watermark (the last stable offset
// for a ReadCommitted fetch) with f.Wait > 0 it long-polls: it returns when a
// notification or a poll shows data, or, with no chunks, when f.Wait has elapsed.
// waited is the time spent waiting.
func (r *Reader) lookup(ctx context.Context, f Fetch) (list catalog.ChunkList, waited time.Duration, err error) {
	if f.Wait <= 0 {
		list, err = r.chunks(ctx, f)
		return list, 0, err
	}
	// Registered before the first look, so a commit landing between the look and the
	// wait still wakes this fetch.
	k := partKey{f.TopicID, f.Partition}
	w := r.addWaiter(k, f.Offset)
	defer r.removeWaiter(w)
	list, err = r.chunks(ctx, f)
	if err != nil || f.Offset < limit(f, list.Partition) {
		return list, 0, err
	}
	start := time.Now()
	defer func() { waited = time.Since(start) }()
	deadline := time.NewTimer(f.Wait)
	defer deadline.Stop()
	poll := time.NewTimer(jitter(r.cfg.PollInterval))
	defer poll.Stop()
	for {
		var by string
		select {
		case <-ctx.Done():
			return catalog.ChunkList{}, 0, ctx.Err()
		case <-deadline.C:
			return list, 0, nil
		case by = <-w.wake:
		case <-poll.C:
			by = "poll"
			poll.Reset(jitter(r.cfg.PollInterval))
		}
		list, err = r.chunks(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return list, 0, err
		}
		if hw := list.Partition.HighWatermark; f.Offset < limit(f, list.Partition) {
			if by == "notify" {
				r.m.wakeupsNotify.Inc()
			} else {
				r.m.wakeupsPoll.Inc()
				// Others waiting on this partition need not each wait for their own poll.
				r.wake(k, hw, "poll")
			}
			return list, 0, nil
		}
	}
}

// chunks looks up f's chunks and turns an out-of-range offset into *OutOfRangeError.
func (r *Reader) chunks(ctx context.Context, f Fetch) (catalog.ChunkList, error) {
	// The catalog counts whole chunks, batch framing included, and stops before the
	// chunk that would pass its limit, while Fetch counts record bytes: asking for
	// twice as much usually fills a fetch in one lookup. Chunk rows are small, and
	// chunks past what the fetch uses are never read.
	list, err := r.cat.Chunks(ctx, f.TopicID, f.Partition, f.Offset, 2*f.MaxBytes)
	p := list.Partition
	if errors.Is(err, catalog.ErrOffsetOutOfRange) || (err == nil && (f.Offset < p.LogStartOffset || f.Offset > p.HighWatermark)) {
		return list, &OutOfRangeError{Offset: f.Offset, LogStartOffset: p.LogStartOffset, HighWatermark: p.HighWatermark}
	}
	if err != nil {
		if !errors.Is(err, catalog.ErrTopicNotFound) && !errors.Is(err, catalog.ErrPartitionOutOfRange) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", ErrCatalogUnavailable, err)
		}
		return list, fmt.Errorf("reader: look up chunks of topic %d partition %d at offset %d: %w", f.TopicID, f.Partition, f.Offset, err)
	}
	return list, nil
}

// jitter spreads d by ±10% so waiters and retries do not move in lockstep.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}
