package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestMounts: another package's handler is served under its prefixes, at the root and
// under /v1, behind the API's middleware: no key, no answer from it.
func TestMounts(t *testing.T) {
	sub := chi.NewRouter()
	sub.Get("/{name}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+chi.URLParam(r, "name")) })
	a := New(Config{Auth: AuthConfig{Keys: []string{testKey1}}}, Deps{Mounts: []Mount{{Path: "/things", Handler: sub}, {Path: "/v1/things", Handler: sub}}})
	for _, path := range []string{"/things/x", "/v1/things/x"} {
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("%s without a key: %d %s", path, w.Code, w.Body)
		}
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+testKey1)
		w = httptest.NewRecorder()
		a.Handler().ServeHTTP(w, req)
		if w.Code != 200 || w.Body.String() != "hello x" {
			t.Fatalf("%s with a key: %d %s", path, w.Code, w.Body)
		}
	}
	// The API's own routes are still there.
	req := httptest.NewRequest("GET", "/v1/topics", nil)
	req.Header.Set("Authorization", "Bearer "+testKey1)
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, req)
	if w.Code == http.StatusNotFound {
		t.Fatalf("/v1/topics: %d", w.Code)
	}
}
