package streams

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/retail/retail"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/window"
)

// The figures of the closing note, as benchmarks against a real server (one `strata
// serve` on Postgres + MinIO). Each runs its workload once per iteration; run with
// -benchtime=1x:
//
//	go test -run '^$' -bench . -benchtime=1x ./test/streams

// runApp runs a topology in-process until stop is called.
func runApp(tb testing.TB, b *streams.Builder, cfg streams.Config) (*streams.App, func()) {
	tb.Helper()
	app, err := streams.New(b, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	return app, func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("app: %v", err)
		}
	}
}

// BenchmarkRetailThroughput: records/s of the retail app, exactly once and at least
// once, on the same inputs (200,000; 1,000,000 with STRATA_LONG), one instance,
// default commit settings, inputs all produced before it starts.
func BenchmarkRetailThroughput(b *testing.B) {
	n := 200_000
	if long() {
		n = 1_000_000
	}
	nd, c := setup(b, n)
	run := 0
	for _, g := range []struct {
		name string
		g    streams.Guarantee
	}{{"exactly-once", streams.ExactlyOnce}, {"at-least-once", streams.AtLeastOnce}} {
		b.Run(g.name, func(b *testing.B) {
			for range b.N {
				run++
				app := fmt.Sprintf("bench-%d", run)
				start := time.Now()
				_, stop := runApp(b, retail.Build(app, retail.Options{}), streams.Config{Client: client.New(nd.url), Guarantee: g.g, StateDir: b.TempDir()})
				waitDrained(b, c, app, 10*time.Minute)
				took := time.Since(start)
				stop()
				b.ReportMetric(float64(n)/took.Seconds(), "records/s")
			}
		})
	}
}

