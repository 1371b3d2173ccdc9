package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
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

	"github.com/strata-io/strata/bench"
	"github.com/strata-io/strata/objstore/open"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

func benchCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("bench", "strata bench [--catalog postgres://... --bucket s3://...] [--nodes N] [--against URL,...] [flags]",
		`Measures produce and fetch throughput and latency, the cost per GiB (object store requests,
catalog commits, CPU) and fetch latency at scale, each beside the floor of this machine measured in the
same run (raw PUT/GET bandwidth of the bucket, raw commit rate of the catalog database), and checks the
performance targets. Writes a table to stdout and report.json, latency.svg and the nodes' logs to --out.

Without --catalog and --bucket it starts an embedded node (SQLite and files in a temporary directory).
With them it starts --nodes node processes against that Postgres and bucket. With --against it drives
nodes already running (add --catalog and --bucket for the floor and the scale phase).`)
	against := c.fs.String("against", "", "drive these running `nodes` (comma-separated base URLs) instead of starting any")
	againstKafka := c.fs.String("against-kafka", "", "with --against: the running nodes' Kafka `addresses` (comma-separated host:port, in the same order), for the Kafka phases")
	noKafka := c.fs.Bool("no-kafka", false, "skip the Kafka protocol's produce and fetch phases")
	cat := c.fs.String("catalog", "", "catalog `URL` of the nodes: postgres://... (or a SQLite file); with --bucket, nodes are started against them")
	bucket := c.fs.String("bucket", "", "object store `URL` of the nodes: s3://bucket/prefix?endpoint=...&path_style=true, or file:///dir")
	createBucket := c.fs.Bool("create-bucket", false, "create the S3 bucket if it is missing (MinIO)")
	nodes := c.fs.Int("nodes", 1, "`number` of node processes to start")
	inProcess := c.fs.Bool("in-process", false, "run the node inside this process (one node; needed for --cpuprofile)")
	cpuprofile := c.fs.String("cpuprofile", "", "write a CPU profile of each phase to `directory`/PHASE.prof (implies --in-process)")
	out := c.fs.String("out", "bench-out", "`directory` for report.json, latency.svg and the nodes' logs")
	jsonOut := c.fs.Bool("json", false, "print the JSON report to stdout instead of the table")
	partitions := c.fs.Int("partitions", 8, "`number` of partitions of the bench topic")
	producers := c.fs.Int("producers", 32, "`number` of closed-loop producers at maximum load")
	overload := c.fs.Int("overload-producers", 0, "`number` of producers in the overload phase (default: enough to offer 2x --buffer-bytes, at most 256)")
	tails := c.fs.Int("tails", 2, "`number` of partitions tailed over Server-Sent Events at half load")
	recordSize := c.fs.Int("record-size", 1024, "record value `bytes` (e.g. 100, 1024, 10240)")
	batch := c.fs.Int("batch", 500, "records per produce `request`")
	duration := c.fs.Duration("duration", 10*time.Second, "`time` of each produce phase")
	paths := c.fs.String("paths", "", "produce `paths` measured at maximum load: binary, json, kafka (default: all the nodes serve)")
	floorDur := c.fs.Duration("floor-duration", 3*time.Second, "`time` of each floor measurement")
	scaleRecords := c.fs.Int64("scale-records", 10_000_000, "`records` the large partition is seeded to in the scale phase")
	scaleChunk := c.fs.Int("scale-chunk-records", 100, "`records` per seeded chunk row (10 makes 1 M rows for 10 M records)")
	noScale := c.fs.Bool("no-scale", false, "skip the scale phase")
	linger := c.fs.Duration("linger", writer.DefaultLinger, "nodes' --linger (started nodes; for the targets otherwise)")
	maxFlush := byteSize(writer.DefaultMaxFlushBytes)
	c.fs.Var(&maxFlush, "max-flush-bytes", "nodes' --max-flush-bytes `size`")
	bufferBytes := byteSize(writer.DefaultBufferBytes)
	c.fs.Var(&bufferBytes, "buffer-bytes", "nodes' --buffer-bytes `size`")
	cacheBytes := byteSize(reader.DefaultCacheBytes)
	c.fs.Var(&cacheBytes, "cache-bytes", "nodes' --cache-bytes `size`")
	keep := c.fs.Bool("keep", false, "keep the embedded node's data directory")
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		if *cpuprofile != "" {
			*inProcess = true
		}
		var bad []string
		if (*cat == "") != (*bucket == "") && *against == "" {
			bad = append(bad, "--catalog and --bucket go together (or give neither for an embedded node)")
		}
		if *nodes < 1 || *nodes > 16 {
			bad = append(bad, fmt.Sprintf("--nodes %d: want 1 to 16", *nodes))
		}
		if *againstKafka != "" && *against == "" {
			bad = append(bad, "--against-kafka goes with --against")
		}
		if *inProcess && (*nodes > 1 || *against != "") {
			bad = append(bad, "--in-process runs one node of its own: not with --nodes > 1 or --against")
		}
		var pathList []string
		for _, p := range strings.Split(*paths, ",") {
			if p = strings.TrimSpace(p); p != "" {
				pathList = append(pathList, p)
			}
		}
		cfg := bench.Config{
			Partitions: *partitions, Producers: *producers, Tails: *tails, OverloadProducers: *overload, RecordSize: *recordSize, BatchRecords: *batch,
			Duration: *duration, Paths: pathList, Linger: *linger, MaxFlushBytes: int64(maxFlush),
			BufferBytes: int64(bufferBytes), CacheBytes: int64(cacheBytes), ScaleRecords: *scaleRecords,
			ScaleChunkRecords: *scaleChunk, NoScale: *noScale, FloorDuration: *floorDur, Nodes: []string{"http://placeholder"},
		}
		if !*noKafka && (*against == "" || *againstKafka != "") {
			cfg.KafkaNodes = []string{"placeholder:9092"} // the nodes will serve Kafka
		}
		if err := cfg.Validate(); err != nil {
			bad = append(bad, err.Error())
		}
		cfg.Nodes, cfg.KafkaNodes = nil, nil // the placeholders let Validate check the rest
		if len(bad) > 0 {
			return badFlags(c.name, bad)
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("create --out %s: %w", *out, err)
		}
		log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		cfg.Log = log

		nodeArgs := []string{"--linger", linger.String(), "--max-flush-bytes", strconv.FormatInt(int64(maxFlush), 10),
			"--buffer-bytes", strconv.FormatInt(int64(bufferBytes), 10), "--cache-bytes", strconv.FormatInt(int64(cacheBytes), 10),
			"--roles", "writer,reader", "--log-level", "info", "--log-format", "json", "--listen", "127.0.0.1:0"}
		if !*noKafka {
			nodeArgs = append(nodeArgs, "--kafka-listen", "127.0.0.1:0")
		}
		catalogURL, bucketURL := *cat, *bucket
		switch {
		case *against != "":
			cfg.Nodes = nil
			for _, u := range strings.Split(*against, ",") {
				if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
					cfg.Nodes = append(cfg.Nodes, u)
				}
			}
			for _, a := range strings.Split(*againstKafka, ",") {
				if a = strings.TrimSpace(a); a != "" && !*noKafka {
					cfg.KafkaNodes = append(cfg.KafkaNodes, a)
				}
			}
			cfg.Target = "running nodes"
		case catalogURL == "":
			dir, err := os.MkdirTemp("", "strata-bench-")
			if err != nil {
				return err
			}
			if !*keep {
				defer os.RemoveAll(dir)
			} else {
				fmt.Fprintf(e.stderr, "bench: data in %s\n", dir)
			}
			catalogURL = "sqlite:" + filepath.Join(dir, "catalog.db")
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
			st, err := open.Open(ctx, bucketURL, log)
			if err != nil {
				return fmt.Errorf("open --bucket: %w", err)
			}
			if eb, ok := st.(interface{ EnsureBucket(context.Context) error }); ok && *createBucket {
				if err := eb.EnsureBucket(ctx); err != nil {
					return fmt.Errorf("create bucket: %w", err)
				}
			}
			cfg.Store = st
		}

		// Start the nodes: in this process, or as child processes of this binary.
		var stop func()
		switch {
		case *against != "":
		case *inProcess:
			base, kafkaAddr, stopNode, err := startBenchNodeInProcess(ctx, catalogURL, bucketURL, nodeArgs, *createBucket, filepath.Join(*out, "node-0.log"))
			if err != nil {
				return err
			}
			stop = stopNode
			cfg.Nodes = []string{base}
			if kafkaAddr != "" {
				cfg.KafkaNodes = []string{kafkaAddr}
			}
		default:
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary to start nodes: %w", err)
			}
			var procs []*benchNode
			stop = func() {
				for _, p := range procs {
					p.stop()
				}
			}
			for i := range *nodes {
				args := append([]string{"serve", "--catalog", catalogURL, "--bucket", bucketURL}, nodeArgs...)
				if *createBucket && i == 0 {
					args = append(args, "--create-bucket")
				}
				p, err := startBenchNode(ctx, exe, args, filepath.Join(*out, fmt.Sprintf("node-%d.log", i)))
				if err != nil {
					stop()
					return err
				}
				procs = append(procs, p)
				cfg.Nodes = append(cfg.Nodes, p.url)
				if !*noKafka {
					if p.kafka == "" {
						stop()
						return fmt.Errorf("node %d serves no Kafka listener: see %s (or run with --no-kafka)", i, filepath.Join(*out, fmt.Sprintf("node-%d.log", i)))
					}
					cfg.KafkaNodes = append(cfg.KafkaNodes, p.kafka)
				}
			}
		}
		if stop != nil {
			defer stop()
		}

		if catalogURL != "" {
			var db *bench.DB
			var err error
			if strings.HasPrefix(catalogURL, "postgres") {
				db, err = bench.OpenPostgres(ctx, catalogURL)
			} else {
				path := strings.TrimPrefix(strings.TrimPrefix(catalogURL, "sqlite:"), "//")
				db, err = bench.OpenSQLite(ctx, path, filepath.Join(filepath.Dir(path), "bench-floor.db"))
			}
			if err != nil {
				return err
			}
			defer db.Close()
			cfg.DB = db
		}

		if *cpuprofile != "" {
			if err := os.MkdirAll(*cpuprofile, 0o755); err != nil {
				return fmt.Errorf("create --cpuprofile %s: %w", *cpuprofile, err)
			}
			var prof *os.File
			cfg.Phase = func(name string, done bool) {
				if done {
					if prof != nil {
						pprof.StopCPUProfile()
						prof.Close()
						prof = nil
					}
					return
				}
				f, err := os.Create(filepath.Join(*cpuprofile, name+".prof"))
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

		start := time.Now()
		rep, err := bench.Run(ctx, cfg)
		if err != nil {
			return err
		}
		log.Info("bench finished", "seconds", time.Since(start).Round(time.Second))
		if err := writeFile(filepath.Join(*out, "report.json"), rep.WriteJSON); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(*out, "latency.svg"), rep.WriteSVG); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(*out, "table.txt"), rep.WriteTable); err != nil {
			return err
		}
		if *jsonOut {
			return rep.WriteJSON(e.stdout)
		}
		return rep.WriteTable(e.stdout)
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
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startBenchNodeInProcess runs one node in this process, configured by serve's own
// flags, so that a CPU profile of this process shows the node's hot spots beside the
// load generator's (which the profile names by package).
func startBenchNodeInProcess(ctx context.Context, catalogURL, bucketURL string, nodeArgs []string, create bool, logPath string) (string, string, func(), error) {
	c := newCommand("serve", "", "")
	sf := addServeFlags(c, ":0")
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
	stopNode := func() {
		n.stopRoles()
		n.wg.Wait()
		n.closeCatalog()
		lf.Close()
	}
	var kn *kafkaNode
	if kf.listen != "" {
		if kn, err = startKafka(ctx, kf, n.cat, n.deps.Core, nil, n.log, n.deps.Registerer, false); err != nil {
			stopNode()
			return "", "", nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if kn != nil {
			kn.stop()
		}
		stopNode()
		return "", "", nil, err
	}
	srv := &http.Server{Handler: n.api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-served
		if kn != nil {
			kn.stop()
		}
		stopNode()
	}
	base := "http://" + ln.Addr().String()
	if err := waitReady(ctx, base); err != nil {
		stop()
		return "", "", nil, err
	}
	kafkaAddr := ""
	if kn != nil {
		kafkaAddr = kn.addr
	}
	return base, kafkaAddr, stop, nil
}
