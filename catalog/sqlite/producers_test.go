package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

func TestProducers(t *testing.T) {
	catalogtest.RunProducers(t, func(t *testing.T, opts catalog.Options) catalogtest.ProducerCatalog {
		// One file per subtest; a second open in the same subtest (the concurrency
		// test) must share it, as two processes on one file would.
		path := filepath.Join(t.TempDir(), "catalog.db")
		if p, ok := producerFiles[t.Name()]; ok {
			path = p
		}
		producerFiles[t.Name()] = path
		c, err := Open(t.Context(), path, opts)
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

// producerFiles maps a subtest to its database file (subtests run one at a time).
var producerFiles = map[string]string{}
