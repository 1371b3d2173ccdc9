package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestConfluentDiffExamples runs Confluent's own compatibility examples — the JSON
// Schema and Protobuf diff cases its registry is tested with, each an original and an
// update schema and whether Confluent finds the update compatible (it reads data the
// original wrote) — against this registry's rules, which must give the same answer
// for every one. The examples are Confluent's, not this repository's: set
// STRATA_CONFLUENT_SR to a checkout of confluentinc/schema-registry to run them. (At
// the time of writing: JSON Schema 104 + 28 draft-07 and 113 + 18 2020-12 cases,
// Protobuf 54, all agreeing.)
func TestConfluentDiffExamples(t *testing.T) {
	root := os.Getenv("STRATA_CONFLUENT_SR")
	if root == "" {
		t.Skip("set STRATA_CONFLUENT_SR to a checkout of Confluent's schema-registry to run its diff examples")
	}
	const js, pb = "json-schema-provider/src/test/resources/", "protobuf-provider/src/test/resources/"
	trailingComma := regexp.MustCompile(`,(\s*[}\]])`) // Jackson reads them; encoding/json does not
	for _, f := range []struct{ path, typ string }{
		{js + "diff-schema-examples.json", TypeJSON},
		{js + "diff-combined-schema-examples.json", TypeJSON},
		{js + "diff-schema-examples-2020-12.json", TypeJSON},
		{js + "diff-combined-schema-examples-2020-12.json", TypeJSON},
		{pb + "diff-schema-examples.json", TypeProtobuf},
	} {
		b, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatal(err)
		}
		var cases []struct {
			Description string          `json:"description"`
			Original    json.RawMessage `json:"original_schema"`
			Update      json.RawMessage `json:"update_schema"`
			Compatible  bool            `json:"compatible"`
			OrigDeps    []struct {
				Name       string `json:"name"`
				Dependency string `json:"dependency"`
			} `json:"original_dependencies"`
			UpdDeps []struct {
				Name       string `json:"name"`
				Dependency string `json:"dependency"`
			} `json:"update_dependencies"`
		}
		if err := json.Unmarshal(trailingComma.ReplaceAll(b, []byte("$1")), &cases); err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
		agree := 0
		for _, c := range cases {
			o, u := string(c.Original), string(c.Update)
			if f.typ == TypeProtobuf { // the .proto text is a JSON string
				_ = json.Unmarshal(c.Original, &o)
				_ = json.Unmarshal(c.Update, &u)
			}
			var oRefs, uRefs []Resolved
			for _, d := range c.OrigDeps {
				oRefs = append(oRefs, Resolved{Name: d.Name, Type: f.typ, Text: d.Dependency})
			}
			for _, d := range c.UpdDeps {
				uRefs = append(uRefs, Resolved{Name: d.Name, Type: f.typ, Text: d.Dependency})
			}
			po, err := Parse(f.typ, o, oRefs)
			if err != nil {
				t.Errorf("%s: %s: the original does not parse: %v", f.path, c.Description, err)
				continue
			}
			pu, err := Parse(f.typ, u, uRefs)
			if err != nil {
				t.Errorf("%s: %s: the update does not parse: %v", f.path, c.Description, err)
				continue
			}
			msgs := Check(Backward, pu, []Prior{{Version: 1, Schema: po}})
			if (len(msgs) == 0) != c.Compatible {
				t.Errorf("%s: %s: compatible %v, Confluent says %v (%v)", f.path, c.Description, len(msgs) == 0, c.Compatible, msgs)
				continue
			}
			agree++
		}
		t.Logf("%s: %d of %d agree", f.path, agree, len(cases))
	}
}
