package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestClassic runs the classic-group suite on one database; each call opens its own
// catalog (pool) on it, as several nodes would.
func TestClassic(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	catalogtest.RunClassic(t, func(t *testing.T) catalogtest.ClassicCatalog {
		return openDSN(t, dsn, catalog.Options{})
	})
}

// BenchmarkClassic10 measures a whole rebalance of a classic group of 10 members, and
// one member's heartbeat, on one catalog (pool).
func BenchmarkClassic10(b *testing.B) {
	catalogtest.BenchmarkClassic(b, openTest(b, catalog.Options{}), 10)
}
