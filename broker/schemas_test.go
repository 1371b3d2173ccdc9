package broker

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/registry"
)

// validatingCore is a core over real roles with the registry on and a topic whose
// values are validated, with schema text of typ registered under its value subject.
func validatingCore(t *testing.T, topic, typ, schema string, refs ...catalog.SchemaReference) (*Broker, int32) {
	t.Helper()
	b, cat := newRealCore(t)
	b.d.Registry = cat
	ctx := t.Context()
	if _, err := cat.CreateTopic(ctx, topic, 1, map[string]string{"confluent.value.schema.validation": "true"}); err != nil {
		t.Fatal(err)
	}
	v, err := b.RegisterSchema(ctx, Anonymous, topic+"-value", SchemaRequest{Type: typ, Schema: schema, References: refs})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	return b, int32(v.ID)
}

// produceBoth produces value over the records path (HTTP's) and the batches path
// (Kafka's), beside a valid record, and answers both errors.
func produceBoth(t *testing.T, b *Broker, topic string, valid, value []byte) (error, error) {
	t.Helper()
	ctx := t.Context()
	_, errRecords := b.Produce(ctx, Anonymous, ProduceRequest{Records: []Record{
		{Topic: topic, Partition: 0, Value: valid, Timestamp: -1},
		{Topic: topic, Partition: 0, Value: value, Timestamp: -1},
	}})
	batch := batchtest.Batch(t, []batchtest.Record{{Value: valid}, {Value: value}}, 0, -1, -1, -1)
	_, errBatches := b.ProduceBatches(ctx, Anonymous, BatchesRequest{Topic: topic, Partition: 0, Batches: batch})
	return errRecords, errBatches
}

// testFramedValidation: the valid value is stored, each bad one refused on both paths
// naming record 1, and nothing of a refused request stored.
func testFramedValidation(t *testing.T, b *Broker, topic string, valid []byte, bad map[string][]byte) {
	t.Helper()
	for name, v := range bad {
		er, eb := produceBoth(t, b, topic, valid, v)
		for path, err := range map[string]error{"records": er, "batches": eb} {
			e := wantCode(t, err, CodeSchemaValidationFailed)
			if e != nil && e.Details["record"] != 1 {
				t.Errorf("%s over %s: %v names record %v, want 1", name, path, e, e.Details["record"])
			}
		}
	}
	parts, err := b.Partitions(t.Context(), Anonymous, topic)
	if err != nil {
		t.Fatal(err)
	}
	if parts[0].HighWatermark != 0 {
		t.Fatalf("refused requests stored records: high watermark %d", parts[0].HighWatermark)
	}
	er, eb := produceBoth(t, b, topic, valid, valid)
	if er != nil || eb != nil {
		t.Fatalf("a valid request: %v / %v", er, eb)
	}
}

func TestValidateJSONSchemaValues(t *testing.T) {
	b, id := validatingCore(t, "js", registry.TypeJSON, `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)
	valid := registry.AppendFrame(nil, id, []byte(`{"id":7}`))
	testFramedValidation(t, b, "js", valid, map[string][]byte{
		"unframed":         []byte(`{"id":7}`),
		"unknown id":       registry.AppendFrame(nil, id+100, []byte(`{"id":7}`)),
		"not JSON":         registry.AppendFrame(nil, id, []byte(`{"id":`)),
		"schema mismatch":  registry.AppendFrame(nil, id, []byte(`{"id":"seven"}`)),
		"missing required": registry.AppendFrame(nil, id, []byte(`{}`)),
	})
}

func TestValidateProtobufValues(t *testing.T) {
	// With a reference: the linked descriptor decodes the referenced message too.
	b, cat := newRealCore(t)
	b.d.Registry = cat
	ctx := t.Context()
	if _, err := b.RegisterSchema(ctx, Anonymous, "line", SchemaRequest{Type: registry.TypeProtobuf, Schema: "syntax = \"proto3\";\npackage shop;\nmessage Line { string sku = 1; }"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateTopic(ctx, "pb", 1, map[string]string{"confluent.value.schema.validation": "true"}); err != nil {
		t.Fatal(err)
	}
	v, err := b.RegisterSchema(ctx, Anonymous, "pb-value", SchemaRequest{Type: registry.TypeProtobuf,
		Schema:     "syntax = \"proto3\";\npackage shop;\nimport \"line.proto\";\nmessage Order { int64 id = 1; repeated Line lines = 2; }\nmessage Other { bool b = 1; }",
		References: []catalog.SchemaReference{{Name: "line.proto", Subject: "line", Version: 1}}})
	if err != nil {
		t.Fatalf("register with a reference: %v", err)
	}
	id := int32(v.ID)
	// Order{id: 7, lines: [{sku: "a"}]}, framed with message index [0].
	order := []byte{0x08, 7, 0x12, 3, 0x0a, 1, 'a'}
	valid := registry.AppendFrame(nil, id, append([]byte{0}, order...))
	testFramedValidation(t, b, "pb", valid, map[string][]byte{
		"unframed":                []byte{0, 0x08, 7},
		"no message index":        registry.AppendFrame(nil, id, nil),
		"message index past":      registry.AppendFrame(nil, id, append(registry.AppendMessageIndexes(nil, []int{2}), order...)),
		"referenced not UTF-8":    registry.AppendFrame(nil, id, []byte{0, 0x12, 3, 0x0a, 1, 0xff}),
		"truncated":               registry.AppendFrame(nil, id, append([]byte{0}, order[:5]...)),
		"the other message's bad": registry.AppendFrame(nil, id, append(registry.AppendMessageIndexes(nil, []int{1}), 0x08, 0x80)),
	})
}

// TestRegisterRefusals: schemas of each type that do not parse are 42201.
func TestRegisterRefusals(t *testing.T) {
	b, cat := newRealCore(t)
	b.d.Registry = cat
	for _, req := range []SchemaRequest{
		{Type: registry.TypeJSON, Schema: `{"type":`},
		{Type: registry.TypeJSON, Schema: `{"$ref":"https://example.com/x.json"}`},
		{Type: registry.TypeProtobuf, Schema: `syntax = "proto3"; message A { B b = 1; }`},
		{Type: registry.TypeProtobuf, Schema: `syntax = "proto3"; import "x.proto"; message A {}`},
		{Type: "XML", Schema: `<a/>`},
	} {
		_, err := b.RegisterSchema(t.Context(), Anonymous, "s", req)
		if e := wantCode(t, err, CodeInvalidSchema); e != nil && RegistryCode(e) != RegInvalidSchema {
			t.Errorf("%s %s: registry code %d, want %d", req.Type, req.Schema, RegistryCode(e), RegInvalidSchema)
		}
	}
}
