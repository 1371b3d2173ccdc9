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
// the full size (100,000 records over 1,000 keys). Nothing here depends on how
// fast the machine is: the tombstones that must stay are under an hour's
// delete.retention.ms, and those that must go are waited for.
func TestKeyCompaction(t *testing.T) {
	t.Parallel()
	records, keys := 20000, 200
	if os.Getenv("STRATA_COMPACTOR_FULL") != "" {
		records, keys = 100000, 1000
	}
	backends(t, func(t *testing.T, e *env) {
		tp := e.topic("compacted", 2, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "3600000"})
		g := compactionLoad(records, keys)
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

		// Past delete.retention.ms the tombstones go, with nothing new written: a
		// topic whose tombstones expire a second after they were written, compacted
		// until they are gone.
		short := e.topic("compacted-short", 2, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "1000"})
		g = compactionLoad(records/10, keys)
		small := e.produce(short, g, len(g.queue))
		waitSettled()
		want = latestPerKey(small, true)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			e.passUntilQuiet(c)
			left := 0
			for p := range short.Partitions {
				for _, r := range e.readAll(short.ID, p) {
					if r.Value == nil {
						left++
					}
				}
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d tombstones left two minutes after their delete.retention.ms of 1s", left)
			}
			time.Sleep(100 * time.Millisecond) // the next pass, once a tombstone is due
		}
		for p := range short.Partitions {
			e.checkPartition(short.ID, p, want[p])
		}
		// Fetches from inside a removed range land on the next survivor.
		for p := range short.Partitions {
			got, err := e.tryReadAll(short.ID, p, want[p][0].offset+1)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want[p])-1 {
				t.Fatalf("partition %d from offset %d: %d records, want %d", p, want[p][0].offset+1, len(got), len(want[p])-1)
			}
		}
	})
}

// compactionLoad is records values over keys, then a tombstone for a tenth of the
// keys, then more values for the upper half of the keys so that no partition ends in a
// tombstone.
func compactionLoad(records, keys int) *gen {
	g := newGen(10, keys, time.Now().Add(-time.Duration(records+keys)*time.Millisecond).UnixMilli())
	for i := range records {
		g.queue = append(g.queue, segment.Record{Key: fmt.Appendf(nil, "key-%05d", i%keys), Value: fmt.Appendf(nil, "value %d of key %d", i, i%keys)})
	}
	for k := range keys / 10 {
		g.queue = append(g.queue, segment.Record{Key: fmt.Appendf(nil, "key-%05d", k)})
	}
	for k := keys / 2; k < keys; k++ {
		g.queue = append(g.queue, segment.Record{Key: fmt.Appendf(nil, "key-%05d", k), Value: []byte("last")})
	}
	return g
}
