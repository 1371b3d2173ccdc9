package metered_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/metered"
	"github.com/strata-io/strata/objstore/objstoretest"
)

func newFS(t *testing.T) *fs.Store {
	s, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	reg := prometheus.NewRegistry() // shared by every store: registration must tolerate it
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return metered.New(newFS(t), reg) })
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	faulty := fault.New(newFS(t))
	s := metered.New(faulty, reg)
	ctx := t.Context()

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put(ctx, "a", make([]byte, 100)))
	must(s.Put(ctx, "a", make([]byte, 100)))                                          // identical re-put: ok, counted again
	if err := s.Put(ctx, "a", make([]byte, 7)); !errors.Is(err, objstore.ErrExists) { // refused: no bytes
		t.Fatal(err)
	}
	_, err := s.Get(ctx, "a")
	must(err)
	_, err = s.GetRange(ctx, "a", 10, 30)
	must(err)
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatal(err)
	}
	_, err = s.Head(ctx, "a")
	must(err)
	faulty.FailNext(fault.Delete, 1, nil)
	if err := s.Delete(ctx, "a"); err == nil {
		t.Fatal("injected delete failure not returned")
	}
	must(s.Delete(ctx, "a"))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Head(cctx, "a"); err == nil {
		t.Fatal("Head with cancelled context succeeded")
	}
	stop := errors.New("stop")
	must(s.Put(ctx, "b", nil))
	if err := s.List(ctx, "", func(objstore.Info) error { return stop }); !errors.Is(err, stop) {
		t.Fatal(err)
	}

	const want = `
# HELP strata_objstore_bytes_total Object bytes sent by successful puts and received by successful gets.
# TYPE strata_objstore_bytes_total counter
strata_objstore_bytes_total{op="get"} 100
strata_objstore_bytes_total{op="get_range"} 30
strata_objstore_bytes_total{op="put"} 200
# HELP strata_objstore_requests_total Object store calls by operation and result (ok, not_found, exists, canceled, error).
# TYPE strata_objstore_requests_total counter
strata_objstore_requests_total{op="delete",result="error"} 1
strata_objstore_requests_total{op="delete",result="ok"} 1
strata_objstore_requests_total{op="get",result="not_found"} 1
strata_objstore_requests_total{op="get",result="ok"} 1
strata_objstore_requests_total{op="get_range",result="ok"} 1
strata_objstore_requests_total{op="head",result="canceled"} 1
strata_objstore_requests_total{op="head",result="ok"} 1
strata_objstore_requests_total{op="list",result="ok"} 1
strata_objstore_requests_total{op="put",result="exists"} 1
strata_objstore_requests_total{op="put",result="ok"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"strata_objstore_bytes_total", "strata_objstore_requests_total"); err != nil {
		t.Error(err)
	}
	// Every call is timed, whatever its result.
	for op, n := range map[string]int{"put": 4, "get": 2, "get_range": 1, "head": 2, "delete": 2, "list": 1} {
		if got := histogramCount(t, reg, op); got != uint64(n) {
			t.Errorf("strata_objstore_request_seconds_count{op=%q} = %d, want %d", op, got, n)
		}
	}
	if n, err := testutil.GatherAndLint(reg); err != nil || len(n) > 0 {
		t.Errorf("lint: %v %v", n, err)
	}
}

func histogramCount(t *testing.T, reg prometheus.Gatherer, op string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "strata_objstore_request_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no histogram for op %q", op)
	return 0
}

// TestSharedRegistry: two stores on one registry share the series instead of panicking.
func TestSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := metered.New(newFS(t), reg)
	b := metered.New(newFS(t), reg)
	if err := a.Put(t.Context(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(t.Context(), "k", []byte("yy")); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(mustCounter(t, reg)); got != 3 {
		t.Errorf("shared put bytes = %v, want 3", got)
	}
	metered.New(newFS(t), nil) // no registry: still works
}

func mustCounter(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	// Re-registering an identical vector hands back the existing one.
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_objstore_bytes_total",
		Help: "Object bytes sent by successful puts and received by successful gets.",
	}, []string{"op"})
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("register: %v", err)
	}
	return are.ExistingCollector.(*prometheus.CounterVec).WithLabelValues("put")
}
