package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema: santhosh-tekuri/jsonschema compiles a schema (draft-07 unless its
// "$schema" names another) with its references and validates values. The canonical
// form is the schema's JSON with its keys sorted and no spaces, so two spellings of one
// schema get one id. Compatibility is written here (no Go library has it): the rules
// Confluent's registry applies to the draft-07 subset it checks, comparing a writer's
// schema (Confluent's "original") with a reader's ("update") keyword by keyword:
// types (integer widens to number, a type to a union holding it), string and number
// bounds, enums, objects under Confluent's content models (open: any property may
// appear; closed: additionalProperties false; partially open: patternProperties or an
// additionalProperties schema), arrays' items and bounds, allOf/anyOf/oneOf (branches
// matched one to one) and not; 2019-09 and 2020-12 spellings are read as draft-07's.
// What it does not model — if/then/else, Confluent's rule metadata — compares as
// unchanged. TestConfluentDiffExamples checks it against Confluent's own examples.
//
// References: a reference's name is the URL (or a path relative to the schema's own
// base, mem://schema/) that "$ref" names; nothing is ever loaded from a file or the
// network (the loader refuses every URL it was not given).

// jsonBase is the base URL a schema and its relative references are compiled under.
const jsonBase = "mem://schema/"

type jsonSchemaFormat struct {
	sch   *jsonschema.Schema
	doc   any            // the parsed document, for compatibility
	docs  map[string]any // every document by its URL (the schema's and its references')
	text  string         // canonical
	title string
	// idBase is the schema's absolute "$id", against which relative references resolve.
	idBase *url.URL
}

// noLoader refuses every URL: a schema names only itself and its references.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not the schema or one of its references (schemas are never loaded from files or the network)", u)
}

func parseJSONSchema(text string, refs []Resolved) (*jsonSchemaFormat, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalidSchema, err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("%w: a JSON schema is an object or a boolean", ErrInvalidSchema)
	}
	nodes := countJSONNodes(doc)
	for _, r := range flattenRefs(refs, 0) {
		if d, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Text)); err == nil {
			nodes += countJSONNodes(d)
		}
	}
	if nodes > maxJSONSchemaNodes {
		// The compiler's work grows with the square of the subschemas: a schema of
		// tens of thousands would hold a node for minutes.
		return nil, fmt.Errorf("%w: the schema and its references hold %d objects; at most %d", ErrInvalidSchema, nodes, maxJSONSchemaNodes)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(noLoader{})
	f := &jsonSchemaFormat{doc: doc, docs: map[string]any{}}
	if m, ok := doc.(map[string]any); ok {
		// A schema with an absolute "$id" resolves relative "$ref"s against it: its
		// references are found there too.
		if id, ok := m["$id"].(string); ok {
			if u, err := url.Parse(id); err == nil && u.IsAbs() {
				f.idBase = u
			}
		}
	}
	if err := f.addRefs(c, refs, 0); err != nil {
		return nil, err
	}
	root := jsonBase + "root.json"
	if err := c.AddResource(root, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	f.docs[root] = doc
	if f.sch, err = c.Compile(root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	f.text = string(canon)
	if m, ok := doc.(map[string]any); ok {
		f.title, _ = m["title"].(string)
	}
	return f, nil
}

// jsonRefURL is where a reference named name lives: an absolute URL as it is, a
// relative name under jsonBase.
func jsonRefURL(name string) string {
	if u, err := url.Parse(name); err == nil && u.IsAbs() {
		return name
	}
	return jsonBase + strings.TrimPrefix(name, "/")
}

func (f *jsonSchemaFormat) addRefs(c *jsonschema.Compiler, refs []Resolved, depth int) error {
	if depth > maxRefDepth {
		return fmt.Errorf("%w: references nest deeper than %d", ErrInvalidSchema, maxRefDepth)
	}
	for _, r := range refs {
		if r.Type != TypeJSON {
			return fmt.Errorf("%w: reference %q is a %s schema; a JSON schema references JSON schemas", ErrInvalidSchema, r.Name, r.Type)
		}
		if err := f.addRefs(c, r.Refs, depth+1); err != nil {
			return err
		}
		d, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Text))
		if err != nil {
			return fmt.Errorf("%w: reference %q: %v", ErrInvalidSchema, r.Name, err)
		}
		u := jsonRefURL(r.Name)
		if _, ok := f.docs[u]; ok {
			continue // named twice (a diamond): the same document
		}
		if err := c.AddResource(u, d); err != nil {
			return fmt.Errorf("%w: reference %q: %v", ErrInvalidSchema, r.Name, err)
		}
		f.docs[u] = d
		if m, ok := d.(map[string]any); ok && f.idBase != nil && m["$id"] == nil {
			if rel, err := url.Parse(r.Name); err == nil && !rel.IsAbs() {
				if err := c.AddResource(f.idBase.ResolveReference(rel).String(), d); err != nil {
					return fmt.Errorf("%w: reference %q: %v", ErrInvalidSchema, r.Name, err)
				}
			}
		}
	}
	return nil
}

// maxJSONSchemaNodes bounds the objects and booleans (the possible subschemas) of a
// JSON schema with its references.
const maxJSONSchemaNodes = 10000

func countJSONNodes(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range x {
			n += countJSONNodes(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += countJSONNodes(e)
		}
		return n
	case bool:
		return 1
	}
	return 0
}

// flattenRefs lists references with theirs (bounded as addRefs bounds them).
func flattenRefs(refs []Resolved, depth int) []Resolved {
	if depth > maxRefDepth {
		return nil
	}
	out := append([]Resolved(nil), refs...)
	for _, r := range refs {
		out = append(out, flattenRefs(r.Refs, depth+1)...)
	}
	return out
}

func (f *jsonSchemaFormat) canonical() string  { return f.text }
func (f *jsonSchemaFormat) recordName() string { return f.title }

func (f *jsonSchemaFormat) validate(payload []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if err := f.sch.Validate(v); err != nil {
		return fmt.Errorf("does not match the JSON schema: %s", oneLine(err.Error()))
	}
	return nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
