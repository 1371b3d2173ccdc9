package reader

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/prom"
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
	diskHits      prometheus.Counter
	diskMisses    prometheus.Counter
	diskWrites    prometheus.Counter
	diskDropped   prometheus.Counter
	diskBytes     prometheus.Gauge
	prefetches    *prometheus.CounterVec // result: ok|error|dropped
}

// newMetrics registers the reader's metrics with reg (prom.Register: several readers in
// one process share them); a nil reg registers nothing.
func newMetrics(reg prometheus.Registerer) *metrics {
	wakeups := prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_reader_longpoll_wakeups_total",
		Help: "Long-polls that ended with data, by what woke them: a commit notification or the high-watermark poll.",
	}, []string{"by"}))
	disk := prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_reader_disk_cache_lookups_total",
		Help: "Memory misses looked up in the disk tier of the block cache, by result (hit, miss).",
	}, []string{"result"}))
	m := &metrics{
		cacheHits: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_cache_hits_total",
			Help: "Block lookups answered from the cache.",
		})),
		cacheMisses: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_cache_misses_total",
			Help: "Block lookups not in the cache (including those merged into another lookup's GET).",
		})),
		cacheBytes: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_reader_cache_bytes",
			Help: "Bytes of blocks held in the cache.",
		})),
		gets: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_gets_total",
			Help: "Ranged GETs sent to the object store.",
		})),
		getBytes: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_get_bytes_total",
			Help: "Bytes received from ranged GETs.",
		})),
		fetchSeconds: prom.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_reader_fetch_seconds",
			Help:    "Time to serve a fetch, excluding time spent waiting in a long-poll.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12), // 100µs .. ~2.4s
		})),
		wakeupsNotify: wakeups.WithLabelValues("notify"),
		wakeupsPoll:   wakeups.WithLabelValues("poll"),
		diskHits:      disk.WithLabelValues("hit"),
		diskMisses:    disk.WithLabelValues("miss"),
		diskWrites: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_disk_cache_writes_total",
			Help: "Blocks evicted from memory and written to the disk tier.",
		})),
		diskDropped: prom.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_reader_disk_cache_dropped_total",
			Help: "Blocks evicted from memory and not written to the disk tier because its write queue was full.",
		})),
		diskBytes: prom.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_reader_disk_cache_bytes",
			Help: "Bytes of blocks held in the disk tier.",
		})),
		prefetches: prom.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_reader_prefetches_total",
			Help: "Background reads of the bytes a sequential reader wants next, by result (ok, error, dropped: queue full).",
		}, []string{"result"})),
	}
	for _, r := range []string{"ok", "error", "dropped"} {
		m.prefetches.WithLabelValues(r)
	}
	return m
}
