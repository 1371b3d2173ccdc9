package registry

import (
	"errors"
	"fmt"
	"testing"
)

func rec(fields string) string {
	return `{"type":"record","name":"Order","fields":[` + fields + `]}`
}

// avroPairs are (old, new) schemas with what Confluent's registry (Avro's own checker)
// answers: backward is "the new schema reads data the old wrote", forward "the old
// schema reads data the new writes". The answers come from the Avro specification's
// schema resolution rules, case by case, not from the code under test.
var avroPairs = []struct {
	name              string
	old, new          string
	backward, forward bool
}{
	{"identical", rec(`{"name":"id","type":"long"}`), rec(`{"name":"id","type":"long"}`), true, true},
	{"add field with default", rec(`{"name":"id","type":"long"}`), rec(`{"name":"id","type":"long"},{"name":"note","type":"string","default":""}`), true, true},
	{"add field without default", rec(`{"name":"id","type":"long"}`), rec(`{"name":"id","type":"long"},{"name":"note","type":"string"}`), false, true},
	{"remove field with default", rec(`{"name":"id","type":"long"},{"name":"note","type":"string","default":""}`), rec(`{"name":"id","type":"long"}`), true, true},
	{"remove field without default", rec(`{"name":"id","type":"long"},{"name":"note","type":"string"}`), rec(`{"name":"id","type":"long"}`), true, false},
	{"int to long", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"long"}`), true, false},
	{"long to int", rec(`{"name":"n","type":"long"}`), rec(`{"name":"n","type":"int"}`), false, true},
	{"float to double", rec(`{"name":"n","type":"float"}`), rec(`{"name":"n","type":"double"}`), true, false},
	{"string to bytes", rec(`{"name":"s","type":"string"}`), rec(`{"name":"s","type":"bytes"}`), true, true},
	{"int to string", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"string"}`), false, false},
	{"enum adds a symbol", `{"type":"enum","name":"Color","symbols":["RED","GREEN"]}`, `{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}`, true, false},
	{"enum drops a symbol", `{"type":"enum","name":"Color","symbols":["RED","GREEN"]}`, `{"type":"enum","name":"Color","symbols":["RED"]}`, false, true},
	{"enum drops a symbol, reader default", `{"type":"enum","name":"Color","symbols":["RED","GREEN"]}`, `{"type":"enum","name":"Color","symbols":["RED"],"default":"RED"}`, true, true},
	{"type to nullable union", rec(`{"name":"s","type":"string"}`), rec(`{"name":"s","type":["null","string"]}`), true, false},
	{"nullable union to type", rec(`{"name":"s","type":["null","string"]}`), rec(`{"name":"s","type":"string"}`), false, true},
	{"union adds a branch", rec(`{"name":"v","type":["null","string"]}`), rec(`{"name":"v","type":["null","string","int"]}`), true, false},
	{"record renamed", `{"type":"record","name":"A","fields":[]}`, `{"type":"record","name":"B","fields":[]}`, false, false},
	{"record renamed with alias", `{"type":"record","name":"A","fields":[]}`, `{"type":"record","name":"B","aliases":["A"],"fields":[]}`, true, false},
	{"field renamed with alias", rec(`{"name":"a","type":"int"}`), rec(`{"name":"b","aliases":["a"],"type":"int"}`), true, false},
	{"fixed size changes", `{"type":"fixed","name":"H","size":16}`, `{"type":"fixed","name":"H","size":32}`, false, false},
	{"array items int to long", `{"type":"array","items":"int"}`, `{"type":"array","items":"long"}`, true, false},
	{"map values long to int", `{"type":"map","values":"long"}`, `{"type":"map","values":"int"}`, false, true},
	{"string to record", `"string"`, rec(``), false, false},
	{"add optional field, null default", rec(`{"name":"id","type":"long"}`), rec(`{"name":"id","type":"long"},{"name":"tag","type":["null","string"],"default":null}`), true, true},
	{"nested record adds field without default",
		rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}`),
		rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string"}]}}`), false, true},
	{"long to double", `"long"`, `"double"`, true, false},
}

