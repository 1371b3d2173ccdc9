package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-io/strata/catalog"
	catopen "github.com/strata-io/strata/catalog/open"
	"github.com/strata-io/strata/cmd/strata/internal/bench"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/open"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// benchFlags are strata bench's flags.
type benchFlags struct {
	against, againstKafka, cat, bucket        *string
	createBucket, inProcess, jsonOut, noScale *bool
	deleteData, noKafka, noCapacity, noSettle *bool
	keep                                      *bool
	// embedded: the nodes create their SQLite catalog in the bench's temporary
	// directory (serve creates one only with --create).
	embedded                               bool
	nodes, partitions, producers, overload *int
	tails, recordSize, batch, scaleChunk   *int
	cpuprofile, out, paths                 *string
	duration, floorDur, linger, capacity   *time.Duration
	hedge                                  *float64
	scaleRecords                           *int64
	maxFlush, bufferBytes, cacheBytes      byteSize
	memoryLimit                            byteSize
	slowSockets                            *int
}

func benchCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("bench", "strata bench [--catalog postgres://... --bucket s3://...] [--nodes N] [--against URL,...] [flags]",
		`Measures produce and fetch throughput and latency, the cost per GiB (object store requests,
catalog commits, CPU) and fetch latency at scale, each beside the floor of this machine measured in the
same run (raw PUT/GET bandwidth of the bucket, raw commit rate of the catalog database), and checks the
performance targets. Writes a table to stdout and report.json, latency.svg and the nodes' logs to --out.

Without --catalog and --bucket it starts an embedded node (SQLite and files in a temporary directory).
With them it starts --nodes node processes against that Postgres and bucket. With --against it drives
nodes already running (add --catalog and --bucket for the floor and the scale phase).`)
	f := &benchFlags{
		against:      c.fs.String("against", "", "drive these running `nodes` (comma-separated base URLs) instead of starting any"),
		againstKafka: c.fs.String("against-kafka", "", "with --against: the running nodes' Kafka `addresses` (comma-separated host:port, in the same order), for the Kafka phases"),
		noKafka:      c.fs.Bool("no-kafka", false, "skip the Kafka protocol's produce and fetch phases"),
		noSettle:     c.fs.Bool("no-settle", false, "do not write out dirty pages and drop the page cache before each produce phase (done when the bench starts the nodes, so that a phase does not pay for an earlier one's writes; dropping needs root)"),
		cat:          c.fs.String("catalog", "", "catalog `DSN` of the nodes, as for serve: postgres://..., a libpq string, or an existing SQLite file; with --bucket, nodes are started against them"),
		bucket:       c.fs.String("bucket", "", "object store `URL` of the nodes: s3://bucket/prefix?endpoint=...&path_style=true, or file:///dir"),
		createBucket: c.fs.Bool("create-bucket", false, "create the S3 bucket if it is missing (MinIO)"),
		deleteData:   c.fs.Bool("delete-data", false, "delete every object under --bucket (its prefix) when the bench ends: for a bucket prefix of the bench's own (scripts/bench.sh gives each run one); a run writes gigabytes"),
		nodes:        c.fs.Int("nodes", 1, "`number` of node processes to start"),
		inProcess:    c.fs.Bool("in-process", false, "run the node inside this process (one node; needed for --cpuprofile)"),
		cpuprofile:   c.fs.String("cpuprofile", "", "write a CPU profile of each phase to `directory`/PHASE.prof (implies --in-process)"),
		out:          c.fs.String("out", "", "`directory` for report.json, latency.svg and the nodes' logs (default: a new one per run under the user's cache directory, e.g. ~/.cache/strata/bench/RUN, so the working tree stays clean)"),
		jsonOut:      c.fs.Bool("json", false, "print the JSON report to stdout instead of the table"),
		partitions:   c.fs.Int("partitions", 8, "`number` of partitions of the bench topic"),
		producers:    c.fs.Int("producers", 0, "`number` of closed-loop producers at maximum load, each with one request in flight (default: enough to keep 4 flushes of --max-flush-bytes in flight, as the floor keeps 4 PUTs; 32 to 256)"),
		overload:     c.fs.Int("overload-producers", 0, "`number` of producers in the overload phase (default: enough to offer 2x --buffer-bytes, at most 256)"),
		tails:        c.fs.Int("tails", 2, "`number` of partitions tailed over Server-Sent Events at half load"),
		recordSize:   c.fs.Int("record-size", 1024, "record value `bytes` (e.g. 100, 1024, 10240)"),
		batch:        c.fs.Int("batch", 500, "records per produce `request`"),
		duration:     c.fs.Duration("duration", 10*time.Second, "`time` of each produce phase"),
		paths:        c.fs.String("paths", "", "produce `paths` measured at maximum load: binary, json, kafka (franz-go), kafka-bare (the binary path's batches in bare Produce requests) (default: all the nodes serve)"),
		floorDur:     c.fs.Duration("floor-duration", 3*time.Second, "`time` of each floor measurement"),
		scaleRecords: c.fs.Int64("scale-records", 10_000_000, "`records` the large partition is seeded to in the scale phase"),
		scaleChunk:   c.fs.Int("scale-chunk-records", 100, "`records` per seeded chunk row (10 makes 1 M rows for 10 M records)"),
		noScale:      c.fs.Bool("no-scale", false, "skip the scale phase"),
		noCapacity:   c.fs.Bool("no-capacity", false, "skip the catalog capacity phase"),
		capacity:     c.fs.Duration("capacity-duration", 2*time.Second, "`time` of each line of the catalog capacity phase (flush commits, heartbeats, offset commits driven through the catalog)"),
		linger:       c.fs.Duration("linger", writer.DefaultLinger, "nodes' --linger (started nodes; for the targets otherwise)"),
		hedge:        c.fs.Float64("hedge-quantile", writer.DefaultHedgeQuantile, "started nodes' --hedge-quantile (0: they never hedge a slow PUT): run with 0 and with the default to see what hedging does to the PUT stage's p99 and p99.9"),
		maxFlush:     byteSize(writer.DefaultMaxFlushBytes),
		bufferBytes:  byteSize(writer.DefaultBufferBytes),
		cacheBytes:   byteSize(reader.DefaultCacheBytes),
		keep:         c.fs.Bool("keep", false, "keep the embedded node's data directory"),
		slowSockets:  c.fs.Int("slow-sockets", 20, "`number` of sockets that ask for 16 MiB answers and never read them in the slow-reader phase (-1: no such phase)"),
	}
	c.fs.Var(&f.memoryLimit, "memory-limit", "nodes' --memory-limit `size` (default: 1GiB for the node processes the bench starts; running nodes and --in-process: theirs); peak RSS is checked against it")
	c.fs.Var(&f.maxFlush, "max-flush-bytes", "nodes' --max-flush-bytes `size`")
	c.fs.Var(&f.bufferBytes, "buffer-bytes", "nodes' --buffer-bytes `size`")
	c.fs.Var(&f.cacheBytes, "cache-bytes", "nodes' --cache-bytes `size`")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		return runBench(ctx, e, c, f)
	}
}

