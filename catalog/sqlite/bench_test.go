package sqlite

import (
	"testing"

	"github.com/strata-io/strata/catalog/catalogtest"
)

// BenchmarkCommit8Partitions commits flushes of eight requests, one per partition of an
// eight-partition topic, one after another: the catalog's cost per flush on this disk,
// fsync included (WAL, synchronous=FULL).
func BenchmarkCommit8Partitions(b *testing.B) {
	c := openTest(b)
	tp := catalogtest.SeedTopic(b, c, "bench", 8, nil)
	reqs := make([][]catalogtest.B, 8)
	for p := range reqs {
		reqs[p] = catalogtest.Req(catalogtest.B{TopicID: tp.ID, Partition: int32(p), Records: 10, Len: 10_000, MaxTimestamp: 1})
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Commit(b.Context(), catalogtest.Flush(catalogtest.NewKey(b), reqs...)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkCommit8PartitionsParallel is the same with concurrent committers, as a
// writer pipelining flushes would: they queue on the one writer connection.
func BenchmarkCommit8PartitionsParallel(b *testing.B) {
	c := openTest(b)
	tp := catalogtest.SeedTopic(b, c, "bench", 8, nil)
	reqs := make([][]catalogtest.B, 8)
	for p := range reqs {
		reqs[p] = catalogtest.Req(catalogtest.B{TopicID: tp.ID, Partition: int32(p), Records: 10, Len: 10_000, MaxTimestamp: 1})
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Commit(b.Context(), catalogtest.Flush(catalogtest.NewKey(b), reqs...)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}
