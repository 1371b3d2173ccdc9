package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestConformance runs the shared catalog suite. The subtests share one database (the
// suite names its topics uniquely); each opens its own Catalog on it.
func TestConformance(t *testing.T) {
	dsn := newDatabase(t)
	catalogtest.Run(t, func(t *testing.T) catalog.Catalog { return openDSN(t, dsn, catalog.Options{}) })
}
