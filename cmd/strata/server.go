package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/metered"
	"github.com/strata-io/strata/objstore/open"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// nodeFlags are the flags shared by dev and serve: listening, tuning and logging.
type nodeFlags struct {
	listen          string
	linger          time.Duration
	maxFlushBytes   byteSize
	bufferBytes     byteSize
	cacheBytes      byteSize
	cacheDir        string   // the block cache's disk tier (bench issue): none when empty
	cacheDiskBytes  byteSize // and its size
	commitTimeout   time.Duration
	shutdownTimeout time.Duration
	bodyTimeout     time.Duration
	// The compactor role's tuning.
	compactInterval time.Duration
	gracePeriod     time.Duration
	sweepInterval   time.Duration
	logLevel        oneOfFlag
	logFormat       oneOfFlag
}

func addNodeFlags(c *command, listen, logFormat string) *nodeFlags {
	n := &nodeFlags{
		maxFlushBytes: writer.DefaultMaxFlushBytes,
		bufferBytes:   writer.DefaultBufferBytes,
		cacheBytes:    reader.DefaultCacheBytes,
		logLevel:      oneOfFlag{"info", []string{"debug", "info", "warn", "error"}},
		logFormat:     oneOfFlag{logFormat, []string{"json", "text"}},
	}
	c.fs.StringVar(&n.listen, "listen", listen, "`address` to serve HTTP on, host:port (port 0 picks a free one)")
	c.fs.DurationVar(&n.linger, "linger", writer.DefaultLinger, "how long a produce may wait to share a flush: longer means fewer, larger objects and more latency")
	c.fs.Var(&n.maxFlushBytes, "max-flush-bytes", "cut a flush early at this `size` (e.g. 8MiB)")
	c.fs.Var(&n.bufferBytes, "buffer-bytes", "`size` of writer memory, buffered plus in flight; beyond it produce answers 429")
	c.fs.Var(&n.cacheBytes, "cache-bytes", "reader block cache `size`")
	c.fs.StringVar(&n.cacheDir, "cache-dir", "", "`directory` for a disk tier of the reader's block cache: blocks evicted from memory are kept there instead of read again from the bucket (one directory per node; kept across restarts)")
	c.fs.Var(&n.cacheDiskBytes, "cache-disk-bytes", "`size` of the disk tier (with --cache-dir; default 4GiB)")
	c.fs.DurationVar(&n.commitTimeout, "commit-timeout", 30*time.Second, "how old a segment may be when its commit lands; the orphan sweep waits twice this")
	c.fs.DurationVar(&n.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take: in-flight requests finish and the writer drains")
	c.fs.DurationVar(&n.bodyTimeout, "body-timeout", api.DefaultBodyTimeout, "how long a request body may take to arrive; a slower or stalled client gets 408 request_timeout")
	c.fs.DurationVar(&n.compactInterval, "compact-interval", compactor.DefaultInterval, "compactor role: time between compaction passes (merging, retention, deletion)")
	c.fs.DurationVar(&n.gracePeriod, "grace-period", compactor.DefaultGracePeriod, "compactor role: how long an object no row refers to stays readable before it is deleted; longer than any fetch")
	c.fs.DurationVar(&n.sweepInterval, "sweep-interval", compactor.DefaultSweepInterval, "compactor role: how often the orphan sweep lists the bucket (shared by all compactors)")
	c.fs.Var(&n.logLevel, "log-level", "log `level`: debug, info, warn, error")
	c.fs.Var(&n.logFormat, "log-format", "log `format`: json or text")
	return n
}

// validate checks the flags and says, per problem, how to fix it.
func (n *nodeFlags) validate() []string {
	var bad []string
	host, port, err := net.SplitHostPort(n.listen)
	if err != nil {
		bad = append(bad, fmt.Sprintf("--listen %q: want host:port, e.g. 127.0.0.1:8080 or :8080", n.listen))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		bad = append(bad, fmt.Sprintf("--listen %q: port %q is not a number between 0 and 65535", n.listen, port))
	} else if host != "" && net.ParseIP(host) == nil && strings.ContainsAny(host, "/:") {
		bad = append(bad, fmt.Sprintf("--listen %q: %q is not a host name or IP address", n.listen, host))
	}
	if n.linger < time.Millisecond || n.linger > time.Minute {
		bad = append(bad, fmt.Sprintf("--linger %s: want between 1ms and 1m (default %s; 50ms-250ms suits most)", n.linger, writer.DefaultLinger))
	}
	if n.maxFlushBytes < 64<<10 || n.maxFlushBytes > 5<<30 {
		bad = append(bad, fmt.Sprintf("--max-flush-bytes %s: want between 64KiB and 5GiB (default %s)", &n.maxFlushBytes, formatBytes(writer.DefaultMaxFlushBytes)))
	} else if n.bufferBytes < n.maxFlushBytes {
		bad = append(bad, fmt.Sprintf("--buffer-bytes %s is below --max-flush-bytes %s: a whole flush must fit in the buffer; raise --buffer-bytes (e.g. to %s) or lower --max-flush-bytes", &n.bufferBytes, &n.maxFlushBytes, formatBytes(int64(8*n.maxFlushBytes))))
	}
	if n.cacheBytes < reader.DefaultBlockSize {
		bad = append(bad, fmt.Sprintf("--cache-bytes %s: want at least one cache block, %s (default %s)", &n.cacheBytes, formatBytes(reader.DefaultBlockSize), formatBytes(reader.DefaultCacheBytes)))
	}
	if n.commitTimeout < 3*time.Second || n.commitTimeout > time.Hour {
		bad = append(bad, fmt.Sprintf("--commit-timeout %s: want between 3s and 1h (default 30s)", n.commitTimeout))
	}
	if n.bodyTimeout < time.Second {
		bad = append(bad, fmt.Sprintf("--body-timeout %s: want at least 1s (default %s)", n.bodyTimeout, api.DefaultBodyTimeout))
	}
	if n.shutdownTimeout < time.Second {
		bad = append(bad, fmt.Sprintf("--shutdown-timeout %s: want at least 1s (default 30s)", n.shutdownTimeout))
	}
	if len(bad) == 0 {
		// Backstops: the roles' own rules, in case they are stricter than the above.
		if err := n.writerConfig().Validate(); err != nil {
			bad = append(bad, err.Error())
		}
		if err := n.readerConfig().Validate(); err != nil {
			bad = append(bad, err.Error())
		}
		if err := n.compactorConfig().Validate(); err != nil {
			bad = append(bad, fmt.Sprintf("--compact-interval, --grace-period: %v", err))
		}
	}
	return bad
}

func (n *nodeFlags) writerConfig() writer.Config {
	return writer.Config{
		Linger:        n.linger,
		MaxFlushBytes: int64(n.maxFlushBytes),
		BufferBytes:   int64(n.bufferBytes),
		// A commit that takes a third of the catalog's commit timeout is settled rather
		// than awaited, so it is settled before the catalog would refuse it as too late.
		CommitTimeout: n.commitTimeout / 3,
	}
}

func (n *nodeFlags) compactorConfig() compactor.Config {
	return compactor.Config{Interval: n.compactInterval, GracePeriod: n.gracePeriod, SweepInterval: n.sweepInterval}
}

func (n *nodeFlags) readerConfig() reader.Config {
	return reader.Config{CacheBytes: int64(n.cacheBytes), DiskCacheDir: n.cacheDir, DiskCacheBytes: int64(n.cacheDiskBytes)}
}

func (n *nodeFlags) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(n.logLevel.val))
	opts := &slog.HandlerOptions{Level: lvl}
	if n.logFormat.val == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// nodeSpec is everything a node needs, validated.
