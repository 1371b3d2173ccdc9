// Package node assembles a Strata node from its configuration: the one place where the
// concrete types meet — a catalog backend, an object store, the roles (writer, reader,
// compactor, connect), the broker core and the front ends (the HTTP API and the Kafka
// listener with its registration in the catalog) — and where the node's lifetime is
// ordered (roles started before serving; on shutdown, requests finish, then the writer
// drains). `strata serve`, `strata dev` and `strata lambda` start their nodes here from
// their flags; the reliability harness and every test start theirs through
// internal/node/inproc and internal/node/nodetest, so all of them run what production
// runs.
package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/prom"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/metered"
	"github.com/strata-io/strata/push"
	"github.com/strata-io/strata/push/egress"
	"github.com/strata-io/strata/quota"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/registry/rest"
	"github.com/strata-io/strata/security"
	"github.com/strata-io/strata/tables"
	"github.com/strata-io/strata/ui"
	"github.com/strata-io/strata/usage"
	"github.com/strata-io/strata/writer"
)

// Committer is what the writer commits a flush through: the catalog, or a decorator
// around it (the harness builds deliberately broken ones).
type Committer interface {
	Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error)
	Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error)
}

// Config is a node: what it serves from and which roles it runs.
type Config struct {
	// Catalog and Store are required. The caller opens them and closes the catalog
	// once the node has stopped. The node meters the store (objstore/metered).
	Catalog catalog.Backend
	Store   objstore.Store
	// Committer, when set, is what the writer commits through instead of Catalog.
	Committer Committer

	// The roles this node runs, each with its configuration.
	Writer          bool
	WriterConfig    writer.Config
	Reader          bool
	ReaderConfig    reader.Config
	Compactor       bool
	CompactorConfig compactor.Config
	// Connect runs the connector runtime: a worker and Kafka Connect's REST API
	// (/connectors, /connector-plugins, and under /v1). It calls the core in-process,
	// so it needs the writer and reader roles on the node too.
	Connect       bool
	ConnectConfig connect.WorkerConfig
	// Tables runs the tables role (table topics, package tables): it reads through the
	// reader role, so it needs the reader on the node too. Every node whose
	// TablesConfig.Location is set serves the Iceberg REST catalog at /iceberg.
	Tables       bool
	TablesConfig tables.Config
	// Push runs the push role (issue 36, package push): it acquires through the
	// core's share groups, so it needs the reader role on the node too. Every node
	// checks push targets against PushConfig's allow-list.
	Push       bool
	PushConfig PushConfig

	Broker broker.Config
	API    api.Config
	// Security turns authentication and authorization on (security.Config.Enabled):
	// the API, the core and the Kafka listener then share the node's guard
	// (Node.Guard) over the catalog's keys, SCRAM credentials and ACLs. Off, the guard
	// still serves the Kafka listener's SASL logins (PLAIN, SCRAM, and OAUTHBEARER with
	// Security.OAuth), which are then optional.
	Security security.Config
	// Quota tunes quota enforcement (zero: package quota's defaults).
	Quota quota.Config
	// Usage tunes per-topic usage counting (zero: package usage's defaults). A Lambda
	// node counts none: nothing would write its counts between invocations.
	Usage usage.Config

	// HTTP is where Serve serves the API; Kafka, the Kafka listener (none without an
	// address). Start opens both listeners, so their addresses are known (port 0 picks
	// a free one) before the node serves.
	HTTP  HTTPConfig
	Kafka KafkaConfig
	// ShutdownTimeout bounds Serve's shutdown: requests in flight, the front ends, the
	// writer's drain and the other roles. 0: 30s.
	ShutdownTimeout time.Duration
	// ShareDLQInterval is how often the share groups' dead-letter mover looks for
	// records to copy (0: broker.ShareDLQInterval).
	ShareDLQInterval time.Duration

	// Lambda: the node answers Lambda invocations, between which nothing runs, so no
	// role may depend on a background loop: the reader does not listen for commit
	// notifications (long-polls poll), and the compactor is built but not run — the
	// caller runs a pass per scheduled event (Node.Compactor.Pass). It opens no
	// listener: invocations reach Node.API's handler.
	Lambda bool

	// MemoryBudget is the bytes the node accounts its large allocations against
	// (internal/membudget: a share of the process's memory limit, which the caller
	// sets as GOMEMLIMIT): request bodies, buffered records, blocks being read, answers
	// being written. The reader's cache is carved out of it whole. 0: nothing is
	// accounted (tests, tools).
	MemoryBudget int64
	// StallTimeout is how long writing to a client may make no progress before its
	// connection is closed, and the memory its unsent answer holds released
	// (internal/stallconn). 0: no bound.
	StallTimeout time.Duration

	// Registry receives every metric of the node and is served on /metrics; nil: a new
	// one with the Go and process collectors.
	Registry *prometheus.Registry
	Log      *slog.Logger
}

