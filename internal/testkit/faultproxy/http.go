// Package faultproxy puts misbehaving proxies between Strata and the services it
// depends on, so reliability tests can fail real network traffic: an HTTP proxy in
// front of an S3-compatible store (MinIO) that answers errors, delays, loses responses
// after the request took effect, and truncates or corrupts bodies; and a TCP proxy in
// front of Postgres that cuts connections right after a transaction committed, before
// the client hears of it.
//
// Both listen on loopback and forward to one target. With no fault set they pass
// traffic through untouched.
package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
)

// Fault says how the HTTP proxy misbehaves. Its effects apply in field order to the
// share Rate of matching requests.
type Fault struct {
	// Rate is the share of matching requests affected, 0 to 1 (0 counts as 1).
	Rate float64
	// Methods limits the fault to these HTTP methods (PUT, GET, HEAD, DELETE); empty
	// means every method.
	Methods []string
	// Latency delays the request before it is forwarded.
	Latency time.Duration
	// Status answers this status (an S3 XML error body) without forwarding.
	Status int
	// LoseResponse forwards the request, then drops the connection instead of
	// answering: the operation took effect and the client cannot know.
	LoseResponse bool
	// Truncate drops the last bytes of a successful response body (half of it, at
	// least one byte), with a Content-Length to match: a store that answers short.
	Truncate bool
	// FlipBit flips one bit in the middle of a successful response body.
	FlipBit bool
}

// HTTP is a fault-injecting reverse proxy.
type HTTP struct {
	target *url.URL
	rp     *httputil.ReverseProxy
	srv    *http.Server
	ln     net.Listener

	mu     sync.Mutex
	faults []Fault

	requests, injected atomic.Int64
}

// NewHTTP starts a proxy on a free loopback port forwarding to target
// ("http://127.0.0.1:9100"). The Host header is passed through unchanged, so S3
// request signatures made for the proxy's address still verify at the target.
func NewHTTP(target string) (*HTTP, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &HTTP{target: u, ln: ln}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // keep the signed Host
		},
		// Aborted requests (a client that gave up on a slow answer) are expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's address, to use as the store's endpoint.
func (p *HTTP) URL() string { return "http://" + p.ln.Addr().String() }

// Set replaces the faults; none heals. A request takes the first fault whose
// methods match it (and then its Rate decides).
func (p *HTTP) Set(faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append([]Fault(nil), faults...)
}

// Counts returns how many requests the proxy saw and how many a fault touched.
func (p *HTTP) Counts() (requests, injected int64) { return p.requests.Load(), p.injected.Load() }

// Close stops the proxy.
func (p *HTTP) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.srv.Shutdown(ctx)
}

func (p *HTTP) applies(r *http.Request) *Fault {
	p.mu.Lock()
	faults := p.faults
	p.mu.Unlock()
	for i := range faults {
		f := &faults[i]
		if len(f.Methods) > 0 {
			found := false
			for _, m := range f.Methods {
				found = found || m == r.Method
			}
			if !found {
				continue
			}
		}
		if f.Rate > 0 && f.Rate < 1 && rand.Float64() >= f.Rate {
			return nil
		}
		return f
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (p *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	f := p.applies(r)
	if f == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.injected.Add(1)
	if f.Latency > 0 && ctxwait.Sleep(r.Context(), f.Latency) != nil {
		return
	}
	if f.Status != 0 {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by faultproxy</Message></Error>`, s3Code(f.Status))
		return
	}
	if !f.LoseResponse && !f.Truncate && !f.FlipBit {
		p.rp.ServeHTTP(w, r)
		return
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	p.rp.ServeHTTP(rec, r)
	if f.LoseResponse {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // aborts the response without answering
	}
	body := rec.body.Bytes()
	if rec.status/100 == 2 && len(body) > 0 {
		if f.Truncate {
			body = body[:len(body)/2]
		}
		if f.FlipBit && len(body) > 0 {
			body = append([]byte(nil), body...)
			body[len(body)/2] ^= 1
		}
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.status)
	_, _ = w.Write(body)
}

func s3Code(status int) string {
	switch status {
	case http.StatusServiceUnavailable:
		return "SlowDown"
	case http.StatusInternalServerError:
		return "InternalError"
	case http.StatusForbidden:
		return "AccessDenied"
	}
	return "InjectedError"
}

// recorder buffers a response so that it can be altered or dropped.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int) {
	if !r.wrote {
		r.status, r.wrote = s, true
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}
