package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// openTest opens a fresh catalog in the test's temporary directory.
func openTest(t testing.TB) *Catalog {
	t.Helper()
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
}

func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalog.Catalog { return openTest(t) })
}
