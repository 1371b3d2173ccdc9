package sqlite

import (
	"testing"

	"github.com/strata-io/strata/catalog/catalogtest"
)

// BenchmarkCommitIdempotence: commits of 8 requests × 8 partitions, plain and
// idempotent, in one run (catalogtest.BenchmarkCommitIdempotence).
func BenchmarkCommitIdempotence(b *testing.B) {
	catalogtest.BenchmarkCommitIdempotence(b, openTest(b))
}
