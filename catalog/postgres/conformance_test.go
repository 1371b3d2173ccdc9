package postgres

import (
	"sync"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestConformance runs every conformance suite (catalogtest.Run). Shared subtests use
// one database made for this test; a fresh one gets its own, which every catalog the
// subtest opens shares, as nodes on one database would.
//
// The catalog suite's concurrency test runs the full 8 committers × 1,000 flushes over 16
// partitions (the storage issue's bar); -short runs the suite's own short size.
func TestConformance(t *testing.T) {
	t.Parallel()
	shared := newDatabase(t)
	var (
		mu    sync.Mutex
		fresh = map[*testing.T]string{}
	)
	catalogtest.Run(t, func(t *testing.T, s catalogtest.Store, opts catalog.Options) catalog.Backend {
		if s == catalogtest.Shared {
			return openDSN(t, shared, opts)
		}
		mu.Lock()
		dsn, ok := fresh[t]
		mu.Unlock()
		if !ok {
			dsn = newDatabase(t)
			mu.Lock()
			fresh[t] = dsn
			mu.Unlock()
		}
		return openDSN(t, dsn, opts)
	})
}
