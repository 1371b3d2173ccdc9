package registry

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func proto3(body string) string { return "syntax = \"proto3\";\npackage shop;\n" + body }

// protoPairs are (old, new) Protobuf schemas with the answer Confluent's registry
// gives. Confluent's Protobuf differences are mostly symmetric, so most cases break
// both ways or neither; the asymmetric ones are a message or a required field that
// exists on one side only. Each answer follows Confluent's documented rules (fields
// by number; wire-compatible scalar groups; removed messages, changed packages, oneof
// members removed, several fields moved into a oneof break), case by case.
var protoPairs = []struct {
	name              string
	old, new          string
	backward, forward bool
}{
	{"identical", proto3(`message Order { int64 id = 1; }`), proto3(`message Order { int64 id = 1; }`), true, true},
	{"add a field", proto3(`message Order { int64 id = 1; }`), proto3(`message Order { int64 id = 1; string note = 2; }`), true, true},
	{"remove a field", proto3(`message Order { int64 id = 1; string note = 2; }`), proto3(`message Order { int64 id = 1; }`), true, true},
	{"rename a field", proto3(`message Order { int64 id = 1; }`), proto3(`message Order { int64 order_id = 1; }`), true, true},
	{"int32 to int64", proto3(`message Order { int32 n = 1; }`), proto3(`message Order { int64 n = 1; }`), true, true},
	{"uint64 to bool", proto3(`message Order { uint64 n = 1; }`), proto3(`message Order { bool n = 1; }`), true, true},
	{"int32 to sint32", proto3(`message Order { int32 n = 1; }`), proto3(`message Order { sint32 n = 1; }`), false, false},
	{"string to bytes", proto3(`message Order { string s = 1; }`), proto3(`message Order { bytes s = 1; }`), true, true},
	{"string to int32", proto3(`message Order { string s = 1; }`), proto3(`message Order { int32 s = 1; }`), false, false},
	{"fixed32 to sfixed32", proto3(`message Order { fixed32 n = 1; }`), proto3(`message Order { sfixed32 n = 1; }`), true, true},
	{"fixed32 to fixed64", proto3(`message Order { fixed32 n = 1; }`), proto3(`message Order { fixed64 n = 1; }`), false, false},
	{"float to double", proto3(`message Order { float n = 1; }`), proto3(`message Order { double n = 1; }`), false, false},
	{"enum to int32", proto3(`enum Kind { A = 0; } message Order { Kind k = 1; }`), proto3(`enum Kind { A = 0; } message Order { int32 k = 1; }`), true, true},
	{"enum gains a value", proto3(`enum Kind { A = 0; } message Order { Kind k = 1; }`), proto3(`enum Kind { A = 0; B = 1; } message Order { Kind k = 1; }`), true, true},
	{"scalar to message", proto3(`message Line { int32 n = 1; } message Order { int32 l = 1; }`), proto3(`message Line { int32 n = 1; } message Order { Line l = 1; }`), false, false},
	{"message field to another message", proto3(`message A { int32 n = 1; } message B { int32 n = 1; } message Order { A x = 1; }`), proto3(`message A { int32 n = 1; } message B { int32 n = 1; } message Order { B x = 1; }`), false, false},
	{"nested message field changes type", proto3(`message Order { message Line { int32 n = 1; } Line l = 1; }`), proto3(`message Order { message Line { string n = 1; } Line l = 1; }`), false, false},
	{"add a message", proto3(`message Order { int64 id = 1; }`), proto3(`message Order { int64 id = 1; } message Other { int32 n = 1; }`), true, false},
	{"remove a message", proto3(`message Order { int64 id = 1; } message Other { int32 n = 1; }`), proto3(`message Order { int64 id = 1; }`), false, true},
	{"package changed", proto3(`message Order { int64 id = 1; }`), "syntax = \"proto3\";\npackage other;\nmessage Order { int64 id = 1; }", false, false},
	{"map value type changes", proto3(`message Order { map<string, int32> m = 1; }`), proto3(`message Order { map<string, string> m = 1; }`), false, false},
	{"map to repeated message", proto3(`message Order { map<string, int32> m = 1; }`), proto3(`message E { string key = 1; int32 value = 2; } message Order { repeated E m = 1; }`), false, false},
	{"oneof adds a field", proto3(`message Order { oneof v { int32 a = 1; } }`), proto3(`message Order { oneof v { int32 a = 1; string b = 2; } }`), true, false},
	{"one field moved into a new oneof", proto3(`message Order { int32 a = 1; }`), proto3(`message Order { oneof v { int32 a = 1; } }`), true, true},
	{"two fields moved into a oneof", proto3(`message Order { int32 a = 1; string b = 2; }`), proto3(`message Order { oneof v { int32 a = 1; string b = 2; } }`), false, true},
	{"proto2 required field added", "syntax = \"proto2\";\nmessage Order { optional int64 id = 1; }", "syntax = \"proto2\";\nmessage Order { optional int64 id = 1; required int32 n = 2; }", false, false},
	{"proto2 optional field added", "syntax = \"proto2\";\nmessage Order { optional int64 id = 1; }", "syntax = \"proto2\";\nmessage Order { optional int64 id = 1; optional int32 n = 2; }", true, true},
	{"messages reordered", proto3(`message A { int32 n = 1; } message B { int32 n = 1; }`), proto3(`message B { int32 n = 1; } message A { int32 n = 1; }`), true, true},
}

