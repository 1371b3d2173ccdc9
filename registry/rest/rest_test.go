package rest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
)

// The REST API over the core and a real SQLite catalog: Confluent's codes for bad
// input (which changes nothing), modes, subject ACLs and the audit log.

type aclAuth struct{ set *acl.Set }

func (a aclAuth) Allowed(who broker.Principal, op acl.Operation, r acl.Resource) bool {
	return a.set.Allowed(who.Name, who.Host, op, r)
}

type env struct {
	t   testing.TB
	srv *httptest.Server
	cat catalog.Backend
}

func newEnv(t testing.TB, bindings ...acl.Binding) *env {
	t.Helper()
	cat, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return newEnvOn(t, cat, bindings...)
}

func newEnvOn(t testing.TB, cat catalog.Backend, bindings ...acl.Binding) *env {
	d := broker.Deps{Catalog: cat, Registry: cat, Security: cat}
	if bindings != nil {
		d.Authorizer = aclAuth{acl.NewSet(bindings)}
	}
	core := broker.New(broker.Config{}, d)
	h := New(core, Config{Principal: func(r *http.Request) broker.Principal {
		return broker.Principal{Name: r.Header.Get("X-Principal"), Host: "127.0.0.1"}
	}})
	mux := http.NewServeMux()
	for _, p := range Prefixes {
		mux.Handle(p+"/", http.StripPrefix(p, h.Routes(p)))
		mux.Handle(p, http.StripPrefix(p, h.Routes(p)))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, cat: cat}
}

type answer struct {
	status int
	body   string
	code   int
}

func (e *env) do(who, method, path, body string) answer {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	req.Header.Set("X-Principal", who)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb struct {
		ErrorCode int `json:"error_code"`
	}
	_ = json.Unmarshal(b, &eb)
	if ct := resp.Header.Get("Content-Type"); ct != ContentType {
		e.t.Errorf("%s %s: content type %q", method, path, ct)
	}
	return answer{resp.StatusCode, string(b), eb.ErrorCode}
}

func (e *env) want(a answer, status, code int, what string) {
	e.t.Helper()
	if a.status != status || a.code != code {
		e.t.Errorf("%s: %d %s, want %d error_code %d", what, a.status, a.body, status, code)
	}
}

func schemaBodyOf(schema string, refs string) string {
	b, _ := json.Marshal(schema)
	if refs == "" {
		return `{"schema":` + string(b) + `}`
	}
	return `{"schema":` + string(b) + `,"references":` + refs + `}`
}

