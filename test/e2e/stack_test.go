// Package e2e proves the node's "done when" list (issue 3) end to end: an in-process
// node assembled as cmd/strata assembles it (internal/node: catalog, object store,
// writer, reader, core and API behind a real HTTP server), and the real binary run as
// separate processes. Everything here is
// a test; nothing is exported.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/objstore/s3"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// The two deployments every in-process test can run against.
const (
	embedded      = "embedded"       // SQLite + filesystem, as `strata dev`
	postgresMinIO = "postgres_minio" // Postgres + MinIO, as `strata serve`
)

var backends = []string{embedded, postgresMinIO}

// stackOptions choose how a stack is built. The zero value is an embedded node with
// cmd/strata's defaults.
type stackOptions struct {
	// backend is embedded (default) or postgresMinIO.
	backend string
	// dsn, for postgresMinIO, is the catalog database; empty: a fresh database on the
	// shared test server.
	dsn string
	// fault wraps the object store in the fault decorator (stack.fault).
	fault bool
	// commitTimeout is the catalog's commit_timeout (cmd/strata's --commit-timeout);
	// zero: 30s, the flag's default.
	commitTimeout time.Duration
	// topicCacheTTL overrides broker.Config.TopicCacheTTL (cmd/strata leaves the default),
	// for tests that need produce to reach the writer without a catalog read.
	topicCacheTTL time.Duration
}

// stack is one in-process node: every role, assembled and served as cmd/strata's
// runNode does it (internal/node, through nodetest).
type stack struct {
	url    string
	client *client.Client
	cat    catalog.Catalog
	raw    objstore.Store // the store under the decorators: what is really stored
	fault  *fault.Store   // nil unless stackOptions.fault
	reg    *prometheus.Registry
	logs   *nodetest.Logs
}

// newStack builds and starts a node; everything it starts is stopped when t ends.
func newStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	if o.commitTimeout == 0 {
		o.commitTimeout = 30 * time.Second
	}
	s := &stack{reg: prometheus.NewRegistry()}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The node as runNode starts it, with the defaults of cmd/strata's flags:
	// --linger, --max-flush-bytes, --buffer-bytes, --cache-bytes, and a writer commit
	// timeout a third of the catalog's.
	opts := []nodetest.Option{
		nodetest.CatalogOptions(catalog.Options{CommitTimeout: o.commitTimeout}),
		nodetest.Mutate(func(c *node.Config) {
			c.WriterConfig = writer.Config{
				Linger:        writer.DefaultLinger,
				MaxFlushBytes: writer.DefaultMaxFlushBytes,
				BufferBytes:   writer.DefaultBufferBytes,
				CommitTimeout: o.commitTimeout / 3,
			}
			c.ReaderConfig = reader.Config{CacheBytes: reader.DefaultCacheBytes}
			c.Broker = broker.Config{TopicCacheTTL: o.topicCacheTTL}
			c.Registry = s.reg
			c.ShutdownTimeout = 60 * time.Second
		}),
	}
	switch o.backend {
	case "", embedded:
	case postgresMinIO:
		opts = append(opts, nodetest.OnServices(o.dsn))
	default:
		t.Fatalf("unknown backend %q", o.backend)
	}
	if o.fault {
		opts = append(opts, nodetest.WrapStore(func(st objstore.Store) objstore.Store {
			s.fault = fault.New(st)
			return s.fault
		}))
	}
	n := nodetest.Start(t, opts...)
	s.url, s.cat, s.raw, s.logs = n.URL, n.Catalog, n.Store, n.Logs
	s.client = client.New(s.url)
	return s
}