func mustParseProto(t *testing.T, text string, refs ...Resolved) *Schema {
	t.Helper()
	s, err := Parse(TypeProtobuf, text, refs)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	return s
}

// TestProtobufCompatibility: every pair in every level.
func TestProtobufCompatibility(t *testing.T) {
	for _, tc := range protoPairs {
		old, nw := mustParseProto(t, tc.old), mustParseProto(t, tc.new)
		want := map[Level]bool{
			None:     true,
			Backward: tc.backward, BackwardTransitive: tc.backward,
			Forward: tc.forward, ForwardTransitive: tc.forward,
			Full: tc.backward && tc.forward, FullTransitive: tc.backward && tc.forward,
		}
		for _, level := range Levels() {
			msgs := Check(level, nw, []Prior{{Version: 1, Schema: old}})
			if got := len(msgs) == 0; got != want[level] {
				t.Errorf("%s under %s: compatible %v, want %v (%v)", tc.name, level, got, want[level], msgs)
			}
		}
	}
}

// TestProtobufTransitive: the latest equals version 2 and breaks version 1.
func TestProtobufTransitive(t *testing.T) {
	v1 := proto3(`message Order { int64 id = 1; } message Other { int32 n = 1; }`)
	v2 := proto3(`message Order { int64 id = 1; }`)
	for _, level := range []Level{BackwardTransitive, FullTransitive} {
		prior := []Prior{{1, mustParseProto(t, v1)}, {2, mustParseProto(t, v2)}}
		msgs := Check(level, mustParseProto(t, v2), prior)
		if len(msgs) == 0 || !contains(msgs, "{oldSchemaVersion: 1}") || contains(msgs, "{oldSchemaVersion: 2}") {
			t.Errorf("%s: %v, want refused against version 1 only", level, msgs)
		}
	}
	prior := []Prior{{1, mustParseProto(t, v2)}, {2, mustParseProto(t, v1)}}
	if msgs := Check(ForwardTransitive, mustParseProto(t, v1), prior); len(msgs) == 0 || !contains(msgs, "{oldSchemaVersion: 1}") {
		t.Errorf("%s: %v, want refused against version 1", ForwardTransitive, msgs)
	}
}

