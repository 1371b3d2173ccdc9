package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/internal/ctxwait"
)

// The measured phases of a run, in the order run calls them: produce at maximum load
// (per path), overload, produce at half the maximum with tails, and the fetches.

// producerBodies builds n request bodies, body i for partition i%Partitions (JSON
// names the partition in the body; binary in the query, so any body serves any
// partition).
func (b *runner) producerBodies(path string, n int) ([]*body, error) {
	cfg := &b.cfg
	out := make([]*body, n)
	for i := range out {
		var err error
		if path == "binary" {
			out[i], err = binaryBody(cfg.BatchRecords, cfg.RecordSize, i)
		} else {
			out[i], err = jsonBody(cfg.BatchRecords, cfg.RecordSize, i, int32(i%cfg.Partitions))
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// phase runs load for cfg.Duration between two scrapes of the nodes' metrics and fills
// in p from the load's counters and from what the metrics say.
func (b *runner) phase(ctx context.Context, name string, p *Produce, c *counters, ack *recorder, load func(ctx context.Context)) error {
	cfg := &b.cfg
	b.settle(name)
	before, err := scrape(ctx, b.hc, cfg.Nodes)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	peaks := b.memoryPeaks(pctx)
	cfg.Phase(name, false)
	start, cpu := time.Now(), cputime.Self()
	load(pctx)
	p.Seconds = time.Since(start).Seconds()
	cpu = cputime.Self() - cpu
	cfg.Phase(name, true)
	cancel()
	p.PeakRSS, p.PeakHeap = peaks()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.Requests, p.Records, p.Bytes = c.requests.Load(), c.records.Load(), c.bytes.Load()
	p.Rejected, p.Failed = c.rejected.Load(), c.failed.Load()
	if e, ok := c.firstErr.Load().(string); ok {
		p.FirstError = e
	}
	p.Ack = ack.summary()
	after, err := scrape(ctx, b.hc, cfg.Nodes)
	if err != nil {
		return err
	}
	d := delta(before, after)
	gib := float64(p.Bytes) / (1 << 30)
	p.Flushes = d.get("strata_writer_flushes_total")
	p.Puts = d.sum("strata_objstore_requests_total", `op="put"`)
	p.Hedges = d.sum("strata_writer_put_hedges_total", `result="sent"`)
	if objBytes, reqs := d.get("strata_writer_flush_bytes_sum"), d.get("strata_writer_requests_total"); objBytes > 0 && reqs > 0 && p.Bytes > 0 {
		perReq := objBytes / reqs
		p.FullFlushPayload = math.Floor(float64(cfg.MaxFlushBytes)/perReq) * perReq * float64(p.Bytes) / objBytes
	}
	commits := d.sum("strata_writer_commits_total") + d.sum("strata_writer_settles_total")
	if p.Flushes > 0 {
		p.CommitsPerFlush = commits / p.Flushes
		p.MeanFlushBytes = d.get("strata_writer_flush_bytes_sum") / d.get("strata_writer_flush_bytes_count")
		p.FlushBytes = &SizePercentiles{
			P10: d.quantile("strata_writer_flush_bytes", "", 0.1), P50: d.quantile("strata_writer_flush_bytes", "", 0.5),
			P90: d.quantile("strata_writer_flush_bytes", "", 0.9), P99: d.quantile("strata_writer_flush_bytes", "", 0.99),
		}
	}
	for _, st := range writerStages {
		if v := d.quantile("strata_writer_flush_seconds", `stage="`+st+`"`, 0.99); v > 0 {
			if p.StageP99 == nil {
				p.StageP99 = map[string]float64{}
			}
			p.StageP99[st] = v * 1000
		}
	}
	p.PutP999 = 1000 * d.quantile("strata_writer_flush_seconds", `stage="put"`, 0.999)
	p.CPUSeconds = d.get("process_cpu_seconds_total")
	gcShare(p, d)
	if gib > 0 {
		p.PutsPerGiB = p.Puts / gib
		p.CPUSecPerGiB = p.CPUSeconds / gib
		p.ClientCPUSecPerGiB = cpu.Seconds() / gib
	}
	p.RecordsPS = float64(p.Records) / p.Seconds
	p.MiBps = float64(p.Bytes) / (1 << 20) / p.Seconds
	b.log.Info("phase done", "phase", name, "records_per_s", int(p.RecordsPS), "mib_per_s", fmt.Sprintf("%.1f", p.MiBps),
		"ack_p50_ms", p.Ack.P50, "ack_p99_ms", p.Ack.P99, "rejected", p.Rejected, "failed", p.Failed)
	if p.Failed > 0 && p.Records == 0 {
		return fmt.Errorf("bench: %s: every request failed: %s", name, p.FirstError)
	}
	return nil
}

func (b *runner) produceMax(ctx context.Context, path string) (Produce, error) {
	switch path {
	case "kafka":
		return b.produceKafka(ctx)
	case "kafka-bare":
		return b.produceKafkaBare(ctx)
	}
	cfg := &b.cfg
	name := "produce-" + path
	b.log.Info("phase: maximum load", "path", path, "producers", cfg.Producers, "seconds", cfg.Duration.Seconds())
	bodies, err := b.producerBodies(path, cfg.Producers)
	if err != nil {
		return Produce{}, err
	}
	p := Produce{Name: name, Path: path, Mode: "closed"}
	var c counters
	ack := newRecorder(time.Now())
	s := &sender{hc: b.hc, nodes: cfg.Nodes, topic: cfg.Topic, path: path}
	err = b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		closedLoop(ctx, cfg.Producers, bodies, cfg.Partitions, s.send, &c, ack)
	})
	return p, err
}

// warmUp runs the binary path's producers at maximum load before the first measured
// phase, for half a phase (at most 5s), unmeasured. The first phase otherwise pays for
// the start of the nodes and their store: heaps and buffers growing to their working
// size, connections, the PUT latencies hedging waits for. Measured without it, the
// first phase (produce-binary) ran at 241 MiB/s and the same producers and bodies
// over Kafka, fourth, at 365.
func (b *runner) warmUp(ctx context.Context) error {
	cfg := &b.cfg
	d := min(cfg.Duration/2, 5*time.Second)
	b.log.Info("warm-up: binary producers at maximum load, not measured", "seconds", d.Seconds())
	bodies, err := b.producerBodies("binary", 1) // shared, unstamped
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var c counters
	s := &sender{hc: b.hc, nodes: cfg.Nodes, topic: cfg.Topic, path: "binary"}
	closedLoop(wctx, cfg.Producers, bodies, cfg.Partitions, s.send, &c, newRecorder(time.Now()))
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.requests.Load() == 0 {
		e, _ := c.firstErr.Load().(string)
		return fmt.Errorf("bench: warm-up: no produce request was answered (%d failed: %s)", c.failed.Load(), e)
	}
	return nil
}

// overload offers about twice what the writer's buffer holds, from producers that
// retry at once on 429, for a few seconds: the writer must answer with back-pressure
// rather than grow, and the nodes' memory must stay within its bound.
func (b *runner) overload(ctx context.Context) (Produce, error) {
	cfg := &b.cfg
	name := "produce-binary-overload"
	n := cfg.OverloadProducers
	b.log.Info("phase: overload", "producers", n)
	bodies, err := b.producerBodies("binary", 1) // shared, unstamped: only the acks are timed
	if err != nil {
		return Produce{}, err
	}
	p := Produce{Name: name, Path: "binary", Mode: "closed"}
	var c counters
	ack := newRecorder(time.Now())
	s := &sender{hc: b.hc, nodes: cfg.Nodes, topic: cfg.Topic, path: "binary"}
	saved := cfg.Duration
	cfg.Duration = min(cfg.Duration, 4*time.Second)
	defer func() { cfg.Duration = saved }()
	err = b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		closedLoop(ctx, n, bodies, cfg.Partitions, s.send, &c, ack)
	})
	return p, err
}

