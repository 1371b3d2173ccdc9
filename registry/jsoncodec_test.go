package registry

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/hamba/avro/v2"
)

func TestAvroJSONRoundTrip(t *testing.T) {
	s := mustParse(t, orderSchema)
	in := `{"id":7,"note":{"string":"hi"},"color":"GREEN","tags":["a"],"attrs":{"x":1},"hash":"\u0001\u0002\u0003\u00ff","ok":true,"price":2.5}`
	enc, err := s.EncodeJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(enc); err != nil {
		t.Fatalf("the encoding does not validate: %v", err)
	}
	// hamba reads back what was meant.
	var got map[string]any
	if err := avro.Unmarshal(s.avro.s, enc, &got); err != nil || got["id"] != int64(7) || got["note"] != "hi" {
		t.Fatalf("decoded %v %v", got, err)
	}
	out, err := s.DecodeJSON(enc)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil || m["id"] != float64(7) || m["hash"] != "\x01\x02\x03\u00ff" || m["color"] != "GREEN" {
		t.Fatalf("as JSON: %s %v", out, err)
	}
	// A bare value for a nullable union, a default for a missing field.
	if _, err := s.EncodeJSON([]byte(`{"id":7,"note":"bare","color":"RED","tags":[],"attrs":{},"hash":"abcd","ok":false,"price":1}`)); err != nil {
		t.Errorf("bare union value: %v", err)
	}
	if _, err := s.EncodeJSON([]byte(`{"id":7,"color":"RED","tags":[],"attrs":{},"hash":"abcd","ok":false,"price":1}`)); err != nil {
		t.Errorf("note missing, with its default: %v", err)
	}
	for _, bad := range []string{
		`{"id":"7","color":"RED","tags":[],"attrs":{},"hash":"abcd","ok":false,"price":1}`,
		`{"id":7.5,"color":"RED","tags":[],"attrs":{},"hash":"abcd","ok":false,"price":1}`,
		`{"id":7,"color":"BLUE","tags":[],"attrs":{},"hash":"abcd","ok":false,"price":1}`,
		`{"id":7,"color":"RED","tags":[],"attrs":{},"hash":"abc","ok":false,"price":1}`,
		`{"color":"RED","tags":[],"attrs":{},"hash":"abcd","ok":false,"price":1}`,
		`{"id":7,"note":{"int":1},"color":"RED","tags":[],"attrs":{},"hash":"abcd","ok":false,"price":1}`,
		`{"id":7`, `[1]`, `{} {}`,
	} {
		if _, err := s.EncodeJSON([]byte(bad)); !errors.Is(err, ErrEncode) {
			t.Errorf("%s: %v, want ErrEncode", bad, err)
		}
	}
}

func TestJSONSchemaAndProtobufJSON(t *testing.T) {
	js := mustParseJSON(t, obj(`"id":{"type":"integer"}`, `"required":["id"]`))
	enc, err := js.EncodeJSON([]byte(`{ "id" : 7 }`))
	if err != nil || string(enc) != `{"id":7}` {
		t.Fatalf("JSON Schema: %s %v", enc, err)
	}
	if _, err := js.EncodeJSON([]byte(`{"id":"x"}`)); !errors.Is(err, ErrEncode) {
		t.Errorf("JSON Schema mismatch: %v", err)
	}
	pb := mustParseProto(t, proto3(`message Order { int64 id = 1; string note = 2; }`))
	enc, err = pb.EncodeJSON([]byte(`{"id":"7","note":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := pb.Validate(enc); err != nil {
		t.Fatalf("protobuf encoding does not validate: %v", err)
	}
	out, err := pb.DecodeJSON(enc)
	var m map[string]any
	if err != nil || json.Unmarshal(out, &m) != nil || m["id"] != "7" || m["note"] != "hi" {
		t.Fatalf("protobuf as JSON: %s %v", out, err)
	}
	if _, err := pb.EncodeJSON([]byte(`{"nope":1}`)); !errors.Is(err, ErrEncode) {
		t.Errorf("protobuf unknown field: %v", err)
	}
}

// FuzzEncodeJSON: any body sent as JSON to an Avro, JSON Schema or Protobuf schema is
// encoded or refused, never a panic; what is encoded validates.
func FuzzEncodeJSON(f *testing.F) {
	avroS, err := Parse(TypeAvro, orderSchema, nil)
	if err != nil {
		f.Fatal(err)
	}
	jsonS, err := Parse(TypeJSON, `{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}}}`, nil)
	if err != nil {
		f.Fatal(err)
	}
	protoS, err := Parse(TypeProtobuf, "syntax = \"proto3\";\nmessage O { int64 id = 1; repeated string tags = 2; map<string, O> sub = 3; }", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"id":7,"note":{"string":"hi"},"color":"GREEN","tags":["a"],"attrs":{"x":1},"hash":"abcd","ok":true,"price":2.5}`))
	f.Add([]byte(`{"id":"1","tags":["a"],"sub":{"k":{"id":2}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range []*Schema{avroS, jsonS, protoS} {
			enc, err := s.EncodeJSON(b)
			if err != nil {
				continue
			}
			if err := s.Validate(enc); err != nil {
				t.Fatalf("%s: %q encoded to bytes that do not validate: %v", s.Type(), b, err)
			}
			if _, err := s.DecodeJSON(enc); err != nil {
				t.Fatalf("%s: %q encoded to bytes that do not decode: %v", s.Type(), b, err)
			}
		}
	})
}