func mustParse(t *testing.T, text string) *Schema {
	t.Helper()
	s, err := Parse(TypeAvro, text, nil)
	if err != nil {
		t.Fatalf("parse %s: %v", text, err)
	}
	return s
}

// TestAvroCompatibility: every pair, in every level. With one earlier version the
// transitive levels answer as their plain ones.
func TestAvroCompatibility(t *testing.T) {
	for _, tc := range avroPairs {
		old, nw := mustParse(t, tc.old), mustParse(t, tc.new)
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

// TestAvroTransitive: three versions where the latest passes its plain level against
// the one before and fails the transitive level against the first.
func TestAvroTransitive(t *testing.T) {
	for _, tc := range []struct {
		level    Level
		versions [3]string
		plain    bool // the plain level's answer
	}{
		{BackwardTransitive, [3]string{
			rec(`{"name":"a","type":"int"}`),
			rec(`{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}`),
			rec(`{"name":"a","type":"int"},{"name":"b","type":"string"}`)}, true},
		{ForwardTransitive, [3]string{
			rec(`{"name":"a","type":"int"},{"name":"b","type":"string"}`),
			rec(`{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}`),
			rec(`{"name":"a","type":"int"}`)}, true},
		{FullTransitive, [3]string{
			rec(`{"name":"a","type":"int"}`),
			rec(`{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}`),
			rec(`{"name":"a","type":"int"},{"name":"b","type":"string"}`)}, true},
	} {
		prior := []Prior{{1, mustParse(t, tc.versions[0])}, {2, mustParse(t, tc.versions[1])}}
		cand := mustParse(t, tc.versions[2])
		plain := Level(string(tc.level)[:len(tc.level)-len("_TRANSITIVE")])
		if got := len(Check(plain, cand, prior)) == 0; got != tc.plain {
			t.Errorf("%s: compatible %v, want %v", plain, got, tc.plain)
		}
		msgs := Check(tc.level, cand, prior)
		if len(msgs) == 0 {
			t.Errorf("%s: compatible, want refused against version 1", tc.level)
		} else if fmt.Sprint(msgs) == "" || !contains(msgs, "{oldSchemaVersion: 1}") {
			t.Errorf("%s: messages %v do not name version 1", tc.level, msgs)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct{ typ, text string }{
		{TypeAvro, `{"type":"record"`},
		{TypeAvro, `{"type":"record","name":"X","fields":[{"name":"a","type":"Missing"}]}`},
		{TypeAvro, `{"type":"nope"}`},
		{"XML", `<x/>`},
	} {
		if _, err := Parse(tc.typ, tc.text, nil); !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("Parse(%s, %s): %v, want ErrInvalidSchema", tc.typ, tc.text, err)
		}
	}
	// A reference resolves a named type.
	addr := Resolved{Name: "Addr", Type: TypeAvro, Text: `{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}`}
	if _, err := Parse(TypeAvro, rec(`{"name":"a","type":"Addr"}`), []Resolved{addr}); err != nil {
		t.Errorf("with its reference: %v", err)
	}
}

func TestCanonicalIdentity(t *testing.T) {
	a := mustParse(t, `{"type": "record", "name": "R", "fields": [ {"name":"a", "type":"int"} ]}`)
	b := mustParse(t, `{"fields":[{"type":"int","name":"a"}],"name":"R","type":"record"}`)
	c := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":1}]}`)
	if Fingerprint(a, nil) != Fingerprint(b, nil) {
		t.Errorf("two spellings of one schema: %s vs %s", a.Canonical(), b.Canonical())
	}
	if Fingerprint(a, nil) == Fingerprint(c, nil) {
		t.Error("a default does not change the fingerprint")
	}
}
