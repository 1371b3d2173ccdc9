package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/segment"
)

// memStore is an in-memory segmentStore that counts puts and fails, stalls or delays
// them on cue.
type memStore struct {
	mu       sync.Mutex
	objs     map[string][]byte
	keys     []string   // in put order
	parts    [][][]byte // the parts of each stored put, in put order
	puts     int        // Put calls
	inFlight int
	maxIn    int // most Puts in progress at once

	// fail, when set, decides the outcome of Put call n (1-based).
	fail func(n int) error
	// delay, when set, is how long Put call n takes.
	delay func(n int) time.Duration
	// block, when set, runs inside Put call n before it stores (it may wait).
	block func(n int)
}

var _ segmentStore = (*memStore)(nil)

// putParts returns the parts of every put that stored its object, in order.
func (s *memStore) putParts() [][][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][][]byte(nil), s.parts...)
}

func newMemStore() *memStore { return &memStore{objs: make(map[string][]byte)} }

func (s *memStore) PutParts(ctx context.Context, key string, parts [][]byte) error {
	body := bytes.Join(parts, nil)
	s.mu.Lock()
	s.puts++
	n := s.puts
	s.inFlight++
	s.maxIn = max(s.maxIn, s.inFlight)
	fail, delay, block := s.fail, s.delay, s.block
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if block != nil {
		block(n)
	}
	if delay != nil {
		select {
		case <-time.After(delay(n)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		if err := fail(n); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objs[key]; ok {
		return fmt.Errorf("memstore: put %s: key exists", key)
	}
	s.objs[key] = append([]byte(nil), body...)
	s.keys = append(s.keys, key)
	s.parts = append(s.parts, parts)
	return nil
}

func (s *memStore) get(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objs[key]
	return b, ok
}

func (s *memStore) counts() (puts, stored, maxIn int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, len(s.objs), s.maxIn
}

// fakeCatalog is an in-memory committer: it assigns offsets from per-partition high
// watermarks like the real commit, refuses requests for topics in refuse, checks that
// every committed object is already in the store (invariant 3) and that commits never
// overlap, and fails on cue.
type fakeCatalog struct {
	t     testing.TB
	store *memStore

	mu       sync.Mutex
	hw       map[TopicPartition]int64
	refuse   map[int64]error
	segs     []catalog.Segment           // Commit calls, in call order
	results  map[string][]catalog.Result // committed keys
	aborted  map[string]bool             // keys fenced by Settle
	inCommit int
	overlap  bool // two commits ran at once
	settles  int

	// commitFault, when set, is asked about Commit call n: apply says whether the
	// commit happens, err is what the call returns (nil: the results).
	commitFault func(n int) (apply bool, err error)
	// settleFault, when set, makes Settle call n return err (nil: answer normally).
	settleFault func(n int) error
	// commitDelay, when set, is how long Commit call n takes.
	commitDelay func(n int) time.Duration
}

var _ committer = (*fakeCatalog)(nil)

func newFakeCatalog(t testing.TB, store *memStore) *fakeCatalog {
	return &fakeCatalog{
		t:       t,
		store:   store,
		hw:      make(map[TopicPartition]int64),
		refuse:  make(map[int64]error),
		results: make(map[string][]catalog.Result),
		aborted: make(map[string]bool),
	}
}

func (c *fakeCatalog) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	c.mu.Lock()
	c.inCommit++
	if c.inCommit > 1 {
		c.overlap = true
	}
	c.segs = append(c.segs, seg)
	n := len(c.segs)
	fault, delay := c.commitFault, c.commitDelay
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inCommit--
		c.mu.Unlock()
	}()
	if delay != nil {
		time.Sleep(delay(n))
	}
	if c.store != nil {
		obj, ok := c.store.get(seg.Key)
		if !ok {
			c.t.Errorf("commit of %s before its object exists", seg.Key)
		} else if int64(len(obj)) != seg.Size {
			c.t.Errorf("commit of %s: size %d, object has %d bytes", seg.Key, seg.Size, len(obj))
		}
		for _, r := range seg.Requests {
			for _, b := range r.Batches {
				if b.Pos < 0 || b.Len <= 0 || b.Pos+b.Len > seg.Size {
					c.t.Errorf("commit of %s: batch range [%d, +%d) outside the object (%d bytes)", seg.Key, b.Pos, b.Len, seg.Size)
				}
			}
		}
	}
	apply, err := true, error(nil)
	if fault != nil {
		apply, err = fault(n)
	}
	var res []catalog.Result
	if apply {
		res = c.apply(seg)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (c *fakeCatalog) apply(seg catalog.Segment) []catalog.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted[seg.Key] {
		c.t.Errorf("commit of %s after it was fenced", seg.Key)
	}
	res := make([]catalog.Result, len(seg.Requests))
	for i, r := range seg.Requests {
		for _, b := range r.Batches {
			if err := c.refuse[b.TopicID]; err != nil {
				res[i].Err = err
			}
		}
		if res[i].Err != nil {
			continue
		}
		res[i].BaseOffsets = make([]int64, len(r.Batches))
		for j, b := range r.Batches {
			tp := TopicPartition{b.TopicID, b.Partition}
			res[i].BaseOffsets[j] = c.hw[tp]
			c.hw[tp] += int64(b.Records)
		}
	}
	c.results[seg.Key] = res
	return res
}

func (c *fakeCatalog) Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settles++
	if c.settleFault != nil {
		if err := c.settleFault(c.settles); err != nil {
			return nil, err
		}
	}
	res, ok := c.results[seg.Key]
	if !ok {
		c.aborted[seg.Key] = true
		return nil, fmt.Errorf("fake: settle %s: %w", seg.Key, catalog.ErrCommitAborted)
	}
	out := make([]catalog.Result, len(res))
	for i, r := range res {
		if r.Err != nil {
			r = catalog.Result{Err: catalog.ErrCommitAborted}
		}
		out[i] = r
	}
	return out, nil
}

func (c *fakeCatalog) commitCalls() []catalog.Segment {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]catalog.Segment(nil), c.segs...)
}

