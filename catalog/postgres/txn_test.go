package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestTransactions runs the transaction coordinator's suite on one database.
func TestTransactions(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	catalogtest.RunTransactions(t, func(t *testing.T) catalogtest.TxnCatalog {
		return openDSN(t, dsn, catalog.Options{})
	})
}
