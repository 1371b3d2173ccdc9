package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestUnknownQueryParameters: every /v1 route refuses a query parameter it does not
// document, naming it, and a documented one given twice; a documented one passes the
// check (whatever the route then answers).
func TestUnknownQueryParameters(t *testing.T) {
	a := newAPI(Config{}, testDeps{Catalog: newFakeCluster()})
	routes := walkRoutes(a.Handler().(chi.Routes))
	concrete := strings.NewReplacer("{topic}", "orders", "{partition}", "0", "{group}", "g1")
	checked, withParams := 0, 0
	for _, rt := range routes {
		if !strings.HasPrefix(rt.pattern, "/v1/") {
			continue
		}
		path := concrete.Replace(rt.pattern)
		send := func(query string) (int, map[string]any) {
			req := httptest.NewRequest(rt.method, path+"?"+query, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			a.Handler().ServeHTTP(rec, req)
			var body map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			return rec.Code, body
		}
		status, body := send("ofset=0")
		if status != http.StatusBadRequest || body["code"] != "invalid_parameter" || body["parameter"] != "ofset" ||
			!strings.Contains(body["detail"].(string), `"ofset"`) {
			t.Errorf("%s %s?ofset=0: %d %v; want 400 invalid_parameter naming ofset", rt.method, path, status, body)
		}
		checked++
		var documented []string
		for name := range queryParams[rt.method+" "+rt.pattern] {
			documented = append(documented, name)
		}
		sort.Strings(documented)
		if len(documented) == 0 {
			continue
		}
		withParams++
		if !strings.Contains(body["detail"].(string), strings.Join(documented, ", ")) {
			t.Errorf("%s %s: the refusal %q does not list the route's parameters %v", rt.method, path, body["detail"], documented)
		}
		p := documented[0]
		if status, body := send(p + "=1&" + p + "=2"); status != http.StatusBadRequest || body["parameter"] != p {
			t.Errorf("%s %s?%s twice: %d %v; want 400 naming %s", rt.method, path, p, status, body, p)
		}
		// The route's own validation may refuse the value; the check must not.
		if _, body := send(p + "=1"); strings.Contains(fmt.Sprint(body["detail"]), "unknown query parameter") {
			t.Errorf("%s %s?%s=1: refused as unknown: %v", rt.method, path, p, body)
		}
	}
	// The routes that take parameters: fetch (offset, max_records, ...), offsets
	// (timestamp), binary produce (partition), group offsets (topic), listing and
	// deleting ACLs (the filter), the audit log (since, limit, ...), deleting a SCRAM
	// credential (mechanism), listing quotas (user, client_id), a topic's usage (since).
	if checked < 18 || withParams != 10 {
		t.Errorf("checked %d routes, %d with parameters; want every /v1 route and 10 with parameters", checked, withParams)
	}
}

// TestRefusalChainLogged: the answer says what was wrong once, in the request's terms;
// the chain below it goes to the log (debug) under the request id the answer carries.
func TestRefusalChainLogged(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := newAPI(Config{}, testDeps{Catalog: newFakeCluster(), Log: log})
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/topics/nosuch", nil))
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	id := rec.Header().Get("X-Request-Id")
	if rec.Code != 404 || body["detail"] != `topic "nosuch" does not exist` || body["request_id"] != id || id == "" {
		t.Fatalf("%d %v (X-Request-Id %q)", rec.Code, body, id)
	}
	var line struct {
		Msg, Code, Err string
		RequestID      string `json:"request_id"`
	}
	for _, l := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "refused" {
			break
		}
	}
	if line.Msg != "refused" || line.RequestID != id || line.Code != "topic_not_found" || line.Err != "delete topic nosuch: topic not found" {
		t.Errorf("log %+v; want the refusal's chain under request id %s:\n%s", line, id, logged.String())
	}
}
