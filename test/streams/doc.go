// Package streams holds the Streams API tests that need a real server: they build
// ./cmd/strata, ./examples/retail and ./examples/shop, run `strata serve` on Postgres +
// MinIO (scripts/services.sh) and the applications as separate processes, and check
// their outputs against single-threaded oracles through crashes, pauses, lost answers
// and rebalances; every kind of store is restored from its changelog and checked
// against the in-process driver. They skip without the services, and fail under CI.
//
// STRATA_LONG=1 runs the full sizes; without it each test runs a bounded version.
package streams
