package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestPublicMount: a public mount (the console's static files) answers without a key
// when keys are required; the API's routes beside it still refuse, whatever path
// tricks try to borrow the mount's prefix.
func TestPublicMount(t *testing.T) {
	files := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "file "+r.URL.Path) })
	a := New(Config{Auth: AuthConfig{Keys: []string{testKey1}}}, Deps{Mounts: []Mount{{Path: "/ui", Handler: files, Public: true}}})
	for _, path := range []string{"/ui", "/ui/", "/ui/topics/orders"} {
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != 200 || w.Body.String() != "file "+path {
			t.Fatalf("%s without a key: %d %s", path, w.Code, w.Body)
		}
	}
	for _, path := range []string{"/v1/topics", "/uix", "/ui/../v1/topics", "/ui%2F..%2Fv1/topics", "/v1/ui/x", "/metrics"} {
		w := httptest.NewRecorder()
		a.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code == 200 && !strings.HasPrefix(w.Body.String(), "file /ui/") {
			t.Fatalf("%s without a key: %d %s", path, w.Code, w.Body)
		}
		if strings.HasPrefix(path, "/v1/") || path == "/metrics" || path == "/uix" {
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("%s without a key: %d, want 401", path, w.Code)
			}
		}
	}
}