type nodeSpec struct {
	flags  *nodeFlags
	writer bool
	reader bool
	// compactor runs the compactor role in the node; Lambda runs it per scheduled event
	// instead.
	compactor bool
	catalog   func(ctx context.Context, opts catalog.Options) (catalog.Backend, error)
	store     func(ctx context.Context, log *slog.Logger) (objstore.Store, error)
	// describe names the catalog and bucket in the start-up log (passwords redacted).
	catalogName, bucketName string
	// banner, when set, is printed once the node serves (dev: what to try first).
	banner func(w io.Writer, url string)
	// api configures the HTTP API (API keys; limits on Lambda).
	api api.Config
	// lambda: the node answers Lambda invocations, between which nothing runs, so no
	// role may depend on a background loop (the reader does not listen for commit
	// notifications; long-polls poll).
	lambda bool
	// kafka configures the Kafka listener (nil or an empty address: none); dev says a
	// busy default port turns it off rather than failing (kafka.go).
	kafka *kafkaFlags
	dev   bool
}

func devCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("dev", "strata dev [--data ./strata-data] [--listen 127.0.0.1:8080]",
		`Runs everything in one process for development: a SQLite catalog at DATA/catalog.db,
objects under DATA/objects, the writer, reader and compactor roles and the HTTP API. Data survives
restarts. Ctrl-C shuts down gracefully: requests in flight finish, the writer drains.`)
	data := c.fs.String("data", "./strata-data", "`directory` holding the catalog and the objects (created if missing)")
	nf := addNodeFlags(c, "127.0.0.1:8080", "text")
	kf := addKafkaFlags(c, "127.0.0.1:9092", true)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		bad := append(nf.validate(), kf.validate()...)
		if *data == "" {
			bad = append(bad, "--data is empty: give a directory, e.g. --data ./strata-data")
		} else if st, err := os.Stat(*data); err == nil && !st.IsDir() {
			bad = append(bad, fmt.Sprintf("--data %s is a file: give a directory (it is created if missing)", *data))
		}
		if len(bad) > 0 {
			return badFlags(c.name, bad)
		}
		if err := os.MkdirAll(*data, 0o755); err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
		dbPath := filepath.Join(*data, "catalog.db")
		objDir := filepath.Join(*data, "objects")
		spec := nodeSpec{
			flags: nf, writer: true, reader: true, compactor: true, kafka: kf, dev: true,
			catalog: func(ctx context.Context, opts catalog.Options) (catalog.Backend, error) {
				return sqlite.Open(ctx, dbPath, opts)
			},
			store: func(ctx context.Context, log *slog.Logger) (objstore.Store, error) {
				return fs.New(objDir)
			},
			catalogName: dbPath, bucketName: objDir,
			banner: func(w io.Writer, base string) {
				fmt.Fprintf(w, "Strata dev server on %s (data in %s)\n\nTry:\n", base, *data)
				fmt.Fprintf(w, "  curl -X POST %s/v1/topics -H 'Content-Type: application/json' -d '{\"name\":\"orders\",\"partitions\":3}'\n", base)
				srv := ""
				if base != DefaultServer {
					srv = " --server " + base
				}
				fmt.Fprintf(w, "  echo '{\"key\":\"user-1\",\"value\":{\"amount\":42}}' | strata produce orders%s\n", srv)
				fmt.Fprintf(w, "  strata consume orders%s\n\n", srv)
			},
		}
		return runNode(ctx, e, spec)
	}
}

