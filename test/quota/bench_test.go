package quota_test

import (
	"crypto/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/catalog"
)

// BenchmarkProduceQuota is Kafka produce throughput (franz-go, 1 KiB records) on one
// node without any quota ("none") and with a producer_byte_rate the producer stays far
// under (1 TiB/s, "configured"): what enforcing a quota that is not exceeded costs. The
// two alternate over three rounds in the same run, after a warm-up, so that neither
// has the warm caches to itself:
//
//	go test ./test/quota -run XX -bench ProduceQuota -benchtime 20000x
func BenchmarkProduceQuota(b *testing.B) {
	s := start(b)
	id, secret := s.key("User:alice")
	s.createTopic("bench")
	value := make([]byte, 1<<10)
	rand.Read(value)
	cl := s.kclient(id, secret, kgo.DefaultProduceTopic("bench"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce := func(b testing.TB, n int) {
		for range n {
			cl.Produce(b.Context(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	produce(b, 20000) // warm-up
	run := func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		produce(b, b.N)
	}
	alice := "alice"
	for range 3 {
		s.setQuota(alice, map[string]float64{catalog.QuotaProducerByteRate: 1 << 40})
		b.Run("configured", run)
		s.removeQuota(alice, catalog.QuotaProducerByteRate)
		b.Run("none", run)
	}
}
