package registry

import (
	"errors"
	"strings"
	"testing"
)

func obj(props string, extra ...string) string {
	s := `{"type":"object","properties":{` + props + `}`
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

const closed = `"additionalProperties":false`

// jsonPairs are (old, new) JSON schemas with the answer Confluent's registry gives:
// backward is "data the old schema accepts, the new accepts" (Confluent compares the
// old as original with the new as update), forward the other way. Each answer follows
// from Confluent's documented rules for JSON Schema (its content models: adding a
// property to an open model is not backward compatible; removing one from a closed
// model is not forward compatible), case by case, not from the code under test.
var jsonPairs = []struct {
	name              string
	old, new          string
	backward, forward bool
}{
	{"identical", obj(`"a":{"type":"string"}`), obj(`"a":{"type":"string"}`), true, true},
	{"open model: add a property", obj(`"a":{"type":"string"}`), obj(`"a":{"type":"string"},"b":{"type":"integer"}`), false, true},
	{"open model: remove a property", obj(`"a":{"type":"string"},"b":{"type":"integer"}`), obj(`"a":{"type":"string"}`), true, false},
	{"open model: add a property of any type", obj(`"a":{"type":"string"}`), obj(`"a":{"type":"string"},"b":{}`), true, true},
	{"closed model: add an optional property", obj(`"a":{"type":"string"}`, closed), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, closed), true, false},
	{"closed model: add a required property", obj(`"a":{"type":"string"}`, closed), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, closed, `"required":["b"]`), false, false},
	{"closed model: add a required property with a default", obj(`"a":{"type":"string"}`, closed), obj(`"a":{"type":"string"},"b":{"type":"integer","default":0}`, closed, `"required":["b"]`), true, false},
	{"closed to open", obj(`"a":{"type":"string"}`, closed), obj(`"a":{"type":"string"}`), true, false},
	{"make a property required", obj(`"a":{"type":"string"}`), obj(`"a":{"type":"string"}`, `"required":["a"]`), false, true},
	{"property type changes", obj(`"a":{"type":"string"}`), obj(`"a":{"type":"integer"}`), false, false},
	{"integer to number", `{"type":"integer"}`, `{"type":"number"}`, true, false},
	{"string to nullable string", `{"type":"string"}`, `{"type":["string","null"]}`, true, false},
	{"maxLength decreased", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true},
	{"minimum added", `{"type":"number"}`, `{"type":"number","minimum":0}`, false, true},
	{"pattern added", `{"type":"string"}`, `{"type":"string","pattern":"^a"}`, false, true},
	{"enum extended", `{"enum":["a","b"]}`, `{"enum":["a","b","c"]}`, true, false},
	{"anyOf gains a branch", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]}`, true, false},
	{"oneOf to anyOf", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, true, false},
	{"array items widen", `{"type":"array","items":{"type":"integer"}}`, `{"type":"array","items":{"type":"number"}}`, true, false},
	{"nested via $ref: maxLength increased",
		`{"type":"object","properties":{"a":{"$ref":"#/definitions/S"}},"definitions":{"S":{"type":"string","maxLength":5}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/definitions/S"}},"definitions":{"S":{"type":"string","maxLength":10}}}`, true, false},
	{"partially open: added property the pattern covers",
		obj(`"a":{"type":"string"}`, `"patternProperties":{"^x":{"type":"integer"}}`),
		obj(`"a":{"type":"string"},"x1":{"type":"integer"}`, `"patternProperties":{"^x":{"type":"integer"}}`), true, true},
	{"multipleOf reduced", `{"type":"number","multipleOf":10}`, `{"type":"number","multipleOf":5}`, true, false},
}

func mustParseJSON(t *testing.T, text string) *Schema {
	t.Helper()
	s, err := Parse(TypeJSON, text, nil)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	return s
}

// TestJSONSchemaCompatibility: every pair in every level.
func TestJSONSchemaCompatibility(t *testing.T) {
	for _, tc := range jsonPairs {
		old, nw := mustParseJSON(t, tc.old), mustParseJSON(t, tc.new)
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

// TestJSONSchemaTransitive: the plain level passes against the latest, the transitive
// one fails against the first.
func TestJSONSchemaTransitive(t *testing.T) {
	for _, tc := range []struct {
		level    Level
		versions [3]string
	}{
		// The latest equals version 2 (registered under NONE, say) and differs from
		// version 1 in the direction the level checks.
		{BackwardTransitive, [3]string{`{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, `{"type":"string","maxLength":5}`}},
		{ForwardTransitive, [3]string{`{"type":"string","maxLength":5}`, `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":10}`}},
		{FullTransitive, [3]string{obj(`"a":{"type":"string"}`), obj(`"a":{"type":"string"},"b":{"type":"string"}`), obj(`"a":{"type":"string"},"b":{"type":"string"}`)}},
	} {
		prior := []Prior{{1, mustParseJSON(t, tc.versions[0])}, {2, mustParseJSON(t, tc.versions[1])}}
		cand := mustParseJSON(t, tc.versions[2])
		msgs := Check(tc.level, cand, prior)
		if len(msgs) == 0 || !contains(msgs, "{oldSchemaVersion: 1}") {
			t.Errorf("%s: %v, want refused against version 1", tc.level, msgs)
		}
		if contains(msgs, "{oldSchemaVersion: 2}") {
			t.Errorf("%s: %v, refused against version 2 too", tc.level, msgs)
		}
	}
}

func TestJSONSchemaParse(t *testing.T) {
	for _, bad := range []string{`{"type":`, `[1]`, `{"type":"nope"}`, `{"$ref":"other.json"}`, `{"$ref":"file:///etc/passwd"}`, `{"minimum":"x"}`} {
		if _, err := Parse(TypeJSON, bad, nil); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("Parse(%s): %v, want ErrInvalidSchema", bad, err)
		}
	}
	a := mustParseJSON(t, `{ "type": "object", "title": "Order", "properties": {"a": {"type":"string"}} }`)
	b := mustParseJSON(t, `{"properties":{"a":{"type":"string"}},"title":"Order","type":"object"}`)
	if Fingerprint(a, nil) != Fingerprint(b, nil) {
		t.Errorf("two spellings: %s vs %s", a.Canonical(), b.Canonical())
	}
	if a.RecordName() != "Order" {
		t.Errorf("record name %q, want the title", a.RecordName())
	}
	// A reference by name, resolved from the references given, never from the network.
	addr := Resolved{Name: "address.json", Type: TypeJSON, Text: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`}
	s, err := Parse(TypeJSON, obj(`"addr":{"$ref":"address.json"}`), []Resolved{addr})
	if err != nil {
		t.Fatalf("with its reference: %v", err)
	}
	if err := s.Validate([]byte(`{"addr":{"city":"Oslo"}}`)); err != nil {
		t.Errorf("valid through the reference: %v", err)
	}
	if err := s.Validate([]byte(`{"addr":{}}`)); err == nil {
		t.Error("the reference's required property not enforced")
	}
	// Under an absolute "$id", a relative reference resolves against it.
	withID, err := Parse(TypeJSON, `{"$id":"https://example.com/schemas/order.json","type":"object","properties":{"addr":{"$ref":"address.json"}}}`, []Resolved{addr})
	if err != nil {
		t.Fatalf("with an $id: %v", err)
	}
	if err := withID.Validate([]byte(`{"addr":{}}`)); err == nil {
		t.Error("under an $id, the reference's required property not enforced")
	}
	// Compatibility through the reference: the new version's referenced schema is the same.
	if msgs := Check(Backward, s, []Prior{{1, s}}); len(msgs) > 0 {
		t.Errorf("a schema against itself: %v", msgs)
	}
}

func TestValidateJSONSchema(t *testing.T) {
	s := mustParseJSON(t, obj(`"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}`, `"required":["id"]`))
	if err := s.Validate([]byte(`{"id":7,"tags":["a"]}`)); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for _, bad := range []string{``, `{"id":7`, `{"id":"7"}`, `{"tags":[]}`, `{"id":1} {"id":2}`, `{"id":1,"tags":[1]}`} {
		err := s.Validate([]byte(bad))
		if err == nil {
			t.Errorf("%q validated", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: the reason spans lines: %q", bad, err)
		}
	}
}

// TestJSONSchemaCompareBounded: nested unions built to make the branch matching
// explode are refused with a reason, not checked for hours; a schema with more
// subschemas than the compiler handles in reasonable time is refused as invalid.
func TestJSONSchemaCompareBounded(t *testing.T) {
	nested := func(leaf string) string {
		s := leaf
		for range 9 { // two branches that differ (so that neither collapses) and null
			s = `{"anyOf":[{"description":"a","anyOf":[` + s + `]},{"description":"b","anyOf":[` + s + `]},{"type":"null"}]}`
		}
		return s
	}
	old, nw := mustParseJSON(t, nested(`{"type":"string"}`)), mustParseJSON(t, nested(`{"type":"string","maxLength":1}`))
	msgs := Check(Backward, nw, []Prior{{1, old}})
	if len(msgs) == 0 || !strings.Contains(strings.Join(msgs, " "), "too intricate") {
		t.Fatalf("%.300v", msgs)
	}
	huge := `{"anyOf":[` + strings.Repeat(`{},`, maxJSONSchemaNodes) + `{}]}`
	if _, err := Parse(TypeJSON, huge, nil); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("a schema of %d subschemas: %v", maxJSONSchemaNodes+1, err)
	}
}
