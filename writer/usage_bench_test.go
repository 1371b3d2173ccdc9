package writer

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/usage"
)

// BenchmarkProduceUsage is the produce path with per-topic usage counting off and on
// (a usage.Recorder told per flush, as a node wires it), requests spread over 8 topics
// and 4 principals so each flush reports many (topic, principal) pairs. Compare the two
// runs' MB/cpu-s (CPU per byte produced) and ns/op: the issue asks that counting cost
// under 2% of produce throughput.
func BenchmarkProduceUsage(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("counting=%v", on), func(b *testing.B) {
			const records, size, partitions, topics, principals = 100, 1024, 4, 8, 4
			value := make([]byte, size)
			rand.Read(value[:size/2])
			reqs := make([]Request, 64)
			for k := range reqs {
				recs := make([]Record, records)
				for i := range recs {
					recs[i] = Record{TopicID: int64(1 + (k+i)%topics), Partitions: partitions, Partition: -1}
					recs[i].Key = fmt.Appendf(nil, "key-%d-%d", k, i)
					recs[i].Value = value
					recs[i].Timestamp = 1_700_000_000_000
				}
				reqs[k] = Request{Records: recs, Principal: fmt.Sprintf("User:p%d", k%principals)}
			}
			cfg := Config{Linger: 2 * time.Millisecond}
			var rec *usage.Recorder
			if on {
				rec = usage.New(nopUsageStore{}, usage.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
				cfg.Usage = func(us []TopicUsage) {
					now := time.Now()
					for _, x := range us {
						rec.Add(now, x.TopicID, x.Principal, x.Counts())
					}
				}
			}
			w := New(discardStore{}, &countingCatalog{hw: make(map[TopicPartition]int64)}, cfg, nil, nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()

			b.SetBytes(records * size)
			b.SetParallelism(16)
			b.ResetTimer()
			cpu0 := cputime.Self()
			var n sync.Mutex
			k := 0
			b.RunParallel(func(pb *testing.PB) {
				n.Lock()
				r := reqs[k%len(reqs)]
				k++
				n.Unlock()
				for pb.Next() {
					if _, err := w.Produce(context.Background(), r); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			cpu := cputime.Self() - cpu0
			cancel()
			<-done
			if cpu > 0 {
				b.ReportMetric(float64(b.N)*records*size/1e6/cpu.Seconds(), "MB/cpu-s")
			}
			if rec != nil {
				u, err := rec.TopicUsage(context.Background(), 1, time.Now().Add(-time.Hour))
				if err != nil || len(u) == 0 {
					b.Fatalf("counting on, nothing counted: %v %v", u, err)
				}
			}
		})
	}
}

type nopUsageStore struct{}

func (nopUsageStore) AddUsage(context.Context, []catalog.UsageDelta) error { return nil }
func (nopUsageStore) TopicUsage(context.Context, int64, time.Time) ([]catalog.PrincipalUsage, error) {
	return nil, nil
}
func (nopUsageStore) PruneUsage(context.Context, time.Time) (int64, error) { return 0, nil }

// BenchmarkFlushUsageCounting is the whole cost counting adds to one flush: the
// writer's per-batch attribution (reportUsage) and the recorder's adds, for a flush of
// 64 requests from 4 principals, each writing 4 partitions of each of 8 topics (2,048
// batches, 32 (topic, principal) pairs). Compare it with a flush's CPU on the produce
// path (BenchmarkProduceUsage: ns/op × requests per flush).
func BenchmarkFlushUsageCounting(b *testing.B) {
	const reqs, topics, parts, principals = 64, 8, 4, 4
	lay := layout{reqs: make([]*pending, reqs)}
	seg := catalog.Segment{Requests: make([]catalog.Request, reqs)}
	results := make([]catalog.Result, reqs)
	for k := range reqs {
		lay.reqs[k] = &pending{req: Request{Principal: fmt.Sprintf("User:p%d", k%principals)}}
		for t := range topics {
			for p := range parts {
				seg.Requests[k].Batches = append(seg.Requests[k].Batches, catalog.Batch{TopicID: int64(t + 1), Partition: int32(p), Len: 4096, Records: 4})
			}
		}
	}
	rec := usage.New(nopUsageStore{}, usage.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w := &Writer{cfg: Config{Usage: func(us []TopicUsage) {
		now := time.Now()
		for _, x := range us {
			rec.Add(now, x.TopicID, x.Principal, x.Counts())
		}
	}}}
	b.ReportAllocs()
	for b.Loop() {
		w.reportUsage(lay, seg, results, 1)
	}
}
