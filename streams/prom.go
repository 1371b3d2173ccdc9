package streams

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/internal/prom"
)

// promMetrics are the runtime's Prometheus metrics, per task (labels app and task):
// they exist whether or not Config.Registerer is set, so the code never checks. A
// task's series are deleted when it closes here, so a task that moved to another
// instance is not reported twice.
type promMetrics struct {
	processed    *prometheus.CounterVec
	punctuations *prometheus.CounterVec
	late         *prometheus.CounterVec
	commit       *prometheus.HistogramVec
	lag          *prometheus.GaugeVec   // + topic
	remaining    *prometheus.GaugeVec   // + store
	restored     *prometheus.CounterVec // + store
}

func newPromMetrics(reg prometheus.Registerer) *promMetrics {
	task := []string{"app", "task"}
	return &promMetrics{
		processed: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_streams_records_processed_total",
			Help: "Input records a Streams task processed.",
		}, task)),
		punctuations: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_streams_punctuations_total",
			Help: "Punctuator calls (stream-time and wall-clock) of a Streams task.",
		}, task)),
		late: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_streams_late_records_dropped_total",
			Help: "Records a Streams task dropped as late: every window or join window they belonged to had closed.",
		}, task)),
		commit: prom.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_streams_commit_seconds",
			Help:    "Time from sending a Streams task's commit (outputs, changelog records, offsets in one request) to its confirmation, resends included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1ms .. ~16s
		}, task)),
		lag: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_streams_lag_records",
			Help: "Records of an input partition of a Streams task after its last commit, by the high watermark last fetched.",
		}, append(task, "topic"))),
		remaining: prom.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "strata_streams_restore_remaining_records",
			Help: "Changelog records a Streams task still has to replay into a store before it runs (0 once restored).",
		}, append(task, "store"))),
		restored: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_streams_restored_records_total",
			Help: "Changelog records a Streams task replayed into a store.",
		}, append(task, "store"))),
	}
}

// taskProm is one task's series.
type taskProm struct {
	m                             *promMetrics
	app, task                     string
	processed, punctuations, late prometheus.Counter
	commit                        prometheus.Observer
}

func (m *promMetrics) forTask(app string, id TaskID) *taskProm {
	l := prometheus.Labels{"app": app, "task": id.String()}
	return &taskProm{m: m, app: app, task: id.String(), processed: m.processed.With(l), punctuations: m.punctuations.With(l),
		late: m.late.With(l), commit: m.commit.With(l)}
}

func (p *taskProm) committed(took time.Duration) { p.commit.Observe(took.Seconds()) }

func (p *taskProm) lagOf(topic string, n int64) {
	p.m.lag.WithLabelValues(p.app, p.task, topic).Set(float64(max(n, 0)))
}

func (p *taskProm) restoring(store string, remaining int64) {
	p.m.remaining.WithLabelValues(p.app, p.task, store).Set(float64(max(remaining, 0)))
}

func (p *taskProm) replayed(store string, n int64) {
	p.m.restored.WithLabelValues(p.app, p.task, store).Add(float64(n))
}

// forget deletes the task's series.
func (p *taskProm) forget() {
	l := prometheus.Labels{"app": p.app, "task": p.task}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{p.m.processed, p.m.punctuations, p.m.late, p.m.commit, p.m.lag, p.m.remaining, p.m.restored} {
		v.DeletePartialMatch(l)
	}
}
