package api

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// The drift test: openapi.json and package v1 describe the same bodies. Each documented
// operation's JSON request and success answer is walked against its Go type, field by
// field: a property without a field or a field without a property fails, and so do a
// required property the Go side may leave out (omitempty), an answer's field that is
// always sent but not required, and a JSON type that does not fit the Go one. Every
// documented operation needs a type here, every type of package v1 must be reached,
// and every schema of the document too.

// wireOp is an operation's Go types: its request body (nil: none) and its success
// answers, one per oneOf alternative of the documented schema (none: no JSON body).
type wireOp struct {
	req  any
	resp []any
}

func op(req any, resp ...any) wireOp { return wireOp{req, resp} }

// wireOps maps "METHOD path" of openapi.json to its wire types.
var wireOps = map[string]wireOp{
	"GET /healthz":                      op(nil, v1.Status{}),
	"GET /metrics":                      op(nil), // Prometheus text
	"DELETE /v1/topics/{topic}":         op(nil), // 204, no body
	"DELETE /v1/groups/{group}":         op(nil), // 204, no body
	"GET /readyz":                       op(nil, v1.Status{}),
	"GET /v1/openapi.json":              op(nil, map[string]any{}), // the document itself
	"POST /v1/topics":                   op(v1.CreateTopicRequest{}, v1.Topic{}),
	"GET /v1/topics":                    op(nil, v1.TopicList{}),
	"GET /v1/topics/{topic}":            op(nil, v1.Topic{}),
	"PATCH /v1/topics/{topic}":          op(v1.UpdateTopicRequest{}, v1.Topic{}),
	"GET /v1/topics/{topic}/partitions": op(nil, v1.PartitionList{}),
	"GET /v1/topics/{topic}/usage":      op(nil, v1.TopicUsage{}),
	"GET /v1/topics/{topic}/table":      op(nil, v1.TableStatus{}),
	"GET /v1/topics/{topic}/partitions/{partition}/offsets":         op(nil, v1.OffsetAnswer{}),
	"GET /v1/topics/{topic}/partitions/{partition}/records":         op(nil, v1.FetchResponse{}),
	"POST /v1/topics/{topic}/partitions/{partition}/records:delete": op(v1.DeleteRecordsRequest{}, v1.Partition{}),
	"POST /v1/topics/{topic}/records":                               op(v1.ProduceRequest{}, v1.ProduceResponse{}, v1.BatchProduceResponse{}),
	"GET /v1/groups":                                                op(nil, v1.GroupList{}),
	"GET /v1/groups/{group}":                                        op(nil, v1.Group{}),
	"POST /v1/groups/{group}/heartbeat":                             op(v1.HeartbeatRequest{}, v1.HeartbeatResponse{}),
	"GET /v1/groups/{group}/offsets":                                op(nil, v1.GroupOffsets{}),
	"POST /v1/groups/{group}/offsets":                               op(v1.OffsetCommitRequest{}, v1.GroupOffsets{}),
	"POST /v1/groups/{group}/offsets:reset":                         op(v1.ResetOffsetsRequest{}, v1.GroupOffsets{}),
	"GET /v1/groups/{group}/lag":                                    op(nil, v1.GroupLag{}),
	"POST /v1/producers":                                            op(v1.InitProducerRequest{}, v1.InitProducerResponse{}),
	"POST /v1/records":                                              op(v1.TransactRequest{}, v1.TransactResponse{}),
	"GET /v1/acls":                                                  op(nil, v1.ACLList{}),
	"POST /v1/acls":                                                 op(v1.ACLBinding{}, v1.ACLBinding{}),
	"DELETE /v1/acls":                                               op(nil, v1.ACLDeleted{}),
	"GET /v1/quotas":                                                op(nil, v1.QuotaList{}),
	"PUT /v1/quotas":                                                op(v1.PutQuotasRequest{}, v1.QuotaEntry{}),
	"GET /v1/keys":                                                  op(nil, v1.KeyList{}),
	"POST /v1/keys":                                                 op(v1.CreateKeyRequest{}, v1.Key{}),
	"DELETE /v1/keys/{key}":                                         op(nil, v1.Key{}),
	"GET /v1/scram-credentials":                                     op(nil, v1.ScramUserList{}),
	"PUT /v1/scram-credentials/{user}":                              op(v1.SetScramCredentialRequest{}, v1.ScramUser{}),
	"DELETE /v1/scram-credentials/{user}":                           op(nil, v1.ScramUser{}),
	"GET /v1/audit":                                                 op(nil, v1.AuditPage{}),
	"GET /v1/nodes":                                                 op(nil, v1.NodeList{}),
	"GET /v1/share-groups":                                          op(nil, v1.ShareGroupList{}),
	"GET /v1/share-groups/{group}":                                  op(nil, v1.ShareGroup{}),
	"PUT /v1/share-groups/{group}":                                  op(v1.ShareGroupConfigs{}, v1.ShareGroupConfigs{}),
	"DELETE /v1/share-groups/{group}":                               op(nil), // 204, no body
	"POST /v1/share-groups/{group}/records":                         op(v1.ShareRecordsRequest{}, v1.ShareRecordsResponse{}),
	"POST /v1/share-groups/{group}/acks":                            op(v1.ShareAckRequest{}), // 204, no body
	"DELETE /v1/share-groups/{group}/members/{member}":              op(nil),                  // 204, no body
	"POST /v1/share-groups/{group}/offsets:reset":                   op(v1.ResetOffsetsRequest{}, v1.GroupOffsets{}),
	"PUT /v1/share-groups/{group}/push":                             op(v1.PushSubscriptionRequest{}, v1.PushSubscription{}),
	"GET /v1/share-groups/{group}/push":                             op(nil, v1.PushSubscription{}),
	"DELETE /v1/share-groups/{group}/push":                          op(nil), // 204, no body
	"POST /v1/share-groups/{group}/push:pause":                      op(nil, v1.PushSubscription{}),
	"POST /v1/share-groups/{group}/push:resume":                     op(nil, v1.PushSubscription{}),
	"POST /v1/share-groups/{group}/push:rotate-secret":              op(nil, v1.PushSecret{}),
}