// config validates the flags into the bench's configuration, or says everything that
// is wrong.
func (f *benchFlags) config() (bench.Config, []string) {
	if *f.cpuprofile != "" {
		*f.inProcess = true
	}
	var bad []string
	if (*f.cat == "") != (*f.bucket == "") && *f.against == "" {
		bad = append(bad, "--catalog and --bucket go together (or give neither for an embedded node)")
	}
	if *f.cat != "" {
		if _, err := catalogFlag(*f.cat, catopen.Options{}, nil); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if *f.nodes < 1 || *f.nodes > 16 {
		bad = append(bad, fmt.Sprintf("--nodes %d: want 1 to 16", *f.nodes))
	}
	if h := *f.hedge; h != 0 && (h < 0.5 || h >= 1) {
		bad = append(bad, fmt.Sprintf("--hedge-quantile %g: want 0 (never hedge) or between 0.5 and 0.999", h))
	}
	if *f.againstKafka != "" && *f.against == "" {
		bad = append(bad, "--against-kafka goes with --against")
	}
	f.memoryLimit = nodeMemoryLimit(f.memoryLimit, *f.against != "", *f.inProcess)
	if *f.inProcess && (*f.nodes > 1 || *f.against != "") {
		bad = append(bad, "--in-process runs one node of its own: not with --nodes > 1 or --against")
	}
	var pathList []string
	for _, p := range strings.Split(*f.paths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pathList = append(pathList, p)
		}
	}
	cfg := bench.Config{
		Partitions: *f.partitions, Producers: *f.producers, Tails: *f.tails, OverloadProducers: *f.overload, RecordSize: *f.recordSize, BatchRecords: *f.batch,
		Duration: *f.duration, Paths: pathList, Linger: *f.linger, MaxFlushBytes: int64(f.maxFlush),
		BufferBytes: int64(f.bufferBytes), CacheBytes: int64(f.cacheBytes), ScaleRecords: *f.scaleRecords,
		MemoryLimit: int64(f.memoryLimit), SlowSockets: *f.slowSockets,
		ScaleChunkRecords: *f.scaleChunk, NoScale: *f.noScale, FloorDuration: *f.floorDur, Nodes: []string{"http://placeholder"},
		CapacityDuration: *f.capacity, NoCapacity: *f.noCapacity,
		// Nodes the bench starts share this machine's page cache with it (and their store's
		// files); running nodes are measured as they are.
		Settle: *f.against == "" && !*f.noSettle,
	}
	if !*f.noKafka && (*f.against == "" || *f.againstKafka != "") {
		cfg.KafkaNodes = []string{"placeholder:9092"} // the nodes will serve Kafka
	}
	if err := cfg.Validate(); err != nil {
		bad = append(bad, err.Error())
	}
	cfg.Nodes, cfg.KafkaNodes = nil, nil // the placeholders let Validate check the rest
	return cfg, bad
}

