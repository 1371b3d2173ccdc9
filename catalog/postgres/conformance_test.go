package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestConformance runs the shared catalog suite. The subtests share one database (the
// suite names its topics uniquely); each opens its own Catalog on it.
//
// The concurrency test runs the suite's full 8 committers × 1,000 flushes over 16
// partitions (the storage issue's bar); -short runs the suite's own short size.
func TestConformance(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	o := catalogtest.DefaultOptions()
	if testing.Short() {
		o = catalogtest.ShortOptions()
	}
	catalogtest.RunWith(t, func(t *testing.T) catalog.Catalog { return openDSN(t, dsn, catalog.Options{}) }, o)
}
