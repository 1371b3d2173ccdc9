package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestConformance runs the shared catalog suite. The subtests share one database (the
// suite names its topics uniquely); each opens its own Catalog on it.
//
// The concurrency test runs 8 committers × 250 flushes rather than the suite's default
// 8 × 1,000: every commit here waits for a WAL flush, and the package's tests must stay
// within about a minute and a half on a 2-core machine. -short runs the suite's own
// short size.
func TestConformance(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	o := catalogtest.DefaultOptions()
	o.CommitsEach = 250
	if testing.Short() {
		o = catalogtest.ShortOptions()
	}
	catalogtest.RunWith(t, func(t *testing.T) catalog.Catalog { return openDSN(t, dsn, catalog.Options{}) }, o)
}
