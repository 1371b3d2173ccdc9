package compactor

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/segment"
)

// flushObject encodes a one-batch flush for topic/partition as the writer would, and
// the Segment its commit would carry.
func flushObject(t testing.TB, tp catalog.Topic, key string, n int) ([]byte, catalog.Segment) {
	t.Helper()
	b := segment.Batch{TopicID: tp.ID, Partition: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	for i := range n {
		b.Records = append(b.Records, segment.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v"), Timestamp: time.Now().UnixMilli()})
	}
	obj, infos, err := segment.Encode([]segment.Batch{b}, segment.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bi := infos[0]
	return obj, catalog.Segment{Key: key, Size: int64(len(obj)), Requests: []catalog.Request{{Batches: []catalog.Batch{{
		TopicID: tp.ID, Partition: 0, Pos: bi.Pos, Len: bi.Len, Records: bi.Records, MaxTimestamp: bi.MaxTimestamp, BaseSequence: -1,
	}}}}}
}

func (e *env) exists(key string) bool {
	e.t.Helper()
	_, err := e.store.GetRange(e.ctx, key, 0, 1)
	if errors.Is(err, objstore.ErrNotExist) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

// A writer that dies between its PUT and its commit leaves an object no row refers to;
// so does one whose commit was fenced by Settle. Once older than the orphan horizon
// both are swept and leave no row; younger ones and committed ones are not touched.
func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("orphans", 1, nil)
		now, err := e.cat.Now(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		killed := segment.NewKey(now)
		obj, _ := flushObject(t, tp, killed, 3)
		if err := e.store.Put(e.ctx, killed, obj); err != nil {
			t.Fatal(err)
		}
		fenced := segment.NewKey(now)
		obj, seg := flushObject(t, tp, fenced, 3)
		if err := e.store.Put(e.ctx, fenced, obj); err != nil {
			t.Fatal(err)
		}
		if _, err := e.cat.Settle(e.ctx, seg); !errors.Is(err, catalog.ErrCommitAborted) {
			t.Fatalf("settle of a flush never committed: %v, want ErrCommitAborted", err)
		}
		committed := e.produce(tp, newGen(9, 10, now.UnixMilli()), 100)
		// Strata objects under another prefix — a table topic's Iceberg data and metadata
		// files (tables/), which no segment row names — and a foreign one under segments/:
		// never touched.
		others := []string{"segments/not-a-segment-key", "tables/orders-1/data/00000-0.parquet", "tables/orders-1/metadata/00001.metadata.json"}
		for _, k := range others {
			if err := e.store.Put(e.ctx, k, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}

		c := e.compactor(Config{})
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		if !e.exists(killed) || !e.exists(fenced) {
			t.Fatal("an object younger than the orphan horizon was swept")
		}
		waitSettled()
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		if e.exists(killed) || e.exists(fenced) {
			t.Fatalf("orphans not swept: killed %v, fenced %v", e.exists(killed), e.exists(fenced))
		}
		states, err := e.cat.SegmentStates(e.ctx, []string{killed, fenced})
		if err != nil {
			t.Fatal(err)
		}
		if len(states) != 0 {
			t.Fatalf("rows left after the sweep: %v", states)
		}
		for _, k := range others {
			if !e.exists(k) {
				t.Fatalf("the sweep deleted %s, which is not a segment", k)
			}
		}
		e.checkPartition(tp.ID, 0, committed)
		for _, r := range e.rows(tp.ID, 0) {
			if !e.exists(r.SegmentKey) {
				t.Fatalf("committed object %s was swept", r.SegmentKey)
			}
		}
		// A late commit of the swept key is refused.
		if _, err := e.cat.Commit(e.ctx, seg); !errors.Is(err, catalog.ErrCommitTooLate) && !errors.Is(err, catalog.ErrCommitAborted) {
			t.Fatalf("commit of a swept key: %v, want a refusal", err)
		}
	})
}

// Commits racing the sweep, with key times on both sides of the horizons: every key
// ends either committed with its object kept, or not committed with its object swept
// (or, too young for the sweep, still there) — never committed with its object gone.
func TestCommitRacesSweep(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("race", 1, nil)
		now, err := e.cat.Now(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		const n = 40
		segs := make([]catalog.Segment, n)
		for i := range n {
			// Key times from 3 commit timeouts ago to now.
			age := time.Duration(n-1-i) * 3 * testCommitTimeout / (n - 1)
			key := segment.NewKey(now.Add(-age))
			obj, seg := flushObject(t, tp, key, 1)
			if err := e.store.Put(e.ctx, key, obj); err != nil {
				t.Fatal(err)
			}
			segs[i] = seg
		}
		c := e.compactor(Config{})
		var wg sync.WaitGroup
		committed := make([]bool, n)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 6 {
				if err := c.Pass(e.ctx); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i, seg := range segs {
				res, err := e.cat.Commit(e.ctx, seg)
				switch {
				case err == nil:
					committed[i] = res[0].Err == nil
				case errors.Is(err, catalog.ErrCommitTooLate), errors.Is(err, catalog.ErrCommitAborted):
				default:
					t.Errorf("commit %d: %v", i, err)
				}
			}
		}()
		wg.Wait()
		// Then the sweep finishes its work on what is left.
		waitSettled()
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, n)
		for i, s := range segs {
			keys[i] = s.Key
		}
		states, err := e.cat.SegmentStates(e.ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		var kept, swept int
		for i, s := range segs {
			// A committed object may have been merged since: its row is then
			// 'deleting', and the object stays for the grace period.
			st := states[s.Key]
			live := st == catalog.SegmentLive || st == catalog.SegmentDeleting
			there := e.exists(s.Key)
			switch {
			case committed[i] && (!live || !there):
				t.Errorf("key %d committed, but row %q, object there %v", i, st, there)
			case !committed[i] && live:
				t.Errorf("key %d: commit refused, but its row is %q", i, st)
			case !committed[i] && there:
				t.Errorf("key %d: never committed and older than the horizon by now, but not swept", i)
			case committed[i]:
				kept++
			default:
				swept++
			}
		}
		if got := e.readAll(tp.ID, 0); len(got) != kept {
			t.Errorf("read %d records back, want the %d committed", len(got), kept)
		}
		if kept == 0 || swept == 0 {
			// Timing decides the mix; on a loaded machine every commit may lose. The
			// verdict above (never both, never neither) is what must hold.
			t.Logf("%d kept, %d swept: this run exercised one side of the race only", kept, swept)
		}
		t.Logf("%d committed and kept, %d refused and swept", kept, swept)
	})
}
