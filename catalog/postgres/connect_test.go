package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestConnect runs the connector suite, each subtest on a database of its own (workers
// share out every task in the catalog).
func TestConnect(t *testing.T) {
	t.Parallel()
	catalogtest.RunConnect(t, func(t *testing.T) catalogtest.ConnectCatalog {
		return openDSN(t, newDatabase(t), catalog.Options{})
	})
}
