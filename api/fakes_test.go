package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// testNow is the node clock of every test: CreateTime bounds are checked against it.
var testNow = time.UnixMilli(1_700_000_000_000)

type tp struct {
	topicID   int64
	partition int32
}

// fakeCluster is an in-memory catalog, writer and reader in one, so a record produced
// through the API can be fetched back through it. It counts writes so tests can assert
// that refused input changed nothing.
type fakeCluster struct {
	mu        sync.Mutex
	nextID    int64
	topics    map[string]catalog.Topic
	logStart  map[tp]int64
	logs      map[tp][]segment.DecodedRecord // logs[p][i] has offset logStart+i
	changed   chan struct{}                  // closed and replaced on every append
	stampTime int64                          // LogAppendTime stamp

	catalogWrites int // successful CreateTopic/UpdateTopic/DeleteTopic
	topicReads    int // Topic calls
	produceCalls  int
	produceErr    error           // returned by Produce instead of writing
	produced      []writer.Record // every record Produce accepted
	rawRequests   int             // accepted requests that came as raw batches
	fetchWaits    []time.Duration
	panicOnTopics bool
	markers       map[tp]map[int64]bool // offsets taken by transaction markers: no record
}

// The core's interfaces, under the names the API's tests knew them by.
type (
	Catalog = broker.Catalog
	Writer  = broker.Writer
	Reader  = broker.Reader
	Groups  = broker.Groups
)

var (
	_ Catalog = (*fakeCluster)(nil)
	_ Writer  = (*fakeCluster)(nil)
	_ Reader  = (*fakeCluster)(nil)
)

// testDeps are what a test serves the API from: the roles and the catalog, from which
// newAPI builds the core as a node would.
type testDeps struct {
	Catalog    Catalog
	Writer     Writer
	Reader     Reader
	Groups     Groups
	Ready      func(ctx context.Context) error
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	Log        *slog.Logger
	Now        func() time.Time
	TopicTTL   time.Duration
	Memory     *membudget.Budget
	// MaxWait caps fetch long-polls in the core (broker.Config.MaxWait).
	MaxWait time.Duration
	// Registry is the schema registry's catalog (nil: none).
	Registry broker.SchemaRegistry
}

// newAPI builds the core over d and the API over the core. A fake catalog with
// InitProducer or DeleteRecords serves those too (a test-only discovery: a node takes
// them from its catalog.Backend), as does a reader with FetchRawShared.
func newAPI(cfg Config, d testDeps) *API {
	bd := broker.Deps{Catalog: d.Catalog, Writer: d.Writer, Reader: d.Reader, Groups: d.Groups, Now: d.Now, Registry: d.Registry}
	if p, ok := d.Catalog.(broker.Producers); ok {
		bd.Producers = p
	}
	if rd, ok := d.Catalog.(broker.RecordDeleter); ok {
		bd.Records = rd
	}
	if br, ok := d.Reader.(broker.BatchReader); ok {
		bd.Batches = br
	}
	var core *broker.Broker
	if d.Catalog != nil || d.Writer != nil || d.Reader != nil || d.Groups != nil {
		core = broker.New(broker.Config{TopicCacheTTL: d.TopicTTL, MaxWait: d.MaxWait}, bd)
	}
	return New(cfg, Deps{Core: core, Ready: d.Ready, Gatherer: d.Gatherer, Registerer: d.Registerer, Log: d.Log, Memory: d.Memory})
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		topics:    map[string]catalog.Topic{},
		logStart:  map[tp]int64{},
		logs:      map[tp][]segment.DecodedRecord{},
		changed:   make(chan struct{}),
		stampTime: testNow.UnixMilli() + 5,
	}
}

