// Package engine holds the catalog's rules that both backends share and no caller
// needs: commit planning and offset assignment (commit.go), the idempotent producer
// checks (producers.go), the heartbeat state machine (heartbeat.go), the assignors
// (assign.go), the offset-commit checks (offsets.go), the group views (describe.go), the
// compaction swap and due times (compact.go), node ids (nodes.go) and the inventory's
// paging (inventory.go). A backend loads rows in a transaction, runs these functions on
// them, and writes back what they answer, so that the backends differ only in SQL.
//
// The transaction scripts are here too: a call that runs more than one statement is one
// function over a small interface the backend implements — its write transaction and
// its statements, no rule — SwapChunks over SwapStmts (swap.go), the coordinator's calls
// over TxnBackend (txn.go), Heartbeat and CommitOffsets over GroupBackend
// (group_step.go), the classic steps over ClassicBackend (classic_step.go),
// InitProducer over ProducerStmts (producer_init.go), RegisterNode over NodeStmts
// (nodes.go), the schema registry over RegistryDB (registry.go) and the table topics'
// state over TablesDB (tables.go). A backend's method
// is then one call; TestNoScriptInBothBackends fails when a script is written in both.
//
// Why internal, and why here: callers (the broker, the roles, the front ends) see the
// catalog package — its types, interfaces and request checks — and nothing of how a
// backend reaches its answers; the backends (catalog/postgres, catalog/sqlite) and the
// conformance suites (catalog/catalogtest) sit under catalog/ and may import this. The
// name says what it is to them: the engine a backend drives, not more domain.
//
// Postgres runs some of these rules as plpgsql instead (the flush commit: strata_commit,
// strata_commit_groups); those functions and the Go here are twins, guarded by the
// conformance suites (see the catalog package doc). The migrations' comments name these
// rules as they were named when written, catalog.PlanSegment and the like: the same
// functions, here since; migrations are never edited.
package engine