// benchMemoryLimit is the --memory-limit of the node processes the bench starts unless
// told otherwise. Their own default (90 % of a cgroup's limit, or half the machine's
// memory) bounds nothing on a development machine, so peak RSS was checked against a
// rule of thumb the nodes were never given, and missed in every run; with a limit of
// their own, the check is of the memory budget itself. 1 GiB holds the default buffer
// and cache within the budget (60 % of the limit).
const benchMemoryLimit = 1 << 30

// nodeMemoryLimit is the nodes' --memory-limit: the one given, else benchMemoryLimit for
// node processes the bench starts. Running nodes (--against) are measured as they are,
// and a node in the bench's process would put the bench itself under the limit.
func nodeMemoryLimit(given byteSize, against, inProcess bool) byteSize {
	if given > 0 || against || inProcess {
		return given
	}
	return benchMemoryLimit
}

// nodeArgs are the flags of the nodes the bench starts.
func (f *benchFlags) nodeArgs() []string {
	var create []string
	if f.embedded {
		create = []string{"--create"}
	}
	if f.memoryLimit > 0 {
		create = append(create, "--memory-limit", strconv.FormatInt(int64(f.memoryLimit), 10))
	}
	args := append(create, "--linger", f.linger.String(), "--hedge-quantile", strconv.FormatFloat(*f.hedge, 'g', -1, 64), "--max-flush-bytes", strconv.FormatInt(int64(f.maxFlush), 10),
		"--buffer-bytes", strconv.FormatInt(int64(f.bufferBytes), 10), "--cache-bytes", strconv.FormatInt(int64(f.cacheBytes), 10),
		"--roles", "writer,reader", "--log-level", "info", "--log-format", "json", "--listen", "127.0.0.1:0",
		// A line per request would fill the node's log with the load; refusals are still
		// logged (there are none).
		"--access-log-sample", "0")
	if !*f.noKafka {
		args = append(args, "--kafka-listen", "127.0.0.1:0")
	}
	return args
}

