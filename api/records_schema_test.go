package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/registry"
)

// registerSchema registers text under subject straight in the registry's catalog.
func registerSchema(t *testing.T, cat *sqlite.Catalog, subject, typ, text string) int64 {
	t.Helper()
	p, err := registry.Parse(typ, text, nil)
	if err != nil {
		t.Fatal(err)
	}
	refs := []catalog.SchemaReference{}
	v, _, err := cat.RegisterSchema(context.Background(), catalog.NewSchema{Subject: subject, Schema: catalog.Schema{
		Type: typ, Text: p.Canonical(), References: refs, Fingerprint: registry.Fingerprint(p, refs)}},
		func([]catalog.SubjectSchema) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return v.ID
}

func schemaEnv(t *testing.T) (*testEnv, *sqlite.Catalog) {
	t.Helper()
	cat, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "registry.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return newEnv(t, Config{}, func(d *testDeps) { d.Registry = cat }), cat
}

const eventAvro = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"tag","type":["null","string"],"default":null}]}`

// TestProduceFetchWithSchema: JSON values sent with ?schema= are stored framed in the
// registered schema's encoding, fetched back as they are stored, and as JSON with
// ?format=json; what does not fit is 422 naming the record and stores nothing.
func TestProduceFetchWithSchema(t *testing.T) {
	e, cat := schemaEnv(t)
	e.createTopic("ev", 1, map[string]string{"value.format": "binary"})
	e.createTopic("js", 1, nil)
	v1 := registerSchema(t, cat, "ev-value", registry.TypeAvro, `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"}]}`)
	v2 := registerSchema(t, cat, "ev-value", registry.TypeAvro, eventAvro)
	other := registerSchema(t, cat, "elsewhere-value", registry.TypeAvro, `"string"`)
	jsID := registerSchema(t, cat, "js-value", registry.TypeJSON, `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)

	rec := e.do("POST", "/v1/topics/ev/records?schema=latest", `{"records":[{"value":{"id":7,"tag":"a"},"partition":0},{"value":{"id":8},"partition":0},{"value":null,"partition":0}]}`)
	if rec.Code != 200 {
		t.Fatalf("produce with the latest schema: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do("POST", "/v1/topics/ev/records?schema="+itoa(v1), `{"records":[{"value":{"id":9},"partition":0}]}`); rec.Code != 200 {
		t.Fatalf("produce with an older id: %d %s", rec.Code, rec.Body)
	}
	// Stored framed, in Avro: the fetch of a binary topic shows the bytes.
	var raw struct {
		Records []struct {
			Value json.RawMessage `json:"value"`
		} `json:"records"`
	}
	decodeBody(t, e.do("GET", "/v1/topics/ev/partitions/0/records?offset=0", ""), &raw)
	if len(raw.Records) != 4 {
		t.Fatalf("stored %d records, want 4", len(raw.Records))
	}
	var b64 string
	_ = json.Unmarshal(raw.Records[0].Value, &b64)
	stored, _ := base64.StdEncoding.DecodeString(b64)
	want, _ := avro.Marshal(avro.MustParse(eventAvro), map[string]any{"id": int64(7), "tag": map[string]any{"string": "a"}})
	if string(stored) != string(registry.AppendFrame(nil, int32(v2), want)) {
		t.Fatalf("stored %x, want %x", stored, registry.AppendFrame(nil, int32(v2), want))
	}
	if string(raw.Records[2].Value) != "null" {
		t.Errorf("the tombstone: %s", raw.Records[2].Value)
	}
	// ?format=json decodes each by its own id.
	var dec struct {
		Records []struct {
			Value         json.RawMessage `json:"value"`
			ValueEncoding string          `json:"value_encoding"`
		} `json:"records"`
	}
	decodeBody(t, e.do("GET", "/v1/topics/ev/partitions/0/records?offset=0&format=json", ""), &dec)
	got := []string{}
	for _, r := range dec.Records {
		got = append(got, string(r.Value)+r.ValueEncoding)
	}
	if want := `[{"id":7,"tag":"a"} {"id":8,"tag":null} null {"id":9}]`; fmtSlice(got) != want {
		t.Fatalf("decoded %v, want %s", got, want)
	}

	// Refusals: nothing stored.
	wantProblem(t, e.do("POST", "/v1/topics/ev/records?schema=latest", `{"records":[{"value":{"id":1},"partition":0},{"value":{"id":"x"},"partition":0}]}`), 422, CodeSchemaValidationFailed)
	p := wantProblem(t, e.do("POST", "/v1/topics/ev/records?schema=latest", `{"records":[{"value":{"id":1},"partition":0},{"value":{"tag":"a"},"partition":0}]}`), 422, CodeSchemaValidationFailed)
	if p["record"] != json.Number("1") {
		t.Errorf("names record %v, want 1", p["record"])
	}
	wantProblem(t, e.do("POST", "/v1/topics/ev/records?schema="+itoa(other), `{"records":[{"value":"x","partition":0}]}`), 404, CodeSchemaNotFound)
	wantProblem(t, e.do("POST", "/v1/topics/ev/records?schema=99999", `{"records":[{"value":"x","partition":0}]}`), 404, CodeSchemaNotFound)
	wantProblem(t, e.do("POST", "/v1/topics/ev/records?schema=newest", `{"records":[{"value":1,"partition":0}]}`), 400, CodeInvalidParameter)
	wantProblem(t, e.do("POST", "/v1/topics/ev/records?schema=0", `{"records":[{"value":1,"partition":0}]}`), 400, CodeInvalidParameter)
	wantProblem(t, e.do("GET", "/v1/topics/ev/partitions/0/records?format=xml", ""), 400, CodeInvalidParameter)
	binary := httptest.NewRequest("POST", "/v1/topics/ev/records?partition=0&schema=latest", strings.NewReader("x"))
	binary.Header.Set("Content-Type", RecordBatchContentType)
	rr := httptest.NewRecorder()
	e.h.ServeHTTP(rr, binary)
	wantProblem(t, rr, 400, CodeInvalidParameter)
	e.createTopic("bare", 1, nil)
	wantProblem(t, e.do("POST", "/v1/topics/bare/records?schema=latest", `{"records":[{"value":1,"partition":0}]}`), 404, CodeSchemaNotFound)
	decodeBody(t, e.do("GET", "/v1/topics/ev/partitions/0/records?offset=0", ""), &raw)
	if len(raw.Records) != 4 {
		t.Fatalf("refused requests stored records: %d", len(raw.Records))
	}

	// JSON Schema: validated, stored as compact JSON after the framing.
	if rec := e.do("POST", "/v1/topics/js/records?schema="+itoa(jsID), `{"records":[{"value":{ "id" : 1 },"partition":0}]}`); rec.Code != 200 {
		t.Fatalf("JSON Schema produce: %d %s", rec.Code, rec.Body)
	}
	wantProblem(t, e.do("POST", "/v1/topics/js/records?schema=latest", `{"records":[{"value":{"id":"one"},"partition":0}]}`), 422, CodeSchemaValidationFailed)
	decodeBody(t, e.do("GET", "/v1/topics/js/partitions/0/records?offset=0&format=json", ""), &dec)
	if len(dec.Records) != 1 || string(dec.Records[0].Value) != `{"id":1}` {
		t.Fatalf("JSON Schema fetch: %+v", dec.Records)
	}
	decodeBody(t, e.do("GET", "/v1/topics/js/partitions/0/records?offset=0&format=base64", ""), &raw)
	_ = json.Unmarshal(raw.Records[0].Value, &b64)
	stored, _ = base64.StdEncoding.DecodeString(b64)
	if string(stored) != string(registry.AppendFrame(nil, int32(jsID), []byte(`{"id":1}`))) {
		t.Fatalf("JSON Schema stored %q", stored)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func fmtSlice(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

// TestTailWithSchema: an SSE tail with ?format=json decodes framed values as a fetch does.
func TestTailWithSchema(t *testing.T) {
	e, cat := schemaEnv(t)
	e.createTopic("ev", 1, nil)
	registerSchema(t, cat, "ev-value", registry.TypeAvro, eventAvro)
	if rec := e.do("POST", "/v1/topics/ev/records?schema=latest", `{"records":[{"value":{"id":7},"partition":0}]}`); rec.Code != 200 {
		t.Fatalf("produce: %d %s", rec.Code, rec.Body)
	}
	ts := newTailServer(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, br := ts.open(t, ctx, "/v1/topics/ev/partitions/0/records?offset=0&format=json")
	ev := nextRecordEvent(t, br)
	var got struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(ev.data), &got); err != nil || string(got.Value) != `{"id":7,"tag":null}` {
		t.Fatalf("event %q: %v", ev.data, err)
	}
	cancel()
	ts.waitHandlersDone(t)
}