// openSchemas may document members their Go type does not hold: a problem's extension
// members, which vary by code.
var openSchemas = map[string]bool{"Problem": true}

func TestOpenAPIMatchesWireTypes(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	w := &wireWalk{schemas: doc.Components.Schemas, reachedTypes: map[reflect.Type]bool{}, reachedSchemas: map[string]bool{}}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			key := strings.ToUpper(method) + " " + path
			documented[key] = true
			var o struct {
				RequestBody struct {
					Content map[string]struct {
						Schema any `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
				Responses map[string]struct {
					Content map[string]struct {
						Schema any `json:"schema"`
					} `json:"content"`
				} `json:"responses"`
			}
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			wo, ok := wireOps[key]
			if !ok {
				t.Errorf("%s is documented but has no wire types in wireOps", key)
				continue
			}
			if c, ok := o.RequestBody.Content[v1.ContentTypeJSON]; ok {
				if wo.req == nil {
					t.Errorf("%s documents a JSON request body; wireOps has no type for it", key)
				} else {
					w.compare(t, key+" request", reflect.TypeOf(wo.req), c.Schema, false)
				}
			} else if wo.req != nil {
				t.Errorf("%s: wireOps has a request type %T, the document no JSON request body", key, wo.req)
			}
			var answered bool
			for status, r := range o.Responses {
				c, ok := r.Content[v1.ContentTypeJSON]
				if !ok || !strings.HasPrefix(status, "2") {
					continue
				}
				answered = true
				alts := []any{c.Schema}
				if m, ok := c.Schema.(map[string]any); ok && m["oneOf"] != nil {
					alts = m["oneOf"].([]any)
				}
				if len(alts) != len(wo.resp) {
					t.Errorf("%s %s: the document has %d answer schemas, wireOps %d types", key, status, len(alts), len(wo.resp))
					continue
				}
				for i, alt := range alts {
					w.compare(t, key+" "+status, reflect.TypeOf(wo.resp[i]), alt, true)
				}
			}
			if !answered && len(wo.resp) > 0 {
				t.Errorf("%s: wireOps has answer types, the document no JSON answer", key)
			}
		}
	}
	for key := range wireOps {
		if !documented[key] {
			t.Errorf("wireOps has %s, which openapi.json does not document", key)
		}
	}
	// The problem body answers every error: not reached through a success answer.
	w.compare(t, "problem", reflect.TypeFor[v1.Problem](), map[string]any{"$ref": "#/components/schemas/Problem"}, true)

	for _, name := range v1TypeNames(t) {
		if !w.reachedName(name) {
			t.Errorf("v1.%s is in no documented body: document it, or reach it from wireOps", name)
		}
	}
	for name := range doc.Components.Schemas {
		if !w.reachedSchemas[name] {
			t.Errorf("schema %s is in no documented body reached from wireOps: delete it or use it", name)
		}
	}
}

// errorfer is where compare reports: a test, or collect.
type errorfer interface {
	Errorf(format string, args ...any)
}

// collect keeps what compare reports, to try a oneOf alternative.
type collect []string

func (c *collect) Errorf(format string, args ...any) { *c = append(*c, fmt.Sprintf(format, args...)) }

// wireWalk compares Go types with schemas and remembers what it has reached.
type wireWalk struct {
	schemas        map[string]any
	reachedTypes   map[reflect.Type]bool
	reachedSchemas map[string]bool
}

func (w *wireWalk) reachedName(name string) bool {
	for t := range w.reachedTypes {
		if t.PkgPath() == reflect.TypeFor[v1.Topic]().PkgPath() && t.Name() == name {
			return true
		}
	}
	return false
}

var (
	rawType       = reflect.TypeFor[json.RawMessage]()
	timeType      = reflect.TypeFor[time.Time]()
	timestampType = reflect.TypeFor[v1.Timestamp]()
	configType    = reflect.TypeFor[v1.ConfigValue]()
)

// resolve follows $ref, marking the schemas it passes.
func (w *wireWalk) resolve(s any) (map[string]any, string) {
	m, _ := s.(map[string]any)
	name := ""
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			break
		}
		name = strings.TrimPrefix(ref, "#/components/schemas/")
		w.reachedSchemas[name] = true
		m, _ = w.schemas[name].(map[string]any)
	}
	return m, name
}

// schemaTypes is a schema's "type", as a list ("" for a schema without one).
func schemaTypes(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// compare checks Go type gt against schema s at where; answer says the type is sent by
// the server, whose fields without omitempty are then always present, so required.
func (w *wireWalk) compare(t errorfer, where string, gt reflect.Type, s any, answer bool) {
	m, name := w.resolve(s)
	if m == nil {
		t.Errorf("%s: no schema for %s", where, gt)
		return
	}
	if name != "" {
		where += " (" + name + ")"
	}
	w.reachedTypes[gt] = true
	for gt.Kind() == reflect.Pointer {
		gt = gt.Elem()
		w.reachedTypes[gt] = true
	}
	if alts, ok := m["oneOf"].([]any); ok {
		// One of the alternatives must fit; the others are other JSON forms, which only
		// raw values take.
		if gt == rawType {
			for _, a := range alts {
				w.resolve(a)
			}
			return
		}
		for _, a := range alts {
			var sub collect
			w.compare(&sub, where, gt, a, answer)
			if len(sub) == 0 {
				return
			}
		}
		t.Errorf("%s: %s fits none of the oneOf alternatives", where, gt)
		return
	}
	types := schemaTypes(m)
	want := func(jsonTypes ...string) {
		if len(types) == 0 {
			return // a schema without a type takes anything
		}
		for _, jt := range types {
			if jt != "null" && !slices.Contains(jsonTypes, jt) {
				t.Errorf("%s: the document says %v, the Go type %s is %v", where, types, gt, jsonTypes)
				return
			}
		}
	}
	switch {
	case gt == rawType:
		return // any JSON: the document says what it may be
	case gt == timestampType:
		want("integer")
		return
	case gt == configType:
		want("string", "number", "boolean")
		return
	case gt == timeType:
		want("string")
		return
	}
	switch gt.Kind() {
	case reflect.String:
		want("string")
	case reflect.Bool:
		want("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want("integer")
	case reflect.Float32, reflect.Float64:
		want("number", "integer")
	case reflect.Slice:
		want("array")
		if items, ok := m["items"]; ok {
			w.compare(t, where+"[]", gt.Elem(), items, answer)
		}
	case reflect.Map:
		want("object")
		if ap, ok := m["additionalProperties"].(map[string]any); ok {
			w.compare(t, where+"{}", gt.Elem(), ap, answer)
		}
	case reflect.Interface:
	case reflect.Struct:
		want("object")
		w.compareObject(t, where, name, gt, m, answer)
	default:
		t.Errorf("%s: Go type %s has no JSON type this test knows", where, gt)
	}
}

// wireField is a struct field as encoding/json sees it.
type wireField struct {
	name      string
	typ       reflect.Type
	omitEmpty bool
}

// jsonFields lists gt's JSON members, embedded structs flattened.
func jsonFields(gt reflect.Type) []wireField {
	var out []wireField
	for i := range gt.NumField() {
		f := gt.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		out = append(out, wireField{name, f.Type, omit})
	}
	return out
}

func (w *wireWalk) compareObject(t errorfer, where, name string, gt reflect.Type, m map[string]any, answer bool) {
	props, _ := m["properties"].(map[string]any)
	var required []string
	if rs, ok := m["required"].([]any); ok {
		for _, r := range rs {
			s, _ := r.(string)
			required = append(required, s)
		}
	}
	fields := jsonFields(gt)
	seen := map[string]bool{}
	for _, f := range fields {
		seen[f.name] = true
		p, ok := props[f.name]
		if !ok {
			t.Errorf("%s: Go field %s.%s (json %q) is not documented", where, gt.Name(), f.name, f.name)
			continue
		}
		req := slices.Contains(required, f.name)
		switch {
		case req && f.omitEmpty:
			t.Errorf("%s: %q is required in the document, but %s may leave it out (omitempty)", where, f.name, gt)
		case answer && !f.omitEmpty && !req:
			t.Errorf("%s: %s always sends %q (no omitempty): list it as required in the document", where, gt, f.name)
		}
		w.compare(t, where+"."+f.name, f.typ, p, answer)
	}
	if openSchemas[name] {
		return
	}
	var missing []string
	for p := range props {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("%s: documented property %q has no field in %s", where, p, gt)
	}
	for _, r := range required {
		if !seen[r] && !openSchemas[name] {
			t.Errorf("%s: required %q is not a property", where, r)
		}
	}
}

// v1TypeNames lists the exported struct types of package v1, from its source.
func v1TypeNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("v1", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() {
					out = append(out, ts.Name.Name)
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d types in package v1: %v", len(out), out)
	}
	sort.Strings(out)
	return out
}

// TestErrorCodesMatchWireTypes: package v1's error codes are the server's table, name
// for name and in its order (TestOpenAPIErrorCodes holds the document to the table).
func TestErrorCodesMatchWireTypes(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("v1", "codes.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	type named struct{ name, value string }
	var consts []named
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("v1.%s is not a string literal", n.Name)
				}
				v, _ := strconv.Unquote(lit.Value)
				consts = append(consts, named{n.Name, v})
			}
		}
	}
	// The table's names, read the same way from this package's source.
	af, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	ast.Inspect(af, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "codeTable" {
			for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
				table = append(table, e.(*ast.CompositeLit).Elts[0].(*ast.Ident).Name)
			}
		}
		return true
	})
	if len(table) != len(codeTable) {
		t.Fatalf("read %d names of codeTable, it has %d", len(table), len(codeTable))
	}
	if len(consts) != len(codeTable) {
		t.Errorf("package v1 has %d codes, the server's table %d", len(consts), len(codeTable))
	}
	for i, c := range codeTable {
		if i >= len(consts) {
			t.Errorf("v1 lacks %s = %q", table[i], c.Code)
			continue
		}
		if consts[i].name != table[i] || consts[i].value != string(c.Code) {
			t.Errorf("code %d: v1 has %s = %q, the table %s = %q", i, consts[i].name, consts[i].value, table[i], c.Code)
		}
	}
}
