package compactor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
)

// Merging rewrites many small multi-partition chunks into per-partition objects near the
// target size: every offset reads back identical, fetches running meanwhile never fail
// or return wrong data, objects per partition end within ceil(bytes/target)+1, chunk
// rows shrink, and the old objects are deleted once the grace period has passed.
func TestMerge(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, e *env) {
		const target = 128 << 10
		tp := e.topic("merge", 3, nil)
		g := newGen(1, 500, time.Now().Add(-time.Hour).UnixMilli())
		g.nullKeys, g.tombstones = true, true
		produced := e.produce(tp, g, 3000)
		want := byPartition(produced)

		type count struct{ objects, rows int }
		before := map[int32]count{}
		for p := range tp.Partitions {
			o, r := e.objectsOf(tp.ID, p)
			before[p] = count{o, r}
			e.checkPartition(tp.ID, p, want[p])
		}
		keysBefore := e.storeKeys()
		waitSettled()

		// Fetchers compare random ranges with what was produced, all along.
		ctx, stop := context.WithCancel(e.ctx)
		var (
			wg      sync.WaitGroup
			fetches atomic.Int64
			failure atomic.Pointer[string]
		)
		fail := func(s string) { failure.CompareAndSwap(nil, &s) }
		for f := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					p := int32((f + i) % int(tp.Partitions))
					ws := want[p]
					from := ws[(i*7919)%len(ws)].offset
					res, err := e.r.Fetch(ctx, reader.Fetch{TopicID: tp.ID, Partition: p, Offset: from, MaxRecords: 300})
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						fail(err.Error())
						return
					}
					for j, got := range res.Records {
						k := int(got.Offset - ws[0].offset)
						if k < 0 || k >= len(ws) || j > 0 && got.Offset != res.Records[j-1].Offset+1 {
							fail("unexpected offset")
							return
						}
						if err := sameRecord(got, ws[k]); err != nil {
							fail(err.Error())
							return
						}
					}
					fetches.Add(1)
				}
			}()
		}

		c := e.compactor(Config{TargetBytes: target})
		passes := e.passUntilQuiet(c)
		// Past the grace period, the deletion job removes the old objects while the
		// fetchers still run.
		time.Sleep(testGracePeriod + 200*time.Millisecond)
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		stop()
		wg.Wait()
		if f := failure.Load(); f != nil {
			t.Fatalf("a fetch during compaction failed: %s", *f)
		}
		if fetches.Load() == 0 {
			t.Fatal("no fetch ran during compaction")
		}

		live := map[string]bool{}
		for p := range tp.Partitions {
			e.checkPartition(tp.ID, p, want[p])
			info := e.partition(tp.ID, p)
			o, r := e.objectsOf(tp.ID, p)
			bound := int((info.Bytes+target-1)/target) + 1
			t.Logf("partition %d: %d bytes; objects %d -> %d (bound %d), rows %d -> %d",
				p, info.Bytes, before[p].objects, o, bound, before[p].rows, r)
			if o > bound {
				t.Errorf("partition %d: %d objects, want at most %d", p, o, bound)
			}
			if r >= before[p].rows {
				t.Errorf("partition %d: %d chunk rows, had %d: they should shrink", p, r, before[p].rows)
			}
			var sum int64
			rows := e.rows(tp.ID, p)
			for i, row := range rows {
				sum += row.Len
				live[row.SegmentKey] = true
				// A run of one small row is not worth a rewrite: only the last row may
				// be left in a writer object.
				if !row.RealOffsets && i != len(rows)-1 {
					t.Errorf("partition %d: row [%d, %d] still in writer object %s", p, row.BaseOffset, row.LastOffset, row.SegmentKey)
				}
			}
			if sum != info.Bytes {
				t.Errorf("partition %d: rows hold %d bytes, the partition says %d", p, sum, info.Bytes)
			}
		}
		// Exactly the objects rows refer to are left: the old ones went after the grace
		// period, the merged ones stay.
		after := e.storeKeys()
		for k := range after {
			if !live[k] {
				t.Errorf("object %s is left with no row referring to it", k)
			}
		}
		for k := range live {
			if !after[k] {
				t.Errorf("object %s is referred to but gone", k)
			}
		}
		t.Logf("%d passes, %d fetches during compaction; objects in store %d -> %d; merges %v, bytes rewritten %v",
			passes, fetches.Load(), len(keysBefore), len(after), testutil.ToFloat64(c.m.merges), testutil.ToFloat64(c.m.bytesRewritten))
		var gone int
		for k := range keysBefore {
			if !after[k] {
				gone++
			}
		}
		if n := testutil.ToFloat64(c.m.objectsDeleted); int(n) != gone || gone == 0 {
			t.Errorf("deleted %v objects, %d writer objects are gone", n, gone)
		}

		// Quiescent: another pass changes nothing.
		merges := testutil.ToFloat64(c.m.merges)
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(c.m.merges); got != merges {
			t.Errorf("a pass over a compacted topic merged again (%v -> %v)", merges, got)
		}
		_ = catalog.NoTimestamp
	})
}
