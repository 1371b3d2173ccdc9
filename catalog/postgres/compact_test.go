package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestCompaction runs the compaction conformance suite; each subtest has a database of
// its own, since the suite leases partitions across the whole catalog.
func TestCompaction(t *testing.T) {
	t.Parallel()
	catalogtest.RunCompaction(t, func(t *testing.T) catalogtest.CompactionCatalog {
		return openDSN(t, newDatabase(t), catalog.Options{CommitTimeout: catalogtest.CompactionCommitTimeout})
	})
}