func runBench(ctx context.Context, e *env, c *command, f *benchFlags) error {
	cfg, bad := f.config()
	if len(bad) > 0 {
		return badFlags(c.name, bad)
	}
	if *f.out == "" {
		*f.out = defaultBenchOut(time.Now())
	}
	if err := os.MkdirAll(*f.out, 0o755); err != nil {
		return fmt.Errorf("create --out %s: %w", *f.out, err)
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log.Info("bench: report.json, latency.svg and the nodes' logs go to --out", "dir", *f.out)
	cfg.Log = log

	catalogURL, bucketURL := *f.cat, *f.bucket
	switch {
	case *f.against != "":
		cfg.Nodes = nil
		for _, u := range strings.Split(*f.against, ",") {
			if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
				cfg.Nodes = append(cfg.Nodes, u)
			}
		}
		for _, a := range strings.Split(*f.againstKafka, ",") {
			if a = strings.TrimSpace(a); a != "" && !*f.noKafka {
				cfg.KafkaNodes = append(cfg.KafkaNodes, a)
			}
		}
		cfg.Target = "running nodes"
	case catalogURL == "":
		dir, err := os.MkdirTemp("", "strata-bench-")
		if err != nil {
			return err
		}
		if !*f.keep {
			defer os.RemoveAll(dir)
		} else {
			fmt.Fprintf(e.stderr, "bench: data in %s\n", dir)
		}
		catalogURL = "sqlite:" + filepath.Join(dir, "catalog.db")
		f.embedded = true
		bucketURL = "file://" + filepath.Join(dir, "objects")
		cfg.Target = "embedded (SQLite, files)"
	default:
		cfg.Target = "postgres + object store"
		if strings.HasPrefix(bucketURL, "s3:") {
			cfg.Target = "postgres + S3"
			if strings.Contains(bucketURL, "endpoint=") {
				cfg.Target = "postgres + S3-compatible (" + endpointHost(bucketURL) + ")"
			}
		}
	}

	// The floor's handles on the same bucket and database the nodes use.
	if bucketURL != "" {
		bt, err := open.Parse(bucketURL)
		if err != nil {
			return fmt.Errorf("open --bucket: %w", err)
		}
		st, err := bt.Open(ctx, log, open.Options{CreateBucket: *f.createBucket})
		if err != nil {
			return fmt.Errorf("open --bucket: %w", err)
		}
		cfg.Store = st
		if *f.deleteData {
			// Registered before the nodes' stop, so it runs after they have stopped.
			defer deleteAll(context.WithoutCancel(ctx), st, log)
		}
	}
	stop, err := f.startNodes(ctx, &cfg, catalogURL, bucketURL)
	if err != nil {
		return err
	}
	defer stop()
	if catalogURL != "" {
		db, err := openBenchDB(ctx, catalogURL)
		if err != nil {
			return err
		}
		defer db.Close()
		cfg.DB = db
		if !*f.noCapacity {
			cat, err := openBenchCatalog(ctx, catalogURL, log)
			if err != nil {
				return err
			}
			defer cat.Close()
			cfg.Catalog = cat
		}
	}
	if *f.cpuprofile != "" {
		if err := os.MkdirAll(*f.cpuprofile, 0o755); err != nil {
			return fmt.Errorf("create --cpuprofile %s: %w", *f.cpuprofile, err)
		}
		cfg.Phase = profilePhases(*f.cpuprofile, log)
	}

	start := time.Now()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	log.Info("bench finished", "seconds", time.Since(start).Round(time.Second))
	if err := writeFile(filepath.Join(*f.out, "report.json"), rep.WriteJSON); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(*f.out, "latency.svg"), rep.WriteSVG); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(*f.out, "table.txt"), rep.WriteTable); err != nil {
		return err
	}
	if *f.jsonOut {
		return rep.WriteJSON(e.stdout)
	}
	return rep.WriteTable(e.stdout)
}

// defaultBenchOut is a run's own directory under the user's cache directory (the
// system's temporary directory without one): never the working tree.
func defaultBenchOut(now time.Time) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "strata", "bench", now.Format("20060102-150405"))
}

// deleteAll deletes every object of st (--delete-data), saying how many went.
func deleteAll(ctx context.Context, st objstore.Store, log *slog.Logger) {
	var keys []string
	if err := st.List(ctx, "", func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		log.Warn("--delete-data: list the bucket", "err", err)
		return
	}
	for _, k := range keys {
		if err := st.Delete(ctx, k); err != nil {
			log.Warn("--delete-data: delete", "key", k, "err", err)
			return
		}
	}
	log.Info("--delete-data: deleted the run's objects", "objects", len(keys))
}

