package streams

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// verdict is what the proxy does with one request.
type verdict int

const (
	pass         verdict = iota
	loseResponse         // forward it, let it take effect, then cut the connection unanswered
	cut                  // cut the connection without forwarding
)

// proxy stands between an application instance and the server, deciding per request
// with decide (called with the request's method, path and body).
type proxy struct {
	url    string
	target *url.URL
	decide func(method, path string, body []byte) verdict
	srv    *http.Server
}

func newProxy(t *testing.T, target string, decide func(method, path string, body []byte) verdict) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{url: "http://" + addr, target: u, decide: decide}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	v := p.decide(r.Method, r.URL.Path, body)
	if v == cut {
		hangUp(w)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.String()+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		hangUp(w)
		return
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil || v == loseResponse {
		hangUp(w) // the server has answered: the request took effect, the client hears nothing
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rb)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
