package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/murmur2"
	"github.com/strata-io/strata/segment"
)

// segmentStore is the part of the object store the writer uses (objstore.Store has it).
type segmentStore interface {
	// PutParts creates key with the parts laid end to end and never overwrites; an SDK
	// retry of a put that had already succeeded returns nil.
	PutParts(ctx context.Context, key string, parts [][]byte) error
}

// committer is the part of the catalog the writer uses (catalog.Catalog has it).
type committer interface {
	// Commit commits one flush in one transaction. Its error is for the whole flush:
	// definite (catalog.ErrCommitTooLate, ErrCommitAborted, ErrInvalidSegment: nothing
	// was written), or anything else, after which the outcome is unknown.
	Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error)
	// Settle settles an unknown outcome with the fencing insert on seg.Key.
	Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error)
}

// Estimated encoding overheads, used to size requests before they are encoded: a Kafka
// v2 batch header is 61 bytes; a record adds its length, attributes, timestamp and
// offset deltas, key and value lengths and header count as varints (about 20 bytes for
// typical values), and each header its two lengths.
const (
	batchOverhead  = 61
	recordOverhead = 20
	headerOverhead = 4
)

// Writer buffers produce requests across all partitions and requests and flushes them,
// each flush as one segment object and one catalog commit. It is safe for concurrent use.
type Writer struct {
	store segmentStore
	cat   committer
	cfg   Config
	log   *slog.Logger
	m     *metrics

	// encode and newKey are segment.EncodeParts and segment.NewKey; tests replace them
	// to inject faults. EncodeParts leaves raw batches where they are (in the request
	// bodies) rather than copy them into the object: a flush holds its bytes once.
	encode func([]segment.Batch, segment.EncodeOptions) ([][]byte, int64, uint32, []segment.BatchInfo, error)
	newKey func(time.Time) string
	hedge  *hedger

	kick chan struct{}  // wakes Run when the buffer starts filling, to arm the linger timer
	wg   sync.WaitGroup // flush goroutines

	mu         sync.Mutex
	running    bool // Run was called
	closed     bool // Run's ctx ended: no new requests
	buf        []*pending
	bufBytes   int64
	bufRecords int
	bufFirst   time.Time // when buf's first request arrived (monotonic)
	held       int64     // bytes of requests not yet answered: buffered, cut or in flight
	cut        []*flush  // cut, waiting for an in-flight slot, in flush order
	inflight   int
	seq        uint64
	lastDone   chan struct{}    // done of the last flush cut; nil before the first
	sticky     map[int64]uint64 // per topic: the counter choosing the next sticky partition
	room       chan struct{}    // closed when held drops (SubmitWait); nil until wanted
}

// pending is one request waiting for its flush.
type pending struct {
	req     Request
	size    int64
	records int     // records in the request (Raw: in its batches)
	parts   []int32 // per record: its partition, or -1 for sticky (chosen when the flush is cut); nil for Raw
	unkeyed []int64 // topics with sticky records
	done    chan struct{}
	resp    Response
	err     error
	// requeue: the catalog refused the request as ahead of its producer's sequence (an
	// earlier request of the producer had not arrived yet): put it in the next flush
	// rather than answer. requeues counts how often that happened.
	requeue  bool
	requeues int
}

// flush is one cut of the buffer: one object, one commit.
type flush struct {
	seq      uint64
	reqs     []*pending
	bytes    int64
	records  int
	sticky   map[int64]uint64 // per topic: the sticky partition counter for this flush
	prevDone chan struct{}    // closed when the previous flush is answered; nil for the first
	done     chan struct{}    // closed when every request of this flush is answered
}

