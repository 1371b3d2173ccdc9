package prom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "strata_test_total", Help: "A test counter."}
	a := Register(reg, prometheus.NewCounter(opts))
	b := Register(reg, prometheus.NewCounter(opts))
	if a != b {
		t.Fatal("a second registration made a second counter")
	}
	a.Inc()
	b.Inc()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 2 {
		t.Fatalf("gathered %v %v", mfs, err)
	}
	if c := Register(nil, prometheus.NewCounter(opts)); c == nil {
		t.Fatal("no collector without a registry")
	}
	defer func() {
		if recover() == nil {
			t.Error("a clash with a different metric of the same name did not panic")
		}
	}()
	Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_test_total", Help: "A gauge."}))
}
