package compactor

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two compactors at once divide the work through their leases: no error, no swap
// conflict, nothing lost, and the same end state one compactor reaches — every record
// intact, objects per partition within the bound, and exactly the referenced objects
// left in the store.
func TestTwoCompactors(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		const target = 128 << 10
		tp := e.topic("two", 4, nil)
		doomed := e.topic("two-doomed", 2, nil)
		g := newGen(11, 300, time.Now().Add(-time.Hour).UnixMilli())
		produced := e.produce(tp, g, 4000)
		e.produce(doomed, newGen(12, 10, time.Now().UnixMilli()), 500)
		if err := e.cat.DeleteTopic(e.ctx, doomed.Name); err != nil {
			t.Fatal(err)
		}
		want := byPartition(produced)
		waitSettled()

		a := e.compactor(Config{TargetBytes: target, Holder: "a"})
		b := e.compactor(Config{TargetBytes: target, Holder: "b"})
		var wg sync.WaitGroup
		for _, c := range []*Compactor{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 6 {
					if err := c.Pass(e.ctx); err != nil {
						t.Errorf("%s: %v", c.cfg.Holder, err)
					}
					time.Sleep(300 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		// The grace period has passed for everything marked during the passes.
		time.Sleep(testGracePeriod + 100*time.Millisecond)
		if err := a.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*Compactor{a, b} {
			if n := testutil.ToFloat64(c.m.conflicts); n != 0 {
				t.Errorf("%s: %v swap conflicts: leases should keep compactors apart", c.cfg.Holder, n)
			}
		}
		ma, mb := testutil.ToFloat64(a.m.merges), testutil.ToFloat64(b.m.merges)
		t.Logf("merges: a %v, b %v", ma, mb)
		if ma+mb == 0 {
			t.Fatal("nothing merged")
		}

		live := map[string]bool{}
		for p := range tp.Partitions {
			e.checkPartition(tp.ID, p, want[p])
			info := e.partition(tp.ID, p)
			o, _ := e.objectsOf(tp.ID, p)
			if bound := int((info.Bytes+target-1)/target) + 1; o > bound {
				t.Errorf("partition %d: %d objects, want at most %d", p, o, bound)
			}
			for _, r := range e.rows(tp.ID, p) {
				live[r.SegmentKey] = true
			}
		}
		for p := range doomed.Partitions {
			if rows := e.rows(doomed.ID, p); len(rows) != 0 {
				t.Errorf("deleted topic partition %d: %d rows left", p, len(rows))
			}
		}
		keys := e.storeKeys()
		for k := range keys {
			if !live[k] {
				t.Errorf("object %s left in the store without a row", k)
			}
		}
		for k := range live {
			if !keys[k] {
				t.Errorf("object %s referred to but deleted", k)
			}
		}
	})
}
