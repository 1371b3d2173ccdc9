// Package lambda serves Strata's HTTP API from AWS Lambda: it turns API Gateway HTTP API
// (payload format 2.0) and Lambda Function URL events into requests for the same
// http.Handler a container node serves, turns the answers back into Lambda responses,
// flushes the writer once per invocation, and runs one compaction pass per scheduled
// (EventBridge) event.
//
// The limits of the platform, which no code here can lift:
//   - A request or a buffered response is at most 6 MB, base64 included: produce less
//     per request, and fetches are capped (Config.MaxFetchBytes).
//   - API Gateway's HTTP API ends a request after 30 s: long-polls are capped below it
//     (cmd/strata sets the core's MaxWait, broker.Config.MaxWait).
//   - Nothing runs between invocations (the sandbox is frozen): the writer is flushed
//     before each answer, so batching is the client's linger; commit notifications are
//     not listened for, so long-polls poll.
//   - Server-Sent Events need a Function URL in RESPONSE_STREAM invoke mode
//     (Config.Stream); the HTTP API buffers whole responses, so the handler for
//     buffered answers should refuse tails (the API's NoStreaming: 406
//     streaming_unsupported).
package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// Flusher is the writer's per-invocation flush (*writer.Writer).
type Flusher interface {
	Flush(ctx context.Context) error
}

// Compactor runs one compaction pass: merge, retention, deletion and the orphan sweep.
type Compactor interface {
	Pass(ctx context.Context) error
}

// Config tunes a Handler. Zero values take the documented defaults.
type Config struct {
	// Stream, when set, serves Function URL events with streamed responses: set it when
	// the Function URL's InvokeMode is RESPONSE_STREAM, to the same API as the buffered
	// handler but allowed to stream, so Server-Sent Events tails work there. API Gateway
	// events are always buffered. Nil: every response is buffered.
	Stream http.Handler
	// MaxFetchBytes caps max_bytes on record fetches, so the rendered JSON stays under
	// Lambda's 6 MB response limit (JSON escaping and base64 can double the bytes).
	// Default 2 MiB.
	MaxFetchBytes int64
	// FlushTimeout bounds the flush after each invocation when the invocation's own
	// deadline is further away. Default 10s.
	FlushTimeout time.Duration
	// StreamMargin ends a streamed response this long before the invocation's deadline,
	// so the stream closes cleanly instead of being cut. Default 1s.
	StreamMargin time.Duration
}

// Defaults of Config.
const (
	DefaultMaxFetchBytes = 2 << 20
	DefaultFlushTimeout  = 10 * time.Second
	DefaultStreamMargin  = time.Second
	// MaxResponseBytes is Lambda's limit on a buffered (synchronous) response payload.
	MaxResponseBytes = 6 << 20
)

func (c Config) withDefaults() Config {
	if c.MaxFetchBytes <= 0 {
		c.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if c.FlushTimeout <= 0 {
		c.FlushTimeout = DefaultFlushTimeout
	}
	if c.StreamMargin <= 0 {
		c.StreamMargin = DefaultStreamMargin
	}
	return c
}

// Handler answers Lambda invocations. Give Handle to lambda.Start.
type Handler struct {
	h   http.Handler
	w   Flusher
	c   Compactor
	cfg Config
	log *slog.Logger
}

// New returns a Handler serving h (buffered answers). w is flushed after every HTTP invocation (nil: a node
// without the writer role). c runs scheduled events (nil: scheduled events fail, saying
// the compactor is not available).
func New(h http.Handler, w Flusher, c Compactor, cfg Config, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{h: h, w: w, c: c, cfg: cfg.withDefaults(), log: log.With("component", "lambda")}
}

// ErrUnsupportedEvent is returned for an event that is neither an HTTP request (API
// Gateway HTTP API payload 2.0, Function URL) nor a scheduled compaction.
var ErrUnsupportedEvent = errors.New("lambda: unsupported event")

// ErrNoCompactor is returned for a scheduled event when the handler has no compactor.
var ErrNoCompactor = errors.New("lambda: scheduled event: this build has no compactor; no compaction ran")

// eventProbe tells the supported events apart.
type eventProbe struct {
	Version        string `json:"version"`
	HTTPMethod     string `json:"httpMethod"` // API Gateway payload 1.0: refused
	RequestContext struct {
		HTTP struct {
			Method string `json:"method"`
		} `json:"http"`
	} `json:"requestContext"`
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
	Action     string `json:"action"`
}

// Handle answers one invocation. HTTP events get an HTTP response (an error only when
// the response cannot be given at all); scheduled events run one compaction pass and
// return its error.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	var p eventProbe
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrUnsupportedEvent, err)
	}
	switch {
	case p.RequestContext.HTTP.Method != "":
		if p.Version != "2.0" {
			return nil, fmt.Errorf("%w: HTTP event version %q: configure the API Gateway integration with payload format version 2.0", ErrUnsupportedEvent, p.Version)
		}
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("%w: decode HTTP event: %v", ErrUnsupportedEvent, err)
		}
		return h.serveHTTP(ctx, &ev)
	case p.HTTPMethod != "":
		return nil, fmt.Errorf("%w: API Gateway payload format 1.0: configure the integration with payload format version 2.0", ErrUnsupportedEvent)
	case p.DetailType == "Scheduled Event" || p.Action == "compact":
		return nil, h.compact(ctx)
	}
	return nil, fmt.Errorf("%w: want an API Gateway HTTP API (2.0) or Function URL request, or a scheduled event", ErrUnsupportedEvent)
}

