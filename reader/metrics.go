package reader

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	cacheBytes    prometheus.Gauge
	gets          prometheus.Counter
	getBytes      prometheus.Counter
	fetchSeconds  prometheus.Histogram
	wakeupsNotify prometheus.Counter
	wakeupsPoll   prometheus.Counter
}

// newMetrics registers the reader's metrics with reg; a nil reg registers nothing
// (tests, or a second Reader in one process).
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	wakeups := f.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_reader_longpoll_wakeups_total",
		Help: "Long-polls that ended with data, by what woke them: a commit notification or the high-watermark poll.",
	}, []string{"by"})
	return &metrics{
		cacheHits: f.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_cache_hits_total",
			Help: "Block lookups answered from the cache.",
		}),
		cacheMisses: f.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_cache_misses_total",
			Help: "Block lookups not in the cache (including those merged into another lookup's GET).",
		}),
		cacheBytes: f.NewGauge(prometheus.GaugeOpts{
			Name: "strata_reader_cache_bytes",
			Help: "Bytes of blocks held in the cache.",
		}),
		gets: f.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_gets_total",
			Help: "Ranged GETs sent to the object store.",
		}),
		getBytes: f.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_get_bytes_total",
			Help: "Bytes received from ranged GETs.",
		}),
		fetchSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_reader_fetch_seconds",
			Help:    "Time to serve a fetch, excluding time spent waiting in a long-poll.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12), // 100µs .. ~2.4s
		}),
		wakeupsNotify: wakeups.WithLabelValues("notify"),
		wakeupsPoll:   wakeups.WithLabelValues("poll"),
	}
}
