package streams

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/window"
)

// storesTopology uses every kind of store part 2 added: a sliding window, sessions,
// a stream-stream outer join's two window stores and its buffer of unmatched
// records, tables read from a topic and made from a stream, a foreign-key join's
// subscriptions and result, and a processor's window and session stores.
func storesTopology() *streams.Builder {
	b := streams.NewBuilder("stores")
	in := streams.From(b, "st-in", serde.String, serde.String) // value: a customer id
	right := streams.From(b, "st-r", serde.String, serde.String)
	cust := streams.FromTable(b, "st-cust", "cust", serde.String, serde.String)
	res := serde.JSON[window.Result[int64]]()
	streams.WindowedCount(streams.GroupByKey(in), "sliding", window.Sliding(10*time.Second, 2*time.Second), streams.EmitEveryUpdate).To("st-sliding", serde.String, res)
	streams.SessionCount(streams.GroupByKey(in), "sessions", window.Session(10*time.Second, 2*time.Second), streams.EmitEveryUpdate).To("st-sessions", serde.String, res)
	streams.OuterJoin(in, right, "join", window.Join(10*time.Second, 2*time.Second), func(_ string, l, r *string) string {
		return deref(l) + "+" + deref(r)
	}).To("st-join", serde.String, serde.String)
	fk := streams.JoinForeignKey(streams.ToTable(in, "in-table"), cust, "fk", func(v string) string { return v }, func(v, c string) string { return v + "=" + c }, serde.String)
	streams.MapValues(fk.Changes(), func(c streams.Change[string]) string { return deref(c.New) }).To("st-fk", serde.String, serde.String)
	streams.ProcessWithStores(in, "papi", func() streams.Processor[string, string, string, string] { return &papiCounter{} },
		streams.WindowStoreSpec("papi-win", time.Minute), streams.SessionStoreSpec("papi-sess", time.Minute)).To("st-papi", serde.String, serde.String)
	return b
}

var storeNames = []string{"sliding", "sessions", "join-left", "join-right", "join-outer", "cust", "in-table", "fk", "fk-subscriptions", "papi-win", "papi-sess"}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// papiCounter counts a key's records per 10s window and per session (gap 10s) in a
// processor's window and session stores, forwarding both counts.
type papiCounter struct {
	ctx  *streams.ProcessorContext[string, string]
	wins *streams.WindowStore[string, int64]
	sess *streams.SessionStore[string, int64]
}

func (p *papiCounter) Init(ctx *streams.ProcessorContext[string, string]) error {
	p.ctx = ctx
	var err error
	if p.wins, err = streams.WindowStoreOf(ctx, "papi-win", serde.String, serde.Int64); err != nil {
		return err
	}
	p.sess, err = streams.SessionStoreOf(ctx, "papi-sess", serde.String, serde.Int64)
	return err
}

func (p *papiCounter) Process(r streams.Record[string, string]) error {
	ts := r.Timestamp.UnixMilli()
	start := time.UnixMilli(ts - ts%10_000)
	n, _, err := p.wins.Get(r.Key, start)
	if err != nil {
		return err
	}
	if err := p.wins.Put(r.Key, start, n+1); err != nil {
		return err
	}
	merged, count := window.Window{Start: ts, End: ts + 1}, int64(1)
	var found []window.Window
	if err := p.sess.FindSessions(r.Key, time.UnixMilli(ts-10_000), time.UnixMilli(ts+10_000), func(w window.Window, n int64) bool {
		found = append(found, w)
		merged.Start, merged.End = min(merged.Start, w.Start), max(merged.End, w.End)
		count += n
		return true
	}); err != nil {
		return err
	}
	for _, w := range found {
		if err := p.sess.Remove(r.Key, w); err != nil {
			return err
		}
	}
	if err := p.sess.Put(r.Key, merged, count); err != nil {
		return err
	}
	p.ctx.Forward(streams.Record[string, string]{Key: r.Key, Value: fmt.Sprintf("w%d=%d s[%d,%d]=%d", start.UnixMilli(), n+1, merged.Start, merged.End-1, count), Timestamp: r.Timestamp})
	return nil
}

func (p *papiCounter) Close() error { return nil }

