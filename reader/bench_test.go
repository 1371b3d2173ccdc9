package reader

import (
	"fmt"
	"testing"

	"github.com/strata-io/strata/segment"
)

// BenchmarkFetchCached measures fetches of 1 KiB records served from a warm cache: the
// CPU cost of copying chunk bytes, splitting, rewriting and decoding batches. Each
// fetch returns 1 MiB of record values (1024 records); MB/s counts those bytes.
func BenchmarkFetchCached(b *testing.B) {
	for _, c := range []segment.Compression{segment.CompressionNone, segment.CompressionLZ4, segment.CompressionZstd} {
		l := newTestLog(b)
		for range 4 { // 4 flushes of 10 batches of 100 records: offsets 0-3999
			var bs []segment.Batch
			for range 10 {
				bs = append(bs, l.batch(0, 100, 1024, c))
			}
			l.flush(bs...)
		}
		r := New(l.store, l.cat, Config{}, nil, nil)
		offsets := []int64{0, 1024, 2048}
		for _, o := range offsets { // warm the cache
			if _, err := r.Fetch(b.Context(), Fetch{TopicID: testTopic, Offset: o, MaxRecords: 10000}); err != nil {
				b.Fatal(err)
			}
		}
		name := map[segment.Compression]string{segment.CompressionNone: "none", segment.CompressionLZ4: "lz4", segment.CompressionZstd: "zstd"}[c]
		b.Run(fmt.Sprintf("decoded/%s", name), func(b *testing.B) {
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := r.Fetch(b.Context(), Fetch{TopicID: testTopic, Offset: offsets[i%len(offsets)], MaxRecords: 10000})
				if err != nil || len(res.Records) != 1024 {
					b.Fatalf("%d records, %v", len(res.Records), err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("raw/%s", name), func(b *testing.B) {
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := r.FetchRaw(b.Context(), Fetch{TopicID: testTopic, Offset: offsets[i%len(offsets)], MaxRecords: 1024, MaxBytes: 16 << 20})
				if err != nil || len(res.Batches) == 0 {
					b.Fatalf("%d batches, %v", len(res.Batches), err)
				}
				i++
			}
		})
		if gets := l.store.gets.Load(); gets > 4 {
			b.Errorf("%d GETs: the benchmark was not served from the cache", gets)
		}
	}
}
