package jepsen

import (
	"context"
	"log/slog"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/inproc"
	"github.com/strata-io/strata/objstore"
)

// Committer is the part of the catalog the writer commits through. A decorator here
// models a writer that breaks the commit protocol (tests build deliberately broken
// ones and prove the checker catches them).
type Committer = node.Committer

// NodeConfig is what the harness sets of an in-process node (internal/node/inproc:
// the writer and reader roles, the HTTP API on a loopback port).
type NodeConfig struct {
	Catalog catalog.Backend
	Store   objstore.Store
	// Committer, when set, is what the writer commits through instead of Catalog.
	Committer Committer
	// CommitTimeout is the catalog's commit timeout; the writer's is a third of it.
	// Default 30s.
	CommitTimeout time.Duration
	Log           *slog.Logger
}

// StartNode starts an in-process node, served until its Close (which returns a role's
// failure, if one failed).
func StartNode(ctx context.Context, cfg NodeConfig) (*inproc.Node, error) {
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 30 * time.Second
	}
	return inproc.Start(ctx, cfg.Catalog, cfg.Store, func(c *node.Config) {
		c.Committer, c.Log = cfg.Committer, cfg.Log
		c.WriterConfig.CommitTimeout = cfg.CommitTimeout / 3
		// The harness's writer gives up on a PUT after 5s: its faults include stores
		// that hang, and a flush must fail (and be retried by the client) well within a
		// fault window.
		c.WriterConfig.PutTimeout = 5 * time.Second
	})
}
