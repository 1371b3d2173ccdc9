// Package bench drives running Strata nodes and measures them beside the floor of the
// machine they run on (the `strata bench` command). One run measures, in order:
//
//   - the floor: PUT and GET bandwidth of segment-sized objects in the nodes' bucket, and
//     the catalog database's rate of one-statement transactions updating 8 rows;
//   - produce at maximum load, binary (Kafka record batches) and JSON paths: closed-loop
//     producers, throughput, produce-ack latency, and from the nodes' metrics the
//     object store PUTs per GiB, catalog commits per flush, CPU seconds per GiB and peak
//     resident memory;
//   - produce at half the binary path's maximum, open loop, with Server-Sent Events
//     tails measuring end-to-end latency, and the PUT latency of objects the size of the
//     flushes it made;
//   - fetch: a first (cold) and a second (cached) reader of the same data, binary, with
//     the GETs each caused, and a cached JSON reader;
//   - with Kafka listeners (Config.KafkaNodes), franz-go producing at maximum load
//     beside the binary path, and a cached Kafka fetch of the same data (kafka.go);
//   - at scale: fetch latency from a partition seeded to 10 M records (chunk rows
//     inserted directly) against one of 10 K.
//
// Every headline figure is reported with its ratio to its floor and checked against
// the targets of the performance issue. Output: Report, as a table, JSON and an SVG
// chart of latency over time.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
)

// Config says what to run. Zero fields take the defaults in brackets.
type Config struct {
	// Nodes are the base URLs of the nodes under test; requests go to them in turn.
	Nodes []string
	// KafkaNodes are the nodes' Kafka listener addresses (host:port), in the order of
	// Nodes; with them the Kafka protocol's produce and fetch phases run (kafka.go).
	KafkaNodes []string
	// Target names the setup in the report ("embedded", "postgres+minio", ...).
	Target string
	// Store is the nodes' bucket, for the floor (nil: no store floor).
	Store Store
	// DB is the nodes' catalog database, for the commit floor and the scale phase
	// (nil: neither).
	DB *DB

	Topic      string // [bench-<unix time>]
	Partitions int    // [8]
	Producers  int    // closed-loop producers [32]: enough requests in flight to fill flushes
	// OverloadProducers drive the overload phase, which offers more than the writer's
	// buffer holds to check back-pressure and the memory bound [2 x buffer / request, at most 256].
	OverloadProducers int
	// Tails is how many partitions the half-load phase tails over Server-Sent Events
	// for end-to-end latency [2]: a sample, since rendering every record as an event
	// would load the node beyond what the produce path is being measured with.
	Tails        int
	RecordSize   int           // value bytes [1024]
	BatchRecords int           // records per produce request [500]
	Duration     time.Duration // of each produce phase [10s]
	// Paths to measure at maximum load: "binary", "json", "kafka" (franz-go through
	// KafkaNodes) [all that the nodes serve].
	Paths []string
	// The nodes' settings, which the targets depend on.
	Linger        time.Duration // [50ms]
	MaxFlushBytes int64         // [8 MiB]
	BufferBytes   int64         // [64 MiB]
	CacheBytes    int64         // [256 MiB]
	// MemoryLimit is the nodes' --memory-limit, which peak resident memory is checked
	// against [0: the nodes' default; checked against buffer + cache + 100 MiB].
	MemoryLimit int64
	// SlowSockets is how many sockets the slow-reader phase opens [20; -1: no phase].
	SlowSockets int

	// ScaleRecords is the large partition's size in the scale phase [10,000,000]; 0
	// with NoScale skips it. ScaleChunkRecords is the records per seeded chunk row
	// [100]: 100,000 rows for 10 M records.
	ScaleRecords      int64
	ScaleChunkRecords int
	NoScale           bool
	// FloorDuration is spent on each floor measurement [3s].
	FloorDuration time.Duration

	// Phase, when set, is called as each phase starts ("produce-binary", ...) and
	// ends (with done true): cmd uses it to profile a phase.
	Phase func(name string, done bool)
	Log   *slog.Logger
}

