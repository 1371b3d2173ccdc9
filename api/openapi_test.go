package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	OperationID string                     `json:"operationId"`
	Responses   map[string]json.RawMessage `json:"responses"`
	ErrorCodes  []Code                     `json:"x-error-codes"`
}

func loadOpenAPI(t *testing.T) (openAPIDoc, any) {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var generic any
	if err := json.Unmarshal(openAPIDocument, &generic); err != nil {
		t.Fatal(err)
	}
	return doc, generic
}

// TestOpenAPICoversRoutes walks chi's routes: each is in the document, and each
// documented operation is a route.
func TestOpenAPICoversRoutes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	a := newAPI(Config{}, testDeps{Catalog: newFakeCluster()})
	routes := walkRoutes(a.Handler().(chi.Routes))
	if len(routes) < 13 {
		t.Fatalf("walked only %d routes", len(routes))
	}
	served := map[string]bool{}
	for _, r := range routes {
		key := strings.ToLower(r.method) + " " + r.pattern
		served[key] = true
		ops, ok := doc.Paths[r.pattern]
		if !ok {
			t.Errorf("route %s %s: path not in openapi.json", r.method, r.pattern)
			continue
		}
		if _, ok := ops[strings.ToLower(r.method)]; !ok {
			t.Errorf("route %s %s: method not in openapi.json", r.method, r.pattern)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			if !served[method+" "+path] {
				t.Errorf("openapi.json documents %s %s, which is not routed", method, path)
			}
		}
	}
}

// TestOpenAPIErrorCodes: the ErrorCode enum is errors.go's table, with the same
// statuses, and every operation documents a response for each code it lists.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	var ec struct {
		Enum    []Code         `json:"enum"`
		XStatus map[string]int `json:"x-status"`
	}
	if err := json.Unmarshal(doc.Components.Schemas["ErrorCode"], &ec); err != nil {
		t.Fatal(err)
	}
	if len(ec.Enum) != len(codeTable) {
		t.Errorf("ErrorCode has %d codes, errors.go %d", len(ec.Enum), len(codeTable))
	}
	for i, c := range codeTable {
		if i < len(ec.Enum) && ec.Enum[i] != c.Code {
			t.Errorf("ErrorCode[%d] = %s, errors.go has %s", i, ec.Enum[i], c.Code)
		}
		if ec.XStatus[string(c.Code)] != c.Status {
			t.Errorf("code %s: documented status %d, errors.go %d", c.Code, ec.XStatus[string(c.Code)], c.Status)
		}
	}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.OperationID == "" {
				t.Errorf("%s %s: no operationId", method, path)
			}
			for _, c := range op.ErrorCodes {
				info, ok := codeIndex[c]
				if !ok {
					t.Errorf("%s %s: unknown code %s", method, path, c)
					continue
				}
				resp, ok := op.Responses[strconv.Itoa(info.Status)]
				if !ok || !strings.Contains(string(resp), string(c)) {
					t.Errorf("%s %s: no %d response naming %s", method, path, info.Status, c)
				}
			}
		}
	}
}

// TestOpenAPIRefs: every $ref resolves.
func TestOpenAPIRefs(t *testing.T) {
	_, generic := loadOpenAPI(t)
	var walk func(v any)
	n := 0
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				var cur any = generic
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[part]
				}
				if cur == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(generic)
	if n == 0 {
		t.Error("no $ref found")
	}
}
