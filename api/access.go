package api

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/strata-io/strata/broker"
)

// The access log: a line per request with its principal, the operations and resources
// the broker core decided on, and its status. Refusals (401, 403) are always logged;
// the rest at Config.AccessLogSample (0: none, 1: every request), so a busy node can
// keep the security-relevant lines without one per produce. The health probes are
// logged only when refused.

type accessInfoKey struct{}

// accessInfo is filled by authMiddleware, inside the access log's middleware.
type accessInfo struct {
	who string
}

func (a *API) accessLogMiddleware(next http.Handler) http.Handler {
	rate := a.cfg.AccessLogSample
	if rate <= 0 && a.auth == nil {
		return next // nothing to log: without authentication nothing is refused
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &accessInfo{}
		ctx, acc := broker.WithAccess(context.WithValue(r.Context(), accessInfoKey{}, info))
		sw := &statusWriter{ResponseWriter: w}
		aborted := true
		defer func() {
			status := sw.status
			switch {
			case aborted:
				status = 0 // cut: a panic (a revoked key's stream), logged as such
			case !sw.wroteHeader:
				status = http.StatusOK
			}
			refused := status == http.StatusUnauthorized || status == http.StatusForbidden
			if !refused && (rate <= 0 || (rate < 1 && rand.Float64() >= rate) || isProbe(r.URL.Path)) {
				return
			}
			a.logAccess(r, info, acc, status, time.Since(start))
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
		aborted = false
	})
}

func isProbe(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

func (a *API) logAccess(r *http.Request, info *accessInfo, acc *broker.Access, status int, took time.Duration) {
	who := info.who
	if who == "" {
		who = broker.AnonymousName
	}
	route := r.URL.Path
	if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePattern() != "" {
		route = strings.TrimSuffix(rctx.RoutePattern(), "/")
	}
	attrs := []slog.Attr{
		slog.String("principal", who),
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("ms", float64(took.Microseconds())/1000),
		slog.String("request_id", requestID(r.Context())),
	}
	if d, n, ok := acc.Summary(); ok {
		attrs = append(attrs, d.Attrs(n)...)
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "access", attrs...)
}
