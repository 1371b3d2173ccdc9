package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
)

// The query parameters each route takes are the ones openapi.json documents for it:
// any other is refused with 400 invalid_parameter naming it, as an unknown JSON field
// is (a mistyped ?ofset=0 would otherwise fetch from the start), and so is a parameter
// given twice. Documenting a parameter is what lets a route take it.

// queryParams maps "GET /v1/topics/{topic}/partitions/{partition}/records" to the
// names of its query parameters, read once from the embedded document.
var queryParams = func() map[string]map[string]bool {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]openAPIParam `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		panic("api: openapi.json: " + err.Error())
	}
	resolve := func(ps []openAPIParam) []openAPIParam {
		out := make([]openAPIParam, 0, len(ps))
		for _, p := range ps {
			if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
				p = doc.Components.Parameters[name]
			}
			out = append(out, p)
		}
		return out
	}
	m := map[string]map[string]bool{}
	for path, ops := range doc.Paths {
		var shared []openAPIParam
		if raw, ok := ops["parameters"]; ok {
			if err := json.Unmarshal(raw, &shared); err != nil {
				panic("api: openapi.json: " + path + ": " + err.Error())
			}
		}
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op struct {
				Parameters []openAPIParam `json:"parameters"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				panic("api: openapi.json: " + method + " " + path + ": " + err.Error())
			}
			names := map[string]bool{}
			for _, p := range resolve(append(append([]openAPIParam(nil), shared...), op.Parameters...)) {
				if p.In == "query" {
					names[p.Name] = true
				}
			}
			m[strings.ToUpper(method)+" "+path] = names
		}
	}
	return m
}()

type openAPIParam struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

// checkQuery refuses a query parameter the matched route does not document, or one
// given twice. Routes the document does not know (none, by TestOpenAPICoversRoutes)
// are not checked.
func checkQuery(r *http.Request) *problem {
	if r.URL.RawQuery == "" {
		return nil
	}
	allowed, ok := queryParams[r.Method+" "+routePattern(r)]
	if !ok {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil // queryMiddleware has refused it already
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names) // the same answer for the same query, whatever the map order
	for _, name := range names {
		if !allowed[name] {
			return unknownParameter(name, allowed)
		}
		if len(q[name]) > 1 {
			return newProblem(CodeInvalidParameter, "query parameter %s is given %d times: give it once", truncate(name, 64), len(q[name])).
				with("parameter", name)
		}
	}
	return nil
}

func unknownParameter(name string, allowed map[string]bool) *problem {
	if len(allowed) == 0 {
		return newProblem(CodeInvalidParameter, "unknown query parameter %q: this route takes none", truncate(name, 64)).
			with("parameter", name)
	}
	known := make([]string, 0, len(allowed))
	for k := range allowed {
		known = append(known, k)
	}
	sort.Strings(known)
	return newProblem(CodeInvalidParameter, "unknown query parameter %q: this route takes %s", truncate(name, 64), strings.Join(known, ", ")).
		with("parameter", name)
}

// routePattern is the pattern chi matched, without a mounted router's trailing slash:
// "/v1/topics/{topic}".
func routePattern(r *http.Request) string {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return ""
	}
	p := rctx.RoutePattern()
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}
