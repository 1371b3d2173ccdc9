package compactor

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore/fault"
)

// lossyCatalog applies swaps but loses the answer of the next ones on cue, as a
// connection lost after COMMIT.
type lossyCatalog struct {
	compactionCatalog
	lose atomic.Int32
}

var errLost = errors.New("connection lost after commit")

func (c *lossyCatalog) SwapChunks(ctx context.Context, s catalog.Swap) error {
	err := c.compactionCatalog.SwapChunks(ctx, s)
	if err == nil && c.lose.Add(-1) >= 0 {
		return errLost
	}
	return err
}

// The compactor under store and catalog failures: nothing is lost or served wrong, a
// failed step changes nothing or is finished by a later pass, an object is deleted
// only when nothing refers to it, and a row goes only once the store confirmed its
// object gone.
func TestFaults(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("faults", 2, nil)
		produced := e.produce(tp, newGen(13, 100, time.Now().UnixMilli()), 1500)
		want := byPartition(produced)
		rows := func() [][]catalog.CompactionChunk {
			return [][]catalog.CompactionChunk{e.rows(tp.ID, 0), e.rows(tp.ID, 1)}
		}
		sameRows := func(a, b [][]catalog.CompactionChunk) bool {
			for i := range a {
				if !slices.EqualFunc(a[i], b[i], func(x, y catalog.CompactionChunk) bool { return catalog.SameChunk(x.Chunk, y.Chunk) }) {
					return false
				}
			}
			return true
		}
		check := func() {
			t.Helper()
			for p := range tp.Partitions {
				e.checkPartition(tp.ID, p, want[p])
			}
		}
		waitSettled()
		fs := fault.New(e.store)
		lossy := &lossyCatalog{compactionCatalog: e.cat}
		// c deletes nothing (a long grace period) until the deletion step, which d runs.
		c := New(fs, lossy, Config{TargetBytes: 1 << 20, GracePeriod: time.Hour, SweepInterval: time.Millisecond}, nil, nil)
		d := New(fs, lossy, Config{TargetBytes: 1 << 20, GracePeriod: time.Second, SweepInterval: time.Millisecond}, nil, nil)
		before := rows()

		// Uploads fail: the pass reports it and nothing changes.
		fs.FailAlways(fault.Put, nil)
		if err := c.Pass(e.ctx); err == nil {
			t.Fatal("a pass whose uploads all failed reported no error")
		}
		if !sameRows(before, rows()) {
			t.Fatal("rows changed though no merged object could be stored")
		}
		// Reads come back corrupt: nothing is rewritten from them.
		fs.ClearAll()
		fs.Inject(fault.GetRange, fault.Fault{FlipBit: true})
		if err := c.Pass(e.ctx); err == nil {
			t.Fatal("a pass reading corrupt chunks reported no error")
		}
		if !sameRows(before, rows()) {
			t.Fatal("rows changed though every chunk read was corrupt")
		}
		fs.ClearAll()
		check()

		// An upload whose answer is lost: the object is there, the compactor cannot
		// know it, and leaves it to the sweep.
		fs.LoseNext(fault.Put, 1)
		if err := c.Pass(e.ctx); err == nil {
			t.Fatal("a lost upload answer went unreported")
		}
		fs.ClearAll()
		// A swap whose answer is lost: it landed, so its object must not be deleted.
		lossy.lose.Store(1)
		if err := c.Pass(e.ctx); err == nil {
			t.Fatal("a lost swap answer went unreported")
		}
		check()
		for range 10 {
			if err := c.Pass(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		check()

		// Deletes fail: rows stay 'deleting' until the store confirms.
		time.Sleep(1100 * time.Millisecond)
		fs.FailAlways(fault.Delete, nil)
		deleting := 0
		if err := d.Pass(e.ctx); err == nil {
			t.Fatal("failed deletes went unreported")
		}
		keys := keysOf(e.storeKeys())
		states, err := e.cat.SegmentStates(e.ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if s == catalog.SegmentDeleting {
				deleting++
			}
		}
		if deleting == 0 {
			t.Fatal("no object waits for deletion after failed deletes")
		}
		if n := testutil.ToFloat64(d.m.objectsDeleted); n != 0 {
			t.Fatalf("%v objects counted deleted while every delete failed", n)
		}
		fs.ClearAll()

		// Everything settles: the orphan of the lost upload is swept once old enough,
		// the old objects deleted, and exactly the referenced objects remain.
		waitSettled()
		for range 3 {
			if err := d.Pass(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		check()
		live := map[string]bool{}
		for p := range tp.Partitions {
			for _, r := range e.rows(tp.ID, p) {
				live[r.SegmentKey] = true
			}
		}
		store := e.storeKeys()
		for k := range store {
			if !live[k] {
				t.Errorf("object %s left without a row", k)
			}
		}
		for k := range live {
			if !store[k] {
				t.Errorf("object %s referred to but gone", k)
			}
		}
		if n := testutil.ToFloat64(c.m.orphansSwept) + testutil.ToFloat64(d.m.orphansSwept); n < 1 {
			t.Errorf("orphans swept %v, want the lost upload's object", n)
		}
	})
}
