package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

func TestCompaction(t *testing.T) {
	catalogtest.RunCompaction(t, func(t *testing.T) catalogtest.CompactionCatalog {
		c, err := Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{CommitTimeout: catalogtest.CompactionCommitTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}