func (c *Config) defaults() {
	if c.Topic == "" {
		c.Topic = "bench-" + strconv.FormatInt(time.Now().Unix(), 10)
	}
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	if c.Producers == 0 {
		c.Producers = 32
	}
	if c.Tails == 0 {
		c.Tails = 2
	}
	c.Tails = min(c.Tails, c.Partitions)
	if c.RecordSize == 0 {
		c.RecordSize = 1024
	}
	if c.BatchRecords == 0 {
		c.BatchRecords = 500
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if len(c.Paths) == 0 {
		c.Paths = []string{"binary", "json"}
		if len(c.KafkaNodes) > 0 {
			c.Paths = append(c.Paths, "kafka")
		}
	}
	if c.Linger == 0 {
		c.Linger = 50 * time.Millisecond
	}
	if c.MaxFlushBytes == 0 {
		c.MaxFlushBytes = 8 << 20
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = 64 << 20
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = 256 << 20
	}
	if c.SlowSockets == 0 {
		c.SlowSockets = 20
	}
	if c.OverloadProducers == 0 {
		c.OverloadProducers = int(min(256, max(8, 2*c.BufferBytes/int64(c.BatchRecords*(c.RecordSize+40)))))
	}
	if c.ScaleRecords == 0 {
		c.ScaleRecords = 10_000_000
	}
	if c.ScaleChunkRecords == 0 {
		c.ScaleChunkRecords = 100
	}
	if c.FloorDuration == 0 {
		c.FloorDuration = 3 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Phase == nil {
		c.Phase = func(string, bool) {}
	}
}

// Validate says what is wrong with c, once defaults are applied.
func (c Config) Validate() error {
	c.defaults()
	var errs []error
	if len(c.Nodes) == 0 {
		errs = append(errs, errors.New("no node to drive"))
	}
	if c.Partitions < 1 || c.Producers < 1 || c.RecordSize < 1 || c.BatchRecords < 1 {
		errs = append(errs, errors.New("partitions, producers, record size and batch records must be positive"))
	}
	for _, p := range c.Paths {
		switch {
		case p == "kafka" && len(c.KafkaNodes) == 0:
			errs = append(errs, errors.New("path kafka: the nodes serve no Kafka listener"))
		case p != "binary" && p != "json" && p != "kafka":
			errs = append(errs, fmt.Errorf("path %q: use binary, json or kafka", p))
		}
	}
	if c.Duration < time.Second {
		errs = append(errs, fmt.Errorf("duration %s: at least 1s", c.Duration))
	}
	if c.ScaleChunkRecords < 1 || c.ScaleRecords < int64(c.ScaleChunkRecords) {
		errs = append(errs, fmt.Errorf("scale: %d records in chunks of %d", c.ScaleRecords, c.ScaleChunkRecords))
	}
	return errors.Join(errs...)
}

// Produce is one produce phase's result.
type Produce struct {
	Name       string  `json:"name"`
	Path       string  `json:"path"`
	Mode       string  `json:"mode"` // closed (max) or open (fixed rate)
	Seconds    float64 `json:"seconds"`
	Requests   int64   `json:"requests"`
	Records    int64   `json:"records"`
	Bytes      int64   `json:"payload_bytes"`
	RecordsPS  float64 `json:"records_per_s"`
	MiBps      float64 `json:"mib_per_s"`
	Rejected   int64   `json:"rejected_429"`
	Failed     int64   `json:"failed"`
	FirstError string  `json:"first_error,omitempty"`
	Ack        Latency `json:"ack"`
	// From the nodes' metrics over the phase.
	Flushes         float64 `json:"flushes"`
	Puts            float64 `json:"puts"`
	PutsPerGiB      float64 `json:"puts_per_gib"`
	CommitsPerFlush float64 `json:"catalog_commits_per_flush"`
	MeanFlushBytes  float64 `json:"mean_flush_bytes"`
	CPUSeconds      float64 `json:"node_cpu_seconds"`
	CPUSecPerGiB    float64 `json:"node_cpu_seconds_per_gib"`
	PeakRSS         float64 `json:"node_peak_rss_bytes"`
	PeakHeap        float64 `json:"node_peak_heap_bytes"`
	// GCCPUSeconds is the collector's CPU time over the phase; GCShare its share of
	// the node's CPU.
	GCCPUSeconds float64 `json:"node_gc_cpu_seconds"`
	GCShare      float64 `json:"node_gc_cpu_share"`
	// StageP99 is the writer's p99 per flush stage over the phase, in ms, from the
	// nodes' strata_writer_flush_seconds histogram: where produce-ack latency goes.
	StageP99 map[string]float64 `json:"writer_stage_p99_ms,omitempty"`
}

// writerStages are the stage labels of strata_writer_flush_seconds, in flush order.
var writerStages = []string{"encode", "put", "wait", "commit"}

// stageNote formats StageP99 in flush order.
func stageNote(p99 map[string]float64) string {
	var parts []string
	for _, st := range writerStages {
		if v, ok := p99[st]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", st, v))
		}
	}
	if len(parts) == 0 {
		return "not exposed"
	}
	return strings.Join(parts, ", ")
}

// Fetch is one fetch phase's result.
type Fetch struct {
	Name       string  `json:"name"`
	Path       string  `json:"path"`
	Bytes      int64   `json:"bytes"`
	Objects    float64 `json:"mean_object_bytes,omitempty"`
	Seconds    float64 `json:"seconds"`
	MiBps      float64 `json:"mib_per_s"`
	Gets       float64 `json:"gets"`
	GetBytes   float64 `json:"get_bytes"`
	GetsPer4Mi float64 `json:"gets_per_4mib"`
}

// Scale is the scale phase's result.
type Scale struct {
	SmallRecords  int64   `json:"small_records"`
	LargeRecords  int64   `json:"large_records"`
	ChunkRecords  int     `json:"records_per_chunk"`
	RowsSeeded    int64   `json:"rows_seeded"`
	SeedSeconds   float64 `json:"seed_seconds"`
	Small         Latency `json:"small_fetch"`
	Large         Latency `json:"large_fetch"`
	P50Ratio      float64 `json:"p50_ratio"`
	CatalogKind   string  `json:"catalog"`
	FetchesPerSet int     `json:"fetches_each"`
}

// Target is one target of the performance issue with this run's figure.
type Target struct {
	Name   string  `json:"name"`
	Figure float64 `json:"figure"`
	Bound  float64 `json:"bound"`
	Unit   string  `json:"unit"`
	// Ratio is the figure over its floor (or over the bound when there is no floor).
	Ratio float64 `json:"ratio"`
	Want  string  `json:"want"`
	Pass  bool    `json:"pass"`
	Note  string  `json:"note,omitempty"`
}

// Report is a whole run.
type Report struct {
	Started   time.Time `json:"started"`
	Target    string    `json:"target"`
	Nodes     int       `json:"nodes"`
	GoVersion string    `json:"go_version"`
	CPUs      int       `json:"cpus"`
	Settings  struct {
		Partitions    int     `json:"partitions"`
		Producers     int     `json:"producers"`
		RecordSize    int     `json:"record_size"`
		BatchRecords  int     `json:"batch_records"`
		PhaseSeconds  float64 `json:"phase_seconds"`
		LingerMs      float64 `json:"linger_ms"`
		MaxFlushBytes int64   `json:"max_flush_bytes"`
		BufferBytes   int64   `json:"buffer_bytes"`
		CacheBytes    int64   `json:"cache_bytes"`
		MemoryLimit   int64   `json:"memory_limit,omitempty"`
	} `json:"settings"`
	Floor   *Floor    `json:"floor,omitempty"`
	Produce []Produce `json:"produce"`
	E2E     Latency   `json:"end_to_end"`
	Fetch   []Fetch   `json:"fetch"`
	Scale   *Scale    `json:"scale,omitempty"`
	// SlowReaders is the slow-reader phase (memory.go).
	SlowReaders *SlowReaders `json:"slow_readers,omitempty"`
	Targets     []Target     `json:"targets"`
	Series      struct {
		Ack []Point `json:"ack"`
		E2E []Point `json:"e2e"`
	} `json:"series"`
	Seconds float64 `json:"seconds"`
	// Load is the machine's 1-minute load average when the run started and ended
	// (/proc/loadavg): figures from a machine shared with other work drift with it.
	Load  [2]float64 `json:"load_average"`
	Notes []string   `json:"notes,omitempty"`
}

// Run runs the whole benchmark and returns its report. The topics it creates are left
// for inspection, except the scale phase's seeded rows.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cfg.defaults()
	b := &runner{cfg: cfg, log: cfg.Log}
	b.hc = &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
	defer b.hc.CloseIdleConnections()
	return b.run(ctx)
}

