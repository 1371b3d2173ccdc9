package catalogtest

import (
	"testing"

	"github.com/strata-io/strata/catalog"
)

// Store says what a subtest's catalogs may be opened on.
type Store int

const (
	// Shared: a store other subtests may use too; the suite names its rows uniquely
	// and assumes nothing about anyone else's.
	Shared Store = iota
	// Fresh: a store no other subtest uses (the suite counts rows whole, leases
	// across the catalog, or counts ids from the start).
	Fresh
)

// Open opens a whole backend for subtest t with opts and arranges its Close with
// t.Cleanup. Every call within one subtest answers a catalog on the same store, as
// several nodes on one database would have; s says whether that store may be shared
// with other subtests.
type Open func(t *testing.T, s Store, opts catalog.Options) catalog.Backend

// Run runs every conformance suite on the backend open opens, each as a parallel
// subtest named after what it proves, with DefaultOptions, or ShortOptions under -short.
// open is called from several goroutines at once. It is the one
// entry point a backend calls: a new suite is listed here and so runs on both.
func Run(t *testing.T, open Open) {
	o := DefaultOptions()
	if testing.Short() {
		o = ShortOptions()
	}
	shared := func(t *testing.T) catalog.Backend { return open(t, Shared, catalog.Options{}) }
	fresh := func(t *testing.T) catalog.Backend { return open(t, Fresh, catalog.Options{}) }
	for _, s := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"catalog", func(t *testing.T) {
			runCatalog(t, func(t *testing.T) catalog.Catalog { return shared(t) }, o)
		}},
		{"groups", func(t *testing.T) {
			runGroups(t, func(t *testing.T) GroupCatalog { return shared(t) })
		}},
		{"classic", func(t *testing.T) {
			runClassic(t, func(t *testing.T) ClassicCatalog { return shared(t) })
		}},
		{"producers", func(t *testing.T) {
			runProducers(t, func(t *testing.T, opts catalog.Options) ProducerCatalog {
				if opts.ProducerExpiry != 0 {
					// The expiry sweep reaps every idle producer in the store.
					return open(t, Fresh, opts)
				}
				return open(t, Shared, opts)
			})
		}},
		{"transactions", func(t *testing.T) {
			runTransactions(t, func(t *testing.T) TxnCatalog { return shared(t) })
		}},
		{"compaction", func(t *testing.T) {
			runCompaction(t, func(t *testing.T) CompactionCatalog {
				return open(t, Fresh, catalog.Options{CommitTimeout: CompactionCommitTimeout})
			})
		}},
		{"cluster", func(t *testing.T) {
			runCluster(t, func(t *testing.T) ClusterCatalog { return fresh(t) })
		}},
		{"connect", func(t *testing.T) {
			runConnect(t, func(t *testing.T) ConnectCatalog { return fresh(t) })
		}},
		{"security", func(t *testing.T) { runSecurity(t, fresh) }},
		{"scram", func(t *testing.T) { runScram(t, fresh) }},
		{"registry", func(t *testing.T) { runRegistry(t, fresh) }},
		{"share_groups", func(t *testing.T) {
			runShareGroups(t, func(t *testing.T) ShareCatalog { return shared(t) })
		}},
		{"quotas", func(t *testing.T) { runQuotas(t, fresh) }},
		{"tables", func(t *testing.T) { runTables(t, fresh) }},
		{"usage", func(t *testing.T) { runUsage(t, fresh) }},
		{"push", func(t *testing.T) { runPush(t, fresh) }},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each suite on stores of its own: most of their time is waiting
			s.run(t)
		})
	}
}
