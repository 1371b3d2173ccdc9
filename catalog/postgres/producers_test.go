package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestProducers runs the producer and transaction suite on one database; the expiry
// test, whose short expiry would forget every other test's producers, gets its own.
func TestProducers(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	catalogtest.RunProducers(t, func(t *testing.T, opts catalog.Options) catalogtest.ProducerCatalog {
		if opts.ProducerExpiry != 0 {
			return openTest(t, opts)
		}
		return openDSN(t, dsn, opts)
	})
}