var knownRoles = []string{"writer", "reader", "compactor"}

func serveCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("serve", "strata serve --catalog postgres://... --bucket s3://bucket/prefix [--roles writer,reader] [--listen :8080]",
		`Runs a node. Any node serves any request for the roles it runs; put as many as needed
behind a load balancer. /readyz answers 200 once the catalog and the bucket answer.`)
	sf := addServeFlags(c, ":8080")
	kf := addKafkaFlags(c, "", false)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		spec, bad := sf.spec()
		bad = append(bad, kf.validate()...)
		if kf.listen != "" && (!spec.writer || !spec.reader) {
			// Kafka clients produce and fetch on whichever node Metadata names.
			bad = append(bad, "--kafka-listen needs the writer and reader roles on this node (--roles writer,reader,...), or turn Kafka off with --kafka-listen ''")
		}
		spec.kafka = kf
		if len(bad) > 0 {
			return badFlags(c.name, bad)
		}
		return runNode(ctx, e, spec)
	}
}

// serveFlags are the flags of a production node: serve's, shared with lambda.
type serveFlags struct {
	roles, catalog, bucket *string
	createBucket           *bool
	apiKeys, apiKeysFile   *string
	publicMetrics          *bool
	nf                     *nodeFlags
}

func addServeFlags(c *command, listen string) *serveFlags {
	return &serveFlags{
		roles:         c.fs.String("roles", "writer,reader", "comma-separated `roles` to run: writer, reader, compactor"),
		catalog:       c.fs.String("catalog", "", "catalog `URL`: postgres://user:pass@host:5432/db, or a SQLite file (sqlite:path or a plain path) for a single node"),
		bucket:        c.fs.String("bucket", "", "object store `URL`: s3://bucket/prefix[?endpoint=http://host:9000&path_style=true&region=R], or file:///dir"),
		createBucket:  c.fs.Bool("create-bucket", false, "create the S3 bucket at start-up if it is missing (MinIO, development); needs the s3:CreateBucket permission"),
		apiKeys:       c.fs.String("api-keys", "", "bearer API `keys`, comma-separated: with any, requests without one get 401 (the /healthz and /readyz probes stay open); prefer the environment or --api-keys-file to the command line"),
		apiKeysFile:   c.fs.String("api-keys-file", "", "`file` of bearer API keys, one a line (# comments), e.g. a mounted secret; adds to --api-keys"),
		publicMetrics: c.fs.Bool("public-metrics", false, "serve /metrics without an API key (when keys are set)"),
		nf:            addNodeFlags(c, listen, "json"),
	}
}

