package sqlite

import (
	"time"

	"github.com/strata-io/strata/catalog/internal/engine"
)

// sqliteEngine is what this backend gives the engine's transaction scripts: the write
// transactions (immediate, on the one writer connection) and the statements they run
// (each script's statements sit beside the method that calls it).
type sqliteEngine struct{ c *Catalog }

var (
	_ engine.SwapBackend     = sqliteEngine{}
	_ engine.ClassicBackend  = sqliteEngine{}
	_ engine.RegistryDB      = sqliteEngine{}
	_ engine.NodeBackend     = sqliteEngine{}
	_ engine.ProducerBackend = sqliteEngine{}
	_ engine.GroupBackend    = sqliteEngine{}
)

func (c *Catalog) engine() sqliteEngine { return sqliteEngine{c} }

// Name is the backend's name, for errors.
func (sqliteEngine) Name() string { return "sqlite" }

// CommitTimeout is the catalog's commit timeout.
func (e sqliteEngine) CommitTimeout() time.Duration { return e.c.opts.CommitTimeout }

// registry is the schema registry's methods, written once (engine.Registry); Catalog
// embeds it under this unexported name.
type registry = engine.Registry