type runner struct {
	cfg Config
	log *slog.Logger
	hc  *http.Client
	rep Report
	// meanObject is the mean size of the objects the produce phases wrote.
	meanObject float64
}

func (b *runner) run(ctx context.Context) (*Report, error) {
	cfg := &b.cfg
	rep := &b.rep
	rep.Started = time.Now().UTC()
	rep.Target = cfg.Target
	rep.Nodes = len(cfg.Nodes)
	rep.GoVersion = runtime.Version()
	rep.CPUs = runtime.NumCPU()
	s := &rep.Settings
	s.Partitions, s.Producers, s.RecordSize, s.BatchRecords = cfg.Partitions, cfg.Producers, cfg.RecordSize, cfg.BatchRecords
	s.PhaseSeconds, s.LingerMs = cfg.Duration.Seconds(), float64(cfg.Linger)/1e6
	s.MaxFlushBytes, s.BufferBytes, s.CacheBytes, s.MemoryLimit = cfg.MaxFlushBytes, cfg.BufferBytes, cfg.CacheBytes, cfg.MemoryLimit
	start := time.Now()
	rep.Load[0] = loadAverage()
	defer func() { rep.Load[1] = loadAverage() }()

	c := client.New(cfg.Nodes[0], client.WithHTTPClient(b.hc))
	formats := map[string]string{"key.format": "string", "value.format": "string"}
	if _, err := c.CreateTopic(ctx, cfg.Topic, int32(cfg.Partitions), formats); err != nil {
		return nil, fmt.Errorf("bench: create topic %s: %w", cfg.Topic, err)
	}

	// The floor first, on a quiet machine; the PUT latency of flush-sized objects
	// once the half-load phase has shown the flush size.
	prefix := "bench-floor/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
	var commitP99 float64
	if cfg.Store != nil || cfg.DB != nil {
		rep.Floor = &Floor{SegmentBytes: cfg.MaxFlushBytes, Streams: 4}
		cfg.Phase("floor", false)
		if cfg.Store != nil {
			b.log.Info("floor: object store")
			put, get, err := floorStore(ctx, cfg.Store, prefix, cfg.MaxFlushBytes, 4, cfg.FloorDuration)
			if err != nil {
				return nil, err
			}
			rep.Floor.PutMiBps, rep.Floor.GetMiBps = put, get
		}
		if cfg.DB != nil {
			b.log.Info("floor: catalog commits")
			commit, cleanup, err := cfg.DB.commitFloor(ctx)
			if err != nil {
				return nil, err
			}
			rate, lat, err := floorCommit(ctx, commit, cfg.FloorDuration)
			cleanup()
			if err != nil {
				return nil, err
			}
			rep.Floor.CommitsPerSec, rep.Floor.Commit = rate, lat
			commitP99 = lat.P99
		}
		cfg.Phase("floor", true)
	}

	// Maximum load, each path.
	var maxBinary float64
	for _, path := range cfg.Paths {
		p, err := b.produceMax(ctx, path)
		if err != nil {
			return nil, err
		}
		rep.Produce = append(rep.Produce, p)
		if path == "binary" {
			maxBinary = p.RecordsPS
		}
	}
	if maxBinary == 0 {
		maxBinary = rep.Produce[0].RecordsPS
	}

	// Half the binary maximum, with tails.
	half, e2e, err := b.produceHalf(ctx, maxBinary/2)
	if err != nil {
		return nil, err
	}
	rep.Produce, rep.E2E = append(rep.Produce, half), e2e

	over, err := b.overload(ctx)
	if err != nil {
		return nil, err
	}
	rep.Produce = append(rep.Produce, over)

	if rep.Floor != nil && cfg.Store != nil {
		size := int64(half.MeanFlushBytes)
		if size <= 0 {
			size = 64 << 10
		}
		b.log.Info("floor: PUT latency of flush-sized objects", "bytes", size)
		lat, err := floorPutLatency(ctx, cfg.Store, prefix, size, min(cfg.FloorDuration, 2*time.Second))
		if err != nil {
			return nil, err
		}
		rep.Floor.FlushBytes, rep.Floor.FlushPut = size, lat
	}

	var objBytes, objs float64
	for _, p := range rep.Produce {
		objBytes += p.MeanFlushBytes * p.Flushes
		objs += p.Flushes
	}
	if objs > 0 {
		b.meanObject = objBytes / objs
	}
	if err := b.fetches(ctx); err != nil {
		return nil, err
	}
	if err := b.slowReaders(ctx); err != nil {
		return nil, err
	}
	if !cfg.NoScale && cfg.DB != nil {
		sc, err := b.scale(ctx, c)
		if err != nil {
			return nil, err
		}
		rep.Scale = sc
	}
	rep.Seconds = time.Since(start).Seconds()
	b.targets(commitP99)
	return rep, nil
}