// latencies tails every partition of topic from its start and records, per record,
// how long after its timestamp it became readable, until ctx ends.
func latencies(ctx context.Context, c *client.Client, topic string, partitions int32) func() []time.Duration {
	var (
		mu  sync.Mutex
		out []time.Duration
		wg  sync.WaitGroup
	)
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(0); ctx.Err() == nil; {
				res, err := c.Fetch(ctx, topic, p, client.FetchOptions{Offset: off, Wait: time.Second, MaxRecords: 1000})
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				now := time.Now()
				mu.Lock()
				for _, r := range res.Records {
					out = append(out, now.Sub(r.Timestamp))
				}
				mu.Unlock()
				off = res.NextOffset
			}
		}()
	}
	return func() []time.Duration {
		wg.Wait()
		slices.Sort(out)
		return out
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// paced sends records at rate per second for d, stamping each with the time it is
// handed to the producer.
func paced(tb testing.TB, c *client.Client, rate int, d time.Duration, next func(i int) (string, client.Record)) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	p, err := c.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		if wait := time.Duration(i) * time.Second / time.Duration(rate); wait > time.Since(start) {
			time.Sleep(wait - time.Since(start))
		}
		topic, r := next(i)
		r.Timestamp = time.Now()
		if _, err := p.Send(ctx, topic, r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkEndToEndLatency: from handing an input to the producer to its output being
// readable, p50 and p99, at a 100ms commit interval, exactly once: a stateless map,
// and the retail app (its reorders, over 50 SKUs so stock crosses the reorder point
// often).
func BenchmarkEndToEndLatency(b *testing.B) {
	const rate, dur = 1000, 10 * time.Second
	nd := startNode(b)
	c := client.New(nd.url)
	b.Run("stateless-map", func(b *testing.B) {
		createTopics(b, c, 6, "lat-in", "lat-out")
		mb := streams.NewBuilder("lat-map")
		streams.MapValues(streams.From(mb, "lat-in", serde.String, serde.JSON[json.RawMessage]()), func(v json.RawMessage) json.RawMessage { return v }).
			To("lat-out", serde.String, serde.JSON[json.RawMessage]())
		_, stop := runApp(b, mb, streams.Config{Client: c, CommitInterval: 100 * time.Millisecond})
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		got := latencies(ctx, c, "lat-out", 6)
		gotIn := latencies(ctx, c, "lat-in", 6)
		time.Sleep(2 * time.Second) // the task starts
		paced(b, c, rate, dur, func(i int) (string, client.Record) {
			return "lat-in", client.Record{Key: client.String(fmt.Sprintf("k%d", i%100)), Value: json.RawMessage(fmt.Sprint(i))}
		})
		time.Sleep(2 * time.Second)
		cancel()
		ds := got()
		in := gotIn()
		b.ReportMetric(float64(pct(in, 0.5).Milliseconds()), "input-p50-ms")
		report(b, ds)
	})
	b.Run("retail", func(b *testing.B) {
		createTopics(b, c, 6, retail.Sales, retail.Shipments, retail.Reorders, retail.PriceAdjustments)
		_, stop := runApp(b, retail.Build("lat-retail", retail.Options{}), streams.Config{Client: c, CommitInterval: 100 * time.Millisecond, StateDir: b.TempDir()})
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		got := latencies(ctx, c, retail.Reorders, 6)
		time.Sleep(2 * time.Second)
		ins := retail.Generate(1, rate*int(dur/time.Second)+rate, 50, time.Now(), time.Millisecond)
		recs := retail.Records(ins)
		idx := map[string]int{}
		paced(b, c, rate, dur, func(i int) (string, client.Record) {
			topic := ins[i].Topic
			r := recs[topic][idx[topic]]
			idx[topic]++
			return topic, r
		})
		time.Sleep(2 * time.Second)
		cancel()
		report(b, got())
	})
}

func report(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		b.Fatal("no output read")
	}
	b.ReportMetric(float64(pct(ds, 0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(ds, 0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(float64(len(ds)), "outputs")
}

// BenchmarkRestore: time to restore a store of 1,000,000 keys (100,000 without
// STRATA_LONG... set STRATA_RESTORE_KEYS to choose) from a wiped state directory, and
// then from the intact one.
func BenchmarkRestore(b *testing.B) {
	n := 100_000
	if long() {
		n = 1_000_000
	}
	if v := os.Getenv("STRATA_RESTORE_KEYS"); v != "" {
		fmt.Sscan(v, &n)
	}
	nd := startNode(b)
	c := client.New(nd.url)
	start := time.Now()
	seedChangelog(b, c, n)
	b.Logf("wrote %d changelog records in %s", n, time.Since(start).Round(time.Millisecond))
	dir := b.TempDir()
	b.Run("wiped", func(b *testing.B) {
		for range b.N {
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
			took, m, stop := runCounting(b, nd.url, dir)
			stop()
			b.ReportMetric(took.Seconds(), "restore-s")
			b.ReportMetric(float64(m.RestoredRecords), "records")
		}
	})
	b.Run("intact", func(b *testing.B) {
		for range b.N {
			took, m, stop := runCounting(b, nd.url, dir)
			stop()
			b.ReportMetric(took.Seconds(), "restore-s")
			b.ReportMetric(float64(m.RestoredRecords), "records")
		}
	})
}

// BenchmarkJoinAndSessionThroughput: records/s of a stream-stream join (5s windows,
// every record meeting one partner) and of a session-window aggregation (5s gap,
// emitted on close), each beside a stateless map in the same run, one instance each,
// exactly once, default commit settings, Pebble state, over the same inputs (200,000
// records on two topics of 6 partitions, 1,000 keys; 1,000,000 with STRATA_LONG), all
// produced before each application starts:
//
//	go test -run '^$' -bench JoinAndSession -benchtime=1x ./test/streams
func BenchmarkJoinAndSessionThroughput(b *testing.B) {
	n := 200_000
	if long() {
		n = 1_000_000
	}
	nd := startNode(b)
	c := client.New(nd.url)
	createTopics(b, c, 6, "bj-left", "bj-right", "bj-out")
	recs := map[string][]client.Record{}
	for i := range n {
		topic := "bj-left"
		if i%2 == 1 {
			topic = "bj-right"
		}
		// 100 records a second of nominal time; a left and a right record 10ms apart share
		// a key, which comes back 20s later: each joins its one partner.
		recs[topic] = append(recs[topic], client.Record{Key: client.String(fmt.Sprintf("k%03d", (i/2*7919)%1000)),
			Value: json.RawMessage(fmt.Sprint(i)), Timestamp: genStart.Add(time.Duration(i) * 10 * time.Millisecond)})
	}
	start := time.Now()
	produceAll(b, c, recs)
	b.Logf("produced %d inputs in %s", n, time.Since(start).Round(time.Millisecond))
	num := serde.JSON[int64]()
	topologies := []struct {
		name  string
		build func(app string) *streams.Builder
	}{
		{"stateless-map", func(app string) *streams.Builder {
			sb := streams.NewBuilder(app)
			in := streams.Merge(streams.From(sb, "bj-left", serde.String, num), streams.From(sb, "bj-right", serde.String, num))
			streams.MapValues(in, func(v int64) int64 { return v + 1 }).To("bj-out", serde.String, num)
			return sb
		}},
		{"stream-stream-join", func(app string) *streams.Builder {
			sb := streams.NewBuilder(app)
			l, r := streams.From(sb, "bj-left", serde.String, num), streams.From(sb, "bj-right", serde.String, num)
			streams.Join(l, r, "join", window.Join(5*time.Second, time.Second), func(_ string, a, b int64) int64 { return a + b }).To("bj-out", serde.String, num)
			return sb
		}},
		{"session-window", func(app string) *streams.Builder {
			sb := streams.NewBuilder(app)
			in := streams.Merge(streams.From(sb, "bj-left", serde.String, num), streams.From(sb, "bj-right", serde.String, num))
			streams.SessionCount(streams.GroupByKey(in), "sessions", window.Session(5*time.Second, time.Second), streams.EmitOnWindowClose).
				To("bj-out", serde.String, serde.JSON[window.Result[int64]]())
			return sb
		}},
	}
	run := 0
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			for range b.N {
				run++
				app := fmt.Sprintf("bj-%s-%d", tp.name, run)
				start := time.Now()
				_, stop := runApp(b, tp.build(app), streams.Config{Client: c, StateDir: b.TempDir()})
				stopped := false
				defer func() { // a failed wait still stops the app before its state directory goes
					if !stopped {
						stop()
					}
				}()
				waitDrainedTopics(b, c, app, 10*time.Minute, "bj-left", "bj-right")
				took := time.Since(start)
				stop()
				stopped = true
				b.ReportMetric(float64(n)/took.Seconds(), "records/s")
			}
		})
	}
}

// waitDrainedTopics waits until the group has committed the end of every partition
// of the topics.
func waitDrainedTopics(t testing.TB, c *client.Client, group string, within time.Duration, topics ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lag, err := c.GroupLag(ctx, group)
		cancel()
		done := err == nil && len(lag.Partitions) > 0
		for _, p := range lag.Partitions {
			if slices.Contains(topics, p.Topic) && (p.CommittedOffset == nil || *p.CommittedOffset != p.HighWatermark) {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not drained after %s", group, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
