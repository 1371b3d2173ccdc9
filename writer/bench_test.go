package writer

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/segment"
)

// discardStore is a segmentStore that keeps nothing: the benchmark measures the
// writer's own CPU (batching, layout, encoding, answering), not storage.
type discardStore struct{}

func (discardStore) PutParts(context.Context, string, [][]byte) error { return nil }

// countingCatalog assigns offsets like the real commit, without checks.
type countingCatalog struct {
	mu sync.Mutex
	hw map[TopicPartition]int64
}

func (c *countingCatalog) Commit(_ context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := make([]catalog.Result, len(seg.Requests))
	for i, r := range seg.Requests {
		res[i].BaseOffsets = make([]int64, len(r.Batches))
		for j, b := range r.Batches {
			tp := TopicPartition{b.TopicID, b.Partition}
			res[i].BaseOffsets[j] = c.hw[tp]
			c.hw[tp] += int64(b.Records)
		}
	}
	return res, nil
}

func (c *countingCatalog) Settle(context.Context, catalog.Segment) ([]catalog.Result, error) {
	return nil, catalog.ErrCommitAborted
}

// BenchmarkProduce produces requests of 500 records of 1 KiB each (keyed, spread over 16
// partitions) from many concurrent producers. MB/s is record bytes through the writer
// per wall-clock second; MB/cpu-s per second of CPU, the writer's own cost (layout,
// segment encoding, answering), which holds on a shared machine.
func BenchmarkProduce(b *testing.B) {
	for _, comp := range []segment.Compression{segment.CompressionNone, segment.CompressionLZ4, segment.CompressionZstd} {
		b.Run(fmt.Sprintf("compression=%d", comp), func(b *testing.B) {
			const records, size, partitions = 500, 1024, 16
			value := make([]byte, size)
			rand.Read(value[:size/2]) // half random, half zeros: compressible like JSON
			reqs := make([]Request, 64)
			for k := range reqs {
				recs := make([]Record, records)
				for i := range recs {
					recs[i] = Record{TopicID: 1, Partitions: partitions, Partition: -1}
					recs[i].Key = fmt.Appendf(nil, "key-%d-%d", k, i)
					recs[i].Value = value
					recs[i].Timestamp = 1_700_000_000_000
				}
				reqs[k] = Request{Records: recs, Compression: comp}
			}
			w := New(discardStore{}, &countingCatalog{hw: make(map[TopicPartition]int64)},
				Config{Linger: 2 * time.Millisecond}, nil, nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()

			b.SetBytes(records * size)
			b.SetParallelism(16) // producers waiting for their answers, as HTTP handlers do
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
			b.ReportMetric(float64(b.N)/metricValue(b, w.m.flushes), "requests/flush")
			if cpu > 0 {
				// Record bytes per second of CPU: the writer's own cost, whatever else
				// runs on the machine (MB/s above is wall time, and includes Linger).
				b.ReportMetric(float64(b.N)*records*size/1e6/cpu.Seconds(), "MB/cpu-s")
			}
		})
	}
}
