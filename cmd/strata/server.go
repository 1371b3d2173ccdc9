package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	catopen "github.com/strata-io/strata/catalog/open"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/redact"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/open"
	"github.com/strata-io/strata/push"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/tables"
	"github.com/strata-io/strata/ui"
	"github.com/strata-io/strata/writer"
)

// nodeFlags are the flags shared by dev and serve: listening, tuning and logging.
type nodeFlags struct {
	listen          string
	linger          time.Duration
	maxFlushBytes   byteSize
	hedgeQuantile   float64
	bufferBytes     byteSize
	cacheBytes      byteSize
	cacheDir        string   // the block cache's disk tier (bench issue): none when empty
	cacheDiskBytes  byteSize // and its size
	commitTimeout   time.Duration
	shutdownTimeout time.Duration
	bodyTimeout     time.Duration
	// The compactor role's tuning.
	compactInterval time.Duration
	// Push targets' allow-list (every node checks them) and plain HTTP.
	pushAllow         string
	pushAllowInsecure bool
	pushLeaseTTL      time.Duration
	gracePeriod       time.Duration
	sweepInterval     time.Duration
	// The tables role's maintenance.
	tablesMaintain    time.Duration
	tablesSnapshotAge time.Duration
	tablesOrphanGrace time.Duration
	tablesLeaseTTL    time.Duration
	logLevel          oneOfFlag
	logFormat         oneOfFlag
	tls               *tlsFlags
	connect           *connectFlags
	usage             *usageFlags

	// compactBatch: the compactor role's partitions per pass. maxTimestampAfterMs: the
	// largest message.timestamp.after.max.ms a topic may set (catalog.CheckConfigLimits).
	compactBatch        int
	maxTimestampAfterMs int64
	// txnMaxTimeout bounds a Kafka transaction's timeout (transaction.max.timeout.ms).
	txnMaxTimeout time.Duration
	// shareDLQPrefix is --share-dlq-prefix (broker.Config.ShareDLQPrefix).
	shareDLQPrefix string

	// The node's memory: the process limit (0: the default, DefaultLimit), how long a
	// write may stall, and the caps on reads served at once.
	memoryLimit                          byteSize
	stallTimeout                         time.Duration
	maxFetches, maxLongPolls, maxStreams int
	// mem is what resolveMemory found: the limit, where it came from, the budget.
	mem memorySpec
}

// memorySpec is a node's memory, resolved.
type memorySpec struct {
	limit, budget int64
	source        string // where the limit came from, for the start-up log
}

// minRequestRoom is the least of the budget that --buffer-bytes and --cache-bytes must
// leave to request bodies and answers: two of the largest bodies.
const minRequestRoom = 2 * api.DefaultMaxBodyBytes

// autoCache is --cache-bytes when it is not given: reader.DefaultCacheBytes, or what
// the budget leaves for it when that is less (resolveMemory).
const autoCache = 0

