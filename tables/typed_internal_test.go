package tables

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/strata-io/strata/catalog"
)

// TestEvolve: columns keep their ids and places, new ones (and their nested fields)
// take ids past the last, types widen as Iceberg allows and never narrow, and a change
// Iceberg does not allow is errMismatch.
func TestEvolve(t *testing.T) {
	p := iceberg.PrimitiveTypes
	base := defaultSchema(catalog.Config{KeyFormat: "string", ValueFormat: "binary"})
	v1 := []iceberg.NestedField{{Name: "a", Type: p.Int32}, {Name: "s", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{{Name: "x", Type: p.Float32}}}}}
	s1, err := evolve(base, base.HighestFieldID(), v1)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s1.FindFieldByName("a")
	x, _ := s1.FindFieldByName("s.x")
	if a.ID != 10 || x.ID != 12 || a.Required {
		t.Fatalf("ids a %d s.x %d (required %v), want 10 and 12, optional: %s", a.ID, x.ID, a.Required, s1)
	}
	if same, _ := evolve(s1, 12, v1); same != s1 {
		t.Fatal("an unchanged schema evolved")
	}
	// a widens, s gains y, b is new; a field the schema dropped (none here) would stay.
	v2 := []iceberg.NestedField{{Name: "b", Type: p.String}, {Name: "a", Type: p.Int64},
		{Name: "s", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{{Name: "y", Type: p.Bool}, {Name: "x", Type: p.Float64}}}}}
	s2, err := evolve(s1, 12, v2)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := s2.FindFieldByName("a")
	x2, _ := s2.FindFieldByName("s.x")
	y2, _ := s2.FindFieldByName("s.y")
	b2, _ := s2.FindFieldByName("b")
	if a2.ID != 10 || !a2.Type.Equals(p.Int64) || x2.ID != 12 || !x2.Type.Equals(p.Float64) || b2.ID != 13 || y2.ID != 14 {
		t.Fatalf("evolved: %s", s2)
	}
	if names := s2.Fields(); names[6].Name != "a" || names[8].Name != "b" {
		t.Fatalf("columns moved: %s", s2)
	}
	// Narrowing keeps the wider type.
	if s3, err := evolve(s2, 14, []iceberg.NestedField{{Name: "a", Type: p.Int32}}); err != nil || s3 != s2 {
		t.Fatalf("narrowing: %v, %s", err, s3)
	}
	for _, bad := range []iceberg.NestedField{{Name: "a", Type: p.String}, {Name: "s", Type: p.Int32}, {Name: "b", Type: &iceberg.ListType{Element: p.String}}} {
		if _, err := evolve(s2, 14, []iceberg.NestedField{bad}); !errors.Is(err, errMismatch) {
			t.Errorf("%s to %s: %v, want errMismatch", bad.Name, bad.Type, err)
		}
	}
	// A value field named like a default column takes the prefix; the prefix is one to one.
	for field, col := range map[string]string{"offset": "value_offset", "value_x": "value_value_x", "x": "x"} {
		if colName(field) != col || fieldName(col) != field {
			t.Errorf("colName(%q) = %q, fieldName back %q", field, colName(field), fieldName(colName(field)))
		}
	}
}

// TestJSONRefs: a JSON schema's references within its own document are followed (the
// root a $ref to its definitions, as generators write them); one back into a schema it
// is inside of, or to another document, is a JSON string column.
func TestJSONRefs(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"$ref":"#/definitions/Order","definitions":{
		"Order":{"type":"object","properties":{"id":{"type":"integer"},"ship":{"$ref":"#/definitions/Addr"},
			"parent":{"$ref":"#/definitions/Order"},"ext":{"$ref":"other.json"}}},
		"Addr":{"type":"object","properties":{"city":{"type":"string"}}}}}`), &doc); err != nil {
		t.Fatal(err)
	}
	got := jsonType(doc, doc, map[string]bool{}, 0)
	want := "struct<0: ext: optional string, 0: id: optional long, 0: parent: optional string, 0: ship: optional struct<0: city: optional string>>"
	if got.String() != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
