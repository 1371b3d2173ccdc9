package writer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"
)

// metrics are the writer's Prometheus metrics. They exist whether or not a registry was
// given, so the code never checks for nil.
type metrics struct {
	requests     prometheus.Counter
	flushes      prometheus.Counter
	flushBytes   prometheus.Histogram
	flushRecords prometheus.Histogram
	puts         *prometheus.CounterVec   // result: ok|error
	hedges       *prometheus.CounterVec   // result: sent|won
	commits      *prometheus.CounterVec   // result: ok|too_late|aborted|invalid|unknown
	settles      *prometheus.CounterVec   // result: committed|aborted|unknown
	stage        *prometheus.HistogramVec // stage: encode|put|commit
	buffered     prometheus.Gauge
	rejected     *prometheus.CounterVec // reason: buffer_full|memory|too_large|invalid|closed
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_writer_requests_total",
			Help: "Produce requests accepted into the buffer.",
		})),
		flushes: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_writer_flushes_total",
			Help: "Flushes cut from the buffer (each is one object PUT and one catalog commit).",
		})),
		flushBytes: prom.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_writer_flush_bytes",
			Help:    "Size of the segment object of each flush, in bytes.",
			Buckets: flushBytesBuckets(),
		})),
		flushRecords: prom.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_writer_flush_records",
			Help:    "Records per flush.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 12), // 1 .. 4M
		})),
		puts: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_writer_puts_total",
			Help: "Segment object PUTs by result (ok, error).",
		}, []string{"result"})),
		hedges: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_writer_put_hedges_total",
			Help: "Second PUTs of a flush slower than the hedge quantile (sent), those that landed first and were committed (won), and those not sent because the hedge budget, one PUT in twenty, was spent (over_budget).",
		}, []string{"result"})),
		commits: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_writer_commits_total",
			Help: "Catalog commits by result (ok; too_late, aborted, invalid: refused whole; unknown: settled afterwards).",
		}, []string{"result"})),
		settles: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_writer_settles_total",
			Help: "Unknown commit outcomes settled, by result (committed, aborted, unknown: gave up).",
		}, []string{"result"})),
		stage: prom.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_writer_flush_seconds",
			Help:    "Time spent per flush in each stage (encode, put, wait: for the flush before it to be answered, commit: includes settling).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14), // 100µs .. ~15s
		}, []string{"stage"})),
		buffered: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_writer_buffered_bytes",
			Help: "Bytes held by the writer: buffered, uploading and committing.",
		})),
		rejected: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_writer_rejected_total",
			Help: "Produce requests refused before buffering, by reason (buffer_full, memory: the node's memory budget, too_large, invalid, closed).",
		}, []string{"reason"})),
	}
	// Pre-create the label values so dashboards see zeros rather than gaps.
	for _, r := range []string{"ok", "error"} {
		m.puts.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "too_late", "aborted", "invalid", "unknown"} {
		m.commits.WithLabelValues(r)
	}
	for _, r := range []string{"committed", "aborted", "unknown"} {
		m.settles.WithLabelValues(r)
	}
	for _, r := range []string{"buffer_full", "memory", "too_large", "invalid", "closed"} {
		m.rejected.WithLabelValues(r)
	}
	return m
}

// flushBytesBuckets are 1 KiB to 256 KiB by fours, then every MiB to 16 MiB (flush
// sizes near --max-flush-bytes must be told apart: 5 MiB from 8 MiB), then 32 MiB to
// 256 MiB by twos.
func flushBytesBuckets() []float64 {
	b := prometheus.ExponentialBuckets(1<<10, 4, 5)
	b = append(b, prometheus.LinearBuckets(1<<20, 1<<20, 16)...)
	return append(b, prometheus.ExponentialBuckets(32<<20, 2, 4)...)
}
