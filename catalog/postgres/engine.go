package postgres

import (
	"time"

	"github.com/strata-io/strata/catalog/internal/engine"
)

// pgEngine is what this backend gives the engine's transaction scripts
// (engine.Backend): the write transactions and the statements they run,
// each script's statements in the file of its concern (compact.go: SwapTx, groups.go:
// GroupTx, …). Catalog embeds the methods those scripts implement (scripts, registry),
// so none is written here twice.
type pgEngine struct{ c *Catalog }

var _ engine.Backend = pgEngine{}

func (c *Catalog) engine() pgEngine { return pgEngine{c} }

// Name is the backend's name, for errors.
func (pgEngine) Name() string { return "postgres" }

// CommitTimeout is the catalog's commit timeout.
func (e pgEngine) CommitTimeout() time.Duration { return e.c.commitTimeout }

// registry is the schema registry's methods, written once (engine.Registry); Catalog
// embeds it under this unexported name.
type registry = engine.Registry

// scripts is the catalog methods whose transaction scripts are the engine's
// (engine.Methods); Catalog embeds it under this unexported name.
type scripts = engine.Methods

// scram is the SCRAM credentials' methods, written once (engine.Scram); Catalog embeds
// it under this unexported name.
type scram = engine.Scram
