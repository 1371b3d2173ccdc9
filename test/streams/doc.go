// Package streams holds the Streams API tests that need a real server: they build
// ./cmd/strata and ./examples/retail, run `strata serve` on Postgres + MinIO
// (scripts/services.sh) and the retail application as separate processes, and check
// its outputs against the single-threaded oracle through crashes, pauses, lost
// answers and rebalances. They skip without the services, and fail under CI.
//
// STRATA_LONG=1 runs the full sizes; without it each test runs a bounded version.
package streams