// producerBodies builds n request bodies, body i for partition i%Partitions (JSON
// names the partition in the body; binary in the query, so any body serves any
// partition).
func (b *runner) producerBodies(path string, n int) ([]*body, error) {
	cfg := &b.cfg
	out := make([]*body, n)
	for i := range out {
		var err error
		if path == "binary" {
			out[i], err = binaryBody(cfg.BatchRecords, cfg.RecordSize, i)
		} else {
			out[i], err = jsonBody(cfg.BatchRecords, cfg.RecordSize, i, int32(i%cfg.Partitions))
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// phase runs load for cfg.Duration between two scrapes of the nodes' metrics and fills
// in p from the load's counters and from what the metrics say.
func (b *runner) phase(ctx context.Context, name string, p *Produce, c *counters, ack *recorder, load func(ctx context.Context)) error {
	cfg := &b.cfg
	before, err := scrape(ctx, b.hc, cfg.Nodes)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	peaks := b.memoryPeaks(pctx)
	cfg.Phase(name, false)
	start := time.Now()
	load(pctx)
	p.Seconds = time.Since(start).Seconds()
	cfg.Phase(name, true)
	cancel()
	p.PeakRSS, p.PeakHeap = peaks()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.Requests, p.Records, p.Bytes = c.requests.Load(), c.records.Load(), c.bytes.Load()
	p.Rejected, p.Failed = c.rejected.Load(), c.failed.Load()
	if e, ok := c.firstErr.Load().(string); ok {
		p.FirstError = e
	}
	p.Ack = ack.summary()
	after, err := scrape(ctx, b.hc, cfg.Nodes)
	if err != nil {
		return err
	}
	d := delta(before, after)
	gib := float64(p.Bytes) / (1 << 30)
	p.Flushes = d.get("strata_writer_flushes_total")
	p.Puts = d.sum("strata_objstore_requests_total", `op="put"`)
	commits := d.sum("strata_writer_commits_total") + d.sum("strata_writer_settles_total")
	if p.Flushes > 0 {
		p.CommitsPerFlush = commits / p.Flushes
		p.MeanFlushBytes = d.get("strata_writer_flush_bytes_sum") / d.get("strata_writer_flush_bytes_count")
	}
	for _, st := range writerStages {
		if v := d.quantile("strata_writer_flush_seconds", `stage="`+st+`"`, 0.99); v > 0 {
			if p.StageP99 == nil {
				p.StageP99 = map[string]float64{}
			}
			p.StageP99[st] = v * 1000
		}
	}
	p.CPUSeconds = d.get("process_cpu_seconds_total")
	gcShare(p, d)
	if gib > 0 {
		p.PutsPerGiB = p.Puts / gib
		p.CPUSecPerGiB = p.CPUSeconds / gib
	}
	p.RecordsPS = float64(p.Records) / p.Seconds
	p.MiBps = float64(p.Bytes) / (1 << 20) / p.Seconds
	b.log.Info("phase done", "phase", name, "records_per_s", int(p.RecordsPS), "mib_per_s", fmt.Sprintf("%.1f", p.MiBps),
		"ack_p50_ms", p.Ack.P50, "ack_p99_ms", p.Ack.P99, "rejected", p.Rejected, "failed", p.Failed)
	if p.Failed > 0 && p.Records == 0 {
		return fmt.Errorf("bench: %s: every request failed: %s", name, p.FirstError)
	}
	return nil
}

func (b *runner) produceMax(ctx context.Context, path string) (Produce, error) {
	if path == "kafka" {
		return b.produceKafka(ctx)
	}
	cfg := &b.cfg
	name := "produce-" + path
	b.log.Info("phase: maximum load", "path", path, "producers", cfg.Producers, "seconds", cfg.Duration.Seconds())
	bodies, err := b.producerBodies(path, cfg.Producers)
	if err != nil {
		return Produce{}, err
	}
	p := Produce{Name: name, Path: path, Mode: "closed"}
	var c counters
	ack := newRecorder(time.Now())
	s := &sender{hc: b.hc, nodes: cfg.Nodes, topic: cfg.Topic, path: path}
	err = b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		closedLoop(ctx, s, cfg.Producers, bodies, true, cfg.Partitions, &c, ack)
	})
	return p, err
}

// overload offers about twice what the writer's buffer holds, from producers that
// retry at once on 429, for a few seconds: the writer must answer with back-pressure
// rather than grow, and the nodes' memory must stay within its bound.
func (b *runner) overload(ctx context.Context) (Produce, error) {
	cfg := &b.cfg
	name := "produce-binary-overload"
	n := cfg.OverloadProducers
	b.log.Info("phase: overload", "producers", n)
	bodies, err := b.producerBodies("binary", 1) // shared, unstamped: only the acks are timed
	if err != nil {
		return Produce{}, err
	}
	p := Produce{Name: name, Path: "binary", Mode: "closed"}
	var c counters
	ack := newRecorder(time.Now())
	s := &sender{hc: b.hc, nodes: cfg.Nodes, topic: cfg.Topic, path: "binary"}
	saved := cfg.Duration
	cfg.Duration = min(cfg.Duration, 4*time.Second)
	defer func() { cfg.Duration = saved }()
	err = b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		closedLoop(ctx, s, n, bodies, false, cfg.Partitions, &c, ack)
	})
	return p, err
}

