package jepsen

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
)

// Balancer is an http.RoundTripper that sends each request to a node picked at
// random, as a load balancer in front of the nodes would. Clients are built on the
// placeholder base URL BalancedURL; the balancer rewrites scheme and host.
type Balancer struct {
	mu    sync.Mutex
	nodes []string // base URLs, "http://127.0.0.1:8080"
	// writers and readers, when set, take the produce and the fetch requests, as a
	// load balancer routing by path in front of role-split nodes would.
	writers, readers []string
	rt               http.RoundTripper
}

// BalancedURL is the base URL of clients that go through a Balancer.
const BalancedURL = "http://strata.invalid"

// NewBalancer returns a balancer over the given nodes.
func NewBalancer(nodes []string) *Balancer {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	tr.ResponseHeaderTimeout = 0 // long polls: bounded by each call's context
	return &Balancer{nodes: append([]string(nil), nodes...), rt: tr}
}

// SetNodes replaces the nodes (a node restarted on another port).
func (b *Balancer) SetNodes(nodes []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nodes = append([]string(nil), nodes...)
}

// SetRoles routes produce requests to writers and fetches to readers; every other
// request goes to any node.
func (b *Balancer) SetRoles(writers, readers []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writers, b.readers = append([]string(nil), writers...), append([]string(nil), readers...)
}

// Nodes returns the current nodes.
func (b *Balancer) Nodes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.nodes...)
}

func (b *Balancer) pick(req *http.Request) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := b.nodes
	records := strings.HasSuffix(req.URL.Path, "/records")
	switch {
	case records && req.Method == http.MethodPost && len(b.writers) > 0:
		from = b.writers
	case records && req.Method == http.MethodGet && len(b.readers) > 0:
		from = b.readers
	}
	return from[rand.IntN(len(from))]
}

// RoundTrip implements http.RoundTripper.
func (b *Balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	node := b.pick(req)
	r := req.Clone(req.Context())
	u := *req.URL
	host := node[len("http://"):]
	u.Scheme, u.Host = "http", host
	r.URL, r.Host = &u, host
	return b.rt.RoundTrip(r)
}

// HTTPClient returns an http.Client over the balancer whose every request ends after
// timeout at the latest (a paused node never answers).
func (b *Balancer) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: b, Timeout: timeout}
}

// notSent reports whether err proves the request never reached a server: the
// connection was refused, so nothing can have been done.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return false
}

// WaitReady waits until every node answers /readyz with 200, or ctx ends.
func WaitReady(ctx context.Context, nodes []string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, n := range nodes {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n+"/readyz", nil)
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if cerr := ctxwait.Sleep(ctx, 100*time.Millisecond); cerr != nil {
				return errors.Join(cerr, err)
			}
		}
	}
	return nil
}