// startNodes starts the nodes the bench drives, in this process or as child processes
// of this binary (none with --against), adds them to cfg and returns what stops them.
func (f *benchFlags) startNodes(ctx context.Context, cfg *bench.Config, catalogURL, bucketURL string) (stop func(), err error) {
	if *f.against != "" {
		return func() {}, nil
	}
	cfg.Hedge = "never"
	if *f.hedge > 0 {
		cfg.Hedge = fmt.Sprintf("past p%.3g", 100**f.hedge)
	}
	switch {
	case *f.inProcess:
		base, kafkaAddr, stop, err := startBenchNodeInProcess(ctx, catalogURL, bucketURL, f.nodeArgs(), *f.createBucket, filepath.Join(*f.out, "node-0.log"))
		if err != nil {
			return nil, err
		}
		cfg.Nodes = []string{base}
		if kafkaAddr != "" {
			cfg.KafkaNodes = []string{kafkaAddr}
		}
		return stop, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to start nodes: %w", err)
	}
	var procs []*benchNode
	stop = func() {
		for _, p := range procs {
			p.stop()
		}
	}
	for i := range *f.nodes {
		args := append([]string{"serve", "--catalog", catalogURL, "--bucket", bucketURL}, f.nodeArgs()...)
		if *f.createBucket && i == 0 {
			args = append(args, "--create-bucket")
		}
		p, err := startBenchNode(ctx, exe, args, filepath.Join(*f.out, fmt.Sprintf("node-%d.log", i)))
		if err != nil {
			stop()
			return nil, err
		}
		procs = append(procs, p)
		cfg.Nodes = append(cfg.Nodes, p.url)
		if !*f.noKafka {
			if p.kafka == "" {
				stop()
				return nil, fmt.Errorf("node %d serves no Kafka listener: see %s (or run with --no-kafka)", i, filepath.Join(*f.out, fmt.Sprintf("node-%d.log", i)))
			}
			cfg.KafkaNodes = append(cfg.KafkaNodes, p.kafka)
		}
	}
	return stop, nil
}

// openBenchDB opens the floor's handle on the nodes' catalog database (the nodes have
// created an embedded catalog by now).
func openBenchDB(ctx context.Context, catalogURL string) (*bench.DB, error) {
	target, err := catalogFlag(catalogURL, catopen.Options{}, nil)
	if err != nil {
		return nil, err
	}
	if target.Kind() == catopen.Postgres {
		db, err := bench.OpenPostgres(ctx, target.ConnString())
		return db, target.Redact(err)
	}
	path := target.Path()
	return bench.OpenSQLite(ctx, path, filepath.Join(filepath.Dir(path), "bench-floor.db"))
}

// openBenchCatalog opens the nodes' catalog for the capacity phase, as a node does
// (the nodes have created it and applied its migrations by now).
func openBenchCatalog(ctx context.Context, catalogURL string, log *slog.Logger) (catalog.Backend, error) {
	target, err := catalogFlag(catalogURL, catopen.Options{}, nil)
	if err != nil {
		return nil, err
	}
	cat, err := target.Open(ctx, catalog.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("bench: open the catalog for the capacity phase: %w", err)
	}
	return cat, nil
}