func (b *runner) produceHalf(ctx context.Context, rate float64) (Produce, Latency, error) {
	cfg := &b.cfg
	name := "produce-binary-half"
	b.log.Info("phase: half load with tails", "records_per_s", int(rate), "seconds", cfg.Duration.Seconds())
	const maxInflight = 64
	bodies, err := b.producerBodies("binary", 1)
	if err != nil {
		return Produce{}, Latency{}, err
	}
	pool := []*body{bodies[0]}
	for len(pool) < maxInflight {
		f := pool[0]
		pool = append(pool, &body{buf: append([]byte(nil), f.buf...), slots: f.slots, crc: true, recs: f.recs, bytes: f.bytes})
	}
	p := Produce{Name: name, Path: "binary", Mode: "open"}
	var c counters
	now := time.Now()
	ack, e2e := newRecorder(now), newRecorder(now)

	// One tail per partition, open before the first record is sent.
	tctx, stopTails := context.WithCancel(ctx)
	var twg sync.WaitGroup
	tailErrs := make(chan error, cfg.Tails)
	for part := range cfg.Tails {
		ready := make(chan struct{})
		node := cfg.Nodes[part%len(cfg.Nodes)]
		twg.Go(func() {
			if err := tail(tctx, b.hc, node, cfg.Topic, int32(part), e2e, ready); err != nil {
				tailErrs <- err
			}
		})
		<-ready
	}
	s := &sender{hc: b.hc, nodes: cfg.Nodes, topic: cfg.Topic, path: "binary"}
	err = b.phase(ctx, name, &p, &c, ack, func(ctx context.Context) {
		openLoop(ctx, s, pool, cfg.Partitions, rate, maxInflight, &c, ack)
	})
	// The last records' events are on their way: give them a moment.
	_ = ctxwait.Sleep(ctx, 500*time.Millisecond+cfg.Linger)
	stopTails()
	twg.Wait()
	close(tailErrs)
	if err != nil {
		return p, Latency{}, err
	}
	for err := range tailErrs {
		b.rep.Notes = append(b.rep.Notes, "tail: "+err.Error())
	}
	b.rep.Series.Ack = ack.series(250 * time.Millisecond)
	b.rep.Series.E2E = e2e.series(250 * time.Millisecond)
	sum := e2e.summary()
	if want := p.Records * int64(cfg.Tails) / int64(cfg.Partitions); int64(sum.N) < want*9/10 {
		b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("the %d tails saw %d records of the about %d produced to their partitions at half load", cfg.Tails, sum.N, want))
	}
	return p, sum, nil
}

