package postgres

import (
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// BenchmarkHeartbeats100 measures heartbeats per second of a stable group of 100
// members on one catalog (pool).
func BenchmarkHeartbeats100(b *testing.B) {
	catalogtest.BenchmarkHeartbeats(b, openTest(b, catalog.Options{}), 100)
}

// BenchmarkHeartbeats100Remote is BenchmarkHeartbeats100 with the database a
// millisecond away (every round trip delayed by the test proxy), as a managed database
// in another zone is: there round trips, more than the database's own work, bound a
// heartbeat, and the group's lock is held across them.
func BenchmarkHeartbeats100Remote(b *testing.B) {
	dsn := newDatabase(b)
	proxy := newCutProxy(b, proxyTarget(b, dsn))
	proxy.setDelay(time.Millisecond)
	catalogtest.BenchmarkHeartbeats(b, openDSN(b, proxied(b, dsn, proxy.addr()), catalog.Options{}), 100)
}
