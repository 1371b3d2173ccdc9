package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"
)

type ctxKey int

const requestIDKey ctxKey = iota

// requestID returns the request's id, set by requestIDMiddleware.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// requestIDMiddleware takes the caller's X-Request-Id when it is short and printable (a
// load balancer's id ties logs together across hops), else makes one, and echoes it.
func requestIDMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = fmt.Sprintf("%016x", rand.Uint64())
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// recoverMiddleware turns a handler panic into a logged 500 problem, so one bad request
// never takes the process down. http.ErrAbortHandler keeps its meaning (abort quietly).
func (a *API) recoverMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.log.Error("handler panic", "panic", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path,
				"request_id", requestID(r.Context()), "stack", string(debug.Stack()))
			if !sw.wroteHeader {
				writeProblem(sw, r, newProblem(CodeInternal, "the server hit a bug; it has been logged"))
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// bodyLimitMiddleware bounds every request body, in size and in time. A declared length
// over the limit is refused before reading; otherwise the reader fails at the limit and
// the handler's decode answers body_too_large. A body must arrive within timeout of the
// handler's start (0: no bound), or its read fails with errBodyTimeout and the handler
// answers 408 request_timeout: without it, a client that sends headers and then stalls
// holds a goroutine and its buffers for as long as it likes. The deadline is on the
// connection; net/http lifts it once the body has been read to its end (when it starts
// its background read), so a produce that then waits for its flush is not cut short.
func bodyLimitMiddleware(limit int64, timeout time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				writeProblem(w, r, bodyTooLarge(limit))
				return
			}
			if r.Body != nil && r.Body != http.NoBody {
				if timeout > 0 {
					// Not every ResponseWriter has a connection (Lambda, tests): there
					// the front end bounds the body.
					if http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout)) == nil {
						r.Body = &deadlineBody{ReadCloser: r.Body, timeout: timeout}
					}
				}
				r.Body = http.MaxBytesReader(w, r.Body, limit)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// errBodyTimeout: the body did not arrive within the body timeout.
var errBodyTimeout = errors.New("the request body did not arrive")

// deadlineBody turns the deadline's error into errBodyTimeout.
type deadlineBody struct {
	io.ReadCloser
	timeout time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w within %s", errBodyTimeout, b.timeout)
	}
	return n, err
}

// queryMiddleware refuses a malformed query string (bad percent-encoding): r.URL.Query
// drops such pairs silently, so ?offset=%zz would read as no offset at all.
func queryMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			writeProblem(w, r, newProblem(CodeInvalidParameter, "the query string is malformed: %v", err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bodyTooLarge(limit int64) *problem {
	return newProblem(CodeBodyTooLarge, "the request body exceeds %d bytes; split it into several requests", limit).
		with("max_body_bytes", limit)
}

// httpMetrics are the API's request metrics, labelled by chi's route pattern so that
// label values stay bounded whatever paths clients send.
type httpMetrics struct {
	requests      *prometheus.CounterVec
	seconds       *prometheus.HistogramVec
	memoryRefused prometheus.Counter
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "strata_http_request_seconds",
			Help: "HTTP request duration by route pattern (long-polls and tails included).",
			// Long-polls run up to MaxWait; the top buckets keep them apart from the rest.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
	}
	m.requests = prom.Register(reg, m.requests)
	m.memoryRefused = prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strata_http_memory_refused_total",
		Help: "Requests refused because the node's memory budget had no room for their body or answer (429 buffer_full for produce, 503 memory_exhausted otherwise).",
	}))
	m.seconds = prom.Register(reg, m.seconds)
	return m
}

func (m *httpMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rctx := chi.RouteContext(r.Context()); rctx != nil {
			if p := rctx.RoutePattern(); p != "" {
				// Mounted routers leave a trailing slash ("/v1/topics/"); drop it so
				// the label reads like the documented path.
				if len(p) > 1 {
					p = strings.TrimSuffix(p, "/")
				}
				route = p
			}
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
		m.seconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status written. Unwrap lets http.ResponseController reach
// the connection's Flush and SetWriteDeadline through it (the SSE tail needs both).
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status = code
		// 1xx responses are informational; the final status comes later.
		w.wroteHeader = code >= 200
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.status = http.StatusOK
		w.wroteHeader = true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if !w.wroteHeader {
		w.status = http.StatusOK
		w.wroteHeader = true
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
