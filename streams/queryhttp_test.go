package streams

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/serde"
)

// The query handler's answers that need no running application: bad input is a 400
// that says what is wrong, an unknown store a 404, and a store whose application has
// not started (no task runs anywhere) a 503 not_available.
func TestQueryHandlerRefusals(t *testing.T) {
	b := NewBuilder("app")
	Count(GroupByKey(From(b, "in", serde.String, serde.String)), "counts")
	FromGlobalTable(b, "g", "global", serde.String, serde.String)
	a, err := New(b, Config{Client: client.New("http://127.0.0.1:1")})
	if err != nil {
		t.Fatal(err)
	}
	h := a.QueryHandler()
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/stores/counts/keys/k?key_encoding=hex", 400, "bad_request"},
		{"/stores/counts/keys/%25%25?key_encoding=base64", 400, "bad_request"},
		{"/stores/counts/range?limit=0", 400, "bad_request"},
		{"/stores/counts/range?limit=10001", 400, "bad_request"},
		{"/stores/nope/keys/k", 404, "store_not_found"},
		{"/stores/nope/range", 404, "store_not_found"},
		{"/stores/counts/keys/k", 503, "not_available"},
		{"/stores/counts/keys/k/owner", 503, "not_available"},
		{"/stores/counts/range", 503, "not_available"},
		{"/stores/global/keys/k", 503, "not_available"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		var p queryProblem
		_ = json.NewDecoder(rec.Body).Decode(&p)
		if rec.Code != tc.status || p.Code != tc.code {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, rec.Code, p.Code, tc.status, tc.code)
		}
		if tc.status == 503 && rec.Header().Get("Retry-After") == "" {
			t.Errorf("GET %s: 503 without Retry-After", tc.path)
		}
	}
}