// Node is a started node: its roles run, its listeners are open and its front ends
// other than the HTTP API (the Kafka listener) serve; Serve serves the API.
type Node struct {
	API    *api.API
	Broker *broker.Broker
	// Guard authenticates and authorizes (it authorizes only when Config.Security is
	// on).
	Guard *security.Guard
	// Quotas enforces the catalog's client quotas on this node.
	Quotas *quota.Enforcer
	// Usage counts per-topic usage on this node (nil on a Lambda node).
	Usage *usage.Recorder
	// The roles, nil when the node does not run them.
	Writer    *writer.Writer
	Reader    *reader.Reader
	Compactor *compactor.Compactor
	Connect   *connect.Worker
	Tables    *tables.Role
	Push      *push.Role
	// Store is the metered store the roles use.
	Store    objstore.Store
	Registry *prometheus.Registry
	// Memory is the node's memory budget (nil without Config.MemoryBudget), shared by
	// the API and the Kafka listener.
	Memory *membudget.Budget
	// URL is the HTTP API's base URL (http:// or https://; a wildcard host shown as
	// 127.0.0.1), "" without an HTTP listener.
	URL string
	// KafkaAddr is where the Kafka listener listens (a wildcard host shown as
	// 127.0.0.1), "" without one; KafkaNodeID is the node's id in the catalog's
	// registry of Kafka brokers.
	KafkaAddr   string
	KafkaNodeID int32

	cfg Config
	// pushEgress is the outbound policy for push targets (PushConfig).
	pushEgress *egress.Policy
	apiD       api.Deps
	log        *slog.Logger
	errs       chan error
	stop       context.CancelFunc
	wg         sync.WaitGroup
	httpLn     net.Listener
	// fronts are the front ends served beside the HTTP API (the Kafka listener),
	// stopped with it, before the roles.
	fronts []*front
	// The connect worker stops first, while the writer still takes its tasks' last
	// commits.
	stopConnect context.CancelFunc
	connectDone chan struct{}
	// The usage recorder stops after every role, so it writes the writer's last
	// flushes too.
	stopUsage context.CancelFunc
	usageDone chan struct{}
	once      sync.Once
	ended     chan struct{}
}