// spec validates the flags into a nodeSpec, or says everything that is wrong.
func (sf *serveFlags) spec() (nodeSpec, []string) {
	nf := sf.nf
	bad := nf.validate()
	rs, err := parseRoles(*sf.roles)
	if err != nil {
		bad = append(bad, err.Error())
	}
	spec := nodeSpec{flags: nf, writer: rs["writer"], reader: rs["reader"], compactor: rs["compactor"]}
	if spec.catalog, spec.catalogName, err = catalogOpener(*sf.catalog); err != nil {
		bad = append(bad, err.Error())
	}
	if *sf.bucket == "" {
		bad = append(bad, "--bucket is required: e.g. --bucket s3://my-bucket/strata (MinIO: add ?endpoint=http://127.0.0.1:9000&path_style=true), or set STRATA_BUCKET")
	} else {
		b := *sf.bucket
		spec.bucketName = redactURL(b)
		create := *sf.createBucket
		spec.store = func(ctx context.Context, log *slog.Logger) (objstore.Store, error) {
			st, err := open.Open(ctx, b, log)
			if err != nil || !create {
				return st, err
			}
			if eb, ok := st.(interface{ EnsureBucket(context.Context) error }); ok {
				if err := eb.EnsureBucket(ctx); err != nil {
					return nil, fmt.Errorf("create bucket: %w", err)
				}
			}
			return st, nil
		}
	}
	keys, err := api.ParseAPIKeys(*sf.apiKeys)
	if err != nil {
		// The message never quotes the key.
		bad = append(bad, fmt.Sprintf("--api-keys: %v", err))
	}
	if *sf.apiKeysFile != "" {
		b, err := os.ReadFile(*sf.apiKeysFile)
		if err != nil {
			bad = append(bad, fmt.Sprintf("--api-keys-file: %v", err))
		} else if more, err := api.ParseAPIKeys(string(b)); err != nil {
			bad = append(bad, fmt.Sprintf("--api-keys-file %s: %v", *sf.apiKeysFile, err))
		} else if len(more) == 0 {
			bad = append(bad, fmt.Sprintf("--api-keys-file %s holds no key: write one key a line", *sf.apiKeysFile))
		} else {
			keys = append(keys, more...)
		}
	}
	spec.api.Auth = api.AuthConfig{Keys: keys, PublicMetrics: *sf.publicMetrics}
	return spec, bad
}

// badFlags reports every problem found at start-up at once, so one run says all there
// is to fix.
func badFlags(cmd string, bad []string) error {
	if len(bad) == 1 {
		return usagef(cmd, "%s", bad[0])
	}
	return usagef(cmd, "%d problems:\n  %s", len(bad), strings.Join(bad, "\n  "))
}

func parseRoles(s string) (map[string]bool, error) {
	rs := map[string]bool{}
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(strings.ToLower(r))
		if r == "" {
			continue
		}
		known := false
		for _, k := range knownRoles {
			known = known || r == k
		}
		if !known {
			return nil, fmt.Errorf("--roles: unknown role %q: use a comma-separated list of writer, reader, compactor", r)
		}
		rs[r] = true
	}
	if len(rs) == 0 {
		return nil, errors.New("--roles is empty: give at least one of writer, reader, compactor (e.g. --roles writer,reader)")
	}
	return rs, nil
}

