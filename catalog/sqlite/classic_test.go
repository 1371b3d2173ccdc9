package sqlite

import (
	"testing"

	"github.com/strata-io/strata/catalog/catalogtest"
)

func TestClassic(t *testing.T) {
	open := openShared()
	catalogtest.RunClassic(t, func(t *testing.T) catalogtest.ClassicCatalog { return open(t).(*Catalog) })
}

// BenchmarkClassic10 measures a whole rebalance of a classic group of 10 members, and
// one member's heartbeat, on one catalog.
func BenchmarkClassic10(b *testing.B) {
	catalogtest.BenchmarkClassic(b, openTest(b), 10)
}