func (c *fakeCluster) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := catalog.ValidateTopicName(name); err != nil {
		return catalog.Topic{}, err
	}
	if err := catalog.ValidatePartitions(partitions); err != nil {
		return catalog.Topic{}, err
	}
	if _, err := catalog.ParseConfig(configs); err != nil {
		return catalog.Topic{}, err
	}
	if _, ok := c.topics[name]; ok {
		return catalog.Topic{}, fmt.Errorf("create topic %s: %w", name, catalog.ErrTopicExists)
	}
	c.nextID++
	cfg := map[string]string{}
	for k, v := range configs {
		cfg[k] = v
	}
	t := catalog.Topic{ID: c.nextID, Name: name, Partitions: partitions, Configs: cfg, CreatedAt: testNow}
	c.topics[name] = t
	c.catalogWrites++
	return t, nil
}

func (c *fakeCluster) Topic(ctx context.Context, name string) (catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topicReads++
	t, ok := c.topics[name]
	if !ok {
		return catalog.Topic{}, fmt.Errorf("topic %s: %w", name, catalog.ErrTopicNotFound)
	}
	return t, nil
}

func (c *fakeCluster) Topics(ctx context.Context) ([]catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.panicOnTopics {
		panic("fake: Topics exploded")
	}
	var out []catalog.Topic
	for _, t := range c.topics {
		out = append(out, t)
	}
	return out, nil
}

func (c *fakeCluster) DeleteTopic(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; !ok {
		return fmt.Errorf("delete topic %s: %w", name, catalog.ErrTopicNotFound)
	}
	delete(c.topics, name)
	c.catalogWrites++
	return nil
}

func (c *fakeCluster) UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return catalog.Topic{}, fmt.Errorf("update topic %s: %w", name, catalog.ErrTopicNotFound)
	}
	if partitions != 0 {
		if partitions < t.Partitions {
			return catalog.Topic{}, fmt.Errorf("update topic %s: %w: %d is fewer than %d", name, catalog.ErrInvalidPartitions, partitions, t.Partitions)
		}
		if err := catalog.ValidatePartitions(partitions); err != nil {
			return catalog.Topic{}, err
		}
	}
	next := map[string]string{}
	for k, v := range t.Configs {
		next[k] = v
	}
	for k, v := range configs {
		if v == "" {
			delete(next, k)
		} else {
			next[k] = v
		}
	}
	if _, err := catalog.ParseConfig(next); err != nil {
		return catalog.Topic{}, err
	}
	if partitions != 0 {
		t.Partitions = partitions
	}
	t.Configs = next
	c.topics[name] = t
	c.catalogWrites++
	return t, nil
}

func (c *fakeCluster) topicByID(id int64) (catalog.Topic, bool) {
	for _, t := range c.topics {
		if t.ID == id {
			return t, true
		}
	}
	return catalog.Topic{}, false
}

func (c *fakeCluster) Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topicByID(topicID)
	if !ok {
		return nil, catalog.ErrTopicNotFound
	}
	var out []catalog.PartitionInfo
	for p := int32(t.Partitions - 1); p >= 0; p-- { // reverse: the API must sort
		k := tp{topicID, p}
		var bytes int64
		for _, r := range c.logs[k] {
			bytes += int64(len(r.Key) + len(r.Value))
		}
		hw := c.logStart[k] + int64(len(c.logs[k]))
		out = append(out, catalog.PartitionInfo{TopicID: topicID, Partition: p, LogStartOffset: c.logStart[k],
			HighWatermark: hw, LastStableOffset: hw, Bytes: bytes}) // no transactions here

	}
	return out, nil
}

func (c *fakeCluster) OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tp{topicID, partition}
	for _, r := range c.logs[k] {
		if r.Timestamp >= ts {
			return r.Offset, nil
		}
	}
	return c.logStart[k] + int64(len(c.logs[k])), nil
}

