package sqlite

import (
	"time"

	"github.com/strata-io/strata/catalog/internal/engine"
)

// sqliteEngine is what this backend gives the engine's transaction scripts
// (engine.Backend): the write transactions (immediate, on the one writer connection) and the statements they run,
// each script's statements in the file of its concern (compact.go: SwapTx, groups.go:
// GroupTx, …). Catalog embeds the methods those scripts implement (scripts, registry),
// so none is written here twice.
type sqliteEngine struct{ c *Catalog }

var _ engine.Backend = sqliteEngine{}

func (c *Catalog) engine() sqliteEngine { return sqliteEngine{c} }

// Name is the backend's name, for errors.
func (sqliteEngine) Name() string { return "sqlite" }

// CommitTimeout is the catalog's commit timeout.
func (e sqliteEngine) CommitTimeout() time.Duration { return e.c.opts.CommitTimeout }

// registry is the schema registry's methods, written once (engine.Registry); Catalog
// embeds it under this unexported name.
type registry = engine.Registry

// scripts is the catalog methods whose transaction scripts are the engine's
// (engine.Methods); Catalog embeds it under this unexported name.
type scripts = engine.Methods

// scram is the SCRAM credentials' methods, written once (engine.Scram); Catalog embeds
// it under this unexported name.
type scram = engine.Scram
