package segment

import (
	"math/rand/v2"
	"testing"
)

// benchFlush is a full writer flush: 16 partitions × 500 records of 1 KiB JSON-like
// values (8 MiB, the default max flush), one batch per partition.
func benchFlush(c Compression) (batches []Batch, payload int64) {
	rng := rand.New(rand.NewPCG(42, 42))
	for p := range 16 {
		b := Batch{TopicID: 1, Partition: int32(p), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Compression: c}
		for i := range 500 {
			r := Record{Key: []byte("user-" + string(rune('a'+i%26))), Value: genValue(rng, 1024), Timestamp: 1_700_000_000_000 + int64(i)}
			payload += int64(len(r.Key) + len(r.Value))
			b.Records = append(b.Records, r)
		}
		batches = append(batches, b)
	}
	return batches, payload
}

func BenchmarkEncode(b *testing.B) {
	for _, c := range codecs {
		b.Run(codecName(c), func(b *testing.B) {
			batches, payload := benchFlush(c)
			b.SetBytes(payload)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				obj, _, err := Encode(batches, EncodeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				size = len(obj)
			}
			b.ReportMetric(float64(payload)/float64(size), "ratio")
		})
	}
}

// BenchmarkDecode reads a whole object back as the reader does: split each
// partition's chunk into batches and decode every record.
func BenchmarkDecode(b *testing.B) {
	for _, c := range codecs {
		b.Run(codecName(c), func(b *testing.B) {
			batches, payload := benchFlush(c)
			obj, infos, err := Encode(batches, EncodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(payload)
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for _, in := range infos {
					ds, err := DecodeBatches(obj[in.Pos : in.Pos+in.Len])
					if err != nil {
						b.Fatal(err)
					}
					n += len(ds[0].Records)
				}
				if n != 8000 {
					b.Fatalf("%d records", n)
				}
			}
		})
	}
}
