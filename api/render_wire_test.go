package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/segment"
)

// The hot paths render their answers by hand (a produce's offsets, a fetch's records,
// a record-batch produce's range) rather than through encoding/json. Each is held here
// to its type of package v1: the answer decodes into it with unknown fields refused,
// and re-encoding what was decoded gives the same JSON, so a member the renderer adds,
// drops or spells otherwise fails. TestOpenAPIMatchesWireTypes holds the types to the
// document.

// strictWire decodes body into a T, refusing unknown members, and checks that T encodes
// back to the same JSON value.
func strictWire[T any](t *testing.T, what string, body []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %s does not decode into %T: %v", what, body, v, err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("%s: rendered\n %s\nbut %T encodes it as\n %s", what, body, v, again)
	}
	return v
}

func TestRenderersMatchWireTypes(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("t", 2, nil)
	e.createTopic("s", 1, map[string]string{"value.format": "string"})

	rec := e.do("POST", "/v1/topics/t/records", `{"records":[{"key":"k","value":{"n":1},"headers":[{"key":"h","value":"v"},{"key":"n","value":null}],"partition":1},{"value":2,"partition":0}]}`)
	if rec.Code != 200 {
		t.Fatalf("produce: %d %s", rec.Code, rec.Body)
	}
	pr := strictWire[v1.ProduceResponse](t, "produce", rec.Body.Bytes())
	if len(pr.Offsets) != 2 || pr.Offsets[0].Partition != 1 || pr.Offsets[1].Partition != 0 {
		t.Errorf("produce answered %+v", pr)
	}

	rec = e.do("POST", "/v1/records", `{"records":[{"topic":"t","value":3,"partition":1},{"topic":"s","value":"x"}]}`)
	if rec.Code != 200 {
		t.Fatalf("records: %d %s", rec.Code, rec.Body)
	}
	tr := strictWire[v1.TransactResponse](t, "records", rec.Body.Bytes())
	if len(tr.Offsets) != 2 || tr.Offsets[0].Topic != "t" || tr.Offsets[1].Topic != "s" {
		t.Errorf("records answered %+v", tr)
	}

	// Bytes a topic's format cannot show come back as base64, flagged, header values too.
	e.c.appendRaw("s", 0, segment.DecodedRecord{Key: []byte{0xff}, Value: []byte{0xfe}, Headers: []segment.Header{{Key: "b", Value: []byte{0xff, 0}}}})
	for _, q := range []string{"", "&format=base64"} {
		rec = e.do("GET", "/v1/topics/s/partitions/0/records?offset=0"+q, "")
		if rec.Code != 200 {
			t.Fatalf("fetch: %d %s", rec.Code, rec.Body)
		}
		fr := strictWire[v1.FetchResponse](t, "fetch"+q, rec.Body.Bytes())
		if len(fr.Records) != 2 || fr.NextOffset != 2 {
			t.Errorf("fetch%s answered %+v", q, fr)
		}
	}
	rec = e.do("GET", "/v1/topics/t/partitions/1/records?offset=0", "")
	fr := strictWire[v1.FetchResponse](t, "fetch", rec.Body.Bytes())
	if len(fr.Records) != 2 || len(fr.Records[0].Headers) != 2 || fr.Records[0].Headers[1].Value != nil || string(fr.Records[0].Key) != `"k"` {
		t.Errorf("fetch answered %s", rec.Body)
	}

	rec = e.do("GET", "/v1/topics/t/partitions/1/offsets?timestamp=earliest", "")
	if off := strictWire[v1.OffsetAnswer](t, "offset for time", rec.Body.Bytes()); off.Offset == nil || *off.Offset != 0 {
		t.Errorf("offset for time answered %s", rec.Body)
	}

	rec = e.postBatches("/v1/topics/t/records?partition=0", batchtest.Batch(t, batchtest.Some(3, testNow.UnixMilli()), 0, -1, -1, -1))
	if rec.Code != 200 {
		t.Fatalf("batch produce: %d %s", rec.Code, rec.Body)
	}
	if br := strictWire[v1.BatchProduceResponse](t, "batch produce", rec.Body.Bytes()); br.Partition != 0 || br.LastOffset-br.BaseOffset != 2 {
		t.Errorf("batch produce answered %s", rec.Body)
	}

	// A problem: v1.Problem's members, then the extension members.
	rec = e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1,"partition":"x"}]}`)
	var p v1.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != string(CodeInvalidPartition) || p.Type != v1.ProblemTypePrefix+p.Code || p.Status != 400 || p.Title == "" || p.Detail == "" {
		t.Errorf("problem %s: %+v, %v", rec.Body, p, err)
	}
	var members map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &members); err != nil || members["record"] != float64(0) || members["field"] != "partition" {
		t.Errorf("problem %s lost its extension members", rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != v1.ContentTypeProblem {
		t.Errorf("problem Content-Type %q", ct)
	}
}
