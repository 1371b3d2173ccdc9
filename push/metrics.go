package push

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"
)

// metrics are the push role's Prometheus metrics, per subscription (share group).
type metrics struct {
	calls     *prometheus.CounterVec // class: accept|reject|throttle|pause|fail
	latency   *prometheus.HistogramVec
	records   *prometheus.CounterVec // result: accept|reject|release|requeue
	pauses    *prometheus.CounterVec
	ackErrors *prometheus.CounterVec
	backlog   *prometheus.GaugeVec
	oldest    *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		calls: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_push_calls_total",
			Help: "Push calls by subscription and answer class (accept, reject, throttle, pause, fail).",
		}, []string{"group", "class"})),
		latency: prom.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_push_call_seconds",
			Help:    "Duration of push calls, answered or not.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 12),
		}, []string{"group"})),
		records: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_push_records_total",
			Help: "Records acknowledged by the push role, by result (accept, reject, release, requeue: released without using a delivery).",
		}, []string{"group", "result"})),
		pauses: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_push_pauses_total",
			Help: "Subscriptions paused by the push role (a misconfigured target, or a long run of failed calls).",
		}, []string{"group"})),
		ackErrors: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_push_ack_errors_total",
			Help: "Acknowledgements refused (the records' locks passed during the call): they are delivered again.",
		}, []string{"group"})),
		backlog: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_push_backlog_records",
			Help: "Records of a held subscription's share group not yet done.",
		}, []string{"group"})),
		oldest: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_push_oldest_unacked_seconds",
			Help: "Age (by its timestamp) of the oldest record of a held subscription's topics not yet done; 0 when none waits.",
		}, []string{"group"})),
	}
}