// gcCPU adds the collector's CPU time (go_cpu_classes_gc_total_cpu_seconds_total) to
// the Go metrics: beside process_cpu_seconds_total it is the share of a node's CPU the
// collector takes, which a memory limit set too tight drives up (strata bench reports
// it).
var gcCPU = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/gc/total:cpu-seconds$`)}

// readyProbeKey is a key that never exists: a Head answering "not found" proves the
// bucket is reachable and the credentials work, without writing anything.
const readyProbeKey = "strata-readyz-probe"

// Start builds the node, starts its roles and opens its listeners: the HTTP API's
// (served by Serve) and the Kafka listener's, registered in the catalog and serving at
// once. It may block for seconds — the first load of keys and ACLs, the registration —
// within ctx, which bounds only the start: the node runs until Serve ends or Stop. On
// error nothing is left running.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(gcCPU)),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	cat, raw := cfg.Catalog, cfg.Store
	store := metered.New(raw, reg)
	// The roles run under a context of their own: stopping the node serves out its
	// requests first, and only then stops the roles, so the writer drains last.
	roleCtx, stop := context.WithCancel(context.Background())
	n := &Node{Store: store, Registry: reg, cfg: cfg, log: log, errs: make(chan error, 1), stop: stop, ended: make(chan struct{})}
	start := func(name string, run func(context.Context) error) {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			err := run(roleCtx)
			if roleCtx.Err() != nil {
				return
			}
			if err == nil {
				err = errors.New("stopped unexpectedly")
			}
			n.fail(fmt.Errorf("%s: %w", name, err))
		}()
	}

	if cfg.MemoryBudget > 0 {
		n.Memory = membudget.New(cfg.MemoryBudget, reg)
	}
	bd := broker.Deps{Catalog: cat, Producers: cat, Records: cat, Groups: cat, Connect: cat, Security: cat, Classic: cat,
		Registry: cat, Transactions: cat, Nodes: cat, Share: cat, Scram: cat, QuotaStore: cat, Tables: cat}
	if err := n.startGuard(ctx, cfg, start); err != nil {
		n.Stop(context.Background())
		return nil, err
	}
	n.startQuotas(ctx, cfg, reg, start)
	bd.Quotas = n.Quotas
	if !cfg.Lambda {
		n.startUsage(cfg, reg, log)
		bd.Usage = n.Usage
	}
	if cfg.Security.Enabled() {
		bd.Authorizer = n.Guard
		cfg.API.Auth.Authenticator = n.Guard
	}
	var localReader atomic.Pointer[reader.Reader]
	if cfg.Writer {
		cfg.WriterConfig.Memory = n.Memory
		var com Committer = cat
		if cfg.Committer != nil {
			com = cfg.Committer
		}
		wcfg := cfg.WriterConfig
		if cfg.Reader && wcfg.Committed == nil {
			// This node's tails and long-polls learn of its own commits at once; the
			// catalog's notification, a round trip later, serves the other nodes. The
			// reader is built below, after the writer has started.
			wcfg.Committed = func(ws []catalog.Watermark) {
				if r := localReader.Load(); r != nil {
					for _, w := range ws {
						r.Notify(w)
					}
				}
			}
		}
		if cfg.Reader && wcfg.Written == nil {
			wcfg.Written = func(key string, parts [][]byte) {
				if r := localReader.Load(); r != nil {
					r.Written(key, parts)
				}
			}
		}
		if u := n.Usage; u != nil && wcfg.Usage == nil {
			wcfg.Usage = func(us []writer.TopicUsage) {
				now := time.Now()
				for _, x := range us {
					u.Add(now, x.TopicID, x.Principal, x.Counts())
				}
			}
		}
		n.Writer = writer.New(store, com, wcfg, log, reg)
		bd.Writer, bd.Submitter = n.Writer, n.Writer
		start("writer", n.Writer.Run)
	}
	if cfg.Reader {
		// The cache is held whole for the node's life: a standing reservation, the
		// budget's idle level.
		if err := n.Memory.Carve(cfg.ReaderConfig.MemoryBytes(), "the reader's block cache and footers"); err != nil {
			n.Stop(context.Background())
			return nil, fmt.Errorf("node: %w: lower the cache size or raise the memory limit", err)
		}
		cfg.ReaderConfig.Memory = n.Memory
		if u := n.Usage; u != nil && cfg.ReaderConfig.Got == nil {
			cfg.ReaderConfig.Got = func(topicID int64, share float64) {
				u.Add(time.Now(), topicID, "", catalog.UsageCounts{GetRequests: share})
			}
		}
		n.Reader = reader.New(store, cat, cfg.ReaderConfig, log, reg)
		localReader.Store(n.Reader)
		bd.Reader, bd.Batches, bd.Watcher = n.Reader, n.Reader, n.Reader
		if !cfg.Lambda {
			start("reader", n.Reader.Run)
		}
	}
	if cfg.Compactor {
		if err := cfg.CompactorConfig.Validate(); err != nil {
			n.Stop(context.Background())
			return nil, fmt.Errorf("node: compactor: %w", err)
		}
		n.Compactor = compactor.New(store, cat, cfg.CompactorConfig, log, reg)
		if !cfg.Lambda {
			start("compactor", n.Compactor.Run)
		}
	}
	if err := n.pushDeps(cat, &bd); err != nil {
		n.Stop(context.Background())
		return nil, err
	}
	cfg.Broker.Registerer = reg
	n.Broker = broker.New(cfg.Broker, bd)
	n.startPush(cat, start)
	if err := n.startTables(cat, store, start); err != nil {
		n.Stop(context.Background())
		return nil, err
	}
	if !cfg.Lambda {
		// Held classic-group requests wake on the catalog's notifications (they poll
		// without them).
		start("groups", n.Broker.RunGroups)
		// Transactions past their timeout are aborted by whichever node notices.
		start("transaction reaper", func(ctx context.Context) error {
			return n.Broker.RunTxnReaper(ctx, 0, log.With("component", "txn-reaper"))
		})
	}
	if !cfg.Lambda && n.Writer != nil && n.Reader != nil {
		// Share groups' dead-letter copies, leased per group: one node moves a group's
		// records at a time, fenced by its lease's token at each copy's commit. The
		// mover reads the records and produces the copies in-process, so only nodes
		// with both roles run it.
		start("share dead-letter mover", func(ctx context.Context) error {
			return n.Broker.RunShareDLQ(ctx, "node-"+rand.Text(), cfg.ShareDLQInterval, log.With("component", "share-dlq"))
		})
	}
	n.apiD = api.Deps{
		Core:       n.Broker,
		Gatherer:   reg,
		Registerer: reg,
		Log:        log,
		Ready:      readiness(cat, raw),
		Memory:     n.Memory,
	}
	n.apiD.Mounts = registryMounts(n.Broker, log)
	n.apiD.Mounts = append(n.apiD.Mounts, n.tablesMounts(cat, store)...)
	// The web console's files are public; each of its data calls is an API call,
	// authenticated and authorized as any other.
	n.apiD.Mounts = append(n.apiD.Mounts, api.Mount{Path: ui.Prefix, Handler: ui.New(), Public: true})
	if cfg.Connect {
		n.startConnect(cat, log)
	}
	n.API = api.New(cfg.API, n.apiD)
	if err := n.listen(ctx); err != nil {
		n.Stop(context.Background())
		return nil, err
	}
	return n, nil
}

// check refuses a configuration no node can run, saying why.
func (c Config) check() error {
	switch {
	case c.Catalog == nil || c.Store == nil:
		return errors.New("node: a catalog and a store are required")
	case c.Connect && (!c.Writer || !c.Reader || c.Lambda):
		return errors.New("node: the connect role calls the core in-process: run it with the writer and reader roles, not on Lambda")
	case c.Tables && (!c.Reader || c.Lambda):
		return errors.New("node: the tables role reads through the reader role: run it with the reader role, not on Lambda")
	case c.Push && (!c.Reader || c.Lambda):
		return errors.New("node: the push role reads through the reader role: run it with the reader role, not on Lambda")
	case c.Kafka.Listen != "" && (!c.Writer || !c.Reader):
		// Kafka clients produce and fetch on whichever node Metadata names.
		return errors.New("node: the Kafka listener produces and fetches in-process: run it with the writer and reader roles")
	case c.Lambda && (c.HTTP.Listen != "" || c.Kafka.Listen != ""):
		return errors.New("node: a Lambda node answers invocations and opens no listener")
	}
	return nil
}

// startGuard builds the guard and loads the keys and ACLs once before the node serves
// (a catalog that does not answer yet is retried by the guard's loop; until then only
// the static keys work). On Lambda, where nothing runs between invocations, the guard
// refreshes when used instead.
func (n *Node) startGuard(ctx context.Context, cfg Config, start func(string, func(context.Context) error)) error {
	sc := cfg.Security
	if sc.Log == nil {
		sc.Log = n.log
	}
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("node: security: %w", err)
	}
	n.Guard = security.New(sc, cfg.Catalog)
	if sc.OAuth.Unsecured {
		n.log.Warn("OAUTHBEARER accepts unsecured tokens (--oauth-unsecured): any client can log in as any principal; for development only")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Guard.Refresh(ctx); err != nil {
		n.log.Warn("could not load keys and ACLs yet: only the static keys work until the catalog answers", "err", err)
	}
	if !cfg.Lambda {
		start("security", n.Guard.Run)
	}
	return nil
}

// startQuotas builds the quota enforcer over the catalog and its node registry, loads
// the quotas once before the node serves, and keeps them fresh (not on Lambda, where
// nothing runs between invocations: there the quotas are those read at start).
func (n *Node) startQuotas(ctx context.Context, cfg Config, reg prometheus.Registerer, start func(string, func(context.Context) error)) {
	qc := cfg.Quota
	qc.Registerer, qc.Log = reg, n.log
	if qc.PollInterval == 0 {
		qc.PollInterval = cfg.Security.PollInterval
	}
	n.Quotas = quota.New(qc, quotaFeed{n.Guard, cfg.Catalog}, cfg.Catalog)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Quotas.Refresh(rctx); err != nil {
		n.log.Warn("could not load quotas yet: none are enforced until the catalog answers", "err", err)
	}
	if !cfg.Lambda {
		start("quotas", n.Quotas.Run)
	}
}

// startUsage starts the per-topic usage recorder (package usage) on a context of its
// own, which Stop cancels once the roles have stopped.
func (n *Node) startUsage(cfg Config, reg prometheus.Registerer, log *slog.Logger) {
	uc := cfg.Usage
	if uc.Name == nil {
		cat := cfg.Catalog
		uc.Name = func(ctx context.Context, id int64) (string, error) {
			t, err := cat.TopicByID(ctx, id)
			return t.Name, err
		}
	}
	n.Usage = usage.New(cfg.Catalog, uc, log)
	prom.Register(reg, n.Usage.Collector())
	ctx, stop := context.WithCancel(context.Background())
	n.stopUsage, n.usageDone = stop, make(chan struct{})
	go func() {
		defer close(n.usageDone)
		_ = n.Usage.Run(ctx) // ends only with ctx
	}()
}

// quotaFeed is what the quota enforcer reads: the security version and its changes
// from the node's guard — one LISTEN connection and one version poll per node, not one
// per view kept — and the quotas from the catalog.
type quotaFeed struct {
	*security.Guard
	cat catalog.Backend
}

func (f quotaFeed) QuotaEntries(ctx context.Context) ([]catalog.QuotaEntry, error) {
	return f.cat.QuotaEntries(ctx)
}

// startConnect starts the connect worker under a context of its own, and mounts the
// REST API.
func (n *Node) startConnect(cat catalog.Backend, log *slog.Logger) {
	wc := n.cfg.ConnectConfig
	wc.Log = log
	n.Connect = connect.NewWorker(cat, n.Broker, wc)
	rest := connect.NewREST(n.Broker, connect.RESTConfig{Plugins: wc.Plugins, Providers: wc.Providers, Worker: n.Connect.ID(), Principal: api.Principal, Log: log})
	conns, plugins := rest.Connectors(), rest.Plugins()
	n.apiD.Mounts = append(n.apiD.Mounts, []api.Mount{{Path: "/connectors", Handler: conns}, {Path: "/v1/connectors", Handler: conns},
		{Path: "/connector-plugins", Handler: plugins}, {Path: "/v1/connector-plugins", Handler: plugins}}...)
	ctx, stop := context.WithCancel(context.Background())
	n.stopConnect, n.connectDone = stop, make(chan struct{})
	go func() {
		defer close(n.connectDone)
		err := n.Connect.Run(ctx)
		if ctx.Err() == nil {
			n.fail(fmt.Errorf("connect: stopped unexpectedly: %v", err))
		}
	}()
}

// registryMounts serves the schema registry's REST API at the root paths registry
// clients expect.
func registryMounts(core *broker.Broker, log *slog.Logger) []api.Mount {
	h := rest.New(core, rest.Config{Principal: api.Principal, Log: log})
	var ms []api.Mount
	for _, p := range rest.Prefixes {
		ms = append(ms, api.Mount{Path: p, Handler: h.Routes(p)})
	}
	return ms
}

// readiness is the node's /readyz check: the catalog and the bucket, asked at once,
// each failure an *api.NotReadyError naming its dependency (the API shows the name and
// logs the cause, which may quote an address or a credential's owner).
func readiness(cat catalog.Catalog, store objstore.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		var catErr, storeErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := cat.Now(ctx); err != nil {
				catErr = &api.NotReadyError{Dependency: "catalog", Err: err}
			}
		})
		wg.Go(func() {
			if _, err := store.Head(ctx, readyProbeKey); err != nil && !errors.Is(err, objstore.ErrNotExist) {
				storeErr = &api.NotReadyError{Dependency: "bucket", Err: err}
			}
		})
		wg.Wait()
		return errors.Join(catErr, storeErr)
	}
}

// NewAPI builds another HTTP API over the same core, metrics and readiness, with its
// own configuration (Lambda's streaming Function URL beside its buffered one).
func (n *Node) NewAPI(cfg api.Config) *api.API {
	if n.Guard.Enabled() && cfg.Auth.Authenticator == nil {
		cfg.Auth.Authenticator = n.Guard
	}
	return api.New(cfg, n.apiD)
}

// Errors receives a role's failure: a role that stopped before Stop.
func (n *Node) Errors() <-chan error { return n.errs }

// fail reports a role's failure. The first stops the node; one that finds a failure
// already waiting is only logged, so no role goroutine ever blocks on reporting
// (however many roles and workers the node runs).
func (n *Node) fail(err error) {
	select {
	case n.errs <- err:
	default:
		n.log.Error("a role failed while the node was already failing", "err", err)
	}
}
