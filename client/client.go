// Package client is the Go client for Strata's HTTP API v1: topic administration,
// produce, fetch, and tailing a partition over Server-Sent Events with automatic resume.
// Errors from the server are *Error values carrying the problem+json code, so callers
// branch on Code or Retryable rather than on message text.
//
// The group consumer and the idempotent producer build on this Client (later issues);
// they will live beside it in this package.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
)

// Client talks to one Strata endpoint (a node or a load balancer in front of many). It is
// safe for concurrent use.
type Client struct {
	base      *url.URL
	baseErr   error
	hc        *http.Client
	apiKey    string
	userAgent string
	retries   int
	backoff   time.Duration
	maxWait   time.Duration
	sleep     func(ctx context.Context, d time.Duration) error // replaced in tests
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client. Default: a client with no overall timeout, since
// long polls and tails are expected to outlive any fixed one; pass a context deadline
// per call instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithAPIKey sends "Authorization: Bearer KEY" on every request. Default: none.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithUserAgent sets the User-Agent header. Default: "strata-go-client".
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithRetries retries a call up to n more times when the server answers with a
// retryable error (429 or 503: nothing was done, by the API's contract), waiting for the
// server's Retry-After or, without one, an exponential backoff starting at backoff and
// capped at 30 times it. Transport errors are never retried here: whether a produce
// whose connection broke was committed is unknown. Default: 0 (no retries).
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *Client) {
		c.retries = n
		if backoff > 0 {
			c.backoff = backoff
		}
	}
}

// DefaultUserAgent is sent unless WithUserAgent says otherwise.
const DefaultUserAgent = "strata-go-client"

// New returns a client for the API at baseURL (e.g. "http://127.0.0.1:8080"). A path in
// baseURL is kept as a prefix, for servers mounted below the root. baseURL is not
// contacted here; a malformed one makes every call fail with the parse error.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		hc:        &http.Client{},
		userAgent: DefaultUserAgent,
		backoff:   100 * time.Millisecond,
		sleep:     ctxwait.Sleep,
	}
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err == nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		err = fmt.Errorf("want http://host:port or https://host:port")
	}
	if err != nil {
		c.baseErr = fmt.Errorf("client: base URL %q: %w", baseURL, err)
	} else {
		c.base = u
	}
	for _, o := range opts {
		o(c)
	}
	c.maxWait = 30 * c.backoff
	return c
}

// BaseURL returns the endpoint the client talks to.
func (c *Client) BaseURL() string {
	if c.base == nil {
		return ""
	}
	return c.base.String()
}

// endpoint joins path segments (each escaped) under the base URL and adds a query.
func (c *Client) endpoint(q url.Values, segs ...string) (string, error) {
	if c.base == nil {
		return "", c.baseErr
	}
	var b strings.Builder
	b.WriteString(c.base.String())
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	if len(q) > 0 {
		b.WriteByte('?')
		b.WriteString(q.Encode())
	}
	return b.String(), nil
}

func (c *Client) newRequest(ctx context.Context, method, u string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// do sends a JSON request and decodes a JSON answer into out (nil: discard it). Error
// answers become *Error; retryable ones are retried as WithRetries says.
func (c *Client) do(ctx context.Context, what, method string, q url.Values, in, out any, segs ...string) error {
	u, err := c.endpoint(q, segs...)
	if err != nil {
		return err
	}
	var body []byte
	if in != nil {
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s: encode request: %w", what, err)
		}
	}
	for attempt := 0; ; attempt++ {
		err = c.once(ctx, method, u, body, out)
		if err == nil {
			return nil
		}
		e, ok := err.(*Error)
		if !ok || !e.Retryable() || attempt >= c.retries {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := c.sleep(ctx, c.retryDelay(e, attempt)); err != nil {
			return fmt.Errorf("%s: %w (gave up waiting to retry: %w)", what, e, err)
		}
	}
}

// retryDelay honours the server's Retry-After, else backs off exponentially.
func (c *Client) retryDelay(e *Error, attempt int) time.Duration {
	if e.RetryAfter > 0 {
		return e.RetryAfter
	}
	d := c.backoff << min(attempt, 16)
	return min(d, c.maxWait)
}

func (c *Client) once(ctx context.Context, method, u string, body []byte, out any) error {
	req, err := c.newRequest(ctx, method, u, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return parseError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s answer: %w", resp.Status, err)
	}
	return nil
}