// profilePhases writes a CPU profile of each phase to dir/PHASE.prof.
func profilePhases(dir string, log *slog.Logger) func(name string, done bool) {
	var prof *os.File
	return func(name string, done bool) {
		if done {
			if prof != nil {
				pprof.StopCPUProfile()
				prof.Close()
				prof = nil
			}
			return
		}
		f, err := os.Create(filepath.Join(dir, name+".prof"))
		if err != nil {
			log.Warn("cpu profile", "err", err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Warn("cpu profile", "err", err)
			f.Close()
			return
		}
		prof = f
	}
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// endpointHost names the S3-compatible endpoint of a bucket URL, for the report.
func endpointHost(bucketURL string) string {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return "?"
	}
	ep, err := url.Parse(u.Query().Get("endpoint"))
	if err != nil || ep.Host == "" {
		return "?"
	}
	return ep.Host
}

// benchNode is a node started as a child process.
type benchNode struct {
	cmd   *exec.Cmd
	url   string
	kafka string // its Kafka listener's address, when it serves one
	done  chan struct{}
	log   *os.File
}

// startBenchNode starts this binary with args, its stderr (JSON logs) teed to logPath,
// and waits until it serves.
func startBenchNode(ctx context.Context, exe string, args []string, logPath string) (*benchNode, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout = lf
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	// Nodes get their own process group: a Ctrl-C reaches the bench, which stops them
	// in order (SIGTERM, then drain) rather than all at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start node: %w", err)
	}
	n := &benchNode{cmd: cmd, done: make(chan struct{}), log: lf}
	// The Kafka listener is announced before the HTTP API (runNode starts it first).
	type addrs struct{ url, kafka string }
	urlc := make(chan addrs, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		kafka := ""
		for sc.Scan() {
			line := sc.Bytes()
			lf.Write(line)
			lf.Write([]byte{'\n'})
			if !sent {
				var m struct{ Msg, URL, Addr string }
				if json.Unmarshal(line, &m) == nil && m.Msg == "serving Kafka protocol" {
					kafka = m.Addr
				}
				if json.Unmarshal(line, &m) == nil && m.Msg == "serving HTTP API" && m.URL != "" {
					urlc <- addrs{m.URL, kafka}
					sent = true
				}
			}
		}
		_, _ = io.Copy(lf, pr)
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(n.done)
	}()
	select {
	case a := <-urlc:
		n.url, n.kafka = a.url, a.kafka
	case <-n.done:
		lf.Close()
		return nil, fmt.Errorf("node exited before serving: see %s", logPath)
	case <-time.After(60 * time.Second):
		n.stop()
		return nil, fmt.Errorf("node did not serve within a minute: see %s", logPath)
	case <-ctx.Done():
		n.stop()
		return nil, ctx.Err()
	}
	if err := waitReady(ctx, n.url); err != nil {
		n.stop()
		return nil, fmt.Errorf("%w: see %s", err, logPath)
	}
	return n, nil
}

// stop asks the node to shut down gracefully and kills it if it has not within 30s.
func (n *benchNode) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	n.log.Close()
}

func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node at %s not ready after 30s", base)
		}
		if err := ctxwait.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// startBenchNodeInProcess runs one node in this process, configured by serve's own
// flags, so that a CPU profile of this process shows the node's hot spots beside the
// load generator's (which the profile names by package).
func startBenchNodeInProcess(ctx context.Context, catalogURL, bucketURL string, nodeArgs []string, create bool, logPath string) (base, kafkaAddr string, stop func(), err error) {
	c := newCommand("serve", "", "")
	sf := addServeFlags(c, "127.0.0.1:0")
	kf := addKafkaFlags(c, "", false)
	args := append([]string{"--catalog", catalogURL, "--bucket", bucketURL}, nodeArgs...)
	if create {
		args = append(args, "--create-bucket")
	}
	if _, err := c.parse(args, func(string) string { return "" }); err != nil {
		return "", "", nil, err
	}
	spec, bad := sf.spec()
	bad = append(bad, kf.validate()...)
	if len(bad) > 0 {
		return "", "", nil, badFlags("bench", bad)
	}
	// The kafka flags ride on the spec: the node opens the listener beside the API.
	spec.kafka = kf
	lf, err := os.Create(logPath)
	if err != nil {
		return "", "", nil, err
	}
	ne := &env{stdin: strings.NewReader(""), stdout: lf, stderr: lf, getenv: func(string) string { return "" }}
	n, err := startNode(ctx, ne, spec)
	if err != nil {
		lf.Close()
		return "", "", nil, err
	}
	serveCtx, cancelServe := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = n.Serve(serveCtx) }()
	stop = func() {
		cancelServe()
		<-served
		n.closeCatalog()
		lf.Close()
	}
	base, kafkaAddr = n.URL, n.KafkaAddr
	if err := waitReady(ctx, base); err != nil {
		stop()
		return "", "", nil, err
	}
	return base, kafkaAddr, stop, nil
}
