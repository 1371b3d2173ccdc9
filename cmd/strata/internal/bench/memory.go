package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
)

// Memory: a node's resident memory, heap and collector CPU in each produce phase, and
// the outside review's reproduction of slow readers — sockets that ask for 16 MiB
// answers and never read them — with another client fetching meanwhile.

// SlowReaders is the slow-reader phase's result.
type SlowReaders struct {
	Sockets  int     `json:"sockets"`
	MaxBytes int64   `json:"max_bytes_asked"`
	Seconds  float64 `json:"seconds"`
	// The other client's fetches meanwhile: how many were answered 200, how many not
	// (their first status), and their latency.
	Served     int     `json:"other_fetches_served"`
	Failed     int     `json:"other_fetches_failed"`
	FirstError string  `json:"first_error,omitempty"`
	Fetch      Latency `json:"other_fetch"`
	PeakRSS    float64 `json:"node_peak_rss_bytes"`
	PeakHeap   float64 `json:"node_peak_heap_bytes"`
}

// memoryPeaks samples the nodes' resident memory and heap in use every 250ms until
// ctx ends, and returns a func reporting the peaks (summed over nodes).
func (b *runner) memoryPeaks(ctx context.Context) func() (rss, heap float64) {
	var mu sync.Mutex
	var rss, heap float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if s, err := scrape(ctx, b.hc, b.cfg.Nodes); err == nil {
				mu.Lock()
				rss = max(rss, s.get("process_resident_memory_bytes"))
				heap = max(heap, s.get("go_memstats_heap_inuse_bytes"))
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() (float64, float64) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return rss, heap
	}
}

// gcShare fills in p's collector CPU from the metrics' delta over its phase.
func gcShare(p *Produce, d samples) {
	p.GCCPUSeconds = d.get("go_cpu_classes_gc_total_cpu_seconds_total")
	if p.CPUSeconds > 0 {
		p.GCShare = p.GCCPUSeconds / p.CPUSeconds
	}
}

// slowReaders runs the slow-reader phase into the report, unless cfg.SlowSockets is
// negative.
func (b *runner) slowReaders(ctx context.Context) error {
	if b.cfg.SlowSockets <= 0 {
		return nil
	}
	sr, err := b.slowReaderPhase(ctx)
	b.rep.SlowReaders = sr
	return err
}

// slowReaderPhase opens cfg.SlowSockets connections to the first node, each asking for a
// 16 MiB JSON answer from the start of partition 0 and never reading it, holds them
// for a few seconds while another client fetches 100 records at a time from random
// offsets of the other partitions, then closes them. Without a bound the node holds
// every answer for as long as the sockets stay open; with one it stays within its
// limit and keeps answering the other client.
func (b *runner) slowReaderPhase(ctx context.Context) (*SlowReaders, error) {
	cfg := &b.cfg
	node := cfg.Nodes[0]
	u, err := url.Parse(node)
	if err != nil {
		return nil, err
	}
	c := client.New(node, client.WithHTTPClient(b.hc))
	parts, err := c.Partitions(ctx, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("bench: partitions of %s: %w", cfg.Topic, err)
	}
	const maxBytes = 16 << 20
	sr := &SlowReaders{Sockets: cfg.SlowSockets, MaxBytes: maxBytes}
	b.log.Info("phase: slow readers", "sockets", sr.Sockets)
	cfg.Phase("slow-readers", false)
	defer cfg.Phase("slow-readers", true)
	pctx, cancel := context.WithTimeout(ctx, min(cfg.Duration, 6*time.Second))
	defer cancel()
	peaks := b.memoryPeaks(pctx)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	path := "/v1/topics/" + cfg.Topic + "/partitions/0/records?offset=0&max_records=10000&max_bytes=" + strconv.Itoa(maxBytes)
	for range sr.Sockets {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			return nil, fmt.Errorf("bench: slow readers: %w", err)
		}
		conns = append(conns, conn)
		// The request, and never a byte of the answer read.
		if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, u.Host); err != nil {
			return nil, fmt.Errorf("bench: slow readers: %w", err)
		}
	}
	_ = ctxwait.Sleep(pctx, 500*time.Millisecond) // their answers are being made and stuck
	start := time.Now()
	var lat []time.Duration
	for pctx.Err() == nil {
		p := parts[1+rand.IntN(len(parts)-1)]
		if p.HighWatermark <= p.LogStartOffset {
			continue
		}
		off := p.LogStartOffset + rand.Int64N(p.HighWatermark-p.LogStartOffset)
		t := time.Now()
		req, _ := http.NewRequestWithContext(pctx, http.MethodGet, fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d&max_records=100", node, cfg.Topic, p.Partition, off), nil)
		resp, err := b.hc.Do(req)
		if err != nil {
			if pctx.Err() != nil {
				break
			}
			sr.Failed++
			if sr.FirstError == "" {
				sr.FirstError = err.Error()
			}
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			sr.Failed++
			if sr.FirstError == "" {
				sr.FirstError = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body)
			}
			continue
		}
		sr.Served++
		lat = append(lat, time.Since(t))
	}
	sr.Seconds = time.Since(start).Seconds()
	sr.Fetch = summarize(lat)
	cancel()
	sr.PeakRSS, sr.PeakHeap = peaks()
	b.log.Info("phase done", "phase", "slow-readers", "served", sr.Served, "failed", sr.Failed, "p99_ms", sr.Fetch.P99,
		"peak_rss_mib", int(sr.PeakRSS)>>20)
	return sr, nil
}

