package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// Committer is the part of the catalog the writer commits through. A decorator here
// models a writer that breaks the commit protocol (tests build deliberately broken
// ones and prove the checker catches them).
type Committer interface {
	Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error)
	Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error)
}

// NodeConfig configures an in-process node: every role wired as cmd/strata wires them,
// behind a real HTTP server on loopback, with hooks for decorators.
type NodeConfig struct {
	Catalog catalog.Backend
	Store   objstore.Store
	// Committer, when set, is what the writer commits through instead of Catalog.
	Committer Committer
	// Compactor runs the compactor role with these settings (Interval 0: no compactor).
	Compactor compactor.Config
	// CommitTimeout is the catalog's commit timeout; the writer's is a third of it.
	// Default 30s.
	CommitTimeout time.Duration
	Log           *slog.Logger
}

// Node is a running in-process node.
type Node struct {
	URL  string
	srv  *http.Server
	stop context.CancelFunc
	wg   sync.WaitGroup
	errs chan error
}

// StartNode starts an in-process node listening on a free loopback port.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 30 * time.Second
	}
	var com Committer = cfg.Catalog
	if cfg.Committer != nil {
		com = cfg.Committer
	}
	reg := prometheus.NewRegistry()
	roleCtx, stop := context.WithCancel(context.Background())
	n := &Node{stop: stop, errs: make(chan error, 3)}
	start := func(name string, run func(context.Context) error) {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := run(roleCtx); err != nil && roleCtx.Err() == nil {
				n.errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	w := writer.New(cfg.Store, com, writer.Config{CommitTimeout: cfg.CommitTimeout / 3, PutTimeout: 5 * time.Second}, cfg.Log, reg)
	start("writer", w.Run)
	r := reader.New(cfg.Store, cfg.Catalog, reader.Config{}, cfg.Log, reg)
	start("reader", r.Run)
	if cfg.Compactor.Interval > 0 {
		start("compactor", compactor.New(cfg.Store, cfg.Catalog, cfg.Compactor, cfg.Log, reg).Run)
	}
	bd := broker.Deps{Catalog: cfg.Catalog, Writer: w, Reader: r, Batches: r, Producers: cfg.Catalog, Records: cfg.Catalog, Groups: cfg.Catalog}
	deps := api.Deps{Core: broker.New(broker.Config{}, bd), Registerer: reg, Gatherer: reg, Log: cfg.Log,
		Ready: func(ctx context.Context) error { _, err := cfg.Catalog.Now(ctx); return err }}
	a := api.New(api.Config{}, deps)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		n.wg.Wait()
		return nil, fmt.Errorf("jepsen: listen: %w", err)
	}
	n.srv = &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = n.srv.Serve(ln) }()
	n.URL = "http://" + ln.Addr().String()
	return n, nil
}

// Close stops the node: the HTTP server, then the roles (the writer drains).
func (n *Node) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = n.srv.Shutdown(ctx)
	n.stop()
	n.wg.Wait()
	close(n.errs)
	var errs []error
	for err := range n.errs {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
