package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

func TestTransactions(t *testing.T) {
	catalogtest.RunTransactions(t, func(t *testing.T) catalogtest.TxnCatalog {
		c, err := Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
		return c
	})
}