// memoryTargets checks peak resident memory against the nodes' memory limit (or, with
// none given, the old rule of thumb: buffer + cache + 100 MiB).
func (b *runner) memoryTargets(add func(Target)) {
	rep, cfg := &b.rep, &b.cfg
	nodes := float64(len(cfg.Nodes))
	bound, name := nodes*float64(cfg.MemoryLimit), "--memory-limit"
	if cfg.MemoryLimit == 0 {
		bound, name = nodes*float64(cfg.BufferBytes+cfg.CacheBytes+100<<20), "buffer + cache + 100 MiB (no --memory-limit)"
	}
	for _, p := range rep.Produce {
		if p.Name != "produce-binary-overload" || p.PeakRSS == 0 {
			continue
		}
		add(Target{Name: "peak node RSS at overload vs " + name, Figure: p.PeakRSS / (1 << 20), Bound: bound / (1 << 20), Unit: "MiB",
			Ratio: p.PeakRSS / bound, Want: "<= 1x", Pass: p.PeakRSS <= bound,
			Note: fmt.Sprintf("heap in use at its peak %s; the collector took %.1f%% of the node's CPU", sizeString(roundSize(int64(p.PeakHeap))), 100*p.GCShare)})
	}
	if sr := rep.SlowReaders; sr != nil && sr.PeakRSS > 0 {
		add(Target{Name: fmt.Sprintf("peak node RSS with %d sockets not reading 16 MiB answers vs %s", sr.Sockets, name), Figure: sr.PeakRSS / (1 << 20), Bound: bound / (1 << 20), Unit: "MiB",
			Ratio: sr.PeakRSS / bound, Want: "<= 1x", Pass: sr.PeakRSS <= bound,
			Note: fmt.Sprintf("meanwhile another client's fetches: %d served, %d failed, p50 %.1f ms, p99 %.1f ms", sr.Served, sr.Failed, sr.Fetch.P50, sr.Fetch.P99)})
		add(Target{Name: "other client's fetches served beside the slow readers", Figure: float64(sr.Served), Bound: float64(sr.Served + sr.Failed), Unit: "fetches",
			Ratio: float64(sr.Served) / max(1, float64(sr.Served+sr.Failed)), Want: ">= 0.99x", Pass: sr.Served > 0 && float64(sr.Served) >= 0.99*float64(sr.Served+sr.Failed),
			Note: sr.FirstError})
	}
}
