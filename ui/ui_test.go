package ui

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// maxBundleGzip bounds the whole console, gzipped: the issue asks for "a few hundred
// KiB" at most; this keeps it far below.
const maxBundleGzip = 64 << 10

func serve(t *testing.T, c *Console, method, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

// TestPages: every page path — the shared links and deep links that only the script
// routes — answers the console's page, not cached, with the CSP; the page names this
// build's assets.
func TestPages(t *testing.T) {
	c := New()
	for _, p := range []string{"/ui/", "/ui/topics", "/ui/topics/orders", "/ui/topics/a.b-c/partitions/3", "/ui/groups/g1", "/ui/share-groups", "/ui/share-groups/q1", "/ui/connectors", "/ui/no/such/page"} {
		w := serve(t, c, "GET", p+"?offset=5")
		if w.Code != 200 {
			t.Fatalf("%s: %d", p, w.Code)
		}
		checkHeaders(t, p, w)
		if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Fatalf("%s: Content-Type %q", p, ct)
		}
		if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Fatalf("%s: Cache-Control %q", p, cc)
		}
		body := w.Body.String()
		if !strings.Contains(body, "/ui/assets/"+c.Version()+"/app.js") || !strings.Contains(body, `<link rel="modulepreload" href="/ui/assets/`+c.Version()+`/pages/records.js">`) ||
			strings.Contains(body, versionPlaceholder) || strings.Contains(body, preloadPlaceholder) {
			t.Fatalf("%s: the page does not name this version's assets:\n%s", p, body)
		}
	}
	w := serve(t, c, "GET", "/ui")
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d %q", w.Code, w.Header().Get("Location"))
	}
	if w := serve(t, c, "HEAD", "/ui/topics"); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("HEAD: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := serve(t, c, "POST", "/ui/topics"); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" ||
		!strings.Contains(w.Body.String(), `"code":"method_not_allowed"`) {
		t.Fatalf("POST: %d %q %s", w.Code, w.Header().Get("Allow"), w.Body)
	}
}

// TestAssets: each embedded file is served under this version with its content type
// and cached as immutable; another version's URL is served but not cached; an unknown
// file is a 404 problem, not the page (a missing script must not load HTML).
func TestAssets(t *testing.T) {
	c := New()
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	seen := 0
	for _, name := range c.Assets() {
		if name == "index.html" {
			continue
		}
		ext := name[strings.LastIndex(name, "."):]
		w := serve(t, c, "GET", "/ui/assets/"+c.Version()+"/"+name)
		if w.Code != 200 {
			t.Fatalf("%s: %d", name, w.Code)
		}
		checkHeaders(t, name, w)
		if want, ok := types[ext]; ok && w.Header().Get("Content-Type") != want {
			t.Fatalf("%s: Content-Type %q, want %q", name, w.Header().Get("Content-Type"), want)
		}
		if cc := w.Header().Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Fatalf("%s: Cache-Control %q", name, cc)
		}
		etag := w.Header().Get("ETag")
		if w := serve(t, c, "GET", "/ui/assets/"+c.Version()+"/"+name, "If-None-Match", etag); w.Code != http.StatusNotModified {
			t.Fatalf("%s with its ETag: %d", name, w.Code)
		}
		seen++
	}
	if seen < 5 {
		t.Fatalf("only %d assets: %v", seen, c.Assets())
	}
	w := serve(t, c, "GET", "/ui/assets/0000000000000000/app.js")
	if w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("another version: %d %q", w.Code, w.Header().Get("Cache-Control"))
	}
	for _, p := range []string{"/ui/assets/" + c.Version() + "/nope.js", "/ui/assets/" + c.Version() + "/index.html", "/ui/assets/app.js", "/ui/assets/"} {
		w := serve(t, c, "GET", p)
		if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s: %d %q", p, w.Code, w.Header().Get("Content-Type"))
		}
	}
}

func checkHeaders(t *testing.T, what string, w *httptest.ResponseRecorder) {
	t.Helper()
	csp := w.Header().Get("Content-Security-Policy")
	if csp != CSP || strings.Contains(csp, "unsafe-") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Fatalf("%s: CSP %q", what, csp)
	}
	if w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("%s: no nosniff", what)
	}
}

// TestBundleSize bounds the console's size, gzipped file by file as browsers get it.
func TestBundleSize(t *testing.T) {
	c := New()
	t.Logf("console: %d files, %d bytes, %d gzipped file by file", len(c.Assets()), c.Size(), c.GzipSize())
	if c.GzipSize() > maxBundleGzip {
		t.Fatalf("the console is %d bytes gzipped, over the %d bound", c.GzipSize(), maxBundleGzip)
	}
}

// TestGzip: a browser that accepts gzip gets each asset gzipped, and it unpacks to the
// file; one that does not gets the file as it is.
func TestGzip(t *testing.T) {
	c := New()
	url := "/ui/assets/" + c.Version() + "/pages/records.js"
	w := serve(t, c, "GET", url, "Accept-Encoding", "gzip, deflate, br")
	if w.Header().Get("Content-Encoding") != "gzip" || w.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("with gzip accepted: %q %q", w.Header().Get("Content-Encoding"), w.Header().Get("Vary"))
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(zr); err != nil || !bytes.Equal(got.Bytes(), c.assets["pages/records.js"].body) {
		t.Fatalf("gzipped body does not unpack to the file (%v)", err)
	}
	for _, ae := range []string{"", "identity", "gzip;q=0"} {
		w := serve(t, c, "GET", url, "Accept-Encoding", ae)
		if w.Header().Get("Content-Encoding") != "" || !bytes.Equal(w.Body.Bytes(), c.assets["pages/records.js"].body) {
			t.Fatalf("Accept-Encoding %q: %q", ae, w.Header().Get("Content-Encoding"))
		}
	}
}

// TestNoUnsafeSources: the sources never parse strings as HTML or code, and carry no
// inline script or style that the CSP would block (records are untrusted).
func TestNoUnsafeSources(t *testing.T) {
	c := New()
	bad := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|setAttribute\('style'|\.style\.|unsafe-inline|<script>|style="|\son[a-z]+="`)
	for _, name := range c.Assets() {
		if m := bad.FindString(string(c.assets[name].body)); m != "" {
			t.Errorf("%s: %q", name, m)
		}
	}
}