func (b *runner) produceHalf(ctx context.Context, rate float64) (Produce, Latency, error) {
	cfg := &b.cfg
	name := "produce-binary-half"
	b.log.Info("phase: half load with tails", "records_per_s", int(rate), "seconds", cfg.Duration.Seconds())
	const maxInflight = 64
	bodies, err := b.producerBodies("binary", 1)
	if err != nil {
		return Produce{}, Latency{}, err
	}
	pool := []*body{bodies[0]}
	for len(pool) < maxInflight {
		f := pool[0]
		pool = append(pool, &body{buf: append([]byte(nil), f.buf...), slots: f.slots, crc: true, recs: f.recs, bytes: f.bytes})
	}
	p := Produce{Name: name, Path: "binary", Mode: "open"}
	var c counters
	now := time.Now()
	ack, e2e := newRecorder(now), newRecorder(now)

	// One tail per partition, open before the first record is sent.
	tctx, stopTails := context.WithCancel(ctx)
	var twg sync.WaitGroup
	tailErrs := make(chan error, cfg.Tails)
	for part := range cfg.Tails {
		ready := make(chan struct{})
		node := cfg.Nodes[part%len(cfg.Nodes)]
		twg.Go(func() {
			if err := tail(tctx, b.hc, node, cfg.Topic, int32(part), e2e, ready); err != nil {
				tailErrs <- err
			}
		})
		<-ready
	}
	s := &sender{hc: b.hc, nodes: cfg.Nodes, topic: cfg.Topic, path: "binary"}
	err = b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		openLoop(ctx, s, pool, cfg.Partitions, rate, maxInflight, &c, ack)
	})
	// The last records' events are on their way: give them a moment.
	sleep(ctx, 500*time.Millisecond+cfg.Linger)
	stopTails()
	twg.Wait()
	close(tailErrs)
	if err != nil {
		return p, Latency{}, err
	}
	for err := range tailErrs {
		b.rep.Notes = append(b.rep.Notes, "tail: "+err.Error())
	}
	b.rep.Series.Ack = ack.series(250 * time.Millisecond)
	b.rep.Series.E2E = e2e.series(250 * time.Millisecond)
	sum := e2e.summary()
	if want := p.Records * int64(cfg.Tails) / int64(cfg.Partitions); int64(sum.N) < want*9/10 {
		b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("the %d tails saw %d records of the about %d produced to their partitions at half load", cfg.Tails, sum.N, want))
	}
	return p, sum, nil
}

