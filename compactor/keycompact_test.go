package compactor

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/segment"
)

// latestPerKey is, per partition, the latest record of every key (tombstones
// included), in offset order: what key compaction must leave.
func latestPerKey(recs []rec, dropTombstones bool) map[int32][]rec {
	type pk struct {
		p   int32
		key string
	}
	latest := map[pk]rec{}
	for _, r := range recs {
		latest[pk{r.partition, string(r.Key)}] = r // recs are in offset order per partition
	}
	keep := map[int32]map[int64]bool{}
	for k, r := range latest {
		if dropTombstones && r.Value == nil {
			continue
		}
		if keep[k.p] == nil {
			keep[k.p] = map[int64]bool{}
		}
		keep[k.p][r.offset] = true
	}
	out := map[int32][]rec{}
	for _, r := range recs {
		if keep[r.partition][r.offset] {
			out[r.partition] = append(out[r.partition], r)
		}
	}
	return out
}

// A compacted topic ends with the latest value per key at its original offset;
// tombstones stay for delete.retention.ms and then go. STRATA_COMPACTOR_FULL=1 runs
// the full size (100,000 records over 1,000 keys).
func TestKeyCompaction(t *testing.T) {
	t.Parallel()
	records, keys, deleteRetention := 20000, 200, 20*time.Second
	if os.Getenv("STRATA_COMPACTOR_FULL") != "" {
		records, keys, deleteRetention = 100000, 1000, 60*time.Second
	}
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("compacted", 2, map[string]string{
			"cleanup.policy":      "compact",
			"delete.retention.ms": fmt.Sprint(deleteRetention.Milliseconds()),
		})
		start := time.Now()
		g := newGen(10, keys, start.Add(-time.Duration(records+keys)*time.Millisecond).UnixMilli())
		for i := range records {
			g.queue = append(g.queue, segment.Record{Key: fmt.Appendf(nil, "key-%05d", i%keys), Value: fmt.Appendf(nil, "value %d of key %d", i, i%keys)})
		}
		// A tenth of the keys deleted, then more values for other keys so that no
		// partition ends in a tombstone.
		for k := range keys / 10 {
			g.queue = append(g.queue, segment.Record{Key: fmt.Appendf(nil, "key-%05d", k)})
		}
		for k := keys / 2; k < keys; k++ {
			g.queue = append(g.queue, segment.Record{Key: fmt.Appendf(nil, "key-%05d", k), Value: []byte("last")})
		}
		produced := e.produce(tp, g, len(g.queue))
		var bytesBefore int64
		rowsBefore := 0
		for p := range tp.Partitions {
			bytesBefore += e.partition(tp.ID, p).Bytes
			rowsBefore += len(e.rows(tp.ID, p))
		}

		c := e.compactor(Config{TargetBytes: 256 << 10})
		waitSettled()
		e.passUntilQuiet(c)
		if time.Since(start) > deleteRetention {
			t.Skip("too slow to observe tombstones before delete.retention.ms")
		}
		want := latestPerKey(produced, false)
		var bytesAfter int64
		rowsAfter := 0
		for p := range tp.Partitions {
			e.checkPartition(tp.ID, p, want[p])
			bytesAfter += e.partition(tp.ID, p).Bytes
			rowsAfter += len(e.rows(tp.ID, p))
		}
		t.Logf("%d records over %d keys: %d bytes in %d rows -> %d bytes in %d rows; %v records removed",
			len(produced), keys, bytesBefore, rowsBefore, bytesAfter, rowsAfter, testutil.ToFloat64(c.m.recordsRemoved))

		// Past delete.retention.ms the tombstones go, with nothing new written.
		time.Sleep(time.Until(start.Add(deleteRetention + 500*time.Millisecond)))
		e.passUntilQuiet(c)
		want = latestPerKey(produced, true)
		for p := range tp.Partitions {
			e.checkPartition(tp.ID, p, want[p])
		}
		// Fetches from inside a removed range land on the next survivor.
		for p := range tp.Partitions {
			got, err := e.tryReadAll(tp.ID, p, want[p][0].offset+1)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want[p])-1 {
				t.Fatalf("partition %d from offset %d: %d records, want %d", p, want[p][0].offset+1, len(got), len(want[p])-1)
			}
		}
	})
}
