package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestSecurity runs the security conformance suite, a fresh file per subtest.
func TestSecurity(t *testing.T) {
	catalogtest.RunSecurity(t, func(t *testing.T) catalog.Backend {
		c, err := Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}

// TestRegistry runs the schema registry's conformance suite, a fresh file per subtest.
func TestRegistry(t *testing.T) {
	catalogtest.RunRegistry(t, func(t *testing.T) catalog.Backend {
		c, err := Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}
