package registry

import (
	"encoding/json"
	"testing"
)

// TestDecode: Decode answers the value as Go values after the same strict walk as
// Validate (trailing bytes refused), for Avro and JSON schemas; Protobuf is not decoded.
func TestDecode(t *testing.T) {
	a, err := Parse(TypeAvro, `{"type":"record","name":"r","fields":[{"name":"n","type":"long"},{"name":"s","type":["null","string"]}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.EncodeJSON([]byte(`{"n":7,"s":{"string":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Decode(p)
	if m, ok := v.(map[string]any); err != nil || !ok || m["n"] != int64(7) || m["s"] != "x" {
		t.Fatalf("avro: %#v, %v", v, err)
	}
	if _, err := a.Decode(append(p, 0)); err == nil {
		t.Fatal("avro with a trailing byte decoded")
	}
	j, err := Parse(TypeJSON, `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err = j.Decode([]byte(`{"n":12345678901234567}`))
	if m, ok := v.(map[string]any); err != nil || !ok || m["n"] != json.Number("12345678901234567") {
		t.Fatalf("json: %#v, %v", v, err)
	}
	if _, err := j.Decode([]byte(`{"m":1}`)); err == nil {
		t.Fatal("a JSON value that does not match its schema decoded")
	}
	pb, err := Parse(TypeProtobuf, `syntax = "proto3"; message M { int64 n = 1; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pb.Decode([]byte{0}); err == nil {
		t.Fatal("protobuf decoded")
	}
	if a.Avro() == nil || a.JSONDocument() != nil || j.JSONDocument() == nil || j.Avro() != nil {
		t.Fatal("accessors answer another type's form")
	}
}