// Produce appends atomically: every record is checked before any is written.
func (c *fakeCluster) Produce(ctx context.Context, req writer.Request) (writer.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.produceCalls++
	if c.produceErr != nil {
		return writer.Response{}, c.produceErr
	}
	if rb := req.Raw; rb != nil {
		// The fake keeps records: read back those of the batches the real writer would
		// store as they are.
		for _, raw := range rb.Batches {
			d, err := segment.DecodeBatch(raw)
			if err != nil {
				return writer.Response{}, fmt.Errorf("%w: raw batch: %v", writer.ErrInvalid, err)
			}
			for _, r := range d.Records {
				req.Records = append(req.Records, writer.Record{TopicID: rb.TopicID, Partition: rb.Partition,
					Record: segment.Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}})
			}
		}
		c.rawRequests++
	}
	parts := make([]int32, len(req.Records))
	for i, r := range req.Records {
		t, ok := c.topicByID(r.TopicID)
		if !ok {
			return writer.Response{}, fmt.Errorf("writer: commit: %w", catalog.ErrTopicNotFound)
		}
		p := r.Partition
		if p < 0 {
			p = 0
			if r.Key != nil {
				h := fnv.New32a()
				h.Write(r.Key)
				p = int32(h.Sum32() % uint32(r.Partitions))
			}
		}
		if p >= t.Partitions {
			return writer.Response{}, fmt.Errorf("writer: commit: %w", catalog.ErrPartitionOutOfRange)
		}
		parts[i] = p
	}
	resp := writer.Response{Records: make([]writer.RecordResult, len(req.Records))}
	for i, r := range req.Records {
		k := tp{r.TopicID, parts[i]}
		off := c.logStart[k] + int64(len(c.logs[k]))
		ts := r.Timestamp
		if r.LogAppendTime {
			ts = c.stampTime
		}
		// Copied, as the writer encodes them before it answers: the API pools request
		// bodies, which the record bytes point into.
		var hs []segment.Header
		if r.Headers != nil {
			hs = make([]segment.Header, len(r.Headers))
		}
		for j, h := range r.Headers {
			hs[j] = segment.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
		c.logs[k] = append(c.logs[k], segment.DecodedRecord{Offset: off, Timestamp: ts, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Headers: hs})
		c.produced = append(c.produced, r)
		resp.Records[i] = writer.RecordResult{Partition: parts[i], Offset: off}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return resp, nil
}

// appendRaw puts records straight into a log, as another client (Kafka protocol)
// would, bypassing the API's encoding.
func (c *fakeCluster) appendRaw(topic string, partition int32, recs ...segment.DecodedRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tp{c.topics[topic].ID, partition}
	for _, r := range recs {
		r.Offset = c.logStart[k] + int64(len(c.logs[k]))
		c.logs[k] = append(c.logs[k], r)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// appendMarker takes the next offset of a partition with a transaction marker, which a
// fetch skips (no record, next_offset past it), as the real reader does.
func (c *fakeCluster) appendMarker(topic string, partition int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tp{c.topics[topic].ID, partition}
	off := c.logStart[k] + int64(len(c.logs[k]))
	if c.markers == nil {
		c.markers = map[tp]map[int64]bool{}
	}
	if c.markers[k] == nil {
		c.markers[k] = map[int64]bool{}
	}
	c.markers[k][off] = true
	c.logs[k] = append(c.logs[k], segment.DecodedRecord{Offset: off})
	close(c.changed)
	c.changed = make(chan struct{})
}

// Fetch waits up to f.Wait for data at the high watermark, like the real reader.
func (c *fakeCluster) Fetch(ctx context.Context, f reader.Fetch) (reader.Result, error) {
	var timer <-chan time.Time
	if f.Wait > 0 {
		t := time.NewTimer(f.Wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		c.mu.Lock()
		c.fetchWaits = append(c.fetchWaits, f.Wait)
		if _, ok := c.topicByID(f.TopicID); !ok {
			c.mu.Unlock()
			return reader.Result{}, fmt.Errorf("reader: %w", catalog.ErrTopicNotFound)
		}
		k := tp{f.TopicID, f.Partition}
		start, log := c.logStart[k], c.logs[k]
		hw := start + int64(len(log))
		if f.Offset < start || f.Offset > hw {
			c.mu.Unlock()
			return reader.Result{}, &reader.OutOfRangeError{Offset: f.Offset, LogStartOffset: start, HighWatermark: hw}
		}
		if f.Offset < hw || timer == nil {
			n := f.MaxRecords
			if n == 0 {
				n = 100
			}
			recs := log[f.Offset-start:]
			if len(recs) > n {
				recs = recs[:n]
			}
			if m := c.markers[k]; m[f.Offset] {
				// Markers answer alone, as the real reader's skipped control batches.
				i := 0
				for i < len(recs) && m[f.Offset+int64(i)] {
					i++
				}
				c.mu.Unlock()
				return reader.Result{NextOffset: f.Offset + int64(i), HighWatermark: hw, LastStableOffset: hw, LogStartOffset: start}, nil
			}
			for i := range recs {
				if c.markers[k][f.Offset+int64(i)] {
					recs = recs[:i]
					break
				}
			}
			c.mu.Unlock()
			return reader.Result{Records: append([]segment.DecodedRecord(nil), recs...), NextOffset: f.Offset + int64(len(recs)),
				HighWatermark: hw, LastStableOffset: hw, LogStartOffset: start}, nil
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return reader.Result{}, ctx.Err()
		case <-timer:
			timer = nil
		case <-changed:
		}
	}
}

func (c *fakeCluster) stats() (catalogWrites, produceCalls, produced int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.catalogWrites, c.produceCalls, len(c.produced)
}

// testEnv is an API over a fakeCluster.
type testEnv struct {
	t   *testing.T
	c   *fakeCluster
	api *API
	h   http.Handler
	reg *prometheus.Registry
	log *bytes.Buffer
}

func newEnv(t *testing.T, cfg Config, mutate ...func(*testDeps)) *testEnv {
	t.Helper()
	c := newFakeCluster()
	reg := prometheus.NewRegistry()
	var logBuf bytes.Buffer
	d := testDeps{
		Catalog:    c,
		Writer:     c,
		Reader:     c,
		Gatherer:   reg,
		Registerer: reg,
		Log:        slog.New(slog.NewTextHandler(&syncWriter{w: &logBuf}, nil)),
		Now:        func() time.Time { return testNow },
	}
	for _, m := range mutate {
		m(&d)
	}
	a := newAPI(cfg, d)
	return &testEnv{t: t, c: c, api: a, h: a.Handler(), reg: reg, log: &logBuf}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// createTopic creates a topic directly in the fake catalog.
func (e *testEnv) createTopic(name string, partitions int32, configs map[string]string) catalog.Topic {
	e.t.Helper()
	t, err := e.c.CreateTopic(context.Background(), name, partitions, configs)
	if err != nil {
		e.t.Fatalf("create topic %s: %v", name, err)
	}
	e.c.mu.Lock()
	e.c.catalogWrites = 0
	e.c.mu.Unlock()
	return t
}

type header struct{ k, v string }

func (e *testEnv) do(method, path, body string, headers ...header) *httptest.ResponseRecorder {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		if h.v == "" {
			req.Header.Del(h.k)
		} else {
			req.Header.Set(h.k, h.v)
		}
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// decodeBody decodes a JSON response into v, failing on trailing garbage.
func decodeBody(t *testing.T, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode response %q: %v", rec.Body.String(), err)
	}
}

// wantProblem checks a problem response's status, code and shape.
func wantProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, code Code) map[string]any {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d; body %s", rec.Code, status, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p map[string]any
	decodeBody(t, rec, &p)
	if p["code"] != string(code) {
		t.Fatalf("code %v, want %s; body %s", p["code"], code, rec.Body.String())
	}
	if p["type"] != problemTypePrefix+string(code) || p["title"] == "" || p["detail"] == "" {
		t.Fatalf("incomplete problem %s", rec.Body.String())
	}
	if n, _ := p["status"].(json.Number).Int64(); int(n) != status {
		t.Fatalf("problem status %v, want %d", p["status"], status)
	}
	return p
}

func jsonNumber(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%v: %v", v, err)
	}
	return i
}
