package postgres

import (
	"time"

	"github.com/strata-io/strata/catalog/internal/engine"
)

// pgEngine is what this backend gives the engine's transaction scripts: the write
// transactions and the statements they run (each script's statements sit beside the
// method that calls it).
type pgEngine struct{ c *Catalog }

var (
	_ engine.SwapBackend     = pgEngine{}
	_ engine.ClassicBackend  = pgEngine{}
	_ engine.RegistryDB      = pgEngine{}
	_ engine.NodeBackend     = pgEngine{}
	_ engine.ProducerBackend = pgEngine{}
	_ engine.GroupBackend    = pgEngine{}
)

func (c *Catalog) engine() pgEngine { return pgEngine{c} }

// Name is the backend's name, for errors.
func (pgEngine) Name() string { return "postgres" }

// CommitTimeout is the catalog's commit timeout.
func (e pgEngine) CommitTimeout() time.Duration { return e.c.commitTimeout }

// registry is the schema registry's methods, written once (engine.Registry); Catalog
// embeds it under this unexported name.
type registry = engine.Registry
