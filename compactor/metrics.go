package compactor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"
)

// metrics are the compactor's Prometheus metrics. They exist whether or not a registry
// was given, so the code never checks for nil.
type metrics struct {
	passes           *prometheus.CounterVec // result: ok|error
	passSeconds      prometheus.Histogram
	merges           prometheus.Counter
	conflicts        prometheus.Counter
	bytesRewritten   prometheus.Counter
	bytesWritten     prometheus.Counter
	recordsRemoved   prometheus.Counter
	logStartAdvances prometheus.Counter
	rowsDropped      prometheus.Counter
	objectsDeleted   prometheus.Counter
	orphansSwept     prometheus.Counter
	lag              prometheus.Gauge
	// Due work: the backlog after a pass, and the work each pass did.
	due            prometheus.Gauge
	overdue        prometheus.Gauge
	waited         prometheus.Histogram
	passPartitions prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		passes: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_compactor_passes_total",
			Help: "Compaction passes by result (ok, error).",
		}, []string{"result"})),
		passSeconds: prom.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_compactor_pass_seconds",
			Help:    "Duration of compaction passes.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 12), // 10ms .. ~30min
		})),
		merges: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_merges_total",
			Help: "Merged objects swapped in for chunk rows (merging and key compaction).",
		})),
		conflicts: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_swap_conflicts_total",
			Help: "Swaps refused because the rows, the log start or the lease moved; their objects were abandoned.",
		})),
		bytesRewritten: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_bytes_rewritten_total",
			Help: "Chunk bytes read and replaced by merged objects.",
		})),
		bytesWritten: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_bytes_written_total",
			Help: "Bytes of merged objects written.",
		})),
		recordsRemoved: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_records_removed_total",
			Help: "Records removed by key compaction (superseded values and expired tombstones).",
		})),
		logStartAdvances: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_log_start_advances_total",
			Help: "Log start offsets advanced by retention.",
		})),
		rowsDropped: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_rows_dropped_total",
			Help: "Chunk rows dropped below the log start or of deleted topics.",
		})),
		objectsDeleted: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_objects_deleted_total",
			Help: "Objects deleted after their grace period.",
		})),
		orphansSwept: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_compactor_orphans_swept_total",
			Help: "Objects never committed (or fenced) removed by the orphan sweep.",
		})),
		lag: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_compactor_lag_seconds",
			Help: "Compaction lag at the last pass: age of the oldest small writer chunk a pass left unmerged.",
		})),
		due: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_compactor_partitions_due",
			Help: "Partitions due for compaction (retention, merging, key compaction, row drops) after the last pass, across all compactors.",
		})),
		overdue: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_compactor_overdue_seconds",
			Help: "How long the most overdue partition had been due after the last pass (0: none due). Growing: the compactors do not keep up.",
		})),
		waited: prom.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_compactor_partition_wait_seconds",
			Help:    "How long each partition worked on had been due.",
			Buckets: prometheus.ExponentialBuckets(0.1, 3, 12), // 100ms .. ~5h
		})),
		passPartitions: prom.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_compactor_pass_partitions",
			Help:    "Partitions worked on per pass (at most the batch, --compact-batch).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9), // 1 .. 65536
		})),
	}
	for _, r := range []string{"ok", "error"} {
		m.passes.WithLabelValues(r)
	}
	return m
}
