// Package bench drives running Strata nodes and measures them beside the floor of the
// machine they run on (the `strata bench` command). One run measures, in order:
//
//   - the floor: PUT and GET bandwidth of segment-sized objects in the nodes' bucket, and
//     the catalog database's rate of one-statement transactions updating 8 rows;
//   - produce at maximum load, after a warm-up that is not measured, binary (Kafka
//     record batches) and JSON paths: closed-loop producers, throughput, produce-ack
//     latency, and from the nodes' metrics the object store PUTs per GiB, catalog
//     commits per flush, CPU seconds per GiB and peak resident memory;
//   - produce at half the binary path's maximum, open loop, with Server-Sent Events
//     tails measuring end-to-end latency, and the PUT latency of objects the size of the
//     flushes it made;
//   - fetch: a first (cold) and a second (cached) reader of the same data, binary, with
//     the GETs each caused, and a cached JSON reader;
//   - with Kafka listeners (Config.KafkaNodes), franz-go producing at maximum load
//     beside the binary path, a bare Kafka client sending the binary path's own batches,
//     and a cached Kafka fetch of the same data (kafka.go);
//   - at scale: fetch latency from a partition seeded to 10 M records (chunk rows
//     inserted directly) against one of 10 K;
//   - the catalog's capacity: flush commits, heartbeats and offset commits a second
//     the catalog database sustains, driven through the catalog itself (capacity.go).
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
	"runtime"
	"strconv"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/sendbody"
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
	// Producers are the closed-loop producers at maximum load [enough for floorStreams
	// flushes: floorStreams x MaxFlushBytes / (BatchRecords x RecordSize), 32 to 256].
	// Each keeps one request in flight, so together they keep as many bytes in flight as
	// the floor keeps PUTs of MaxFlushBytes: with half that (32 producers of 0.5 MiB for
	// 8 MiB flushes), at most two flushes' worth of records existed at once, the node
	// had at most two PUTs in flight against the floor's four, and the phase measured the
	// ack latency (Little's law) rather than what the node can carry.
	Producers int
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
	// KafkaNodes), "kafka-bare" (the binary path's batches in Produce requests of a bare
	// client) [all that the nodes serve, in that order but JSON last].
	Paths []string
	// The nodes' settings, which the targets depend on.
	Linger        time.Duration // [50ms]
	MaxFlushBytes int64         // [8 MiB]
	BufferBytes   int64         // [64 MiB]
	CacheBytes    int64         // [256 MiB]
	// Hedge says how the started nodes hedge slow PUTs ("p95", "never"), for the
	// report; "" when the bench did not start them.
	Hedge string
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
	// Catalog is the nodes' catalog, opened by the bench, for the capacity phase
	// (capacity.go), which runs with it and DB unless NoCapacity; CapacityDuration is
	// each of its cells' time [2s].
	Catalog          CapacityCatalog
	CapacityDuration time.Duration
	NoCapacity       bool

	// Settle writes the machine's dirty pages out and drops its page cache before each
	// produce phase (settle in phases.go): for runs whose nodes and store share this
	// machine.
	Settle bool

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
		// The phases compared with binary's throughput right after it, so that less of
		// the machine's drift falls between them; JSON, compared with the floor, last.
		c.Paths = []string{"binary"}
		if len(c.KafkaNodes) > 0 {
			c.Paths = append(c.Paths, "kafka-bare", "kafka")
		}
		c.Paths = append(c.Paths, "json")
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
	if c.Producers == 0 {
		c.Producers = int(min(256, max(32, floorStreams*c.MaxFlushBytes/int64(c.BatchRecords*c.RecordSize))))
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
	if c.CapacityDuration == 0 {
		c.CapacityDuration = 2 * time.Second
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
		case (p == "kafka" || p == "kafka-bare") && len(c.KafkaNodes) == 0:
			errs = append(errs, fmt.Errorf("path %s: the nodes serve no Kafka listener", p))
		case p != "binary" && p != "json" && p != "kafka" && p != "kafka-bare":
			errs = append(errs, fmt.Errorf("path %q: use binary, json, kafka or kafka-bare", p))
		}
	}
	if c.Duration < time.Second {
		errs = append(errs, fmt.Errorf("duration %s: at least 1s", c.Duration))
	}
	if c.CapacityDuration < 100*time.Millisecond && !c.NoCapacity {
		errs = append(errs, fmt.Errorf("capacity duration %s: at least 100ms", c.CapacityDuration))
	}
	if c.ScaleChunkRecords < 1 || c.ScaleRecords < int64(c.ScaleChunkRecords) {
		errs = append(errs, fmt.Errorf("scale: %d records in chunks of %d", c.ScaleRecords, c.ScaleChunkRecords))
	}
	return errors.Join(errs...)
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
		DialContext:         sendbody.Dial((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
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
	// settleWarned: settle has said the page cache cannot be dropped.
	settleWarned bool
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
	s.Hedge = cfg.Hedge
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
		rep.Floor = &Floor{SegmentBytes: cfg.MaxFlushBytes, Streams: floorStreams}
		b.settle("floor") // from the state each produce phase starts from
		cfg.Phase("floor", false)
		if cfg.Store != nil {
			b.log.Info("floor: object store")
			put, get, err := floorStore(ctx, cfg.Store, prefix, cfg.MaxFlushBytes, floorStreams, cfg.FloorDuration, true)
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

	// Maximum load, each path, after a warm-up.
	if err := b.warmUp(ctx); err != nil {
		return nil, err
	}
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
	if rep.Floor != nil && cfg.Store != nil {
		b.settle("floor-after")
		b.log.Info("floor: object store, again after the maximum-load phases")
		put, _, err := floorStore(ctx, cfg.Store, prefix, cfg.MaxFlushBytes, floorStreams, cfg.FloorDuration, false)
		if err != nil {
			return nil, err
		}
		rep.Floor.PutAfterMiBps = put
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
	if !cfg.NoCapacity && cfg.Catalog != nil && cfg.DB != nil {
		cfg.Phase("capacity", false)
		cp, err := b.capacity(ctx)
		cfg.Phase("capacity", true)
		if err != nil {
			return nil, err
		}
		rep.Capacity = cp
	}
	rep.Seconds = time.Since(start).Seconds()
	b.targets(commitP99)
	return rep, nil
}