// fetches reads back what the produce phases wrote: a first reader (cold: the nodes'
// caches do not hold it), a second reader of the same data (cached), and a JSON reader.
// The data read is capped at three quarters of the cache, so the second reader can
// find all of it there. With Kafka listeners, a Kafka reader of the same data follows.
func (b *runner) fetches(ctx context.Context) error {
	cfg := &b.cfg
	c := client.New(cfg.Nodes[0], client.WithHTTPClient(b.hc))
	parts, err := c.Partitions(ctx, cfg.Topic)
	if err != nil {
		return fmt.Errorf("bench: partitions of %s: %w", cfg.Topic, err)
	}
	var total int64
	for _, p := range parts {
		total += p.Bytes
	}
	budget := min(total, cfg.CacheBytes*3/4/int64(len(cfg.Nodes)))
	until := make(map[int32]int64, len(parts))
	for _, p := range parts {
		if p.Bytes > 0 {
			until[p.Partition] = p.LogStartOffset + (p.HighWatermark-p.LogStartOffset)*budget/total
		}
	}
	for _, pass := range []struct {
		name   string
		binary bool
	}{{"fetch-cold", true}, {"fetch-cached", true}, {"fetch-cached-json", false}} {
		b.log.Info("phase: "+pass.name, "bytes", budget)
		before, err := scrape(ctx, b.hc, cfg.Nodes)
		if err != nil {
			return err
		}
		cfg.Phase(pass.name, false)
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var read int64
		var firstErr error
		for part, end := range until {
			// Each partition is read by the node that will read it again: the cache
			// is per node.
			node := cfg.Nodes[int(part)%len(cfg.Nodes)]
			wg.Go(func() {
				n, err := fetchRange(ctx, b.hc, node, cfg.Topic, part, 0, end, 4<<20, pass.binary)
				mu.Lock()
				read += n
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		cfg.Phase(pass.name, true)
		if firstErr != nil {
			return fmt.Errorf("bench: %s: %w", pass.name, firstErr)
		}
		after, err := scrape(ctx, b.hc, cfg.Nodes)
		if err != nil {
			return err
		}
		d := delta(before, after)
		path := "json"
		if pass.binary {
			path = "binary"
		}
		f := Fetch{Name: pass.name, Path: path, Bytes: read, Seconds: secs, MiBps: float64(read) / (1 << 20) / secs,
			Gets: d.sum("strata_objstore_requests_total", `op="get`), GetBytes: d.sum("strata_objstore_bytes_total", `op="get`),
			Objects: b.meanObject}
		if read > 0 {
			f.GetsPer4Mi = f.Gets / (float64(read) / (4 << 20))
		}
		b.log.Info("phase done", "phase", pass.name, "mib_per_s", fmt.Sprintf("%.1f", f.MiBps), "gets", f.Gets)
		b.rep.Fetch = append(b.rep.Fetch, f)
	}
	if len(cfg.KafkaNodes) > 0 {
		f, err := b.fetchKafka(ctx, until, 4<<20)
		if err != nil {
			return err
		}
		b.rep.Fetch = append(b.rep.Fetch, f)
	}
	return nil
}

// settle, with Config.Settle, writes the machine's dirty pages out and drops its clean
// page cache before a produce phase (and the floor). A phase writes gigabytes (the
// object store's files, or the embedded node's), and the next phase would pay for
// them: the kernel writing them back and reclaiming the cache in its writers' write
// calls. Measured in the
// embedded bench, the node's CPU per GiB of Kafka produce was 1.39 s when its phase
// came first and 2.02 s when it came third, after the binary and JSON phases; with the
// cache dropped before each phase, 1.39 s third. Phases compared in a target must
// start from the same state. Dropping the cache needs root; without it only the dirty
// pages are written, which the log says once.
func (b *runner) settle(name string) {
	if !b.cfg.Settle {
		return
	}
	start := time.Now()
	unix.Sync()
	err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0)
	if err != nil && !b.settleWarned {
		b.settleWarned = true
		b.log.Info("the page cache is not dropped between phases (needs root): a later phase may pay for an earlier one's writes", "err", err)
	}
	b.log.Debug("page cache settled", "before", name, "seconds", time.Since(start).Seconds())
}