func (c *fakeCatalog) highWatermark(topic int64, part int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hw[TopicPartition{topic, part}]
}

// Test-only views of the writer's state.

func (w *Writer) bufferedRequests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

func (w *Writer) flushesCut() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

func (w *Writer) heldBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held
}

// metricValue reads a counter or gauge, or a histogram's sample count.
func metricValue(t testing.TB, c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	panic(fmt.Sprintf("unsupported metric %v", &m))
}

// harness runs a writer over a memStore and a fakeCatalog.
type harness struct {
	w      *Writer
	store  *memStore
	cat    *fakeCatalog
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

// start builds the harness; run says whether Run is started (stopped at cleanup).
func start(t testing.TB, cfg Config, run bool) *harness {
	t.Helper()
	store := newMemStore()
	cat := newFakeCatalog(t, store)
	reg := prometheus.NewRegistry()
	h := &harness{store: store, cat: cat, reg: reg, done: make(chan error, 1)}
	h.w = New(store, cat, cfg, nil, reg)
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		go func() { h.done <- h.w.Run(ctx) }()
		t.Cleanup(func() { h.stop(t) })
	}
	return h
}

// stop ends Run and returns its error (once; later calls return nil).
func (h *harness) stop(t testing.TB) error {
	t.Helper()
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
		return nil
	}
}

type outcome struct {
	resp Response
	err  error
}

// produceAsync starts a Produce and returns where its outcome will arrive.
func (h *harness) produceAsync(req Request) chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		resp, err := h.w.Produce(context.Background(), req)
		ch <- outcome{resp, err}
	}()
	return ch
}

// enqueueRaw buffers req as Produce does, without waiting, and returns its pending
// entry so a test can see exactly when it is answered.
func (h *harness) enqueueRaw(t testing.TB, req Request) *pending {
	t.Helper()
	p, err := h.w.prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.w.enqueue(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// enqueueInOrder starts one Produce per request, each only after the previous one is in
// the writer (buffered or cut), so the flush order is the slice order.
func (h *harness) enqueueInOrder(t testing.TB, reqs ...Request) []chan outcome {
	t.Helper()
	var chs []chan outcome
	for _, req := range reqs {
		before := h.entered()
		chs = append(chs, h.produceAsync(req))
		testwait.Until(t, 20*time.Second, "the request to enter the writer", func() bool { return h.entered() > before })
	}
	return chs
}

// entered counts requests taken by the writer (buffered or already cut).
func (h *harness) entered() int { return int(metricValue(nil, h.w.m.requests)) }

func await(t testing.TB, ch chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to a produce request")
		return outcome{}
	}
}

func mustOK(t testing.TB, o outcome) Response {
	t.Helper()
	if o.err != nil {
		t.Fatalf("produce: %v", o.err)
	}
	return o.resp
}

// rec makes a record for topic with partitions partitions.
func rec(topic int64, partitions, partition int32, key, value string) Record {
	r := Record{TopicID: topic, Partitions: partitions, Partition: partition}
	if key != "" {
		r.Key = []byte(key)
	}
	r.Value = []byte(value)
	r.Timestamp = 1_700_000_000_000
	return r
}

func req(recs ...Record) Request { return Request{Records: recs} }

// decodeAt decodes the batch at [pos, pos+n) of a stored object.
func decodeAt(t testing.TB, store *memStore, key string, pos, n int64) segment.DecodedBatch {
	t.Helper()
	obj, ok := store.get(key)
	if !ok {
		t.Fatalf("object %s not stored", key)
	}
	b, err := segment.DecodeBatch(obj[pos : pos+n])
	if err != nil {
		t.Fatalf("decode batch of %s at %d: %v", key, pos, err)
	}
	return b
}

var errBoom = errors.New("boom")
