package tables_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/tables"
)

// TestKilledAndRacingWorkers: workers killed mid-commit at random points (their
// context cancelled: whatever they were doing stops where it is, files half written,
// a catalog commit with an unknown outcome), object-store writes failing at random,
// and two workers stealing one another's partitions (leases shorter than a commit)
// while records are produced — and the table ends with every offset exactly once, its
// snapshots' ranges contiguous and disjoint: no range was ever committed twice or
// skipped.
func TestKilledAndRacingWorkers(t *testing.T) {
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	// The node serves the REST catalog; the workers are this test's.
	n := nodetest.Start(t, nodetest.InDir(dir), nodetest.Mutate(func(c *node.Config) { c.TablesConfig.Location = loc }))
	createTableTopic(t, n.Broker, "crashy")
	topic, err := n.Catalog.Topic(context.Background(), "crashy")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := catalog.ParseConfig(topic.Configs)

	fs := fault.New(n.Store)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	fs.SetBefore(func(op fault.Op, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == fault.Put && rng.IntN(10) == 0 {
			return errors.New("injected put failure")
		}
		return nil
	})
	newWorker := func(holder string) *tables.Role {
		return tables.New(fs, n.Catalog, n.Reader, tables.Config{Location: loc, Holder: holder, MaxRecords: 400}, nil)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var kills, commits sync.Map
	for _, holder := range []string{"a", "b"} {
		wg.Go(func() {
			w := newWorker(holder)
			r := rand.New(rand.NewPCG(uint64(len(holder)), 7))
			for ctx.Err() == nil {
				// A kill at a random point of the pass, on a short lease the other
				// worker takes over as soon as it lapses; or, one pass in four, none,
				// on a lease long enough to finish however loaded the machine is (under
				// CI's two lanes no pass finished within the kill window and the lease,
				// and neither worker ever committed).
				limit, ttl := time.Duration(r.IntN(60))*time.Millisecond, 30*time.Millisecond
				if r.IntN(4) == 0 {
					limit, ttl = 10*time.Second, 2*time.Second
				}
				pass, cancel := context.WithTimeout(ctx, limit)
				ranges, err := w.Topic(pass, topic, cfg, ttl)
				if pass.Err() != nil {
					v, _ := kills.LoadOrStore(holder, new(int))
					*(v.(*int))++
				}
				if err == nil && len(ranges) > 0 {
					v, _ := commits.LoadOrStore(holder, new(int))
					*(v.(*int))++
				}
				cancel()
			}
		})
	}
	// Records arrive in rounds while the chaos runs, until there are enough and each
	// worker has committed some; then it stops. Produced at once, the first pass to
	// succeed could take them all and leave the other worker nothing to commit (CI
	// saw it: b never committed and the wait timed out).
	produced := map[[2]int64]want{}
	testwait.Until(t, time.Minute, "both workers to commit at least once", func() bool {
		_, a := commits.Load("a")
		_, b := commits.Load("b")
		if a && b && len(produced) >= recordCount() {
			return true
		}
		maps.Copy(produced, produce(t, n.Broker, "crashy", recordCount()/30))
		return false
	})
	stop()
	wg.Wait()
	for _, h := range []string{"a", "b"} {
		k, _ := kills.Load(h)
		c, _ := commits.Load(h)
		t.Logf("worker %s: killed %v times, committed %v times", h, deref(k), deref(c))
	}

	// A clean worker finishes the job.
	fs.SetBefore(nil)
	final := newWorker("final")
	testwait.Until(t, 2*time.Minute, "the table to catch up", func() bool {
		_, err := final.Topic(context.Background(), topic, cfg, 10*time.Second)
		if err != nil {
			t.Logf("final worker: %v", err)
		}
		st, err := n.Catalog.TableState(context.Background(), topic.ID)
		if err != nil {
			return false
		}
		parts, err := n.Catalog.Partitions(context.Background(), topic.ID)
		if err != nil {
			return false
		}
		for _, p := range parts {
			if st.NextOffset(p.Partition) != p.HighWatermark {
				return false
			}
		}
		return true
	})

	tbl := waitRows(t, restCatalog(t, n, nil), "crashy", len(produced))
	checkRows(t, tbl, produced)
	checkSnapshotRanges(t, tbl)
}

func deref(v any) int {
	if p, ok := v.(*int); ok {
		return *p
	}
	return 0
}

// checkSnapshotRanges: walking the current snapshot's ancestry from the first, each
// partition's ranges follow one another from 0 with no gap and no overlap.
func checkSnapshotRanges(t *testing.T, tbl *table.Table) {
	t.Helper()
	snaps := tbl.Metadata().Snapshots()
	slices.SortFunc(snaps, func(a, b table.Snapshot) int { return int(a.SequenceNumber - b.SequenceNumber) })
	next := map[int32]int64{}
	for _, s := range snaps {
		var rs []tables.SummaryRange
		if err := json.Unmarshal([]byte(s.Summary.Properties[tables.SummaryOffsets]), &rs); err != nil {
			t.Fatalf("snapshot %d: summary %q: %v", s.SnapshotID, s.Summary.Properties[tables.SummaryOffsets], err)
		}
		for _, r := range rs {
			if r.From != next[r.Partition] || r.To <= r.From {
				t.Fatalf("snapshot %d: partition %d range [%d, %d), want it to start at %d", s.SnapshotID, r.Partition, r.From, r.To, next[r.Partition])
			}
			next[r.Partition] = r.To
		}
	}
	t.Logf("%d snapshots, partitions converted up to %v", len(snaps), next)
}
