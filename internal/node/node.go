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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/metered"
	"github.com/strata-io/strata/reader"
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

	Broker broker.Config
	API    api.Config

	// Lambda: the node answers Lambda invocations, between which nothing runs, so no
	// role may depend on a background loop: the reader does not listen for commit
	// notifications (long-polls poll), and the compactor is built but not run — the
	// caller runs a pass per scheduled event (Node.Compactor.Pass).
	Lambda bool

	// Registry receives every metric of the node and is served on /metrics; nil: a new
	// one with the Go and process collectors.
	Registry *prometheus.Registry
	Log      *slog.Logger
}

// Node is a started node: its roles run and its API is built, not yet served.
type Node struct {
	API    *api.API
	Broker *broker.Broker
	// The roles, nil when the node does not run them.
	Writer    *writer.Writer
	Reader    *reader.Reader
	Compactor *compactor.Compactor
	// Store is the metered store the roles use.
	Store    objstore.Store
	Registry *prometheus.Registry

	cfg   Config
	apiD  api.Deps
	log   *slog.Logger
	errs  chan error
	stop  context.CancelFunc
	wg    sync.WaitGroup
	once  sync.Once
	ended chan struct{}
}

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
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	cat, raw := cfg.Catalog, cfg.Store
	store := metered.New(raw, reg)
	// The roles run under a context of their own: stopping the node serves out its
	// requests first, and only then stops the roles, so the writer drains last.
	roleCtx, stop := context.WithCancel(context.Background())
	n := &Node{Store: store, Registry: reg, cfg: cfg, log: log, errs: make(chan error, 4), stop: stop, ended: make(chan struct{})}
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
			n.errs <- fmt.Errorf("%s: %w", name, err)
		}()
	}

	bd := broker.Deps{Catalog: cat, Producers: cat, Records: cat, Groups: cat, Classic: cat}
	if cfg.Writer {
		var com Committer = cat
		if cfg.Committer != nil {
			com = cfg.Committer
		}
		n.Writer = writer.New(store, com, cfg.WriterConfig, log, reg)
		bd.Writer = n.Writer
		start("writer", n.Writer.Run)
	}
	if cfg.Reader {
		n.Reader = reader.New(store, cat, cfg.ReaderConfig, log, reg)
		bd.Reader, bd.Batches = n.Reader, n.Reader
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
	}
	n.API = api.New(cfg.API, n.apiD)
	return n, nil
}

// Frontend is a front end served beside the HTTP API (the Kafka listener).
type Frontend interface {
	// Failed reports the front end's failure while it serves.
	Failed() <-chan error
	// Stop stops accepting, lets the requests in flight be answered, and returns.
	Stop()
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
func (n *Node) NewAPI(cfg api.Config) *api.API { return api.New(cfg, n.apiD) }

// Errors receives a role's failure: a role that stopped before Stop.
func (n *Node) Errors() <-chan error { return n.errs }

// Stop stops the roles — the writer drains its buffer first — and waits for them until
// ctx ends. It may be called more than once.
func (n *Node) Stop(ctx context.Context) error {
	n.once.Do(func() {
		n.stop()
		go func() { n.wg.Wait(); close(n.ended) }()
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