// New returns a Writer that stores segments in store and commits them through cat.
// cfg's zero fields take their defaults; New panics if cfg does not validate (call
// cfg.Validate at start-up to report it properly). reg may be nil.
func New(store segmentStore, cat committer, cfg Config, log *slog.Logger, reg prometheus.Registerer) *Writer {
	if err := cfg.Validate(); err != nil {
		panic("writer.New: " + err.Error())
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Writer{
		store:  store,
		cat:    cat,
		cfg:    cfg.withDefaults(),
		log:    log.With("component", "writer"),
		m:      newMetrics(reg),
		encode: segment.EncodeParts,
		newKey: segment.NewKey,
		hedge:  newHedger(cfg.withDefaults().HedgeQuantile),
		kick:   make(chan struct{}, 1),
		sticky: make(map[int64]uint64),
	}
}

// lingerCut is the flush rule for a buffer that is not full (a full one is cut as it
// fills, in enqueue): it leaves once its oldest request has waited linger and a flush
// slot is free to take it at once. Lingered with every slot busy, it is not cut: it
// could not leave before a slot frees anyway, and meanwhile it goes on filling toward
// MaxFlushBytes instead of queueing as one small flush behind the others (under load
// that made flushes average well below MaxFlushBytes: more PUTs and commits per GiB).
// wait > 0 is how long until it has lingered.
func lingerCut(waited, linger time.Duration, slotFree bool) (cut bool, wait time.Duration) {
	if waited < linger {
		return false, linger - waited
	}
	return slotFree, 0
}

// slotFreeLocked says whether a flush cut now would start at once: nothing cut waits
// for a slot, and one is free.
func (w *Writer) slotFreeLocked() bool {
	return len(w.cut) == 0 && w.inflight < w.cfg.MaxInflight
}

// Run cuts a flush whenever the oldest buffered request has waited Linger, until ctx
// ends. Then it stops accepting requests (ErrClosed), flushes everything buffered,
// answers every waiter, waits for its goroutines and returns nil. Without Run, requests
// are flushed only by Flush or when the buffer reaches MaxFlushBytes.
func (w *Writer) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("writer: Run called twice")
	}
	w.running = true
	w.mu.Unlock()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		w.mu.Lock()
		if len(w.buf) > 0 {
			cut, wait := lingerCut(time.Since(w.bufFirst), w.cfg.Linger, w.slotFreeLocked())
			switch {
			case cut:
				w.cutLocked()
				w.dispatchLocked()
			case wait > 0:
				timer.Reset(wait)
			}
			// Neither: lingered, but no slot would take it; process kicks when one frees.
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return w.shutdown()
		case <-w.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// shutdown refuses new requests, flushes the buffer and waits until every flush is
// answered and every goroutine has returned.
func (w *Writer) shutdown() error {
	w.mu.Lock()
	w.closed = true
	w.cutLocked()
	w.dispatchLocked()
	last, held := w.lastDone, w.held
	w.mu.Unlock()
	w.log.Info("writer stopping: flushing the buffer", "bytes", held)
	if last != nil {
		<-last
	}
	w.wg.Wait()
	w.log.Info("writer stopped")
	return nil
}

// Flush cuts a flush of everything buffered now and waits until it, and every flush
// before it, has answered its requests. It returns nil then, or ctx.Err() if ctx ends
// first (the flushes go on). Each request's outcome goes to its own Produce call. On
// cloud functions, where one invocation serves one request, call Flush per invocation
// rather than wait for Linger. (An idempotent request the catalog refuses as ahead of
// its producer's sequence is not answered by its flush: it waits in the next ones, at
// most maxRequeues, for the request it follows — order.go.)
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	w.cutLocked()
	w.dispatchLocked()
	last := w.lastDone
	w.mu.Unlock()
	if last == nil {
		return nil
	}
	select {
	case <-last:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Produce buffers req and waits until its flush is answered: it returns offsets only
// once the segment object is durable and the catalog commit that assigns them has
// committed. If ctx ends first Produce returns ctx.Err(), and the request still commits
// or not; so the writer keeps referring to req's byte slices until the flush is done,
// and the caller must not modify them meanwhile.
//
// Errors: ErrInvalid, ErrTooLarge (the request can never succeed as is);
// ErrBufferFull, ErrClosed, ErrStore, ErrCommit (retryable); or the catalog's own
// refusal of this request, wrapped (catalog.ErrTopicNotFound, ...).
func (w *Writer) Produce(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	p, err := w.prepare(req)
	if err != nil {
		return Response{}, err
	}
	if err := w.enqueue(p); err != nil {
		return Response{}, err
	}
	select {
	case <-p.done:
		return p.resp, p.err
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

// prepare validates req, sizes it and chooses the partitions that do not depend on the
// flush (explicit and keyed), so that bad input is refused before it is buffered.
func (w *Writer) prepare(req Request) (*pending, error) {
	if req.Txn != nil && (req.Producer == nil || req.GroupOffsets != nil || req.Source != nil) {
		return w.invalid("a transactional request needs a producer and carries no offsets")
	}
	if req.ShareDLQ != nil && (req.Producer != nil || req.GroupOffsets != nil || req.Source != nil || req.Txn != nil) {
		return w.invalid("a dead-letter request carries no producer, offsets or transaction")
	}
	if req.Raw != nil {
		return w.prepareRaw(req)
	}
	invalid := w.invalid
	if len(req.Records) == 0 {
		return invalid("no records: send at least one")
	}
	if req.Compression < segment.CompressionNone || req.Compression > segment.CompressionZstd {
		return invalid("compression %d: use none (0), gzip (1), snappy (2), lz4 (3) or zstd (4)", req.Compression)
	}
	if req.Producer == nil && len(req.Sequences) > 0 {
		return invalid("sequences without a producer: set Producer for an idempotent request")
	}
	p := &pending{
		req:     req,
		records: len(req.Records),
		parts:   make([]int32, len(req.Records)),
		done:    make(chan struct{}),
	}
	// A topic's records must agree on the timestamp type: it is a per-batch attribute.
	type topicKind struct {
		topic     int64
		logAppend bool
	}
	var kinds []topicKind
	var batches tpSet // the request's batches: sticky records count as partition -1
	for i := range req.Records {
		r := &req.Records[i]
		part := r.Partition
		switch {
		case part < -1:
			return invalid("record %d: partition %d: use -1 to let the writer choose, or 0 up to the partition count", i, part)
		case part == -1 && r.Partitions < 1:
			return invalid("record %d: partition count %d: set Partitions to the topic's partition count so the writer can choose a partition", i, r.Partitions)
		case part == -1 && r.Key != nil:
			part = murmur2.Partition(r.Key, r.Partitions)
		case part == -1:
			if req.Producer != nil {
				return invalid("record %d: an idempotent request needs an explicit partition or a key for every record", i)
			}
			if !containsTopic(p.unkeyed, r.TopicID) {
				p.unkeyed = append(p.unkeyed, r.TopicID)
			}
		}
		p.parts[i] = part
		if req.Producer != nil {
			seq, ok := req.Sequences[TopicPartition{r.TopicID, part}]
			if !ok {
				return invalid("record %d: no base sequence for topic %d partition %d: an idempotent request needs one per partition it writes", i, r.TopicID, part)
			}
			if seq < 0 {
				return invalid("base sequence %d for topic %d partition %d: sequences start at 0", seq, r.TopicID, part)
			}
		}
		known := false
		for _, k := range kinds {
			if k.topic == r.TopicID {
				if k.logAppend != r.LogAppendTime {
					return invalid("record %d: topic %d mixes LogAppendTime and CreateTime records", i, r.TopicID)
				}
				known = true
				break
			}
		}
		if !known {
			kinds = append(kinds, topicKind{r.TopicID, r.LogAppendTime})
		}
		if batches.add(TopicPartition{r.TopicID, part}) {
			p.size += batchOverhead
		}
		p.size += recordOverhead + int64(len(r.Key)+len(r.Value))
		for _, h := range r.Headers {
			p.size += headerOverhead + int64(len(h.Key)+len(h.Value))
		}
	}
	return w.checkSize(p)
}

// prepareRaw is prepare for a request of raw batches: it checks each batch's header
// against its summary and against what the writer would have written for the request
// (RawBatches), and sizes the request exactly as its records would be sized, so that
// the flush size limit and the buffer cap do not depend on the form a request came in.
func (w *Writer) prepareRaw(req Request) (*pending, error) {
	invalid := w.invalid
	rb := req.Raw
	switch {
	case len(req.Records) > 0:
		return invalid("records and raw batches in one request: send one or the other")
	case req.Compression != segment.CompressionNone:
		return invalid("compression %d with raw batches: each batch carries its own codec; leave Compression at none", req.Compression)
	case len(rb.Batches) == 0:
		return invalid("no raw batches: send at least one")
	case len(rb.Summaries) != len(rb.Batches):
		return invalid("%d summaries for %d raw batches: scan each batch with segment.ScanBatch", len(rb.Summaries), len(rb.Batches))
	case rb.Partition < 0:
		return invalid("raw batches for partition %d: name the partition, 0 up to the partition count", rb.Partition)
	case req.Producer == nil && len(req.Sequences) > 0:
		return invalid("sequences without a producer: set Producer for an idempotent request")
	}
	tp := TopicPartition{rb.TopicID, rb.Partition}
	// What the writer would write into each batch's producer fields.
	pid, epoch, seq := int64(-1), int16(-1), int64(-1)
	if pr := req.Producer; pr != nil {
		s, ok := req.Sequences[tp]
		switch {
		case !ok:
			return invalid("no base sequence for topic %d partition %d: an idempotent request needs one per partition it writes", tp.TopicID, tp.Partition)
		case s < 0:
			return invalid("base sequence %d for topic %d partition %d: sequences start at 0", s, tp.TopicID, tp.Partition)
		}
		pid, epoch, seq = pr.ID, pr.Epoch, int64(s)
	}
	p := &pending{req: req, done: make(chan struct{})}
	recode := false
	for i, raw := range rb.Batches {
		s := &rb.Summaries[i]
		h, err := segment.ParseBatchHeader(raw)
		switch {
		case err != nil:
			return invalid("raw batch %d: %v", i, err)
		case h != s.Header:
			return invalid("raw batch %d: its summary is of another batch: scan each batch with segment.ScanBatch", i)
		case !s.Canonical:
			return invalid("raw batch %d is not laid out as the writer lays out its records: send its records instead", i)
		case h.LogAppendTime:
			return invalid("raw batch %d has the LogAppendTime timestamp type, which the writer stamps at flush: send its records instead", i)
		case h.Transactional != (req.Txn != nil):
			return invalid("raw batch %d: transactional attribute %v in a request that is transactional: %v", i, h.Transactional, req.Txn != nil)
		case h.ProducerID != pid || h.ProducerEpoch != epoch || int64(h.BaseSequence) != seq:
			return invalid("raw batch %d carries producer %d epoch %d base sequence %d, the request producer %d epoch %d base sequence %d",
				i, h.ProducerID, h.ProducerEpoch, h.BaseSequence, pid, epoch, seq)
		}
		if pid >= 0 {
			seq += int64(h.NumRecords)
		}
		recode = recode || (h.Compression == segment.CompressionNone && w.cfg.Compression != segment.CompressionNone)
		p.records += int(h.NumRecords)
		p.size += batchOverhead + int64(h.NumRecords)*recordOverhead + s.DataBytes + int64(s.Headers)*headerOverhead
	}
	if recode {
		// The operator asked for compression: give these records the codec they would
		// have had as Records, at the cost of decoding them.
		recs := make([]Record, 0, p.records)
		for i, raw := range rb.Batches {
			d, err := segment.DecodeBatch(raw)
			if err != nil {
				return invalid("raw batch %d: %v", i, err)
			}
			for _, r := range d.Records {
				recs = append(recs, Record{TopicID: rb.TopicID, Partition: rb.Partition,
					Record: segment.Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}})
			}
		}
		req.Records, req.Raw = recs, nil
		return w.prepare(req)
	}
	return w.checkSize(p)
}

func (w *Writer) invalid(format string, args ...any) (*pending, error) {
	w.m.rejected.WithLabelValues("invalid").Inc()
	return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// checkSize refuses a request that could never fit in one flush.
func (w *Writer) checkSize(p *pending) (*pending, error) {
	if p.size > w.cfg.MaxFlushBytes {
		w.m.rejected.WithLabelValues("too_large").Inc()
		return nil, fmt.Errorf("%w: about %d bytes, above the flush size of %d bytes: split it into smaller requests", ErrTooLarge, p.size, w.cfg.MaxFlushBytes)
	}
	return p, nil
}

// tpSet is a set of partitions, a slice while small (most requests write one or a few
// partitions), a map beyond.
type tpSet struct {
	few  []TopicPartition
	many map[TopicPartition]struct{}
}

// add adds tp and reports whether it was new.
func (s *tpSet) add(tp TopicPartition) bool {
	if s.many != nil {
		if _, ok := s.many[tp]; ok {
			return false
		}
		s.many[tp] = struct{}{}
		return true
	}
	for _, x := range s.few {
		if x == tp {
			return false
		}
	}
	if len(s.few) < 16 {
		s.few = append(s.few, tp)
		return true
	}
	s.many = make(map[TopicPartition]struct{}, 2*len(s.few))
	for _, x := range s.few {
		s.many[x] = struct{}{}
	}
	s.many[tp] = struct{}{}
	return true
}

func containsTopic(ts []int64, t int64) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// enqueue buffers p, or refuses it at once when the writer is closed or full.
func (w *Writer) enqueue(p *pending) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.m.rejected.WithLabelValues("closed").Inc()
		return ErrClosed
	}
	if w.held+p.size > w.cfg.BufferBytes {
		w.m.rejected.WithLabelValues("buffer_full").Inc()
		return fmt.Errorf("%w: %d of %d bytes held: retry after a short wait", ErrBufferFull, w.held, w.cfg.BufferBytes)
	}
	// The records become an object that the node allocates: reserved before they are
	// buffered, released when their flush is answered (process).
	if !w.cfg.Memory.TryReserve(p.size, membudget.UseWriter) {
		w.m.rejected.WithLabelValues("memory").Inc()
		return fmt.Errorf("%w: the node's memory budget is spent: retry after a short wait", ErrBufferFull)
	}
	// Cut before p would push the flush past MaxFlushBytes, so objects stay bounded.
	if len(w.buf) > 0 && w.bufBytes+p.size > w.cfg.MaxFlushBytes {
		w.cutLocked()
	}
	w.held += p.size
	w.m.buffered.Add(float64(p.size))
	if len(w.buf) == 0 {
		w.bufFirst = time.Now()
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	w.buf = append(w.buf, p)
	w.m.requests.Inc()
	w.bufBytes += p.size
	w.bufRecords += p.records
	if w.bufBytes >= w.cfg.MaxFlushBytes {
		w.cutLocked()
	}
	w.dispatchLocked()
	return nil
}

// cutLocked turns the buffer into a flush, queued behind the flushes cut before it.
func (w *Writer) cutLocked() {
	if len(w.buf) == 0 {
		return
	}
	orderBySequence(w.buf)
	f := &flush{
		seq:      w.seq,
		reqs:     w.buf,
		bytes:    w.bufBytes,
		records:  w.bufRecords,
		prevDone: w.lastDone,
		done:     make(chan struct{}),
	}
	w.seq++
	// Sticky partitioning: every unkeyed record of a topic in this flush goes to one
	// partition, the next one for each flush that has some (from a random start, so
	// that writers do not all begin at partition 0).
	for _, p := range f.reqs {
		for _, t := range p.unkeyed {
			if _, ok := f.sticky[t]; ok {
				continue
			}
			if f.sticky == nil {
				f.sticky = make(map[int64]uint64)
			}
			c, ok := w.sticky[t]
			if !ok {
				c = uint64(rand.Uint32()) // 64 bits: never wraps, so never repeats a partition
			}
			f.sticky[t] = c
			w.sticky[t] = c + 1
		}
	}
	w.lastDone = f.done
	w.cut = append(w.cut, f)
	w.buf, w.bufBytes, w.bufRecords = nil, 0, 0
	w.m.flushes.Inc()
	w.m.flushRecords.Observe(float64(f.records))
}

// dispatchLocked starts the flushes waiting for an in-flight slot, in flush order.
func (w *Writer) dispatchLocked() {
	for len(w.cut) > 0 && w.inflight < w.cfg.MaxInflight {
		f := w.cut[0]
		w.cut[0] = nil
		w.cut = w.cut[1:]
		w.inflight++
		w.wg.Add(1)
		go w.process(f)
	}
}

// process runs one flush, then releases its bytes and slot and answers its requests.
// The bytes are released before the answers so that a caller who retries right after
// an answer finds room.
func (w *Writer) process(f *flush) {
	defer w.wg.Done()
	w.flush(f)
	w.mu.Lock()
	w.held -= f.bytes
	w.cfg.Memory.Release(f.bytes)
	w.inflight--
	w.dispatchLocked()
	w.roomLocked()
	if len(w.buf) > 0 {
		// A slot may have freed for a lingered buffer: Run decides.
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	w.m.buffered.Sub(float64(f.bytes))
	for _, p := range f.reqs {
		if p.requeue {
			p.requeue = false
			refusal := p.err
			p.err, p.resp = nil, Response{}
			if err := w.enqueue(p); err != nil {
				p.err = refusal // no room to wait: answer the refusal after all
			} else {
				continue
			}
		}
		close(p.done)
	}
	close(f.done)
}
