package sqlite

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// openShared opens a catalog on one file per test: several calls within a test share
// it, as several processes on one machine would (each Catalog has its own writer
// connection; they queue on SQLite's lock and busy timeout).
func openShared() func(t *testing.T) catalogtest.GroupCatalog {
	var (
		mu    sync.Mutex
		paths = map[*testing.T]string{}
	)
	return func(t *testing.T) catalogtest.GroupCatalog {
		mu.Lock()
		p, ok := paths[t]
		if !ok {
			p = filepath.Join(t.TempDir(), "catalog.db")
			paths[t] = p
		}
		mu.Unlock()
		c, err := Open(t.Context(), p, catalog.Options{})
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
}

func TestGroups(t *testing.T) {
	catalogtest.RunGroups(t, openShared())
}

// BenchmarkHeartbeats100 measures heartbeats per second of a stable group of 100
// members on one catalog.
func BenchmarkHeartbeats100(b *testing.B) {
	catalogtest.BenchmarkHeartbeats(b, openTest(b), 100)
}
