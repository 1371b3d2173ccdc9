package sqlite

import (
	"path/filepath"
	"sync"
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

// TestConformance runs every conformance suite (catalogtest.Run) on a file per subtest,
// which every catalog the subtest opens shares, as processes on one machine would (each
// Catalog has its own writer connection; they queue on SQLite's lock and busy timeout).
func TestConformance(t *testing.T) {
	var (
		mu    sync.Mutex
		paths = map[*testing.T]string{}
	)
	catalogtest.Run(t, func(t *testing.T, _ catalogtest.Store, opts catalog.Options) catalog.Backend {
		mu.Lock()
		p, ok := paths[t]
		if !ok {
			p = filepath.Join(t.TempDir(), "catalog.db")
			paths[t] = p
		}
		mu.Unlock()
		c, err := Open(t.Context(), p, opts)
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
