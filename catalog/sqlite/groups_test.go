package sqlite

import (
	"testing"

	"github.com/strata-io/strata/catalog/catalogtest"
)

// BenchmarkHeartbeats100 measures heartbeats per second of a stable group of 100
// members on one catalog.
func BenchmarkHeartbeats100(b *testing.B) {
	catalogtest.BenchmarkHeartbeats(b, openTest(b), 100)
}
