package broker

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"

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

// BenchmarkValidateRecord is the check alone, per record of about 1 KiB, for each
// format — Avro (the baseline), JSON Schema and Protobuf — and what a topic without
// validation pays (the flag test), in one run:
//
//	go test ./broker -run '^$' -bench ValidateRecord -benchtime 2s
func BenchmarkValidateRecord(b *testing.B) {
	core, cat := newRealCore(b)
	ctx := context.Background()
	core.d.Registry = cat
	body := strings.Repeat("x", 1000)
	avroText := `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"kind","type":"string"},{"name":"body","type":"string"}]}`
	avroPayload, _ := avro.Marshal(avro.MustParse(avroText), map[string]any{"id": int64(1), "kind": "order", "body": body})
	jsonText := `{"type":"object","title":"Event","properties":{"id":{"type":"integer"},"kind":{"type":"string","maxLength":32},"body":{"type":"string"}},"required":["id","kind","body"],"additionalProperties":false}`
	jsonPayload := []byte(`{"id":1,"kind":"order","body":"` + body + `"}`)
	protoText := "syntax = \"proto3\";\nmessage Event { int64 id = 1; string kind = 2; string body = 3; }"
	var pb []byte
	pb = protowire.AppendTag(pb, 1, protowire.VarintType)
	pb = protowire.AppendVarint(pb, 1)
	pb = protowire.AppendTag(pb, 2, protowire.BytesType)
	pb = protowire.AppendString(pb, "order")
	pb = protowire.AppendTag(pb, 3, protowire.BytesType)
	pb = protowire.AppendString(pb, body)
	protoPayload := append([]byte{0}, pb...)
	var ti TopicInfo
	for _, f := range []struct {
		name, typ, text string
		payload         []byte
	}{
		{"avro", registry.TypeAvro, avroText, avroPayload},
		{"json", registry.TypeJSON, jsonText, jsonPayload},
		{"protobuf", registry.TypeProtobuf, protoText, protoPayload},
	} {
		if _, err := cat.CreateTopic(ctx, f.name, 1, map[string]string{"confluent.value.schema.validation": "true"}); err != nil {
			b.Fatal(err)
		}
		v, err := core.RegisterSchema(ctx, Anonymous, f.name+"-value", SchemaRequest{Type: f.typ, Schema: f.text})
		if err != nil {
			b.Fatal(err)
		}
		value := registry.AppendFrame(nil, int32(v.ID), f.payload)
		var e *Error
		if ti, e = core.lookupTopic(ctx, f.name); e != nil {
			b.Fatal(e)
		}
		b.Run("on/"+f.name, func(b *testing.B) {
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			for b.Loop() {
				if e := core.validateRecord(ctx, &ti, 0, nil, value); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
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
