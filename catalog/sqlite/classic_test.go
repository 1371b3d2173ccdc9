package sqlite

import (
	"testing"

	"github.com/strata-io/strata/catalog/catalogtest"
)

// BenchmarkClassic10 measures a whole rebalance of a classic group of 10 members, and
// one member's heartbeat, on one catalog.
func BenchmarkClassic10(b *testing.B) {
	catalogtest.BenchmarkClassic(b, openTest(b), 10)
}
