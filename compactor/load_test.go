package compactor

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// TestLoad is the 1 GiB figure, run only when STRATA_COMPACTOR_LOAD is set (to
// a size in MiB, or 1 for 1 GiB) because it takes minutes: load a topic through the
// writer (Postgres + MinIO, or STRATA_COMPACTOR_LOAD_BACKEND=sqlite), read everything
// back into per-partition digests and time fetches of old data, compact until quiet,
// and do both again. It reports objects and chunk rows before and after, and fetch
// latency before and after, and fails if any record differs or the object bound does
// not hold.
func TestLoad(t *testing.T) {
	v := os.Getenv("STRATA_COMPACTOR_LOAD")
	if v == "" {
		t.Skip("set STRATA_COMPACTOR_LOAD=1 (1 GiB) or a size in MiB to run the load test")
	}
	mib, err := strconv.Atoi(v)
	if err != nil || mib < 1 {
		t.Fatalf("STRATA_COMPACTOR_LOAD=%q: want 1 or a size in MiB", v)
	}
	if mib == 1 {
		mib = 1024
	}
	backend := os.Getenv("STRATA_COMPACTOR_LOAD_BACKEND")
	if backend == "" {
		backend = "postgres"
	}
	e := newEnv(t, backend)
	const partitions = 8
	tp := e.topic("load", partitions, nil) // segment.bytes: the default 64 MiB
	cfg, _ := catalog.ParseConfig(nil)
	target := cfg.SegmentBytes

	start := time.Now()
	total := e.load(tp, int64(mib)<<20)
	t.Logf("loaded %d MiB in %s", total>>20, time.Since(start).Round(time.Second))

	report := func(when string) (objects, rows int, bytes int64) {
		all := map[string]bool{}
		for p := range tp.Partitions {
			o, r := e.objectsOf(tp.ID, p)
			objects += o
			rows += r
			bytes += e.partition(tp.ID, p).Bytes
			for _, row := range e.rows(tp.ID, p) {
				all[row.SegmentKey] = true
			}
		}
		t.Logf("%s: %d MiB in %d chunk rows; %d objects per partition summed, %d distinct objects", when, bytes>>20, rows, objects, len(all))
		return objects, rows, bytes
	}
	_, rowsBefore, _ := report("before compaction")
	start = time.Now()
	digests := e.digests(tp)
	t.Logf("read everything back in %s", time.Since(start).Round(time.Millisecond))
	coldBefore, warmBefore := e.oldFetchLatency(tp, true), e.oldFetchLatency(tp, false)

	waitSettled()
	c := e.compactor(Config{})
	start = time.Now()
	passes := e.passUntilQuiet(c)
	t.Logf("compacted in %d passes, %s: %v merges, %.0f MiB rewritten, %.0f MiB written",
		passes, time.Since(start).Round(time.Second), testutil.ToFloat64(c.m.merges),
		testutil.ToFloat64(c.m.bytesRewritten)/(1<<20), testutil.ToFloat64(c.m.bytesWritten)/(1<<20))
	_, rowsAfter, _ := report("after compaction")

	after := e.digests(tp)
	for p := range digests {
		if digests[p] != after[p] {
			t.Errorf("partition %d reads back differently after compaction", p)
		}
	}
	for p := range tp.Partitions {
		info := e.partition(tp.ID, p)
		o, _ := e.objectsOf(tp.ID, p)
		if bound := int((info.Bytes+target-1)/target) + 1; o > bound {
			t.Errorf("partition %d: %d objects for %d bytes, want at most %d", p, o, info.Bytes, bound)
		}
	}
	if rowsAfter >= rowsBefore {
		t.Errorf("chunk rows %d -> %d: want fewer", rowsBefore, rowsAfter)
	}
	coldAfter, warmAfter := e.oldFetchLatency(tp, true), e.oldFetchLatency(tp, false)
	t.Logf("fetch of old data, 100 records at a random offset, a new reader each (cold caches): before p50 %s p90 %s p99 %s; after p50 %s p90 %s p99 %s",
		coldBefore[0], coldBefore[1], coldBefore[2], coldAfter[0], coldAfter[1], coldAfter[2])
	t.Logf("fetch of old data, 100 records at a random offset, one reader (footers cached, data blocks mostly not): before p50 %s p90 %s p99 %s; after p50 %s p90 %s p99 %s",
		warmBefore[0], warmBefore[1], warmBefore[2], warmAfter[0], warmAfter[1], warmAfter[2])
}

