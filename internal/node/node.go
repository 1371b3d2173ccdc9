// Package node assembles a Strata node from its configuration: the one place where the
// concrete types meet — a catalog backend, an object store, the roles (writer, reader,
// compactor), the broker core and the HTTP API — and where the node's lifetime is
// ordered (roles started before serving; on shutdown, requests finish, then the writer
// drains). `strata serve`, `strata dev` and `strata lambda`, the reliability harness and
// the test stacks all start their nodes here, so they run what production runs.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/internal/stallconn"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/metered"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/registry/rest"
	"github.com/strata-io/strata/security"
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

	Broker broker.Config
	API    api.Config
	// Security turns authentication and authorization on (security.Config.Enabled):
	// the node then builds its guard over the catalog's keys and ACLs, which the API,
	// the core and the Kafka listener (Node.Guard) share.
	Security security.Config

	// Lambda: the node answers Lambda invocations, between which nothing runs, so no
	// role may depend on a background loop: the reader does not listen for commit
	// notifications (long-polls poll), and the compactor is built but not run — the
	// caller runs a pass per scheduled event (Node.Compactor.Pass).
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

// Node is a started node: its roles run and its API is built, not yet served.
type Node struct {
	API    *api.API
	Broker *broker.Broker
	// Guard authenticates and authorizes; nil when Config.Security is off.
	Guard *security.Guard
	// The roles, nil when the node does not run them.
	Writer    *writer.Writer
	Reader    *reader.Reader
	Compactor *compactor.Compactor
	Connect   *connect.Worker
	// Store is the metered store the roles use.
	Store    objstore.Store
	Registry *prometheus.Registry
	// Memory is the node's memory budget (nil without Config.MemoryBudget): a front
	// end built beside the API — the Kafka listener — reserves its frames there.
	Memory *membudget.Budget

	cfg  Config
	apiD api.Deps
	log  *slog.Logger
	errs chan error
	stop context.CancelFunc
	wg   sync.WaitGroup
	// The connect worker stops first, while the writer still takes its tasks' last
	// commits.
	stopConnect context.CancelFunc
	connectDone chan struct{}
	once        sync.Once
	ended       chan struct{}
}

