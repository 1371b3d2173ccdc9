package sqlite

import "github.com/strata-io/strata/catalog/internal/engine"

// The table topics' state (catalog.Tables): its methods, statements and rules are the
// engine's (engine.Tables, which Catalog embeds); it runs them in the registry's
// transactions, and reads the database clock with this.

// tables is catalog.Tables, written once (engine.Tables); Catalog embeds it under this
// unexported name.
type tables = engine.Tables

// ClockSQL implements engine.TablesDB.
func (sqliteEngine) ClockSQL() string {
	return `SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// push is catalog.PushSubscriptions, written once (engine.Push).
type push = engine.Push
