package registry

import (
	"encoding/json"
	"math/big"
	"reflect"
	"testing"

	"github.com/hamba/avro/v2"
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

// TestDecodeAvroAsHamba: the one-pass decoder answers what hamba/avro decodes into any
// (fixed as []byte), for every type and logical type; and every truncation of a value
// is refused, never a panic.
func TestDecodeAvroAsHamba(t *testing.T) {
	s, err := Parse(TypeAvro, `{"type":"record","name":"r","fields":[
		{"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},{"name":"f","type":"float"},
		{"name":"d","type":"double"},{"name":"by","type":"bytes"},{"name":"s","type":"string"},
		{"name":"fx","type":{"type":"fixed","name":"F","size":3}},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
		{"name":"n","type":["null","string"]},{"name":"u","type":["int","string"]},
		{"name":"a","type":{"type":"array","items":{"type":"record","name":"In","fields":[{"name":"x","type":"long"}]}}},
		{"name":"m","type":{"type":"map","values":"In"}},
		{"name":"date","type":{"type":"int","logicalType":"date"}},
		{"name":"tm","type":{"type":"int","logicalType":"time-millis"}},{"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
		{"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
		{"name":"fdec","type":{"type":"fixed","name":"FD","size":2,"logicalType":"decimal","precision":4,"scale":1}}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.EncodeJSON([]byte(`{"b":true,"i":-5,"l":-9000000000,"f":1.5,"d":-2.25,"by":"\u0000\u00ff","s":"héllo",
		"fx":"abc","e":"B","n":{"string":"x"},"u":{"string":"y"},"a":[{"x":1},{"x":-2}],"m":{"k":{"x":3}},
		"date":19000,"tm":3723004,"tu":3723004005,"ts":1700000000123,"tsu":1700000000123456,
		"dec":"\u00ff\u0000","fdec":"\u0001\u0001"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeAvro(s.avro.s, p)
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := avro.Unmarshal(s.avro.s, p, &want); err != nil {
		t.Fatal(err)
	}
	want.(map[string]any)["fx"] = []byte("abc")
	for k, w := range want.(map[string]any) {
		g := got.(map[string]any)[k]
		if wr, ok := w.(*big.Rat); ok {
			if gr, ok := g.(*big.Rat); !ok || gr.Cmp(wr) != 0 {
				t.Errorf("%s: %v, hamba %v", k, g, w)
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %#v, hamba %#v", k, g, w)
		}
	}
	for i := range len(p) {
		if _, err := decodeAvro(s.avro.s, p[:i]); err == nil {
			t.Fatalf("the value cut at %d of %d bytes decoded", i, len(p))
		}
	}
	if _, err := decodeAvro(s.avro.s, append(p, 0)); err == nil {
		t.Fatal("a trailing byte decoded")
	}
}

// FuzzDecodeAvro: Decode never panics or loops, and accepts exactly what Validate
// accepts.
func FuzzDecodeAvro(f *testing.F) {
	s, err := Parse(TypeAvro, orderSchema, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{14, 0, 2, 0, 0, 1, 2, 3, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, derr := s.Decode(b)
		verr := s.Validate(b)
		if (derr == nil) != (verr == nil) {
			t.Fatalf("Decode: %v; Validate: %v", derr, verr)
		}
	})
}