func addNodeFlags(c *command, listen, logFormat string) *nodeFlags {
	defer c.shared()()
	n := &nodeFlags{
		maxFlushBytes: writer.DefaultMaxFlushBytes,
		bufferBytes:   writer.DefaultBufferBytes,
		cacheBytes:    autoCache,
		logLevel:      oneOfFlag{"info", []string{"debug", "info", "warn", "error"}},
		logFormat:     oneOfFlag{logFormat, []string{"json", "text"}},
	}
	c.fs.StringVar(&n.listen, "listen", listen, "`address` to serve HTTP on, host:port (port 0 picks a free one)")
	c.fs.DurationVar(&n.linger, "linger", writer.DefaultLinger, "how long a produce may wait to share a flush: longer means fewer, larger objects and more latency")
	c.fs.Var(&n.maxFlushBytes, "max-flush-bytes", "cut a flush early at this `size` (e.g. 8MiB)")
	c.fs.Float64Var(&n.hedgeQuantile, "hedge-quantile", writer.DefaultHedgeQuantile, "a segment PUT slower than this `quantile` of the recent ones is sent again under a fresh key, and the first to land is committed (the other is cancelled or swept as an orphan); 0 never")
	c.fs.Var(&n.bufferBytes, "buffer-bytes", "`size` of writer memory, buffered plus in flight; beyond it produce answers 429")
	c.fs.Var(&n.cacheBytes, "cache-bytes", "reader block cache `size` (default 256MiB, or less when --memory-limit's budget has no room for it)")
	c.fs.Var(&n.memoryLimit, "memory-limit", "the node process's memory `size` (GOMEMLIMIT, unless that is set); 60% of it is the budget that request bodies, buffered records (--buffer-bytes), the block cache (--cache-bytes) and answers being sent are reserved against (default: 90% of the container's cgroup memory limit, or half the machine's memory)")
	c.fs.DurationVar(&n.stallTimeout, "stall-timeout", 10*time.Second, "how long writing an answer may make no progress (a client that stopped reading) before its connection is closed and the memory it holds released; quiet streams and long-polls are never cut")
	c.fs.IntVar(&n.maxFetches, "max-fetches", api.DefaultMaxFetches, "fetches (without wait_ms) a node serves at once; beyond, 429 concurrency_limit")
	c.fs.IntVar(&n.maxLongPolls, "max-long-polls", api.DefaultMaxLongPolls, "long-polls (fetches with wait_ms) a node serves at once; beyond, 429 concurrency_limit")
	c.fs.IntVar(&n.maxStreams, "max-streams", api.DefaultMaxStreams, "Server-Sent Events tails a node serves at once; beyond, 429 concurrency_limit")
	c.fs.StringVar(&n.cacheDir, "cache-dir", "", "`directory` for a disk tier of the reader's block cache: blocks evicted from memory are kept there instead of read again from the bucket (one directory per node; kept across restarts)")
	c.fs.Var(&n.cacheDiskBytes, "cache-disk-bytes", "`size` of the disk tier (with --cache-dir; default 4GiB)")
	c.fs.DurationVar(&n.commitTimeout, "commit-timeout", 30*time.Second, "how old a segment may be when its commit lands; the orphan sweep waits twice this")
	c.fs.DurationVar(&n.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take: in-flight requests finish and the writer drains")
	c.fs.DurationVar(&n.bodyTimeout, "body-timeout", api.DefaultBodyTimeout, "how long a request body may take to arrive; a slower or stalled client gets 408 request_timeout")
	c.fs.StringVar(&n.pushAllow, "push-allow", "", "comma-separated `hosts`, wildcard domains (*.example.com) and CIDRs push subscriptions may call; loopback, link-local and private addresses only when a CIDR lists them, checked on the address dialled")
	c.fs.BoolVar(&n.pushAllowInsecure, "push-allow-insecure", false, "let push subscriptions call plain http:// targets (local development and tests); without it targets must be https")
	c.fs.DurationVar(&n.pushLeaseTTL, "push-lease-ttl", 15*time.Second, "push role: how long a subscription's lease lasts unrenewed, so how soon another node takes it over when its holder dies (renewed every third of it)")
	c.fs.DurationVar(&n.compactInterval, "compact-interval", compactor.DefaultInterval, "compactor role: time between compaction passes (merging, retention, deletion)")
	c.fs.DurationVar(&n.gracePeriod, "grace-period", compactor.DefaultGracePeriod, "compactor role: how long an object no row refers to stays readable before it is deleted; longer than any fetch")
	c.fs.DurationVar(&n.sweepInterval, "sweep-interval", compactor.DefaultSweepInterval, "compactor role: how often the orphan sweep lists the bucket (shared by all compactors)")
	c.fs.IntVar(&n.compactBatch, "compact-batch", compactor.DefaultMaxPartitions, "compactor role: the most partitions one pass works on, most overdue first (partitions with nothing due are never visited)")
	c.fs.DurationVar(&n.tablesMaintain, "tables-maintain-interval", tables.DefaultMaintainInterval, "tables role: how often a table's small data files are merged, its old snapshots expired and its orphan files deleted (by the node holding its partition 0); 0 never")
	c.fs.DurationVar(&n.tablesSnapshotAge, "tables-snapshot-max-age", tables.DefaultSnapshotMaxAge, "tables role: how long a table keeps a snapshot to time-travel to (the last one always stays); older ones expire with the files only they reference")
	c.fs.DurationVar(&n.tablesLeaseTTL, "tables-lease-ttl", tables.DefaultLeaseTTL, "tables role: how long a node's table partitions stay its without renewal, so how long a partition of a node that died waits for another (at least three of the topic's iceberg.commit.interval.ms)")
	c.fs.DurationVar(&n.tablesOrphanGrace, "tables-orphan-grace", tables.DefaultOrphanGrace, "tables role: how old a file under a table's location that no metadata references must be before it is deleted; longer than any commit takes")
	c.fs.Int64Var(&n.maxTimestampAfterMs, "max-timestamp-after-ms", catalog.DefaultMaxTimestampAfterMs, "the largest message.timestamp.after.max.ms a topic may set without the alter-configs permission on the cluster (with authentication off, at all), -1 for no limit")
	c.fs.DurationVar(&n.txnMaxTimeout, "transaction-max-timeout", broker.DefaultTxnMaxTimeout, "the longest transaction timeout a Kafka producer may ask for (Kafka's transaction.max.timeout.ms); a transaction open longer than its timeout is aborted")
	c.fs.StringVar(&n.shareDLQPrefix, "share-dlq-prefix", catalog.DefaultShareDLQPrefix, "the `prefix` a share group's dead-letter topic's name must start with (Kafka's errors.deadletterqueue.topic.name.prefix, KIP-1191); the topic must also set errors.deadletterqueue.group.enable=true")
	c.fs.Var(&n.logLevel, "log-level", "log `level`: debug, info, warn, error")
	c.fs.Var(&n.logFormat, "log-format", "log `format`: json or text")
	n.tls = addTLSFlags(c)
	n.connect = addConnectFlags(c)
	n.usage = addUsageFlags(c)
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
	if n.hedgeQuantile != 0 && (n.hedgeQuantile < 0.5 || n.hedgeQuantile >= 1) {
		bad = append(bad, fmt.Sprintf("--hedge-quantile %g: want 0 (never hedge) or between 0.5 and 0.999 (default %g)", n.hedgeQuantile, writer.DefaultHedgeQuantile))
	}
	if n.maxFlushBytes < 64<<10 || n.maxFlushBytes > 5<<30 {
		bad = append(bad, fmt.Sprintf("--max-flush-bytes %s: want between 64KiB and 5GiB (default %s)", &n.maxFlushBytes, formatBytes(writer.DefaultMaxFlushBytes)))
	} else if n.bufferBytes < n.maxFlushBytes {
		bad = append(bad, fmt.Sprintf("--buffer-bytes %s is below --max-flush-bytes %s: a whole flush must fit in the buffer; raise --buffer-bytes (e.g. to %s) or lower --max-flush-bytes", &n.bufferBytes, &n.maxFlushBytes, formatBytes(int64(8*n.maxFlushBytes))))
	}
	bad = append(bad, n.resolveMemory()...)
	bad = append(bad, n.usage.validate()...)
	if n.cacheBytes < reader.DefaultBlockSize {
		bad = append(bad, fmt.Sprintf("--cache-bytes %s: want at least one cache block, %s (default %s)", &n.cacheBytes, formatBytes(reader.DefaultBlockSize), formatBytes(reader.DefaultCacheBytes)))
	}
	if n.stallTimeout < time.Second {
		bad = append(bad, fmt.Sprintf("--stall-timeout %s: want at least 1s (default 10s)", n.stallTimeout))
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--max-fetches", n.maxFetches}, {"--max-long-polls", n.maxLongPolls}, {"--max-streams", n.maxStreams}} {
		if c.v < 1 {
			bad = append(bad, fmt.Sprintf("%s %d: want at least 1", c.name, c.v))
		}
	}
	if n.commitTimeout < 3*time.Second || n.commitTimeout > time.Hour {
		bad = append(bad, fmt.Sprintf("--commit-timeout %s: want between 3s and 1h (default 30s)", n.commitTimeout))
	}
	if n.pushLeaseTTL < time.Second || n.pushLeaseTTL > 10*time.Minute {
		bad = append(bad, fmt.Sprintf("--push-lease-ttl %s: want between 1s and 10m (default 15s)", n.pushLeaseTTL))
	}
	if n.bodyTimeout < time.Second {
		bad = append(bad, fmt.Sprintf("--body-timeout %s: want at least 1s (default %s)", n.bodyTimeout, api.DefaultBodyTimeout))
	}
	if n.compactBatch < 1 {
		bad = append(bad, fmt.Sprintf("--compact-batch %d: want at least 1 partition per pass (default %d)", n.compactBatch, compactor.DefaultMaxPartitions))
	}
	if n.maxTimestampAfterMs < -1 {
		bad = append(bad, fmt.Sprintf("--max-timestamp-after-ms %d: want -1 (no limit) or a number of milliseconds (default %d, one day)", n.maxTimestampAfterMs, catalog.DefaultMaxTimestampAfterMs))
	}
	if n.txnMaxTimeout < time.Second {
		bad = append(bad, fmt.Sprintf("--transaction-max-timeout %s: want at least 1s (default %s)", n.txnMaxTimeout, broker.DefaultTxnMaxTimeout))
	}
	if n.shareDLQPrefix == "" {
		bad = append(bad, fmt.Sprintf("--share-dlq-prefix is empty: want a prefix such as %q, so that no group can name any topic its dead-letter topic", catalog.DefaultShareDLQPrefix))
	}
	if n.shutdownTimeout < time.Second {
		bad = append(bad, fmt.Sprintf("--shutdown-timeout %s: want at least 1s (default 30s)", n.shutdownTimeout))
	}
	if n.tablesLeaseTTL < time.Second {
		bad = append(bad, fmt.Sprintf("--tables-lease-ttl %s: want at least 1s", n.tablesLeaseTTL))
	}
	if n.tablesMaintain < 0 || n.tablesSnapshotAge < time.Minute || n.tablesOrphanGrace < time.Minute {
		bad = append(bad, fmt.Sprintf("--tables-maintain-interval %s, --tables-snapshot-max-age %s, --tables-orphan-grace %s: want 0 (never) or more for the first, at least 1m for the others", n.tablesMaintain, n.tablesSnapshotAge, n.tablesOrphanGrace))
	}
	bad = append(bad, n.tls.validate()...)
	bad = append(bad, n.connect.validate()...)
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

// resolveMemory finds the process memory limit (--memory-limit, or the default), the
// budget it gives, and the cache size when it was not given, and checks that the
// sub-budgets fit: the cache (with its footers), twice the writer's buffer (the bodies
// admitted and the records they become) and room for requests.
func (n *nodeFlags) resolveMemory() []string {
	m := memorySpec{limit: int64(n.memoryLimit), source: "--memory-limit"}
	if m.limit == 0 {
		var err error
		if m.limit, m.source, err = membudget.DefaultLimit(); err != nil {
			return []string{err.Error()}
		}
	}
	m.budget = membudget.BudgetFor(m.limit)
	n.mem = m
	writerBytes := 2 * int64(n.bufferBytes)
	if n.cacheBytes == autoCache {
		room := (m.budget - writerBytes - minRequestRoom) * 16 / 17
		n.cacheBytes = byteSize(min(reader.DefaultCacheBytes, max(room, reader.DefaultBlockSize)))
	}
	cache := reader.Config{CacheBytes: int64(n.cacheBytes)}.MemoryBytes()
	if need := cache + writerBytes + minRequestRoom; need > m.budget {
		limit := "--memory-limit " + formatBytes(m.limit)
		if n.memoryLimit == 0 {
			limit = "the default memory limit, " + m.source + ","
		}
		return []string{fmt.Sprintf("%s gives a budget of %s (%.0f%%), which cannot hold the cache (%s with its footers), twice --buffer-bytes %s and %s for requests, %s in all: raise --memory-limit to at least %s, or lower --cache-bytes or --buffer-bytes",
			limit, formatBytes(m.budget), 100*membudget.BudgetShare, formatBytes(cache), &n.bufferBytes, formatBytes(minRequestRoom), formatBytes(need),
			formatBytes((int64(float64(need)/membudget.BudgetShare)+1<<20-1)&^(1<<20-1)))}
	}
	return nil
}

func (n *nodeFlags) writerConfig() writer.Config {
	return writer.Config{
		Linger:        n.linger,
		MaxFlushBytes: int64(n.maxFlushBytes),
		BufferBytes:   int64(n.bufferBytes),
		HedgeQuantile: cmp.Or(n.hedgeQuantile, -1), // the flag's 0 is the writer's never
		// A commit that takes a third of the catalog's commit timeout is settled rather
		// than awaited, so it is settled before the catalog would refuse it as too late.
		CommitTimeout: n.commitTimeout / 3,
	}
}

func (n *nodeFlags) compactorConfig() compactor.Config {
	return compactor.Config{Interval: n.compactInterval, GracePeriod: n.gracePeriod, SweepInterval: n.sweepInterval, MaxPartitions: n.compactBatch}
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
	// compactor runs the compactor role in the node (on Lambda, a pass per scheduled
	// event).
	compactor bool
	// connect runs the connector runtime (worker and REST API).
	connect bool
	// tables runs the tables role (table topics; it needs the reader on the node).
	tables bool
	// push runs the push role (share groups' push subscriptions; it needs the reader).
	push    bool
	catalog func(ctx context.Context, opts catalog.Options) (catalog.Backend, error)
	// The object store: bucketURL (--bucket), parsed at start, or bucket (dev's
	// directory); createBucket creates a missing S3 bucket at start.
	bucketURL    string
	bucket       open.Target
	createBucket bool
	// describe names the catalog and bucket in the start-up log (passwords redacted).
	catalogName, bucketName string
	// warnings are logged at start-up: what works but is not safe.
	warnings []string
	// banner, when set, is printed once the node serves (dev: what to try first).
	banner func(w io.Writer, url string)
	// api configures the HTTP API (limits on Lambda); auth, the authentication of every
	// front end and the access log; maxWait caps fetch long-polls in the core (0: its
	// default).
	api     api.Config
	auth    authConfig
	maxWait time.Duration
	// lambda: the node answers Lambda invocations, between which nothing runs, so no
	// role may depend on a background loop (node.Config.Lambda).
	lambda bool
	// kafka configures the Kafka listener (nil or an empty address: none); dev says a
	// busy default port turns it off rather than failing (kafka.go).
	kafka *kafkaFlags
	dev   bool
	// ownDirs are the node's directories known from its flags (the dev data directory,
	// the SQLite catalog's): the file connectors may never use them, nor the object
	// store's and the block cache's, added when the node starts.
	ownDirs []connect.OwnDir
}

func devCommand() (*command, func(context.Context, *env, *command, []string) error) {
	c := newCommand("dev", "strata dev [--data ./strata-data] [--listen 127.0.0.1:8080]",
		`Runs everything in one process for development: a SQLite catalog at DATA/catalog.db,
objects under DATA/objects, the writer, reader, compactor, connect, tables and push roles and the HTTP API. Data survives
restarts. Ctrl-C shuts down gracefully: requests in flight finish, the writer drains. It listens
on loopback; with another --listen address, set --api-keys (it warns otherwise).`)
	data := c.fs.String("data", "./strata-data", "`directory` holding the catalog and the objects (created if missing)")
	c.shareEnv("data")
	nf := addNodeFlags(c, "127.0.0.1:8080", "text")
	auth := addAuthFlags(c, 0)
	kf := addKafkaFlags(c, "127.0.0.1:9092", true)
	return c, func(ctx context.Context, e *env, c *command, args []string) error {
		if len(args) > 0 {
			return usagef(c.name, "unexpected argument %q (flags start with --)", args[0])
		}
		bad := append(nf.validate(), kf.validate()...)
		authCfg, authBad := auth.config(*nf.tls.clientCA != "")
		bad = append(bad, authBad...)
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
		// dev is the one command that creates its SQLite catalog unasked.
		cat, err := catopen.Parse("sqlite:"+filepath.Join(*data, "catalog.db"), catopen.Options{Create: true})
		if err != nil {
			return err
		}
		objDir := filepath.Join(*data, "objects")
		spec := nodeSpec{
			flags: nf, writer: true, reader: true, compactor: true, connect: true, tables: true, push: true, kafka: kf, dev: true,
			catalog: cat.Open, bucket: open.Dir(objDir),
			catalogName: cat.String(), bucketName: objDir,
			ownDirs: []connect.OwnDir{{Path: *data, What: "the dev data directory (--data)"}},
			auth:    authCfg,
			banner: func(w io.Writer, base string) {
				fmt.Fprintf(w, "Strata dev server on %s (data in %s)\n", base, *data)
				fmt.Fprintf(w, "Web console: %s%s/\n\n", base, ui.Prefix)
				if authCfg.security.Enabled() {
					fmt.Fprintf(w, "API keys are required: add -H 'Authorization: Bearer KEY' to curl, and set STRATA_API_KEY for strata.\n")
					fmt.Fprintf(w, "The --api-keys keys act as User:bootstrap: make keys and ACLs for others with strata keys and strata acls.\n\n")
				}
				fmt.Fprintf(w, "Try:\n")
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

var knownRoles = []string{"writer", "reader", "compactor", "connect", "tables", "push"}

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
	createBucket, create   *bool
	// catalogParams are Postgres parameters added to --catalog unless it sets them
	// (Lambda's pool).
	catalogParams map[string]string
	auth          *authFlags
	nf            *nodeFlags
}

func addServeFlags(c *command, listen string) *serveFlags {
	defer c.shared()()
	return &serveFlags{
		roles:        c.fs.String("roles", "writer,reader", "comma-separated `roles` to run: writer, reader, compactor, connect (the connector runtime; it needs writer and reader on the node too), tables (topics with iceberg.enabled as Iceberg tables; it needs reader on the node too), push (share groups' push subscriptions to webhooks and Lambda; it needs reader on the node too)"),
		catalog:      c.fs.String("catalog", "", "catalog `DSN`: postgres://USER:PASSWORD@HOST:5432/DB?sslmode=verify-full, a libpq string (\"host=HOST user=USER dbname=DB sslmode=verify-full\"), or for a single node a SQLite file (sqlite:PATH, or the path of an existing file)"),
		create:       c.fs.Bool("create", false, "create the SQLite catalog file (and its directory) when --catalog names one that does not exist; without it a missing file is refused, so a typo cannot start an empty catalog"),
		bucket:       c.fs.String("bucket", "", "object store `URL`: s3://bucket/prefix[?endpoint=http://host:9000&path_style=true&region=R], or file:///dir"),
		createBucket: c.fs.Bool("create-bucket", false, "create the S3 bucket at start-up if it is missing (MinIO, development); needs the s3:CreateBucket permission"),
		auth:         addAuthFlags(c, 1),
		nf:           addNodeFlags(c, listen, "json"),
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
	spec := nodeSpec{flags: nf, writer: rs["writer"], reader: rs["reader"], compactor: rs["compactor"], connect: rs["connect"], tables: rs["tables"], push: rs["push"]}
	if spec.tables && !spec.reader {
		bad = append(bad, "--roles: tables needs reader on the same node (it reads the topics through it): e.g. --roles writer,reader,tables")
	}
	if spec.push && !spec.reader {
		bad = append(bad, "--roles: push needs reader on the same node (it reads the share groups through it): e.g. --roles writer,reader,push")
	}
	if spec.connect && (!spec.writer || !spec.reader) {
		bad = append(bad, "--roles: connect needs writer and reader on the same node (its tasks call them in-process): e.g. --roles writer,reader,connect")
	}
	if cat, err := catalogFlag(*sf.catalog, catopen.Options{Create: *sf.create}, sf.catalogParams); err != nil {
		bad = append(bad, err.Error())
	} else {
		spec.catalog, spec.catalogName, spec.warnings = cat.Open, cat.String(), cat.Warnings()
		if cat.Kind() == catopen.SQLite {
			spec.ownDirs = append(spec.ownDirs, connect.OwnDir{Path: filepath.Dir(cat.Path()), What: "the SQLite catalog's directory (--catalog)"})
		}
	}
	if *sf.bucket == "" {
		bad = append(bad, "--bucket is required: e.g. --bucket s3://my-bucket/strata (MinIO: add ?endpoint=http://127.0.0.1:9000&path_style=true), or set STRATA_BUCKET")
	} else {
		spec.bucketName, spec.createBucket = redact.String(*sf.bucket), *sf.createBucket
		spec.bucketURL = *sf.bucket
	}
	var authBad []string
	spec.auth, authBad = sf.auth.config(*nf.tls.clientCA != "")
	bad = append(bad, authBad...)
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
			return nil, fmt.Errorf("--roles: unknown role %q: use a comma-separated list of writer, reader, compactor, connect, tables, push", r)
		}
		rs[r] = true
	}
	if len(rs) == 0 {
		return nil, errors.New("--roles is empty: give at least one of writer, reader, compactor, connect, tables, push (e.g. --roles writer,reader)")
	}
	return rs, nil
}

// started is a node started by startNode, with its logger and the catalog it serves
// from, to close once it has stopped.
type started struct {
	*node.Node
	log          *slog.Logger
	closeCatalog func()
}

// runNode runs a node until ctx ends, then shuts down in order (node.Serve) and closes
// the catalog.
func runNode(ctx context.Context, e *env, spec nodeSpec) error {
	n, err := startNode(ctx, e, spec)
	if err != nil {
		return err
	}
	defer n.closeCatalog()
	if w := keylessWarning(spec.auth, n.HTTPAddr()); w != "" {
		n.log.Warn(w)
	}
	if spec.banner != nil {
		spec.banner(e.stdout, n.URL)
		if n.KafkaAddr != "" {
			fmt.Fprintf(e.stdout, "Kafka clients: bootstrap %s (e.g. kcat -b %s -L)\n\n", n.KafkaAddr, n.KafkaAddr)
		}
	}
	return n.Serve(ctx)
}

// startNode opens the store and the catalog and starts the node (internal/node) with
// its listeners. On error nothing is left running.
func startNode(ctx context.Context, e *env, spec nodeSpec) (*started, error) {
	nf := spec.flags
	log := nf.logger(e.stderr)
	log.Info("starting strata", "version", versionString(), "catalog", spec.catalogName, "bucket", spec.bucketName,
		"writer", spec.writer, "reader", spec.reader, "compactor", spec.compactor, "connect", spec.connect)
	for _, w := range spec.warnings {
		log.Warn(w)
	}

	// The store first: opening it only parses its URL (unless --create-bucket), so a
	// typo there is reported before the catalog runs its migrations.
	bucket := spec.bucket
	if spec.bucketURL != "" {
		var err error
		if bucket, err = open.Parse(spec.bucketURL); err != nil {
			return nil, fmt.Errorf("%w (check --bucket)", err)
		}
	}
	store, err := bucket.Open(ctx, log, open.Options{CreateBucket: spec.createBucket})
	if err != nil {
		return nil, fmt.Errorf("%w (check --bucket)", err)
	}
	own := append(spec.ownDirs, connect.OwnDir{Path: nf.cacheDir, What: "the block cache's disk tier (--cache-dir)"})
	if dir := bucket.Dir(); dir != "" {
		own = append(own, connect.OwnDir{Path: dir, What: "the object store's directory (--bucket)"})
	}
	connectCfg, err := nf.connect.config(own)
	if err != nil {
		return nil, err
	}
	// The core applies --max-timestamp-after-ms, knowing who may exceed it (alter-configs
	// on the cluster): the catalog leaves it to the core.
	cat, err := spec.catalog(ctx, catalog.Options{CommitTimeout: nf.commitTimeout, Logger: log, MaxTimestampAfterMs: -1})
	if err != nil {
		return nil, fmt.Errorf("open catalog %s: %w (check --catalog and that the database is reachable)", spec.catalogName, err)
	}
	closeCatalog := func() {
		if cerr := cat.Close(); cerr != nil {
			log.Warn("close catalog", "err", cerr)
		}
	}
	// The process limit first: GOMEMLIMIT, unless the operator set it themselves.
	inForce := membudget.SetProcessLimit(nf.mem.limit, e.getenv)
	log.Info("memory", "limit", nf.mem.limit, "from", nf.mem.source, "gomemlimit", inForce, "budget", nf.mem.budget,
		"cache_bytes", int64(nf.cacheBytes), "buffer_bytes", int64(nf.bufferBytes))
	cfg, err := spec.nodeConfig(cat, store, connectCfg, log)
	if err != nil {
		closeCatalog()
		return nil, err
	}
	// Tables live in the bucket, named by its URI; every node serves their catalog.
	cfg.Tables, cfg.TablesConfig.Location = spec.tables, bucket.URI()
	cfg.TablesConfig.MaintainInterval, cfg.TablesConfig.SnapshotMaxAge, cfg.TablesConfig.OrphanGrace = nf.tablesMaintain, nf.tablesSnapshotAge, nf.tablesOrphanGrace
	cfg.TablesConfig.LeaseTTL = nf.tablesLeaseTTL
	if nf.tablesMaintain == 0 {
		cfg.TablesConfig.MaintainInterval = -1
	}
	cfg.Push = spec.push
	if spec.push {
		cfg.PushConfig.Lambda = &push.DefaultLambda{}
	}
	cfg.PushConfig.Allow, cfg.PushConfig.AllowInsecure = strings.Split(nf.pushAllow, ","), nf.pushAllowInsecure
	cfg.PushConfig.LeaseTTL = nf.pushLeaseTTL
	n, err := node.Start(ctx, cfg)
	if err != nil {
		closeCatalog()
		var le *node.ListenError
		if errors.As(err, &le) {
			if le.Front == "Kafka" {
				return nil, fmt.Errorf("%w (choose another --kafka-listen, or '' to turn Kafka off)", err)
			}
			return nil, fmt.Errorf("%w (choose another --listen, or stop what uses it)", err)
		}
		return nil, err
	}
	return &started{Node: n, log: log, closeCatalog: closeCatalog}, nil
}

// nodeConfig is the node the flags describe, over the catalog and the store opened from
// them: the one place where flags become a node's configuration.
func (spec nodeSpec) nodeConfig(cat catalog.Backend, store objstore.Store, connectCfg connect.WorkerConfig, log *slog.Logger) (node.Config, error) {
	nf := spec.flags
	apiCfg := spec.api
	apiCfg.MaxFetches, apiCfg.MaxLongPolls, apiCfg.MaxStreams = nf.maxFetches, nf.maxLongPolls, nf.maxStreams
	apiCfg.Auth.PublicMetrics, apiCfg.AccessLogSample = spec.auth.publicMetrics, spec.auth.accessSample
	if apiCfg.BodyTimeout == 0 {
		apiCfg.BodyTimeout = nf.bodyTimeout
	}
	if apiCfg.MaxInflightProduceBytes == 0 {
		// Produce bodies held at once are bounded like the writer's buffer, and refused
		// before they are read beyond it (api/admission.go).
		apiCfg.MaxInflightProduceBytes = int64(nf.bufferBytes)
	}
	cfg := node.Config{
		Catalog: cat, Store: store,
		Writer: spec.writer, WriterConfig: nf.writerConfig(),
		Reader: spec.reader, ReaderConfig: nf.readerConfig(),
		Compactor: spec.compactor, CompactorConfig: nf.compactorConfig(),
		Connect: spec.connect, ConnectConfig: connectCfg,
		API: apiCfg, Lambda: spec.lambda, Log: log,
		MemoryBudget: nf.mem.budget, StallTimeout: nf.stallTimeout,
		Broker:          broker.Config{MaxTimestampAfterMs: nf.maxTimestampAfterMs, MaxWait: spec.maxWait, TxnMaxTimeout: nf.txnMaxTimeout, ShareDLQPrefix: nf.shareDLQPrefix, Prices: nf.usage.prices},
		Usage:           nf.usage.config(),
		Security:        spec.auth.security,
		ShutdownTimeout: nf.shutdownTimeout,
	}
	if spec.lambda {
		// Invocations reach the API's handler: no listener (--listen, --tls-* unused).
		return cfg, nil
	}
	var err error
	cfg.HTTP.Listen = nf.listen
	if cfg.HTTP.TLS, err = nf.tls.serverConfig(log); err != nil {
		return node.Config{}, err
	}
	if spec.kafka != nil && spec.kafka.listen != "" {
		if cfg.Kafka, err = spec.kafka.config(spec, log); err != nil {
			return node.Config{}, err
		}
	}
	return cfg, nil
}