// storeInputs makes one half of the inputs: times in [from, from+60s), jittered by
// up to a second (and right-side records up to 3s later): every time of one half is
// before every time of the next, 65s on, so that the runtime takes them in one merge
// order whether it sees both at once or one after the other — and the second half's
// first records still meet the first half's windows, sessions and join partners.
func storeInputs(rng *rand.Rand, from int64) map[string][]client.Record {
	out := map[string][]client.Record{}
	add := func(topic, k, v string, ts int64) {
		r := client.Record{Key: client.String(k), Timestamp: time.UnixMilli(ts)}
		if v != "" {
			r.Value = client.String(v)
		}
		out[topic] = append(out[topic], r)
	}
	for i := range 1500 {
		ts := from + int64(i)*40 + rng.Int64N(2000) - 1000
		add("st-in", fmt.Sprintf("k%02d", rng.IntN(20)), fmt.Sprintf("c%d", rng.IntN(12)), ts)
		if i%3 == 0 {
			add("st-r", fmt.Sprintf("k%02d", rng.IntN(24)), fmt.Sprintf("r%d", i), ts+rng.Int64N(3000))
		}
		if i%30 == 0 {
			v := fmt.Sprintf("name%d", i)
			if rng.IntN(8) == 0 {
				v = "" // a deletion
			}
			add("st-cust", fmt.Sprintf("c%d", rng.IntN(10)), v, ts)
		}
	}
	return out
}