// compact runs one compaction pass.
func (h *Handler) compact(ctx context.Context) error {
	if h.c == nil {
		return ErrNoCompactor
	}
	start := time.Now()
	if err := h.c.Pass(ctx); err != nil {
		return fmt.Errorf("lambda: compaction pass: %w", err)
	}
	h.log.Info("compaction pass done", "took", time.Since(start))
	return nil
}

// isFunctionURL: Function URL events come from <url-id>.lambda-url.<region>.on.aws.
func isFunctionURL(ev *events.APIGatewayV2HTTPRequest) bool {
	return strings.Contains(ev.RequestContext.DomainName, ".lambda-url.")
}

func (h *Handler) serveHTTP(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) (any, error) {
	fnURL := isFunctionURL(ev)
	req, err := h.request(ctx, ev)
	if err != nil {
		// The event itself is malformed (bad base64): the caller's fault, so an HTTP
		// answer rather than an invocation error.
		return h.buffered(fnURL, plainProblem(http.StatusBadRequest, "invalid_request", err.Error())), nil
	}
	if fnURL && h.cfg.Stream != nil {
		return h.stream(ctx, req), nil
	}
	rec := newRecorder()
	h.h.ServeHTTP(rec, req)
	h.flush(ctx)
	resp := rec.result()
	if len(resp.body) > MaxResponseBytes*3/4 && !isText(resp.header) || len(resp.body) > MaxResponseBytes {
		h.log.Error("response too large for Lambda", "bytes", len(resp.body), "method", req.Method, "path", req.URL.Path)
		resp = plainProblem(http.StatusInternalServerError, "internal_error",
			fmt.Sprintf("the response of %d bytes exceeds Lambda's 6 MB limit; ask for less (max_bytes, max_records)", len(resp.body)))
	}
	return h.buffered(fnURL, resp), nil
}

// flush commits whatever the invocation buffered: the sandbox may be frozen as soon as
// the answer is given, and a flush left half-done would hold its requests until the
// next invocation, or forever.
func (h *Handler) flush(ctx context.Context) {
	if h.w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.FlushTimeout)
	defer cancel()
	if err := h.w.Flush(ctx); err != nil {
		h.log.Warn("flush after invocation", "err", err)
	}
}

// request builds the http.Request an event describes.
func (h *Handler) request(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	var body []byte
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("the event's body is marked base64 but does not decode: %v", err)
		}
		body = b
	} else {
		body = []byte(ev.Body)
	}
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	// A named stage prefixes rawPath with /STAGE; the router knows nothing of stages.
	if st := ev.RequestContext.Stage; st != "" && st != "$default" {
		if rest, ok := strings.CutPrefix(path, "/"+st); ok && (rest == "" || rest[0] == '/') {
			path = rest
		}
	}
	if path == "" {
		path = "/"
	}
	u, err := url.Parse(path)
	if err != nil || u.Scheme != "" || u.Host != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("the event's path %q is not a valid request path", path)
	}
	u.RawQuery = ev.RawQueryString
	u.RawQuery = h.capFetch(ev.RequestContext.HTTP.Method, u)

	req, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, u.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("the event's method or path is invalid: %v", err)
	}
	for k, v := range ev.Headers {
		// HTTP API joins repeated headers with commas, which is what the router's
		// header parsing expects of a single value.
		req.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	req.ContentLength = int64(len(body))
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	req.Host = ev.Headers["host"]
	if req.Host == "" {
		req.Host = ev.RequestContext.DomainName
	}
	if req.Header.Get("X-Request-Id") == "" && ev.RequestContext.RequestID != "" {
		// API Gateway's request id ties the API's logs to the gateway's access log.
		req.Header.Set("X-Request-Id", ev.RequestContext.RequestID)
	}
	if ip := ev.RequestContext.HTTP.SourceIP; ip != "" {
		req.RemoteAddr = ip + ":0"
	}
	req.RequestURI = u.RequestURI()
	return req, nil
}

