package quota_test

import (
	"crypto/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/catalog"
)

// BenchmarkProduceQuota is Kafka produce throughput (franz-go, 1 KiB records) on one
// node, first without any quota, then with a producer_byte_rate the producer stays well
// under (1 TiB/s) — the cost of enforcing a quota that is not exceeded, same run:
//
//	go test ./test/quota -run XX -bench ProduceQuota -benchtime 20000x
func BenchmarkProduceQuota(b *testing.B) {
	s := start(b)
	id, secret := s.key("User:alice")
	s.createTopic("bench")
	value := make([]byte, 1<<10)
	rand.Read(value)
	run := func(b *testing.B) {
		cl := s.kclient(id, secret, kgo.DefaultProduceTopic("bench"), kgo.ProducerBatchCompression(kgo.NoCompression()))
		b.SetBytes(int64(len(value)))
		b.ResetTimer()
		for range b.N {
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
	b.Run("none", run)
	s.setQuota("alice", map[string]float64{catalog.QuotaProducerByteRate: 1 << 40})
	b.Run("configured", run)
}
