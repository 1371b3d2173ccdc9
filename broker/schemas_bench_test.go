package broker

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/registry"
)

// BenchmarkProduceValidation: produce throughput of Avro values of 1 KiB to a topic
// with confluent.value.schema.validation off and on, in one run, over real roles (a
// SQLite catalog, the filesystem store, the writer): Kafka-style record batches (the
// raw path, which stores batches as they came) and HTTP-style records. 100 records a
// request, requests in parallel. Run:
//
//	go test ./broker -run '^$' -bench ProduceValidation -benchtime 3s
func BenchmarkProduceValidation(b *testing.B) {
	core, cat := newRealCore(b)
	ctx := context.Background()
	const avroSchema = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"kind","type":"string"},{"name":"body","type":"string"}]}`
	parsed, err := registry.Parse(registry.TypeAvro, avroSchema, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, topic := range []string{"plain", "validated"} {
		cfg := map[string]string{}
		if topic == "validated" {
			cfg["confluent.value.schema.validation"] = "true"
		}
		if _, err := cat.CreateTopic(ctx, topic, 1, cfg); err != nil {
			b.Fatal(err)
		}
		ns := catalog.NewSchema{Subject: topic + "-value", Schema: catalog.Schema{Type: registry.TypeAvro, Text: parsed.Canonical(), Fingerprint: registry.Fingerprint(parsed, []catalog.SchemaReference{})}}
		if _, _, err := cat.RegisterSchema(ctx, ns, func([]catalog.SubjectSchema) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	core.d.Registry = cat
	payload, err := avro.Marshal(avro.MustParse(avroSchema), map[string]any{"id": int64(1), "kind": "order", "body": strings.Repeat("x", 1000)})
	if err != nil {
		b.Fatal(err)
	}
	value := registry.AppendFrame(nil, 1, payload)
	const perRequest = 100
	recs := make([]batchtest.Record, perRequest)
	for i := range recs {
		recs[i] = batchtest.Record{Value: value, Ts: time.Now().UnixMilli()}
	}
	batch := batchtest.Batch(b, recs, 0, -1, -1, -1)
	for _, topic := range []string{"plain", "validated"} {
		b.Run("batches/"+topic, func(b *testing.B) {
			b.SetBytes(int64(perRequest * len(value)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := core.ProduceBatches(ctx, Anonymous, BatchesRequest{Topic: topic, Partition: 0, Batches: bytes.Clone(batch)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run("records/"+topic, func(b *testing.B) {
			b.SetBytes(int64(perRequest * len(value)))
			b.RunParallel(func(pb *testing.PB) {
				rs := make([]Record, perRequest)
				for pb.Next() {
					for i := range rs {
						rs[i] = Record{Topic: topic, Partition: 0, Value: value, Timestamp: -1}
					}
					if _, err := core.Produce(ctx, Anonymous, ProduceRequest{Records: rs}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkValidateRecord is the check alone, per record, and what a topic without
// validation pays (the flag test).
func BenchmarkValidateRecord(b *testing.B) {
	core, cat := newRealCore(b)
	ctx := context.Background()
	if _, err := cat.CreateTopic(ctx, "v", 1, map[string]string{"confluent.value.schema.validation": "true"}); err != nil {
		b.Fatal(err)
	}
	const avroSchema = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"body","type":"string"}]}`
	parsed, _ := registry.Parse(registry.TypeAvro, avroSchema, nil)
	ns := catalog.NewSchema{Subject: "v-value", Schema: catalog.Schema{Type: registry.TypeAvro, Text: parsed.Canonical(), Fingerprint: registry.Fingerprint(parsed, []catalog.SchemaReference{})}}
	if _, _, err := cat.RegisterSchema(ctx, ns, func([]catalog.SubjectSchema) error { return nil }); err != nil {
		b.Fatal(err)
	}
	core.d.Registry = cat
	payload, _ := avro.Marshal(avro.MustParse(avroSchema), map[string]any{"id": int64(1), "body": strings.Repeat("x", 1000)})
	value := registry.AppendFrame(nil, 1, payload)
	ti, e := core.lookupTopic(ctx, "v")
	if e != nil {
		b.Fatal(e)
	}
	b.Run("on", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for b.Loop() {
			if e := core.validateRecord(ctx, &ti, 0, nil, value); e != nil {
				b.Fatal(e)
			}
		}
	})
	off := ti
	off.Config.ValueSchemaValidation = false
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if validates(&off.Config) {
				b.Fatal("validates")
			}
		}
	})
}
