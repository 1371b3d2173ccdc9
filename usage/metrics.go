package usage

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
)

// metrics exposes the node's counts since it started as counters with a topic label.
// The first Config.TopicLabels topics seen keep their own label for the node's life
// (so every series only grows); later ones are summed under topic="other".
type metrics struct {
	r      *Recorder
	descs  [7]*prometheus.Desc
	mu     sync.Mutex
	labels map[int64]string // topic id → its label, decided once
	named  int              // labels that are a topic's own name
}

func newMetrics(r *Recorder) *metrics {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help+" Topics beyond --usage-topic-labels are counted under topic=\"other\".", []string{"topic"}, nil)
	}
	return &metrics{r: r, labels: map[int64]string{}, descs: [7]*prometheus.Desc{
		d("strata_topic_bytes_in_total", "Record batch bytes committed to the topic by this node."),
		d("strata_topic_bytes_out_total", "Bytes this node served from the topic (batch bytes raw, record bytes decoded)."),
		d("strata_topic_records_in_total", "Records committed to the topic by this node."),
		d("strata_topic_records_out_total", "Records this node served from the topic."),
		d("strata_topic_put_requests_total", "Segment PUTs of this node attributed to the topic by its byte share of each object."),
		d("strata_topic_get_requests_total", "Object-store GETs this node made to serve the topic."),
		d("strata_topic_commits_total", "Flush commits of this node attributed to the topic by its byte share of each flush."),
	}}
}

// Collector is the Recorder's metrics, to register once.
func (r *Recorder) Collector() prometheus.Collector { return r.m }

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	r := m.r
	r.mu.Lock()
	snap := make(map[int64]catalog.UsageCounts, len(r.totals))
	for id, c := range r.totals {
		snap[id] = *c
	}
	r.mu.Unlock()

	m.mu.Lock() // scrapes may overlap; the labels are decided once
	defer m.mu.Unlock()
	sums := map[string]*catalog.UsageCounts{}
	for id, c := range snap {
		l := m.label(id)
		s := sums[l]
		if s == nil {
			s = new(catalog.UsageCounts)
			sums[l] = s
		}
		s.Add(c)
	}
	for l, s := range sums {
		for i, v := range []float64{float64(s.BytesIn), float64(s.BytesOut), float64(s.RecordsIn), float64(s.RecordsOut), s.PutRequests, s.GetRequests, s.Commits} {
			ch <- prometheus.MustNewConstMetric(m.descs[i], prometheus.CounterValue, v, l)
		}
	}
}

// label decides a topic's label the first time it is seen: its name while there is
// room under the cap, else (or when its name cannot be found) OtherTopic.
func (m *metrics) label(id int64) string {
	if l, ok := m.labels[id]; ok {
		return l
	}
	l := OtherTopic
	if m.named < m.r.cfg.TopicLabels && m.r.cfg.Name != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		name, err := m.r.cfg.Name(ctx, id)
		cancel()
		if err == nil && name != "" && name != OtherTopic {
			l = name
			m.named++
		}
	}
	m.labels[id] = l
	return l
}
