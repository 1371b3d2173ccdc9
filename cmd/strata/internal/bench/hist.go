package bench

import (
	"math"
	"slices"
	"sync"
	"time"
)

// recorder collects latencies with the time each was observed, for percentiles over a
// phase and per-second series for the chart. Every sample is kept: a phase of a minute
// at tens of thousands of records a second is a few MiB, and exact percentiles beat
// a histogram's buckets when p999 is the question.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	d     []time.Duration
	at    []time.Duration // since start
}

func newRecorder(start time.Time) *recorder { return &recorder{start: start} }

func (r *recorder) add(at time.Time, d time.Duration) {
	r.mu.Lock()
	r.d = append(r.d, d)
	r.at = append(r.at, at.Sub(r.start))
	r.mu.Unlock()
}

// Latency summarises a set of latencies, in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func (r *recorder) summary() Latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	return summarize(r.d)
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{
		N:    len(s),
		P50:  ms(quantile(s, 0.50)),
		P99:  ms(quantile(s, 0.99)),
		P999: ms(quantile(s, 0.999)),
		Max:  ms(s[len(s)-1]),
		Mean: ms(sum / time.Duration(len(s))),
	}
}

// quantile of sorted s, nearest rank.
func quantile(s []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// Point is one step of a latency series: the samples observed in [T, T+step).
type Point struct {
	T   float64 `json:"t_s"`
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// series buckets the samples by time into steps of step.
func (r *recorder) series(step time.Duration) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.d) == 0 {
		return nil
	}
	var last time.Duration
	for _, a := range r.at {
		last = max(last, a)
	}
	buckets := make([][]time.Duration, int(last/step)+1)
	for i, a := range r.at {
		if a < 0 {
			continue
		}
		k := int(a / step)
		buckets[k] = append(buckets[k], r.d[i])
	}
	out := make([]Point, 0, len(buckets))
	for k, b := range buckets {
		if len(b) == 0 {
			continue
		}
		slices.Sort(b)
		out = append(out, Point{T: float64(k) * step.Seconds(), N: len(b), P50: ms(quantile(b, 0.5)), P99: ms(quantile(b, 0.99))})
	}
	return out
}
