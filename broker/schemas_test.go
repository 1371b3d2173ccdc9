package broker

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/batchtest"
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
