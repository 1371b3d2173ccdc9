package jepsen

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/writer"
)

// Committer is the part of the catalog the writer commits through. A decorator here
// models a writer that breaks the commit protocol (tests build deliberately broken
// ones and prove the checker catches them).
type Committer = node.Committer

// NodeConfig configures an in-process node: every role assembled as cmd/strata
// assembles them (internal/node), behind a real HTTP server on loopback, with hooks for
// decorators.
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
	URL    string
	n      *node.Node
	cancel context.CancelFunc
	served chan error
}

// StartNode starts an in-process node listening on a free loopback port.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 30 * time.Second
	}
	n, err := node.Start(node.Config{
		Catalog: cfg.Catalog, Store: cfg.Store, Committer: cfg.Committer,
		// The harness's writer gives up on a PUT after 5s: its faults include stores
		// that hang, and a flush must fail (and be retried by the client) well within a
		// fault window.
		Writer: true, WriterConfig: writer.Config{CommitTimeout: cfg.CommitTimeout / 3, PutTimeout: 5 * time.Second},
		Reader:    true,
		Compactor: cfg.Compactor.Interval > 0, CompactorConfig: cfg.Compactor,
		Log: cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = n.Stop(context.Background())
		return nil, fmt.Errorf("jepsen: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &Node{URL: "http://" + ln.Addr().String(), n: n, cancel: cancel, served: make(chan error, 1)}
	go func() { in.served <- n.Serve(ctx, ln, nil, 30*time.Second) }()
	return in, nil
}

// Close stops the node: the HTTP server, then the roles (the writer drains). It
// returns a role's failure, if one failed.
func (n *Node) Close() error {
	n.cancel()
	return <-n.served
}
