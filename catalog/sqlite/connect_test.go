package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

func TestConnect(t *testing.T) {
	catalogtest.RunConnect(t, func(t *testing.T) catalogtest.ConnectCatalog {
		c, err := Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}
