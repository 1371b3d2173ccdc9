// Package ui is the web console every node serves at /ui/ (docs/design.md "Web
// console"): plain ES modules and one stylesheet under static/, embedded in the binary
// as they are — no build step — and served here. The console is a client of the HTTP
// API like any other: its files are public, every call it makes goes through the API's
// authentication and authorization with the key the user gives it (kept in the tab's
// sessionStorage, sent as a bearer token, never in a URL).
//
// Every path under /ui/ that is not an asset answers the console's page (index.html),
// so a link to any page of it can be shared and reloaded; the page's script routes on
// the path. Assets live under /ui/assets/{version}/, where version is a hash of the
// embedded files: they are cached for a year, and a new binary's page names new URLs.
package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "github.com/strata-io/strata/api/v1"
)

//go:embed static
var files embed.FS

// Prefix is where the console is served.
const Prefix = "/ui"

// CSP is the Content-Security-Policy of every /ui/ response: scripts, styles and API
// calls from the node's own origin only, nothing inline (records are untrusted: they
// are rendered as text, and the policy stops anything that slips through), no frames,
// no forms posting elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// versionPlaceholder is replaced in index.html by the assets' version; preloadPlaceholder
// by a modulepreload link for every module, so the browser fetches them all at once
// rather than one level of imports at a time.
const (
	versionPlaceholder = "{{VERSION}}"
	preloadPlaceholder = "{{PRELOAD}}"
)

// Console serves the embedded console.
type Console struct {
	version string
	index   []byte
	assets  map[string]asset // by path relative to static/
}

type asset struct {
	body  []byte
	gz    []byte // body gzipped once at load, served to browsers that accept it
	ctype string
}

// New returns the console over the embedded files, loaded (hashed and gzipped) once
// per process however many nodes it starts. It panics only if the binary was built
// without them, which the package's tests rule out.
func New() *Console { return embedded() }

var embedded = sync.OnceValue(func() *Console {
	c, err := load(files)
	if err != nil {
		panic("ui: " + err.Error())
	}
	return c
})

func load(fsys fs.FS) (*Console, error) {
	sub, err := fs.Sub(fsys, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{assets: map[string]asset{}}
	var names []string
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, p := range names {
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return nil, err
		}
		h.Write([]byte(p))
		h.Write(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) { // not left to the host's mime tables
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		c.assets[p] = asset{body: b, gz: gzipped(b), ctype: ct}
	}
	c.version = hex.EncodeToString(h.Sum(nil))[:16]
	idx, ok := c.assets["index.html"]
	if !ok {
		return nil, fs.ErrNotExist
	}
	var preload bytes.Buffer
	for _, p := range names {
		if path.Ext(p) == ".js" && p != "app.js" {
			fmt.Fprintf(&preload, "<link rel=\"modulepreload\" href=\"%s/assets/%s/%s\">\n", Prefix, versionPlaceholder, p)
		}
	}
	page := bytes.ReplaceAll(idx.body, []byte(preloadPlaceholder), bytes.TrimSuffix(preload.Bytes(), []byte("\n")))
	c.index = bytes.ReplaceAll(page, []byte(versionPlaceholder), []byte(c.version))
	return c, nil
}

// Version is the assets' version: a hash of the embedded files.
func (c *Console) Version() string { return c.version }

// Size is the bytes of the embedded files, uncompressed.
func (c *Console) Size() int {
	n := 0
	for _, a := range c.assets {
		n += len(a.body)
	}
	return n
}

// Assets lists the embedded files' paths (relative to static/).
func (c *Console) Assets() []string {
	out := make([]string, 0, len(c.assets))
	for p := range c.assets {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// ServeHTTP serves a request whose path starts with Prefix (mount it there).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		problem(w, http.StatusMethodNotAllowed, v1.CodeMethodNotAllowed, r.Method+" is not allowed on the console's files")
		return
	}
	p := r.URL.Path
	if p == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		return
	}
	rest, ok := strings.CutPrefix(p, Prefix+"/")
	if !ok {
		problem(w, http.StatusNotFound, v1.CodeNotFound, "no console file at "+p)
		return
	}
	if a, ok := strings.CutPrefix(rest, "assets/"); ok {
		c.serveAsset(w, r, a)
		return
	}
	// Any other path is a page of the console: its script routes on the path.
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(c.index)
}

// serveAsset serves assets/{version}/{file}. An asset of another version (a page
// loaded from an older or newer binary behind the same address) is served too, but
// not cached: only this version's URLs are immutable.
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request, rest string) {
	version, name, ok := strings.Cut(rest, "/")
	a, found := c.assets[name]
	if !ok || !found || name == "index.html" {
		problem(w, http.StatusNotFound, v1.CodeNotFound, "no console file at "+r.URL.Path)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Vary", "Accept-Encoding")
	if version == c.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	etag := `"` + c.version + `"`
	h.Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

// acceptsGzip says whether the request's Accept-Encoding takes gzip (browsers all do).
func acceptsGzip(r *http.Request) bool {
	for _, e := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(e), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level: no error
	_, _ = zw.Write(b)                                       // a bytes.Buffer takes every write
	_ = zw.Close()
	return buf.Bytes()
}

// GzipSize is the bytes of the embedded files as served gzipped, each on its own.
func (c *Console) GzipSize() int {
	n := 0
	for _, a := range c.assets {
		n += len(a.gz)
	}
	return n
}

// problem answers an RFC 9457 problem in the API's shape.
func problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", v1.ContentTypeProblem)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(v1.Problem{Type: v1.ProblemTypePrefix + code, Title: http.StatusText(status), Status: status, Detail: detail, Code: code})
	_, _ = w.Write(append(b, '\n'))
}