const rec = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`

// state is what bad input must not change: every subject with its versions, the ids.
func (e *env) state() string {
	e.t.Helper()
	var b strings.Builder
	subs, err := e.cat.Subjects(e.t.Context(), true)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range subs {
		vs, _ := e.cat.SubjectSchemas(e.t.Context(), s, true)
		for _, v := range vs {
			b.WriteString(s + ":" + string(rune('0'+v.Version)) + ":" + v.Fingerprint + ";")
		}
	}
	cfg, _ := e.cat.RegistryConfig(e.t.Context(), "")
	b.WriteString(cfg.Compatibility + cfg.Mode)
	return b.String()
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	e.want(e.do("", "POST", "/subjects/base/versions", schemaBodyOf(rec, "")), 200, 0, "register")
	e.want(e.do("", "POST", "/subjects/user/versions", schemaBodyOf(`{"type":"record","name":"U","fields":[{"name":"r","type":"R"}]}`,
		`[{"name":"R","subject":"base","version":1}]`)), 200, 0, "register with a reference")
	before := e.state()
	long := strings.Repeat("s", 10000)
	for _, tc := range []struct {
		name, method, path, body string
		status, code             int
	}{
		{"unparsable schema", "POST", "/subjects/x/versions", schemaBodyOf(`{"type":"record","name":`, ""), 422, 42201},
		{"unknown type name", "POST", "/subjects/x/versions", schemaBodyOf(`{"type":"record","name":"X","fields":[{"name":"a","type":"Nope"}]}`, ""), 422, 42201},
		{"empty schema", "POST", "/subjects/x/versions", `{"schema":""}`, 422, 42201},
		{"unsupported type", "POST", "/subjects/x/versions", `{"schema":"x","schemaType":"XML"}`, 422, 42201},
		{"reference to a missing subject", "POST", "/subjects/x/versions", schemaBodyOf(rec, `[{"name":"Q","subject":"missing","version":1}]`), 422, 42201},
		{"reference to a missing version", "POST", "/subjects/x/versions", schemaBodyOf(rec, `[{"name":"R","subject":"base","version":7}]`), 422, 42201},
		{"version 0", "GET", "/subjects/base/versions/0", "", 422, 42202},
		{"version -2", "GET", "/subjects/base/versions/-2", "", 422, 42202},
		{"version not a number", "GET", "/subjects/base/versions/one", "", 422, 42202},
		{"delete version 0", "DELETE", "/subjects/base/versions/0", "", 422, 42202},
		{"subject of 10,000 characters", "POST", "/subjects/" + long + "/versions", schemaBodyOf(rec, ""), 422, 42208},
		{"deleting a referenced version", "DELETE", "/subjects/base/versions/1", "", 422, 42206},
		{"deleting a referenced subject", "DELETE", "/subjects/base", "", 422, 42206},
		{"permanent delete before soft", "DELETE", "/subjects/user?permanent=true", "", 404, 40405},
		{"unknown subject", "GET", "/subjects/none/versions", "", 404, 40401},
		{"unknown version", "GET", "/subjects/base/versions/9", "", 404, 40402},
		{"unknown id", "GET", "/schemas/ids/999", "", 404, 40403},
		{"id not a number", "GET", "/schemas/ids/x", "", 404, 40403},
		{"subject without a level", "GET", "/config/base", "", 404, 40408},
		{"subject without a mode", "GET", "/mode/base", "", 404, 40409},
		{"invalid level", "PUT", "/config", `{"compatibility":"SIDEWAYS"}`, 422, 42203},
		{"invalid mode", "PUT", "/mode", `{"mode":"WRITEONLY"}`, 422, 42204},
		{"import over subjects", "PUT", "/mode", `{"mode":"IMPORT"}`, 422, 42205},
		{"version outside import", "POST", "/subjects/x/versions", `{"schema":"\"int\"","version":3}`, 422, 42205},
		{"malformed JSON", "POST", "/subjects/x/versions", `{"schema":`, 400, 400},
		{"incompatible", "POST", "/subjects/base/versions", schemaBodyOf(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"int"}]}`, ""), 409, 409},
	} {
		e.want(e.do("", tc.method, tc.path, tc.body), tc.status, tc.code, tc.name)
	}
	if after := e.state(); after != before {
		t.Fatalf("bad input changed the registry:\nbefore %s\nafter  %s", before, after)
	}
	recs, err := e.cat.AuditLog(t.Context(), 0, 100)
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit records after bad input: %d %v, want the two registrations", len(recs), err)
	}
	// Unknown query parameters and body fields are ignored.
	e.want(e.do("", "POST", "/subjects/base/versions?normalize=true&whatever=1", `{"schema":`+mustJSON(rec)+`,"metadata":{"properties":{"a":"b"}},"ruleSet":null}`), 200, 0, "unknown fields")
	a := e.do("", "GET", "/subjects/base/versions/latest?deleted=false&foo=bar", "")
	if a.status != 200 || !strings.Contains(a.body, `"version":1`) || !strings.Contains(a.body, `"subject":"base"`) {
		t.Errorf("latest: %d %s", a.status, a.body)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestModesAndDeletes(t *testing.T) {
	e := newEnv(t)
	e.want(e.do("", "POST", "/subjects/s/versions", schemaBodyOf(`"int"`, "")), 200, 0, "register")
	e.want(e.do("", "PUT", "/mode/s", `{"mode":"READONLY"}`), 200, 0, "read-only")
	e.want(e.do("", "POST", "/subjects/s/versions", schemaBodyOf(`"long"`, "")), 422, 42205, "register in read-only mode")
	e.want(e.do("", "DELETE", "/subjects/s", ""), 422, 42205, "delete in read-only mode")
	e.want(e.do("", "DELETE", "/mode/s", ""), 200, 0, "mode reset")
	e.want(e.do("", "DELETE", "/subjects/s/versions/latest", ""), 200, 0, "soft delete latest")
	e.want(e.do("", "DELETE", "/subjects/s/versions/1", ""), 404, 40406, "soft delete twice")
	e.want(e.do("", "GET", "/subjects/s/versions/1", ""), 404, 40402, "a soft-deleted version")
	if a := e.do("", "GET", "/subjects/s/versions/1?deleted=true", ""); a.status != 200 {
		t.Errorf("a soft-deleted version with deleted=true: %d %s", a.status, a.body)
	}
	if a := e.do("", "GET", "/schemas/ids/1", ""); a.status != 200 {
		t.Errorf("a soft-deleted version's schema by id: %d %s", a.status, a.body)
	}
	e.want(e.do("", "DELETE", "/subjects/s/versions/1?permanent=true", ""), 200, 0, "permanent delete")
	e.want(e.do("", "GET", "/schemas/ids/1", ""), 404, 40403, "a schema no version holds")

	// Import: ids and versions as given, on an empty registry.
	e.want(e.do("", "PUT", "/mode", `{"mode":"IMPORT"}`), 200, 0, "import mode")
	e.want(e.do("", "POST", "/subjects/imp/versions", `{"schema":"\"string\"","id":500,"version":3}`), 200, 0, "import")
	e.want(e.do("", "POST", "/subjects/imp/versions", `{"schema":"\"bytes\""}`), 422, 42205, "import without an id")
	e.want(e.do("", "PUT", "/mode", `{"mode":"READWRITE"}`), 200, 0, "back to read-write")
	if a := e.do("", "GET", "/subjects/imp/versions/3", ""); !strings.Contains(a.body, `"id":500`) {
		t.Errorf("imported version: %s", a.body)
	}
	a := e.do("", "POST", "/subjects/next/versions", schemaBodyOf(`"double"`, ""))
	if !strings.Contains(a.body, `"id":501`) {
		t.Errorf("the first id after an import of 500: %s", a.body)
	}
	// Levels: a subject's own, then the registry's with defaultToGlobal.
	e.want(e.do("", "PUT", "/config", `{"compatibility":"full_transitive"}`), 200, 0, "global level")
	if a := e.do("", "GET", "/config/next?defaultToGlobal=true", ""); !strings.Contains(a.body, `"compatibilityLevel":"FULL_TRANSITIVE"`) {
		t.Errorf("defaultToGlobal: %s", a.body)
	}
}

func TestSubjectACLs(t *testing.T) {
	allow := func(op acl.Operation, typ acl.ResourceType, name string, pattern acl.PatternType) acl.Binding {
		return acl.Binding{Principal: "User:alice", Host: "*", Resource: typ, Name: name, Pattern: pattern, Operation: op, Permission: acl.PermissionAllow}
	}
	e := newEnv(t,
		allow(acl.OpWrite, acl.TypeSubject, "orders-", acl.PatternPrefixed),
		allow(acl.OpRead, acl.TypeSubject, "orders-value", acl.PatternLiteral),
		acl.Binding{Principal: "User:admin", Host: "*", Resource: acl.TypeCluster, Name: acl.ClusterName, Pattern: acl.PatternLiteral, Operation: acl.OpAll, Permission: acl.PermissionAllow},
		acl.Binding{Principal: "User:admin", Host: "*", Resource: acl.TypeSubject, Name: "*", Pattern: acl.PatternLiteral, Operation: acl.OpAll, Permission: acl.PermissionAllow},
	)
	e.want(e.do("User:alice", "POST", "/subjects/orders-value/versions", schemaBodyOf(`"int"`, "")), 200, 0, "alice registers under her prefix")
	e.want(e.do("User:alice", "POST", "/subjects/payments-value/versions", schemaBodyOf(`"int"`, "")), 403, 40301, "alice elsewhere")
	e.want(e.do("User:alice", "DELETE", "/subjects/orders-value", ""), 403, 40301, "alice deletes")
	e.want(e.do("User:alice", "PUT", "/config", `{"compatibility":"NONE"}`), 403, 40301, "alice sets the registry's level")
	e.want(e.do("User:alice", "GET", "/schemas/ids/1", ""), 200, 0, "alice reads a schema through her subject")
	e.want(e.do("User:bob", "GET", "/schemas/ids/1", ""), 403, 40301, "bob reads it")
	e.want(e.do("User:admin", "POST", "/subjects/payments-value/versions", schemaBodyOf(`"long"`, "")), 200, 0, "admin registers")
	if a := e.do("User:alice", "GET", "/subjects", ""); a.body != "[\"orders-value\"]\n" {
		t.Errorf("alice's subjects: %s", a.body)
	}
	e.want(e.do("User:admin", "DELETE", "/subjects/payments-value", ""), 200, 0, "admin deletes")
	recs, err := e.cat.AuditLog(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Principal+" "+r.Action+" "+r.ResourceType+":"+r.Resource)
	}
	want := []string{"User:alice subject.register subject:orders-value", "User:admin subject.register subject:payments-value", "User:admin subject.delete subject:payments-value"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit log:\n%v\nwant\n%v", got, want)
	}
}

func TestContentTypes(t *testing.T) {
	e := newEnv(t)
	for _, ct := range []string{"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json", "application/json; charset=utf-8"} {
		req, _ := http.NewRequest("POST", e.srv.URL+"/subjects/c/versions", strings.NewReader(schemaBodyOf(`"int"`, "")))
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", ct, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/subjects/c/versions", strings.NewReader(schemaBodyOf(`"int"`, "")))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 415 {
		t.Errorf("text/plain: %d, want 415", resp.StatusCode)
	}
}