func produceAll(t testing.TB, c *client.Client, recs map[string][]client.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := c.NewProducer(ctx, client.ProducerConfig{Linger: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range slices.Sorted(maps.Keys(recs)) {
		if _, err := p.Produce(ctx, topic, recs[topic]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// runStores runs the stores topology with stateDir until the group has drained,
// returns what it restored per store (its Prometheus metric), and stops it. Its
// commit-latency and lag metrics must show commits, and no lag once drained, when it
// had work to do.
func runStores(t *testing.T, c *client.Client, stateDir string, work bool) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	app, err := streams.New(storesTopology(), streams.Config{Client: c, StateDir: stateDir, InstanceID: "stores-1", SessionTimeout: 3 * time.Second,
		MaxCommitRecords: 400, InputPositionHeader: "strata-input", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	restored := map[string]float64{}
	deadline := time.Now().Add(5 * time.Minute)
	for seen := 0; seen < 2; {
		if _, ok := totalLag(t, c, "stores"); ok && len(app.TaskStates()) > 0 {
			seen++
			// Read the restore counters while the tasks (and so their series) live.
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			clear(restored)
			var commits uint64
			lag, lags := 0.0, 0
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					switch mf.GetName() {
					case "strata_streams_restored_records_total":
						for _, l := range m.GetLabel() {
							if l.GetName() == "store" {
								restored[l.GetValue()] += m.GetCounter().GetValue()
							}
						}
					case "strata_streams_commit_seconds":
						commits += m.GetHistogram().GetSampleCount()
					case "strata_streams_lag_records":
						lag += m.GetGauge().GetValue()
						lags++
					}
				}
			}
			if seen == 2 && work && (commits == 0 || lags == 0 || lag != 0) {
				t.Errorf("drained, the metrics show %d commits timed and a lag of %v over %d input partitions", commits, lag, lags)
			}
		} else {
			seen = 0
		}
		select {
		case err := <-done:
			t.Fatalf("app stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("not drained within 5 minutes")
		}
		time.Sleep(250 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("app: %v", err)
	}
	return restored
}

// TestRestoreEveryStore: the topology runs over half the inputs and stops; its state
// directory is deleted; it starts again — restoring every store from its changelog
// (each one counted) — and processes the other half; then once more with the
// directory intact (nothing replayed). Its outputs equal those of the in-process
// driver over all the inputs at once: a store restored wrong would make the second
// half differ.
func TestRestoreEveryStore(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tp := range []struct {
		name string
		n    int32
	}{{"st-in", 2}, {"st-r", 2}, {"st-cust", 1}, {"st-join", 2}, {"st-fk", 2}, {"st-papi", 2}} {
		if _, err := c.CreateTopic(ctx, tp.name, tp.n, map[string]string{"value.format": "string"}); err != nil {
			t.Fatal(err)
		}
	}
	createTopics(t, c, 2, "st-sliding", "st-sessions")
	rng := rand.New(rand.NewPCG(3, 3))
	produceAll(t, c, storeInputs(rng, 1_000_000))
	dir := t.TempDir()
	runStores(t, c, dir, true)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	produceAll(t, c, storeInputs(rng, 1_065_000))
	restored := runStores(t, c, dir, true)
	for _, st := range storeNames {
		if restored[st] == 0 {
			t.Errorf("store %s: nothing restored after the state directory was deleted (%v)", st, restored)
		}
	}
	t.Logf("restored per store: %v", restored)
	again := runStores(t, c, dir, false)
	for st, n := range again {
		if n != 0 {
			t.Errorf("store %s: %v records replayed with the state directory intact, want 0", st, n)
		}
	}

	// The same inputs through the in-process driver, in the runtime's order.
	parts := map[string]int32{"st-in": 2, "st-r": 2, "st-cust": 1, "st-sliding": 2, "st-sessions": 2, "st-join": 2, "st-fk": 2, "st-papi": 2}
	b := storesTopology()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := streams.NewDriver(topo, streams.DriverConfig{Partitions: parts, MaxCommitRecords: 400})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	type in struct {
		topic     string
		partition int32
		r         client.Record
	}
	var queues [][]in
	for _, topic := range []string{"st-cust", "st-in", "st-r"} {
		for p := range parts[topic] {
			var q []in
			for _, r := range readAll(t, c, topic) {
				if *r.Partition == p {
					q = append(q, in{topic, p, r})
				}
			}
			slices.SortFunc(q, func(a, b in) int { return int(a.r.Offset - b.r.Offset) })
			queues = append(queues, q)
		}
	}
	for {
		best := -1
		for i, q := range queues {
			if len(q) == 0 {
				continue
			}
			if best < 0 || lessIn(q[0].r, q[0].topic, queues[best][0].r, queues[best][0].topic) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		x := queues[best][0]
		queues[best] = queues[best][1:]
		k, _ := x.r.KeyBytes()
		v, _ := x.r.ValueBytes()
		if err := d.Pipe(x.topic, x.partition, k, v, x.r.Timestamp, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range []string{"st-sliding", "st-sessions", "st-join", "st-papi"} {
		var want, got []string
		for _, r := range d.Output(topic) {
			want = append(want, fmt.Sprintf("%s %s @%d", r.Key, r.Value, r.Timestamp.UnixMilli()))
		}
		for _, r := range readAll(t, c, topic) {
			k, _ := r.KeyBytes()
			v, _ := r.ValueBytes()
			got = append(got, fmt.Sprintf("%s %s @%d", k, v, r.Timestamp.UnixMilli()))
		}
		if m, x := compare(t, topic, got, want); m+x > 0 || len(want) == 0 {
			t.Errorf("%s: %d missing, %d extra of %d the driver produced", topic, m, x, len(want))
		}
	}
	final := func(keys, vals [][]byte) map[string]string {
		m := map[string]string{}
		for i := range keys {
			if string(vals[i]) == "null" {
				delete(m, string(keys[i]))
			} else {
				m[string(keys[i])] = string(vals[i])
			}
		}
		return m
	}
	var dk, dv, gk, gv [][]byte
	for _, r := range d.Output("st-fk") {
		dk, dv = append(dk, r.Key), append(dv, r.Value)
	}
	for _, r := range readAll(t, c, "st-fk") {
		k, _ := r.KeyBytes()
		v, _ := r.ValueBytes()
		gk, gv = append(gk, k), append(gv, v)
	}
	if want, got := final(dk, dv), final(gk, gv); !maps.Equal(want, got) || len(want) == 0 {
		t.Errorf("foreign-key join's final table: %d keys, the driver's %d", len(got), len(want))
	}
}

func lessIn(a client.Record, at string, b client.Record, bt string) bool {
	if !a.Timestamp.Equal(b.Timestamp) {
		return a.Timestamp.Before(b.Timestamp)
	}
	if at != bt {
		return at < bt
	}
	if *a.Partition != *b.Partition {
		return *a.Partition < *b.Partition
	}
	return a.Offset < b.Offset
}