// openMinIOBucket opens (creating it if needed) bucket on the test MinIO, prefix e2e/.
func openMinIOBucket(t testing.TB, bucket string, log *slog.Logger) *s3.Store {
	t.Helper()
	m := testsvc.MinIO(t)
	st, err := s3.New(context.Background(), s3.Config{
		Bucket: bucket, Prefix: "e2e", Endpoint: m.Endpoint, Region: m.Region,
		PathStyle: true, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// objects lists every key the store really holds.
func (s *stack) objects(t testing.TB) []string {
	t.Helper()
	var keys []string
	err := s.raw.List(context.Background(), "", func(i objstore.Info) error {
		keys = append(keys, i.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("list objects: %v", err)
	}
	return keys
}

// lockedBuffer collects a log written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---- HTTP helpers shared by the tests ----

// problemBody is what a problem+json answer carries.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// httpResult is one raw HTTP exchange.
type httpResult struct {
	status int
	header http.Header
	body   []byte
}

func (r httpResult) problem() (problemBody, bool) {
	var p problemBody
	ct := r.header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/problem+json") || json.Unmarshal(r.body, &p) != nil {
		return p, false
	}
	return p, true
}

var httpClient = &http.Client{Timeout: 2 * time.Minute}

// do sends one request; a transport error fails the test.
func do(t testing.TB, method, url, contentType string, body []byte) httpResult {
	t.Helper()
	res, err := tryDo(context.Background(), method, url, contentType, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, truncate(url, 120), err)
	}
	return res
}

func tryDo(ctx context.Context, method, url, contentType string, body []byte) (httpResult, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return httpResult{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return httpResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpResult{}, err
	}
	return httpResult{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// produceBody builds a produce request body.
func produceBody(recs []map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"records": recs})
	if err != nil {
		panic(err)
	}
	return b
}

// producedOffset is one entry of a produce answer.
type producedOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// produceOutcome classifies one produce attempt.
type produceOutcome int

const (
	acked   produceOutcome = iota // 200 with offsets
	refused                       // a problem answer other than commit_outcome_unknown: nothing written
	unknown                       // commit_outcome_unknown, or the connection broke
)

// produceOnce sends one produce request and classifies the answer.
func produceOnce(ctx context.Context, base, topic string, body []byte) (produceOutcome, []producedOffset, httpResult, error) {
	res, err := tryDo(ctx, http.MethodPost, base+"/v1/topics/"+topic+"/records", "application/json", body)
	if err != nil {
		return unknown, nil, res, err
	}
	if res.status == http.StatusOK {
		var out struct {
			Offsets []producedOffset `json:"offsets"`
		}
		if err := json.Unmarshal(res.body, &out); err != nil {
			return unknown, nil, res, fmt.Errorf("decode produce answer %q: %w", truncate(string(res.body), 200), err)
		}
		return acked, out.Offsets, res, nil
	}
	p, ok := res.problem()
	if !ok {
		// Not the API's answer (it always answers problem+json): say so loudly.
		return unknown, nil, res, fmt.Errorf("HTTP %d without a problem body: %q", res.status, truncate(string(res.body), 200))
	}
	if p.Code == "commit_outcome_unknown" {
		return unknown, nil, res, nil
	}
	return refused, nil, res, nil
}

// partitionState is one partition as GET /v1/topics/{t}/partitions shows it.
type partitionState struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	Bytes          int64 `json:"bytes"`
}

func partitions(t testing.TB, base, topic string) []partitionState {
	t.Helper()
	res := do(t, http.MethodGet, base+"/v1/topics/"+topic+"/partitions", "", nil)
	if res.status != http.StatusOK {
		t.Fatalf("partitions of %s: HTTP %d %s", topic, res.status, res.body)
	}
	var out struct {
		Partitions []partitionState `json:"partitions"`
	}
	if err := json.Unmarshal(res.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Partitions
}

// fetchedRecord is one record of a fetch answer.
type fetchedRecord struct {
	Offset    int64           `json:"offset"`
	Timestamp int64           `json:"timestamp"`
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
}

type fetchAnswer struct {
	Records        []fetchedRecord `json:"records"`
	NextOffset     int64           `json:"next_offset"`
	HighWatermark  int64           `json:"high_watermark"`
	LogStartOffset int64           `json:"log_start_offset"`
}

func fetch(t testing.TB, base, topic string, partition int32, offset int64, maxRecords int) fetchAnswer {
	t.Helper()
	u := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_records=%d", base, topic, partition, offset, maxRecords)
	res := do(t, http.MethodGet, u, "", nil)
	if res.status != http.StatusOK {
		t.Fatalf("fetch %s/%d at %d: HTTP %d %s", topic, partition, offset, res.status, res.body)
	}
	var out fetchAnswer
	if err := json.Unmarshal(res.body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// readPartition reads a partition from 0 to its high watermark, checking that offsets
// are dense and that every fetch below the watermark makes progress.
func readPartition(t testing.TB, base, topic string, p partitionState) []fetchedRecord {
	t.Helper()
	if p.LogStartOffset != 0 {
		t.Fatalf("partition %d: log start %d, want 0 (nothing is deleted here)", p.Partition, p.LogStartOffset)
	}
	out := make([]fetchedRecord, 0, p.HighWatermark)
	next := int64(0)
	for next < p.HighWatermark {
		a := fetch(t, base, topic, p.Partition, next, 5000)
		if len(a.Records) == 0 {
			t.Fatalf("partition %d: fetch at %d below the high watermark %d returned nothing", p.Partition, next, p.HighWatermark)
		}
		for _, r := range a.Records {
			if r.Offset != next {
				t.Fatalf("partition %d: offset %d where %d was due: offsets must be dense", p.Partition, r.Offset, next)
			}
			next++
			out = append(out, r)
		}
		if a.NextOffset != next {
			t.Fatalf("partition %d: next_offset %d after reading up to %d", p.Partition, a.NextOffset, next)
		}
	}
	return out
}

func createTopic(t testing.TB, base, name string, partitions int, configs map[string]string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": name, "partitions": partitions, "configs": configs})
	res := do(t, http.MethodPost, base+"/v1/topics", "application/json", body)
	if res.status != http.StatusCreated {
		t.Fatalf("create topic %s: HTTP %d %s", name, res.status, res.body)
	}
}

// metrics scrapes /metrics and returns every sample by its series text, e.g.
// `strata_writer_puts_total{result="ok"}`.
func metrics(t testing.TB, base string) map[string]float64 {
	t.Helper()
	res := do(t, http.MethodGet, base+"/metrics", "", nil)
	if res.status != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", res.status)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(res.body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds every series of a metric (all label values).
func sum(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// flushCounts are the writer's cost counters.
type flushCounts struct{ flushes, puts, commits float64 }

func writerCounts(t testing.TB, base string) flushCounts {
	m := metrics(t, base)
	return flushCounts{
		flushes: sum(m, "strata_writer_flushes_total"),
		puts:    sum(m, "strata_writer_puts_total"),
		commits: sum(m, "strata_writer_commits_total"),
	}
}