// catalogOpener picks the catalog backend from a --catalog value: the one place the
// binary turns a DSN into a catalog.Backend.
func catalogOpener(s string) (func(context.Context, catalog.Options) (catalog.Backend, error), string, error) {
	lower := strings.ToLower(s)
	switch {
	case s == "":
		return nil, "", errors.New("--catalog is required: e.g. --catalog postgres://strata:secret@db:5432/strata, or a SQLite file for a single node (--catalog ./catalog.db); or set STRATA_CATALOG")
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, "", fmt.Errorf("--catalog: %s is not a valid Postgres URL: want postgres://user:pass@host:5432/dbname", redactURL(s))
		}
		return func(ctx context.Context, opts catalog.Options) (catalog.Backend, error) {
			return postgres.Open(ctx, s, opts)
		}, u.Redacted(), nil
	case strings.HasPrefix(lower, "sqlite:"):
		p := s[len("sqlite:"):]
		p = strings.TrimPrefix(p, "//") // sqlite:///abs/path and sqlite://rel/path
		if p == "" {
			return nil, "", errors.New("--catalog sqlite: names no file: write sqlite:path/to/catalog.db")
		}
		return sqliteOpener(p), p, nil
	case strings.Contains(s, "://"):
		scheme, _, _ := strings.Cut(s, "://")
		return nil, "", fmt.Errorf("--catalog: unsupported scheme %q: use postgres://... or a SQLite file path", scheme)
	}
	return sqliteOpener(s), s, nil
}

func sqliteOpener(path string) func(context.Context, catalog.Options) (catalog.Backend, error) {
	return func(ctx context.Context, opts catalog.Options) (catalog.Backend, error) {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("create catalog directory: %w", err)
			}
		}
		return sqlite.Open(ctx, path, opts)
	}
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// readyProbeKey is a key that never exists: a Head answering "not found" proves the
// bucket is reachable and the credentials work, without writing anything.
const readyProbeKey = "strata-readyz-probe"

// node is a started node: its roles run and its API is built, not yet served.
type node struct {
	log    *slog.Logger
	api    *api.API
	writer *writer.Writer // nil without the writer role
	// deps are what the API serves from, to build another API over the same node.
	deps api.Deps
	// cat and store are the node's catalog and (metered) object store, for roles
	// wired outside startNode (Lambda's scheduled compactor).
	cat   catalog.Backend
	store objstore.Store
	// roleErr receives a role's failure.
	roleErr chan error
	// stopRoles stops the roles (the writer drains its buffer); wg waits for them.
	stopRoles context.CancelFunc
	wg        *sync.WaitGroup
	// closeCatalog closes the catalog, after the roles have stopped.
	closeCatalog func()
}

// runNode runs a node until ctx ends, then shuts down in order: stop accepting, let
// requests in flight finish (the writer still runs, so produces get their answers),
// end long polls and tails, drain the writer, stop the other roles, close the catalog.
func runNode(ctx context.Context, e *env, spec nodeSpec) (err error) {
	n, err := startNode(ctx, e, spec)
	if err != nil {
		return err
	}
	defer n.closeCatalog()
	defer n.stopRoles()
	nf, log, a, roleErr, stopRoles, wg := spec.flags, n.log, n.api, n.roleErr, n.stopRoles, n.wg

	ln, err := net.Listen("tcp", nf.listen)
	if err != nil {
		stopRoles()
		wg.Wait()
		return fmt.Errorf("listen on %s: %w (choose another --listen, or stop what uses it)", nf.listen, err)
	}
	var kn *kafkaNode
	if spec.kafka != nil && spec.kafka.listen != "" {
		if kn, err = startKafka(ctx, spec.kafka, n.cat, n.deps.Core, spec.api.Auth.Keys, log, n.deps.Registerer, spec.dev); err != nil {
			ln.Close()
			stopRoles()
			wg.Wait()
			return err
		}
	}
	var kafkaErr chan error // nil without a listener: never ready
	if kn != nil {
		kafkaErr = kn.errc
	}
	// Long polls and tails never finish by themselves: their requests' context is
	// cancelled a moment into the shutdown so that Shutdown does not wait them out.
	baseCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           a.Handler(),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	base := "http://" + displayAddr(ln.Addr())
	log.Info("serving HTTP API", "url", base)
	if spec.banner != nil {
		spec.banner(e.stdout, base)
		if kn != nil {
			fmt.Fprintf(e.stdout, "Kafka clients: bootstrap %s (e.g. kcat -b %s -L)\n\n", kn.addr, kn.addr)
		}
	}

	var failure error
	select {
	case <-ctx.Done():
		log.Info("shutting down: signal received")
	case err := <-serveErr:
		failure = fmt.Errorf("serve HTTP: %w", err)
	case err := <-kafkaErr:
		failure = fmt.Errorf("serve Kafka: %w", err)
	case err := <-roleErr:
		failure = err
		log.Error("shutting down: a role failed", "err", err)
	}

	deadline := time.Now().Add(nf.shutdownTimeout)
	shCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	grace := time.AfterFunc(min(2*time.Second, nf.shutdownTimeout/4), cancelRequests)
	kafkaStopped := make(chan struct{})
	go func() { // beside the HTTP shutdown: both let requests in flight finish
		defer close(kafkaStopped)
		if kn != nil {
			kn.stop()
		}
	}()
	if err := srv.Shutdown(shCtx); err != nil {
		log.Warn("HTTP shutdown incomplete: closing remaining connections", "err", err)
		_ = srv.Close()
	}
	grace.Stop()
	cancelRequests()
	<-kafkaStopped

	stopRoles()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
		log.Info("stopped")
	case <-shCtx.Done():
		failure = errors.Join(failure, fmt.Errorf("roles did not stop within --shutdown-timeout %s", nf.shutdownTimeout))
	}
	return failure
}