// capFetch lowers max_bytes on record fetches to MaxFetchBytes, so the answer fits in
// one Lambda response; a client asking for less keeps its value.
func (h *Handler) capFetch(method string, u *url.URL) string {
	if method != http.MethodGet || !strings.HasSuffix(u.Path, "/records") {
		return u.RawQuery
	}
	q := u.Query()
	if v := q.Get("max_bytes"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= h.cfg.MaxFetchBytes {
			return u.RawQuery // the API validates it
		}
	}
	q.Set("max_bytes", strconv.FormatInt(h.cfg.MaxFetchBytes, 10))
	return q.Encode()
}

// response is a finished HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// plainProblem is a problem+json answer for what the router never saw.
func plainProblem(status int, code, detail string) response {
	b, _ := json.Marshal(map[string]any{
		"type": "urn:strata:problem:" + code, "title": http.StatusText(status),
		"status": status, "code": code, "detail": detail,
	})
	h := http.Header{}
	h.Set("Content-Type", "application/problem+json")
	return response{status: status, header: h, body: b}
}

// buffered renders r as the response type of the event's source.
func (h *Handler) buffered(fnURL bool, r response) any {
	headers, cookies := flatHeaders(r.header)
	body, b64 := encodeBody(r.header, r.body)
	if fnURL {
		return events.LambdaFunctionURLResponse{StatusCode: r.status, Headers: headers, Body: body, IsBase64Encoded: b64, Cookies: cookies}
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: r.status, Headers: headers, Body: body, IsBase64Encoded: b64, Cookies: cookies}
}

// flatHeaders joins repeated headers with commas (payload 2.0 has no multi-value
// headers) and moves Set-Cookie to the cookies list, which cannot be joined.
func flatHeaders(hd http.Header) (map[string]string, []string) {
	out := make(map[string]string, len(hd))
	var cookies []string
	for k, vs := range hd {
		if k == "Set-Cookie" {
			cookies = append(cookies, vs...)
			continue
		}
		out[k] = strings.Join(vs, ",")
	}
	return out, cookies
}

// isText reports whether a body of this content type can travel as a JSON string.
func isText(hd http.Header) bool {
	mt, _, err := mime.ParseMediaType(hd.Get("Content-Type"))
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func encodeBody(hd http.Header, b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	if isText(hd) && utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

// recorder buffers a response. Flush is accepted and does nothing: the whole body goes
// back at once.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) Flush() {}

func (r *recorder) result() response {
	st := r.status
	if st == 0 {
		st = http.StatusOK
	}
	return response{status: st, header: r.header, body: r.body.Bytes()}
}

// stream serves req in a goroutine of its own and returns as soon as the status and
// headers are known; the runtime then reads the body from a pipe while the handler
// writes it. The request ends StreamMargin before the invocation's deadline, or when the
// runtime stops reading (the client went away).
func (h *Handler) stream(ctx context.Context, req *http.Request) *events.LambdaFunctionURLStreamingResponse {
	sctx, cancel := context.WithCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		sctx, cancel = context.WithDeadline(ctx, dl.Add(-h.cfg.StreamMargin))
	}
	pr, pw := io.Pipe()
	sw := &streamWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer cancel()
		defer func() {
			sw.start(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		h.cfg.Stream.ServeHTTP(sw, req.WithContext(sctx))
		h.flush(ctx)
	}()
	<-sw.ready
	headers, cookies := flatHeaders(sw.sent)
	return &events.LambdaFunctionURLStreamingResponse{
		StatusCode: sw.status,
		Headers:    headers,
		Cookies:    cookies,
		Body:       &cancelOnClose{PipeReader: pr, cancel: cancel},
	}
}

// cancelOnClose ends the request when the runtime closes the body.
type cancelOnClose struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	c.cancel()
	return c.PipeReader.Close()
}

// streamWriter is the ResponseWriter of a streamed response: the first WriteHeader or
// Write fixes the status and headers (they travel ahead of the body), then bytes go to
// the pipe as the handler writes them.
type streamWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	status int
	sent   http.Header // the headers as they were when the status was fixed
	ready  chan struct{}
}

func (w *streamWriter) start(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone() // later header changes cannot reach the client
		close(w.ready)
	})
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	if code >= 200 {
		w.start(code)
	}
}

func (w *streamWriter) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(b)
}

// Flush is a no-op: every Write reaches the pipe at once.
func (w *streamWriter) Flush() {}
