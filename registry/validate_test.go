package registry

import (
	"testing"

	"github.com/hamba/avro/v2"
)

const orderSchema = `{"type":"record","name":"Order","fields":[
	{"name":"id","type":"long"},
	{"name":"note","type":["null","string"],"default":null},
	{"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"attrs","type":{"type":"map","values":"int"}},
	{"name":"hash","type":{"type":"fixed","name":"H","size":4}},
	{"name":"ok","type":"boolean"},
	{"name":"price","type":"double"}]}`

func TestValidateAvro(t *testing.T) {
	s := mustParse(t, orderSchema)
	good, err := avro.Marshal(s.avro.s, map[string]any{
		"id": int64(7), "note": "hi", "color": "GREEN", "tags": []any{"a", "b"},
		"attrs": map[string]any{"x": 1}, "hash": [4]byte{1, 2, 3, 4}, "ok": true, "price": 2.5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(good); err != nil {
		t.Fatalf("a value hamba encoded: %v", err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(append([]byte{}, good...), 0)},
		{"union index out of range", append([]byte{14, 4}, good[2:]...)},
		{"not utf-8", []byte{14, 2, 2, 0xff}},
		{"overlong varint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		if err := s.Validate(tc.b); err == nil {
			t.Errorf("%s: validated", tc.name)
		}
	}
	enum := mustParse(t, `{"type":"enum","name":"E","symbols":["A","B"]}`)
	if err := enum.Validate([]byte{4}); err == nil {
		t.Error("enum index 2 of 2 validated")
	}
	if err := enum.Validate([]byte{2}); err != nil {
		t.Errorf("enum index 1: %v", err)
	}
	b := mustParse(t, `"boolean"`)
	if err := b.Validate([]byte{2}); err == nil {
		t.Error("boolean byte 2 validated")
	}
}

func FuzzValidateAvro(f *testing.F) {
	s, err := Parse(TypeAvro, orderSchema, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{14, 0, 2, 0, 0, 1, 2, 3, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = s.Validate(b) // must not panic or loop
	})
}

func TestFrame(t *testing.T) {
	b := AppendFrame(nil, 258, []byte("x"))
	id, p, ok := ParseFrame(b)
	if !ok || id != 258 || string(p) != "x" {
		t.Fatalf("round trip: %d %q %v", id, p, ok)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {1, 0, 0, 0, 1}} {
		if _, _, ok := ParseFrame(bad); ok {
			t.Errorf("ParseFrame(%v) ok", bad)
		}
	}
}
