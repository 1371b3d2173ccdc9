package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// BenchmarkClassic10 measures a whole rebalance of a classic group of 10 members, and
// one member's heartbeat, on one catalog (pool).
func BenchmarkClassic10(b *testing.B) {
	catalogtest.BenchmarkClassic(b, openTest(b, catalog.Options{}), 10)
}
