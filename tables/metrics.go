package tables

import (
	"strconv"

	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"
)

// metrics are the tables role's Prometheus metrics; they exist whether or not a
// registry was given (Config.Registerer), so the code never checks for nil.
type metrics struct {
	commits       *prometheus.CounterVec // result: ok|conflict|error
	commitSeconds prometheus.Histogram
	rows          prometheus.Counter
	// lag is, per table topic, the committed records this worker's partitions of it
	// hold that the table does not yet, as of its last commit there. The label is a
	// topic with iceberg.enabled: bounded by the table topics.
	lag         *prometheus.GaugeVec
	rewritten   prometheus.Counter
	expired     prometheus.Counter
	orphans     prometheus.Counter
	maintenance *prometheus.CounterVec // result: ok|conflict|error
	// stopped is, per table topic, its partitions stopped at a record that does not
	// fit the table (values.go).
	stopped *prometheus.GaugeVec
	// files and bytes are, per table topic, the data files and their bytes in the
	// table's current snapshot, as of this node's last commit to it.
	files, bytes *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		commits: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_tables_commits_total",
			Help: "Table commits (data files and a snapshot) by result: ok, conflict (another commit landed first, or the lease moved), error.",
		}, []string{"result"})),
		commitSeconds: prom.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_tables_commit_seconds",
			Help:    "Duration of table commits that landed: reading the records, writing the files and the catalog step.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12), // 10ms .. ~10min
		})),
		rows: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_tables_rows_total",
			Help: "Rows committed to tables (one per committed record).",
		})),
		lag: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_tables_lag_records",
			Help: "Per table topic, records of this node's leased partitions not yet in the table, at its last commit there.",
		}, []string{"topic"})),
		rewritten: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_tables_files_rewritten_total",
			Help: "Small data files merged away by table maintenance.",
		})),
		expired: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_tables_snapshots_expired_total",
			Help: "Snapshots expired by table maintenance.",
		})),
		orphans: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_tables_orphans_deleted_total",
			Help: "Unreferenced files under tables' locations deleted by table maintenance.",
		})),
		maintenance: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_tables_maintenance_total",
			Help: "Table maintenance passes by result: ok, conflict (a data commit landed first), error.",
		}, []string{"result"})),
		stopped: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_tables_stopped_partitions",
			Help: "Per table topic, partitions of this node's stopped at a record that does not fit the table's schema (see the role's error log for why).",
		}, []string{"topic"})),
		files: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_tables_data_files",
			Help: "Per table topic, the data files of the table's current snapshot, as of this node's last commit to it.",
		}, []string{"topic"})),
		bytes: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_tables_data_bytes",
			Help: "Per table topic, the bytes of the data files of the table's current snapshot, as of this node's last commit to it.",
		}, []string{"topic"})),
	}
}

// observe sets topic's files and bytes from tbl's current snapshot (its summary's
// totals, which every Iceberg writer keeps).
func (m *metrics) observe(topic string, tbl *table.Table) {
	s := tbl.CurrentSnapshot()
	if s == nil || s.Summary == nil {
		return
	}
	for g, k := range map[*prometheus.GaugeVec]string{m.files: "total-data-files", m.bytes: "total-files-size"} {
		if v, err := strconv.ParseFloat(s.Summary.Properties[k], 64); err == nil {
			g.WithLabelValues(topic).Set(v)
		}
	}
}
