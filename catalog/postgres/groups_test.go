package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestGroups runs the group suite on one database; every subtest opens its own
// catalogs (pools) on it, and the concurrency test spreads its members over several,
// as several server processes would.
func TestGroups(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	catalogtest.RunGroups(t, func(t *testing.T) catalogtest.GroupCatalog {
		return openDSN(t, dsn, catalog.Options{})
	})
}

// BenchmarkHeartbeats100 measures heartbeats per second of a stable group of 100
// members on one catalog (pool).
func BenchmarkHeartbeats100(b *testing.B) {
	catalogtest.BenchmarkHeartbeats(b, openTest(b, catalog.Options{}), 100)
}