// load produces about size bytes of 1 KiB records into the topic from 16 producers.
func (e *env) load(tp catalog.Topic, size int64) int64 {
	e.t.Helper()
	var (
		sent atomic.Int64
		wg   sync.WaitGroup
		bad  atomic.Pointer[error]
	)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := mrand.New(mrand.NewPCG(uint64(w), 7))
			for sent.Load() < size && bad.Load() == nil {
				req := writer.Request{}
				part := int32(rnd.IntN(int(tp.Partitions)))
				n := int64(0)
				for range 64 {
					v := make([]byte, 1024)
					for i := 0; i < len(v); i += 8 {
						binary.LittleEndian.PutUint64(v[i:], rnd.Uint64())
					}
					req.Records = append(req.Records, writer.Record{TopicID: tp.ID, Partitions: tp.Partitions, Partition: part,
						Record: recordOf(fmt.Appendf(nil, "k%d", rnd.IntN(100000)), v, time.Now().UnixMilli())})
					n += int64(len(v))
				}
				for {
					_, err := e.w.Produce(e.ctx, req)
					if err == nil {
						break
					}
					if errorsIsRetryable(err) {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					bad.Store(&err)
					return
				}
				sent.Add(n)
			}
		}()
	}
	wg.Wait()
	if err := bad.Load(); err != nil {
		e.t.Fatalf("produce: %v", *err)
	}
	return sent.Load()
}

// digests reads every partition from its log start and hashes every record's offset,
// key, value, headers and timestamp.
func (e *env) digests(tp catalog.Topic) map[int32][32]byte {
	e.t.Helper()
	out := map[int32][32]byte{}
	for p := range tp.Partitions {
		h := sha256.New()
		off := e.partition(tp.ID, p).LogStartOffset
		for {
			res, err := e.r.Fetch(e.ctx, reader.Fetch{TopicID: tp.ID, Partition: p, Offset: off, MaxRecords: 10000, MaxBytes: 16 << 20})
			if err != nil {
				e.t.Fatal(err)
			}
			var b []byte
			field := func(v []byte) {
				b = binary.AppendVarint(b, int64(len(v))-boolInt(v == nil))
				b = append(b, v...)
			}
			for _, r := range res.Records {
				b = binary.AppendVarint(b[:0], r.Offset)
				b = binary.AppendVarint(b, r.Timestamp)
				field(r.Key)
				field(r.Value)
				b = binary.AppendVarint(b, int64(len(r.Headers)))
				for _, hd := range r.Headers {
					field([]byte(hd.Key))
					field(hd.Value)
				}
				h.Write(b)
			}
			if res.NextOffset >= res.HighWatermark {
				break
			}
			off = res.NextOffset
		}
		var d [32]byte
		copy(d[:], h.Sum(nil))
		out[p] = d
	}
	return out
}

// oldFetchLatency times 200 fetches of 100 records at random offsets of the oldest half
// of the data: each through a fresh reader when cold (every fetch goes to the store,
// footers included), else through one reader with a 64 MiB cache. It returns p50, p90
// and p99.
func (e *env) oldFetchLatency(tp catalog.Topic, cold bool) [3]time.Duration {
	e.t.Helper()
	rnd := mrand.New(mrand.NewPCG(1, 2))
	var lat []time.Duration
	shared := reader.New(e.store, e.cat, reader.Config{CacheBytes: 64 << 20, BlockSize: 1 << 20}, nil, nil)
	for range 200 {
		p := int32(rnd.IntN(int(tp.Partitions)))
		info := e.partition(tp.ID, p)
		off := info.LogStartOffset + rnd.Int64N((info.HighWatermark-info.LogStartOffset)/2)
		r := shared
		if cold {
			r = reader.New(e.store, e.cat, reader.Config{CacheBytes: 64 << 20, BlockSize: 1 << 20}, nil, nil)
		}
		start := time.Now()
		res, err := r.Fetch(context.Background(), reader.Fetch{TopicID: tp.ID, Partition: p, Offset: off, MaxRecords: 100})
		lat = append(lat, time.Since(start))
		if err != nil || len(res.Records) == 0 || res.Records[0].Offset != off {
			e.t.Fatalf("fetch at %d: %d records, %v", off, len(res.Records), err)
		}
	}
	slices.Sort(lat)
	return [3]time.Duration{lat[len(lat)/2].Round(10 * time.Microsecond), lat[len(lat)*9/10].Round(10 * time.Microsecond), lat[len(lat)*99/100].Round(10 * time.Microsecond)}
}

func recordOf(key, value []byte, ts int64) segment.Record {
	return segment.Record{Key: key, Value: value, Timestamp: ts}
}

// errorsIsRetryable: back-pressure, to wait out.
func errorsIsRetryable(err error) bool { return errors.Is(err, writer.ErrBufferFull) }

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