// gcCPU adds the collector's CPU time (go_cpu_classes_gc_total_cpu_seconds_total) to
// the Go metrics: beside process_cpu_seconds_total it is the share of a node's CPU the
// collector takes, which a memory limit set too tight drives up (strata bench reports
// it).
var gcCPU = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/gc/total:cpu-seconds$`)}

// readyProbeKey is a key that never exists: a Head answering "not found" proves the
// bucket is reachable and the credentials work, without writing anything.
const readyProbeKey = "strata-readyz-probe"

// Start builds the node and starts its roles. On error nothing is left running.
func Start(cfg Config) (*Node, error) {
	if cfg.Catalog == nil || cfg.Store == nil {
		return nil, errors.New("node: a catalog and a store are required")
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

	if cfg.Connect && (!cfg.Writer || !cfg.Reader || cfg.Lambda) {
		stop()
		return nil, errors.New("node: the connect role calls the core in-process: run it with the writer and reader roles, not on Lambda")
	}
	if cfg.MemoryBudget > 0 {
		n.Memory = membudget.New(cfg.MemoryBudget, reg)
	}
	bd := broker.Deps{Catalog: cat, Producers: cat, Records: cat, Groups: cat, Connect: cat, Security: cat, Classic: cat, Registry: cat}
	if cfg.Security.Enabled() {
		if err := n.startGuard(cfg, start); err != nil {
			n.Stop(context.Background())
			return nil, err
		}
		bd.Authorizer = n.Guard
		cfg.API.Auth.Authenticator = n.Guard
	}
	if cfg.Writer {
		cfg.WriterConfig.Memory = n.Memory
		var com Committer = cat
		if cfg.Committer != nil {
			com = cfg.Committer
		}
		n.Writer = writer.New(store, com, cfg.WriterConfig, log, reg)
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
		n.Reader = reader.New(store, cat, cfg.ReaderConfig, log, reg)
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
	n.Broker = broker.New(cfg.Broker, bd)
	if !cfg.Lambda {
		// Held classic-group requests wake on the catalog's notifications (they poll
		// without them).
		start("groups", n.Broker.RunGroups)
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
	if cfg.Connect {
		n.startConnect(cat, log)
	}
	n.API = api.New(cfg.API, n.apiD)
	return n, nil
}

// startGuard builds the guard and loads the keys and ACLs once before the node serves
// (a catalog that does not answer yet is retried by the guard's loop; until then only
// the static keys work). On Lambda, where nothing runs between invocations, the guard
// refreshes when used instead.
func (n *Node) startGuard(cfg Config, start func(string, func(context.Context) error)) error {
	sc := cfg.Security
	if sc.Log == nil {
		sc.Log = n.log
	}
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("node: security: %w", err)
	}
	n.Guard = security.New(sc, cfg.Catalog)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Guard.Refresh(ctx); err != nil {
		n.log.Warn("could not load keys and ACLs yet: only the static keys work until the catalog answers", "err", err)
	}
	if !cfg.Lambda {
		start("security", n.Guard.Run)
	}
	return nil
}

// Frontend is a front end served beside the HTTP API (the Kafka listener).
type Frontend interface {
	// Failed reports the front end's failure while it serves.
	Failed() <-chan error
	// Stop stops accepting, lets the requests in flight be answered, and returns.
	Stop()
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
	if n.Guard != nil && cfg.Auth.Authenticator == nil {
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

// Stop stops the roles — the writer drains its buffer first — and waits for them until
// ctx ends. It may be called more than once.
func (n *Node) Stop(ctx context.Context) error {
	n.once.Do(func() {
		go func() {
			if n.stopConnect != nil {
				n.stopConnect()
				<-n.connectDone
			}
			n.stop()
			n.wg.Wait()
			close(n.ended)
		}()
	})
	select {
	case <-n.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node: the roles did not stop in time: %w", ctx.Err())
	}
}

// Serve serves the API on ln until ctx ends, the server fails or a role fails, then
// shuts down in order: stop accepting, let requests in flight finish (the writer still
// runs, so produces get their answers), end long polls and tails a moment in (they
// never finish by themselves), drain the writer, stop the other roles. The whole
// shutdown takes at most shutdownTimeout. With tlsCfg it serves HTTPS only (its
// certificate comes from tlsCfg, which may reload it). It returns why it stopped, nil
// for ctx.
//
// Other front ends (the Kafka listener) are served beside it: a failure of one stops the
// node as a role's would, and each is stopped together with the HTTP server, before the
// roles, so that their requests in flight are answered while the writer still runs.
func (n *Node) Serve(ctx context.Context, ln net.Listener, tlsCfg *tls.Config, shutdownTimeout time.Duration, fronts ...Frontend) error {
	baseCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	ln = stallconn.Listen(ln, n.cfg.StallTimeout)
	frontErr := make(chan error, len(fronts))
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	for _, f := range fronts {
		go func() {
			select {
			case err := <-f.Failed():
				frontErr <- err
			case <-watchCtx.Done():
			}
		}()
	}
	// Before a request is authenticated, only its headers are read, within
	// ReadHeaderTimeout (the TLS handshake too); its body is read only once it is (the
	// API answers 401 without reading it, and closes the connection), within the API's
	// body timeout (--body-timeout, from the handler's start), which is why there is no
	// ReadTimeout here.
	srv := &http.Server{
		Handler:           n.API.Handler(),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
		TLSConfig:         tlsCfg,
	}
	serveErr := make(chan error, 1)
	if tlsCfg != nil {
		go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { serveErr <- srv.Serve(ln) }()
	}

	var failure error
	select {
	case <-ctx.Done():
		n.log.Info("shutting down: signal received")
	case err := <-serveErr:
		failure = fmt.Errorf("serve HTTP: %w", err)
	case err := <-frontErr:
		failure = err
		n.log.Error("shutting down: a front end failed", "err", err)
	case err := <-n.errs:
		failure = err
		n.log.Error("shutting down: a role failed", "err", err)
	}

	shCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	grace := time.AfterFunc(min(2*time.Second, shutdownTimeout/4), cancelRequests)
	var fwg sync.WaitGroup
	for _, f := range fronts {
		fwg.Go(f.Stop)
	}
	if err := srv.Shutdown(shCtx); err != nil {
		n.log.Warn("HTTP shutdown incomplete: closing remaining connections", "err", err)
		_ = srv.Close()
	}
	grace.Stop()
	cancelRequests()
	fwg.Wait()
	if err := n.Stop(shCtx); err != nil {
		return errors.Join(failure, fmt.Errorf("roles did not stop within the shutdown timeout %s", shutdownTimeout))
	}
	n.log.Info("stopped")
	return failure
}