func TestProtobufParse(t *testing.T) {
	for _, bad := range []string{
		`syntax = "proto3"; message {`,
		`syntax = "proto3"; message A { Missing m = 1; }`,
		`syntax = "proto3"; import "other.proto"; message A { int32 n = 1; }`,
		`syntax = "proto3"; import "/etc/passwd"; message A { int32 n = 1; }`,
		`syntax = "proto3"; message A { int32 n = 1; string s = 1; }`,
	} {
		if _, err := Parse(TypeProtobuf, bad, nil); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("Parse(%s): %v, want ErrInvalidSchema", bad, err)
		}
	}
	// A reference is an import by its name; the standard imports resolve.
	line := Resolved{Name: "line.proto", Type: TypeProtobuf, Text: "syntax = \"proto3\";\npackage shop;\nmessage Line { int32 qty = 1; }"}
	s := mustParseProto(t, proto3(`import "line.proto"; import "google/protobuf/timestamp.proto";
message Order { repeated Line lines = 1; google.protobuf.Timestamp at = 2; }`), line)
	if s.RecordName() != "shop.Order" {
		t.Errorf("record name %q, want shop.Order", s.RecordName())
	}
	if _, err := Parse(TypeProtobuf, proto3(`import "line.proto"; message Order { Line l = 1; }`), []Resolved{{Name: "line.proto", Type: TypeAvro, Text: `"string"`}}); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("an Avro reference: %v", err)
	}
}

func TestValidateProtobuf(t *testing.T) {
	s := mustParseProto(t, proto3(`message Order { int64 id = 1; string note = 2; message Line { int32 qty = 1; } }
message Other { bytes b = 1; }`))
	var order []byte
	order = protowire.AppendTag(order, 1, protowire.VarintType)
	order = protowire.AppendVarint(order, 7)
	order = protowire.AppendTag(order, 2, protowire.BytesType)
	order = protowire.AppendString(order, "hi")
	framed := func(path []int, body []byte) []byte { return append(AppendMessageIndexes(nil, path), body...) }
	for name, b := range map[string][]byte{
		"first message, short form": framed([]int{0}, order),
		"first message, long form":  append([]byte{2, 0}, order...),
		"nested message":            framed([]int{0, 0}, []byte{8, 3}),
		"second message":            framed([]int{1}, []byte{10, 1, 0xff}),
		"empty message":             framed([]int{0}, nil),
	} {
		if err := s.Validate(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"no indexes":             nil,
		"index out of range":     framed([]int{5}, order),
		"nested out of range":    framed([]int{1, 0}, nil),
		"truncated message":      framed([]int{0}, order[:len(order)-1]),
		"string is not UTF-8":    framed([]int{0}, []byte{0x12, 1, 0xff}),
		"length past the end":    framed([]int{0}, []byte{0x12, 5, 'a'}),
		"negative index count":   {0x01},
		"truncated index varint": {0x80},
	} {
		if err := s.Validate(b); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
	p2 := mustParseProto(t, "syntax = \"proto2\";\nmessage R { required int32 n = 1; }")
	if err := p2.Validate([]byte{0}); err == nil {
		t.Error("a proto2 message without its required field validated")
	}
}

func TestMessageIndexes(t *testing.T) {
	for _, path := range [][]int{{0}, {1}, {0, 2}, {3, 1, 4}} {
		b := AppendMessageIndexes(nil, path)
		got, rest, err := MessageIndexes(append(b, 9))
		if err != nil || len(rest) != 1 || len(got) != len(path) {
			t.Fatalf("%v: %v %v %v", path, got, rest, err)
		}
		for i := range path {
			if got[i] != path[i] {
				t.Fatalf("%v: read %v", path, got)
			}
		}
	}
}

func FuzzValidateProtobuf(f *testing.F) {
	s, err := Parse(TypeProtobuf, proto3(`message Order { int64 id = 1; string note = 2; repeated Order sub = 3; map<string, int32> m = 4; }`), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 8, 7, 0x12, 2, 'h', 'i'})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = s.Validate(b) // must not panic
	})
}
