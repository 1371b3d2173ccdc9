package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

func TestParseText(t *testing.T) {
	const text = `# HELP strata_objstore_requests_total x
# TYPE strata_objstore_requests_total counter
strata_objstore_requests_total{op="put",result="ok"} 12
strata_objstore_requests_total{op="put",result="error"} 1
strata_objstore_requests_total{op="get_range",result="ok"} 7
strata_objstore_requests_total{op="get",result="ok"} 2
strata_writer_flush_bytes_sum 1.5e+06
process_cpu_seconds_total 3.25
some_quantile{quantile="0.5"} NaN
with_timestamp 4 1700000000000
`
	s := samples{}
	if err := parseText(strings.NewReader(text), s); err != nil {
		t.Fatal(err)
	}
	// A second node's scrape adds to the first.
	if err := parseText(strings.NewReader("process_cpu_seconds_total 1\n"), s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		got, want float64
	}{
		{s.sum("strata_objstore_requests_total", `op="put"`), 13},
		{s.sum("strata_objstore_requests_total", `op="get`), 9},
		{s.sum("strata_objstore_requests_total"), 22},
		{s.get("strata_writer_flush_bytes_sum"), 1.5e6},
		{s.get("process_cpu_seconds_total"), 4.25},
		{s.get("with_timestamp"), 4},
		{s.get(`some_quantile{quantile="0.5"}`), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("got %v, want %v", tc.got, tc.want)
		}
	}
	d := delta(samples{"a": 1, "b": 5}, samples{"a": 4, "b": 5, "c": 2})
	if d["a"] != 3 || d["b"] != 0 || d["c"] != 2 {
		t.Errorf("delta %v", d)
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarize(ds)
	if l.N != 1000 || l.P50 != 500 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 || l.Mean != 500.5 {
		t.Errorf("summary %+v", l)
	}
	if ds[0] != time.Second {
		t.Error("summarize sorted its input in place")
	}
	r := newRecorder(time.Unix(100, 0))
	r.add(time.Unix(100, 0), 10*time.Millisecond)
	r.add(time.Unix(100, 1e8), 30*time.Millisecond)
	r.add(time.Unix(101, 5e8), 20*time.Millisecond)
	s := r.series(time.Second)
	if len(s) != 2 || s[0].N != 2 || s[0].P50 != 10 || s[0].P99 != 30 || s[1].T != 1 || s[1].P50 != 20 {
		t.Errorf("series %+v", s)
	}
}

func TestBodiesStamp(t *testing.T) {
	at := time.Unix(1_700_000_000, 123456789)
	want := strconv.FormatInt(at.UnixNano(), 10)

	b, err := binaryBody(20, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	b.stamp(at)
	batches, err := segment.DecodeBatches(b.buf) // checks the recomputed CRC
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || len(batches[0].Records) != 20 || b.bytes != 20*(100+11) {
		t.Fatalf("%d batches, payload %d", len(batches), b.bytes)
	}
	for _, r := range batches[0].Records {
		if len(r.Headers) != 1 || r.Headers[0].Key != "t" || string(r.Headers[0].Value) != want || len(r.Value) != 100 {
			t.Fatalf("record %+v", r)
		}
	}

	j, err := jsonBody(20, 100, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	j.stamp(at)
	var req struct {
		Records []struct {
			Partition int32
			Key       string
			Value     string
			Headers   map[string]string
		}
	}
	if err := json.Unmarshal(j.buf, &req); err != nil {
		t.Fatal(err)
	}
	for _, r := range req.Records {
		if r.Partition != 5 || r.Headers["t"] != want || len(r.Value) != 100 || !strings.HasPrefix(r.Key, "key-") {
			t.Fatalf("record %+v", r)
		}
	}
}

// stack is a node in this process: the API over a real writer and reader, a SQLite
// catalog and a filesystem store, assembled as `strata dev` assembles them (minus the
// compactor).
func stack(t *testing.T) (url string, store objstore.Store, catPath string, cat catalog.Backend) {
	t.Helper()
	n := nodetest.Start(t, nodetest.Mutate(func(c *node.Config) {
		c.WriterConfig = writer.Config{Linger: 20 * time.Millisecond, BufferBytes: 16 << 20}
		c.ReaderConfig = reader.Config{CacheBytes: 64 << 20}
	}))
	return n.URL, n.Store, filepath.Join(n.Dir, "catalog.db"), n.Catalog
}

// TestRun runs the whole bench, briefly, against a node in this process and checks
// that every phase measured something and that the cost model's counts hold: one PUT
// and one commit per flush, no GET for a second reader.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every phase of the bench for a few seconds")
	}
	url, store, catPath, cat := stack(t)
	db, err := OpenSQLite(t.Context(), catPath, filepath.Join(t.TempDir(), "floor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var phases []string
	rep, err := Run(t.Context(), Config{
		Nodes: []string{url}, Target: "test", Store: store, DB: db, Catalog: cat, CapacityDuration: 100 * time.Millisecond,
		Partitions: 4, Producers: 4, RecordSize: 100, BatchRecords: 50, Duration: time.Second,
		Linger: 20 * time.Millisecond, BufferBytes: 16 << 20, CacheBytes: 64 << 20, MaxFlushBytes: 1 << 20,
		OverloadProducers: 8, ScaleRecords: 20_000, ScaleChunkRecords: 50, FloorDuration: 200 * time.Millisecond,
		Phase: func(name string, done bool) {
			if !done {
				phases = append(phases, name)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(phases, " "); got != "floor produce-binary produce-json produce-binary-half produce-binary-overload fetch-cold fetch-cached fetch-cached-json slow-readers capacity" {
		t.Errorf("phases %s", got)
	}
	if rep.Floor == nil || rep.Floor.PutMiBps <= 0 || rep.Floor.PutAfterMiBps <= 0 || rep.Floor.GetMiBps <= 0 || rep.Floor.CommitsPerSec <= 0 || rep.Floor.FlushPut.N == 0 {
		t.Fatalf("floor %+v", rep.Floor)
	}
	// The produce targets are against the mean of the floors before and after.
	for _, tg := range rep.Targets {
		if tg.Name == "produce binary vs raw PUT bandwidth" {
			if want := 0.7 * (rep.Floor.PutMiBps + rep.Floor.PutAfterMiBps) / 2; math.Abs(tg.Bound-want) > 1e-9 {
				t.Errorf("binary target's bound %.1f, want %.1f", tg.Bound, want)
			}
		}
	}
	for _, p := range rep.Produce {
		if p.Failed > 0 {
			t.Errorf("%s: %d requests failed: %s", p.Name, p.Failed, p.FirstError)
		}
		if p.Name == "produce-binary-overload" {
			continue
		}
		if p.Records == 0 || p.Ack.N == 0 || p.Flushes == 0 {
			t.Errorf("%s measured nothing: %+v", p.Name, p)
		}
		// A phase's counts are deltas over a window: flushes cut before it may be put
		// and committed in it, and the other way round, at most MaxInflight of them.
		// (That each flush is exactly one PUT and one commit is proved where it can be
		// counted exactly: writer's TestOnePutOneCommitPerFlush, e2e's TestFlushCost.)
		slack := float64(writer.DefaultMaxInflight)
		if d := p.Puts - p.Flushes; d > slack || d < -slack || p.CommitsPerFlush*p.Flushes > p.Flushes+slack || p.CommitsPerFlush*p.Flushes < p.Flushes-slack {
			t.Errorf("%s: %v flushes, %v PUTs, %.2f commits per flush", p.Name, p.Flushes, p.Puts, p.CommitsPerFlush)
		}
	}
	if rep.E2E.N == 0 {
		t.Error("no end-to-end latency measured")
	}
	for _, f := range rep.Fetch {
		if f.Bytes == 0 || f.MiBps <= 0 {
			t.Errorf("%s read nothing", f.Name)
		}
		if f.Name == "fetch-cached" && f.Gets != 0 {
			t.Errorf("a second reader of the same data sent %v GETs", f.Gets)
		}
	}
	if rep.Scale == nil || rep.Scale.Small.N == 0 || rep.Scale.Large.N == 0 || rep.Scale.RowsSeeded != 20_000/50-1+10_000/50-1 {
		t.Errorf("scale %+v", rep.Scale)
	}
	checkCapacity(t, rep.Capacity, "sqlite")
	if len(rep.Targets) < 8 {
		t.Errorf("%d targets checked", len(rep.Targets))
	}
	var table, js, svg bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "TARGETS") {
		t.Errorf("table: %v\n%s", err, table.String())
	}
	if err := rep.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
		t.Errorf("json: %v", err)
	}
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&svg)
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	s := samples{}
	in := `strata_writer_flush_seconds_bucket{stage="put",le="0.1"} 10
strata_writer_flush_seconds_bucket{stage="put",le="0.2"} 50
strata_writer_flush_seconds_bucket{stage="put",le="0.4"} 100
strata_writer_flush_seconds_bucket{stage="put",le="+Inf"} 100
strata_writer_flush_seconds_bucket{stage="commit",le="0.1"} 0
strata_writer_flush_seconds_bucket{stage="commit",le="+Inf"} 4
`
	if err := parseText(strings.NewReader(in), s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		label string
		q     float64
		want  float64
	}{
		{`stage="put"`, 0.1, 0.1},
		{`stage="put"`, 0.5, 0.2},
		{`stage="put"`, 0.99, 0.396},
		{`stage="commit"`, 0.99, 0.1}, // all above the last finite bound
		{`stage="encode"`, 0.99, 0},   // no such series
	} {
		if got := s.quantile("strata_writer_flush_seconds", tc.label, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s q%.2f = %v, want %v", tc.label, tc.q, got, tc.want)
		}
	}
}

// TestDefaultProducers: at maximum load the producers keep as many bytes in flight as
// the floor keeps PUTs (floorStreams flushes), within 32 to 256.
func TestDefaultProducers(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want int
	}{
		{Config{}, 65}, // 4 x 8 MiB / (500 x 1 KiB)
		{Config{MaxFlushBytes: 16 << 20}, 131},
		{Config{MaxFlushBytes: 1 << 20}, 32},
		{Config{RecordSize: 100}, 256},
		{Config{Producers: 7}, 7},
	} {
		c.cfg.defaults()
		if c.cfg.Producers != c.want {
			t.Errorf("flush %d, record %d: %d producers, want %d", c.cfg.MaxFlushBytes, c.cfg.RecordSize, c.cfg.Producers, c.want)
		}
	}
}
