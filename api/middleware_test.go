package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRequestID(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do("GET", "/v1/topics/nope", "", header{"X-Request-Id", "lb-1234"})
	if got := rec.Header().Get("X-Request-Id"); got != "lb-1234" {
		t.Errorf("echoed %q", got)
	}
	p := wantProblem(t, rec, 404, CodeTopicNotFound)
	if p["request_id"] != "lb-1234" {
		t.Errorf("problem request_id %v", p["request_id"])
	}
	for _, given := range []string{"", "has space", strings.Repeat("x", 200)} {
		rec := e.do("GET", "/healthz", "", header{"X-Request-Id", given})
		if got := rec.Header().Get("X-Request-Id"); !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(got) {
			t.Errorf("given %q: generated %q", given, got)
		}
	}
}

func TestRecover(t *testing.T) {
	e := newEnv(t, Config{})
	e.c.panicOnTopics = true
	wantProblem(t, e.do("GET", "/v1/topics", ""), 500, CodeInternal)
	if log := e.log.String(); !strings.Contains(log, "handler panic") || !strings.Contains(log, "Topics exploded") || !strings.Contains(log, "request_id=") {
		t.Errorf("panic not logged: %s", log)
	}
	// The process carries on.
	if rec := e.do("GET", "/healthz", ""); rec.Code != 200 {
		t.Errorf("healthz after panic: %d", rec.Code)
	}
	if got := testutil.ToFloat64(e.api.metrics.requests.WithLabelValues("/v1/topics", "GET", "500")); got != 1 {
		t.Errorf("500s counted %v", got)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, Config{})
	e.do("POST", "/v1/topics", `{"name":"a"}`)
	e.do("POST", "/v1/topics", `{"name":"a"}`)
	e.do("GET", "/v1/topics/a/partitions/0/records", "")
	e.do("GET", "/no/such/route", "")
	rec := e.do("GET", "/metrics", "")
	if rec.Code != 200 {
		t.Fatalf("metrics: %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`strata_http_requests_total{code="201",method="POST",route="/v1/topics"} 1`,
		`strata_http_requests_total{code="409",method="POST",route="/v1/topics"} 1`,
		`strata_http_requests_total{code="200",method="GET",route="/v1/topics/{topic}/partitions/{partition}/records"} 1`,
		`strata_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`strata_http_request_seconds_count{route="/v1/topics"} 2`,
		`strata_http_request_seconds_bucket{route="/v1/topics",le="60"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}

	// A second API on the same registry reuses the collectors instead of panicking.
	a2 := newAPI(Config{}, testDeps{Catalog: e.c, Registerer: e.reg, Gatherer: e.reg})
	if a2.metrics.requests != e.api.metrics.requests {
		t.Error("second API registered new collectors")
	}
	// With neither Registerer nor Gatherer, /metrics serves a private registry.
	a3 := newAPI(Config{}, testDeps{Catalog: e.c})
	rec = httptest.NewRecorder()
	a3.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	rec = httptest.NewRecorder()
	a3.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `strata_http_requests_total{code="200",method="GET",route="/healthz"} 1`) {
		t.Errorf("private registry: %s", rec.Body)
	}
	var _ prometheus.Gatherer = e.reg
}

func TestHealthAndReady(t *testing.T) {
	var readyErr error
	e := newEnv(t, Config{}, func(d *testDeps) {
		d.Ready = func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			return readyErr
		}
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := e.do("GET", path, "")
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"status"`) {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
	// The raw errors go to the log, never to the open probe.
	raw := `Head "http://127.0.0.1:1/mybucket/strata-readyz-probe": dial tcp 127.0.0.1:1: connection refused`
	for _, tc := range []struct {
		err    error
		detail string
		deps   any // the "dependencies" member: nil when absent
	}{
		{errors.New(raw), "not ready (the node's log has the cause)", nil},
		{&NotReadyError{"bucket", errors.New(raw)}, "not ready: bucket unreachable (the node's log has the cause)", []any{"bucket"}},
		{errors.Join(&NotReadyError{"catalog", errors.New("dial tcp 10.0.0.5:5432: i/o timeout")}, fmt.Errorf("probe: %w", &NotReadyError{"bucket", errors.New(raw)})),
			"not ready: catalog and bucket unreachable (the node's log has the cause)", []any{"catalog", "bucket"}},
	} {
		readyErr = tc.err
		e.log.Reset()
		rec := e.do("GET", "/readyz", "")
		p := wantProblem(t, rec, 503, CodeNotReady)
		if p["detail"] != tc.detail || !reflect.DeepEqual(p["dependencies"], tc.deps) || rec.Header().Get("Retry-After") == "" {
			t.Errorf("not ready (%v): %v %v", tc.err, p, rec.Header())
		}
		if strings.Contains(rec.Body.String(), "127.0.0.1") || strings.Contains(rec.Body.String(), "10.0.0.5") {
			t.Errorf("/readyz shows the raw error: %s", rec.Body)
		}
		if !strings.Contains(e.log.String(), "connection refused") {
			t.Errorf("the log lacks the cause: %s", e.log)
		}
	}
	if rec := e.do("GET", "/healthz", ""); rec.Code != 200 {
		t.Errorf("healthz must not follow readiness: %d", rec.Code)
	}
}

func TestServeOpenAPI(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do("GET", "/v1/openapi.json", "")
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"openapi": "3.1.0"`) {
		t.Errorf("%d %v %.100s", rec.Code, rec.Header(), b)
	}
}