// startNode opens the store and the catalog and starts the node's roles. On error
// nothing is left running.
func startNode(ctx context.Context, e *env, spec nodeSpec) (_ *node, err error) {
	nf := spec.flags
	log := nf.logger(e.stderr)
	n := &node{log: log}
	log.Info("starting strata", "version", versionString(), "catalog", spec.catalogName, "bucket", spec.bucketName,
		"writer", spec.writer, "reader", spec.reader, "compactor", spec.compactor)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// The store first: opening it only parses its URL (unless --create-bucket), so a
	// typo there is reported before the catalog runs its migrations.
	rawStore, err := spec.store(ctx, log)
	if err != nil {
		return nil, fmt.Errorf("%w (check --bucket)", err)
	}
	cat, err := spec.catalog(ctx, catalog.Options{CommitTimeout: nf.commitTimeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open catalog %s: %w (check --catalog and that the database is reachable)", spec.catalogName, err)
	}
	closeCatalog := func() {
		if cerr := cat.Close(); cerr != nil {
			log.Warn("close catalog", "err", cerr)
		}
	}
	store := metered.New(rawStore, reg)
	n.cat, n.store = cat, store

	ready := func(ctx context.Context) error {
		if _, err := cat.Now(ctx); err != nil {
			return fmt.Errorf("catalog unreachable: %w", err)
		}
		if _, err := rawStore.Head(ctx, readyProbeKey); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("bucket unreachable: %w", err)
		}
		return nil
	}

	// The roles run under a context of their own: a signal first stops the HTTP
	// server, and only then are the roles stopped, so the writer drains last.
	roleCtx, stopRoles := context.WithCancel(context.WithoutCancel(ctx))
	wg := &sync.WaitGroup{}
	defer func() {
		if err != nil {
			stopRoles()
			wg.Wait()
			closeCatalog()
		}
	}()
	roleErr := make(chan error, 3)
	startRole := func(name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := run(roleCtx)
			if roleCtx.Err() != nil {
				return
			}
			if err == nil {
				err = errors.New("stopped unexpectedly")
			}
			roleErr <- fmt.Errorf("%s: %w", name, err)
		}()
	}
	deps := api.Deps{Ready: ready, Gatherer: reg, Registerer: reg, Log: log}
	bd := broker.Deps{Catalog: cat, Producers: cat, Records: cat, Groups: cat}
	if spec.writer {
		w := writer.New(store, cat, nf.writerConfig(), log, reg)
		bd.Writer = w
		n.writer = w
		startRole("writer", w.Run)
	}
	if spec.reader {
		r := reader.New(store, cat, nf.readerConfig(), log, reg)
		bd.Reader, bd.Batches = r, r
		if !spec.lambda {
			startRole("reader", r.Run)
		}
	}
	if spec.compactor {
		startRole("compactor", compactor.New(store, cat, nf.compactorConfig(), log, reg).Run)
	}
	apiCfg := spec.api
	if apiCfg.BodyTimeout == 0 {
		apiCfg.BodyTimeout = nf.bodyTimeout
	}
	if apiCfg.MaxInflightProduceBytes == 0 {
		// Produce bodies held at once are bounded like the writer's buffer, and refused
		// before they are read beyond it (api/admission.go).
		apiCfg.MaxInflightProduceBytes = int64(nf.bufferBytes)
	}
	deps.Core = broker.New(broker.Config{}, bd)
	n.api, n.deps = api.New(apiCfg, deps), deps
	n.roleErr, n.stopRoles, n.wg, n.closeCatalog = roleErr, stopRoles, wg, closeCatalog
	return n, nil
}

// displayAddr turns a listener address into one a browser or curl can use: a wildcard
// host becomes 127.0.0.1.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