// fetches reads back what the produce phases wrote: a first reader (cold: the nodes'
// caches do not hold it), a second reader of the same data (cached), and a JSON reader.
// The data read is capped at three quarters of the cache, so the second reader can
// find all of it there. With Kafka listeners, a Kafka reader of the same data follows.
func (b *runner) fetches(ctx context.Context) error {
	cfg := &b.cfg
	c := client.New(cfg.Nodes[0], client.WithHTTPClient(b.hc))
	parts, err := c.Partitions(ctx, cfg.Topic)
	if err != nil {
		return fmt.Errorf("bench: partitions of %s: %w", cfg.Topic, err)
	}
	var total int64
	for _, p := range parts {
		total += p.Bytes
	}
	budget := min(total, cfg.CacheBytes*3/4/int64(len(cfg.Nodes)))
	until := make(map[int32]int64, len(parts))
	for _, p := range parts {
		if p.Bytes > 0 {
			until[p.Partition] = p.LogStartOffset + (p.HighWatermark-p.LogStartOffset)*budget/total
		}
	}
	for _, pass := range []struct {
		name   string
		binary bool
	}{{"fetch-cold", true}, {"fetch-cached", true}, {"fetch-cached-json", false}} {
		b.log.Info("phase: "+pass.name, "bytes", budget)
		before, err := scrape(ctx, b.hc, cfg.Nodes)
		if err != nil {
			return err
		}
		cfg.Phase(pass.name, false)
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var read int64
		var firstErr error
		for part, end := range until {
			// Each partition is read by the node that will read it again: the cache
			// is per node.
			node := cfg.Nodes[int(part)%len(cfg.Nodes)]
			wg.Go(func() {
				n, err := fetchRange(ctx, b.hc, node, cfg.Topic, part, 0, end, 4<<20, pass.binary)
				mu.Lock()
				read += n
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		cfg.Phase(pass.name, true)
		if firstErr != nil {
			return fmt.Errorf("bench: %s: %w", pass.name, firstErr)
		}
		after, err := scrape(ctx, b.hc, cfg.Nodes)
		if err != nil {
			return err
		}
		d := delta(before, after)
		path := "json"
		if pass.binary {
			path = "binary"
		}
		f := Fetch{Name: pass.name, Path: path, Bytes: read, Seconds: secs, MiBps: float64(read) / (1 << 20) / secs,
			Gets: d.sum("strata_objstore_requests_total", `op="get`), GetBytes: d.sum("strata_objstore_bytes_total", `op="get`),
			Objects: b.meanObject}
		if read > 0 {
			f.GetsPer4Mi = f.Gets / (float64(read) / (4 << 20))
		}
		b.log.Info("phase done", "phase", pass.name, "mib_per_s", fmt.Sprintf("%.1f", f.MiBps), "gets", f.Gets)
		b.rep.Fetch = append(b.rep.Fetch, f)
	}
	if len(cfg.KafkaNodes) > 0 {
		f, err := b.fetchKafka(ctx, until, 4<<20)
		if err != nil {
			return err
		}
		b.rep.Fetch = append(b.rep.Fetch, f)
	}
	return nil
}

// loadAverage is the 1-minute load average, 0 where /proc/loadavg is missing.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

func countString(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.FormatInt(n/1_000_000, 10) + " M"
	case n >= 1000 && n%1000 == 0:
		return strconv.FormatInt(n/1000, 10) + " K"
	}
	return strings.TrimSpace(strconv.FormatInt(n, 10))
}
