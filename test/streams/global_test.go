package streams

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
)

// stringTopics creates topics whose keys and values are strings.
func stringTopics(t testing.TB, c *client.Client, partitions int32, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tp := range topics {
		if _, err := c.CreateTopic(ctx, tp, partitions, map[string]string{"value.format": "string"}); err != nil {
			t.Fatal(err)
		}
	}
}

// runBg runs an App in the background until the test ends (or stop is called).
func runBg(t *testing.T, b *streams.Builder, cfg streams.Config) (app *streams.App, stop func() error) {
	t.Helper()
	app, err := streams.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	stopped := false
	var result error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return app, stop
}

// countRecords is the number of records topic holds.
func countRecords(t testing.TB, c *client.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := c.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range ps {
		n += p.HighWatermark - p.LogStartOffset
	}
	return n
}

// hwms is each partition's high watermark.
func hwms(t testing.TB, c *client.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := c.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range ps {
		out[p.Partition] = p.HighWatermark
	}
	return out
}

func globalTopology() *streams.Builder {
	b := streams.NewBuilder("gjoin")
	orders := streams.From(b, "gj-orders", serde.String, serde.String) // value: a customer id
	cust := streams.FromGlobalTable(b, "gj-customers", "customers", serde.String, serde.String)
	streams.LeftJoinGlobal(orders, cust, func(_, c string) string { return c }, func(id, c string, name *string) string {
		return id + "=" + deref(name)
	}).To("gj-out", serde.String, serde.String)
	return b
}

// TestGlobalTableJoin: a stream of orders (4 partitions, keyed by order) joined with
// a global table of customers (2 partitions, keyed by customer) by two instances.
// The first table and the first orders are written before the instances start, so
// an order processed before the table was restored would join null; then the table
// changes (updates, deletions, new customers) while the application runs, and once
// both instances have the change the next orders are written. The outputs equal the
// oracle's — each order joined with the table as it was when the order was written —
// exactly once.
func TestGlobalTableJoin(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	stringTopics(t, c, 4, "gj-orders", "gj-out")
	stringTopics(t, c, 2, "gj-customers")
	rng := rand.New(rand.NewPCG(38, 1))
	table := map[string]string{}
	var want []string
	seq := 0
	phase := func(tableChanges, orders int) (map[string][]client.Record, int64) {
		recs := map[string][]client.Record{}
		for range tableChanges {
			k := fmt.Sprintf("c%02d", rng.IntN(60))
			r := client.Record{Key: client.String(k)}
			if rng.IntN(6) == 0 {
				delete(table, k)
			} else {
				table[k] = fmt.Sprintf("name%d", rng.IntN(1000))
				r.Value = client.String(table[k])
			}
			recs["gj-customers"] = append(recs["gj-customers"], r)
		}
		for range orders {
			id, k := fmt.Sprintf("o%05d", seq), fmt.Sprintf("c%02d", rng.IntN(60))
			seq++
			recs["gj-orders"] = append(recs["gj-orders"], client.Record{Key: client.String(id), Value: client.String(k)})
			name, ok := table[k]
			if !ok {
				name = "null"
			}
			want = append(want, id+"="+name)
		}
		return recs, int64(len(want))
	}
	// Phase 1, before the instances run.
	p1, n := phase(80, 300)
	produceAll(t, c, map[string][]client.Record{"gj-customers": p1["gj-customers"]})
	produceAll(t, c, map[string][]client.Record{"gj-orders": p1["gj-orders"]})
	var apps []*streams.App
	for i := range 2 {
		app, _ := runBg(t, globalTopology(), streams.Config{Client: c, StateDir: t.TempDir(), InstanceID: fmt.Sprintf("g%d", i), SessionTimeout: 3 * time.Second})
		apps = append(apps, app)
	}
	testwait.Until(t, 2*time.Minute, "the first orders joined", func() bool { return countRecords(t, c, "gj-out") >= n })
	for round := range 3 {
		recs, total := phase(40, 200)
		produceAll(t, c, map[string][]client.Record{"gj-customers": recs["gj-customers"]})
		ends := hwms(t, c, "gj-customers")
		testwait.Until(t, time.Minute, fmt.Sprintf("round %d: every instance has the table's changes", round), func() bool {
			for _, a := range apps {
				pos := a.GlobalPositions("customers")
				for p, end := range ends {
					if pos[p] < end {
						return false
					}
				}
			}
			return true
		})
		produceAll(t, c, map[string][]client.Record{"gj-orders": recs["gj-orders"]})
		testwait.Until(t, 2*time.Minute, fmt.Sprintf("round %d: its orders joined", round), func() bool { return countRecords(t, c, "gj-out") >= total })
	}
	var got []string
	for _, r := range readAll(t, c, "gj-out") {
		v, _ := r.ValueBytes()
		got = append(got, string(v))
	}
	slices.Sort(got)
	slices.Sort(want)
	if missing, extra := compare(t, "global join", got, want); missing+extra > 0 {
		t.Fatalf("outputs differ from the oracle: %d missing, %d extra", missing, extra)
	}
}
