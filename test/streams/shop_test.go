package streams

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/shop/shop"
)

// The shop example (examples/shop): a windowed stream-stream outer join and a
// foreign-key join, against `strata serve`.

const shopParts = 4

// setupShop starts a node, creates the shop topics (customers partitioned unlike the
// orders) and produces n generated inputs, all before any instance starts.
func setupShop(t testing.TB, n int) (*node, *client.Client) {
	t.Helper()
	nd := startNode(t)
	c := client.New(nd.url)
	createTopics(t, c, shopParts, shop.Orders, shop.Payments, shop.Statuses, shop.Enriched)
	createTopics(t, c, shopParts-1, shop.Customers)
	ins := shop.Generate(11, n, 500, genStart, 6*time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := c.NewProducer(ctx, client.ProducerConfig{Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for topic, recs := range shop.Records(ins) {
		if _, err := p.Produce(ctx, topic, recs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced %d inputs in %s", len(ins), time.Since(start).Round(time.Millisecond))
	return nd, c
}

// shopInputsBack reads the inputs as stored, with partitions and offsets.
func shopInputsBack(t testing.TB, c *client.Client) []shop.Input {
	t.Helper()
	var ins []shop.Input
	for _, topic := range []string{shop.Orders, shop.Payments, shop.Customers} {
		for _, r := range readAll(t, c, topic) {
			k, _ := r.KeyBytes()
			v, _ := r.ValueBytes()
			ins = append(ins, shop.Input{Topic: topic, Partition: *r.Partition, Offset: r.Offset, Key: string(k), Value: v, TS: r.Timestamp.UnixMilli()})
		}
	}
	return ins
}

// totalLag is the group's lag over every partition it reads, internal topics too.
func totalLag(t testing.TB, c *client.Client, group string) (int64, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lag, err := c.GroupLag(ctx, group)
	if err != nil || len(lag.Partitions) == 0 {
		return -1, false
	}
	var n int64
	done := true
	for _, p := range lag.Partitions {
		switch {
		case p.CommittedOffset == nil && p.HighWatermark > 0:
			done = false
			n += p.HighWatermark
		case p.CommittedOffset != nil && *p.CommittedOffset != p.HighWatermark:
			done = false
			n += p.HighWatermark - *p.CommittedOffset
		}
	}
	return n, done
}

// waitAllDrained waits until the group has committed the end of every partition it
// reads — internal topics too, so that nothing is left in flight between tasks —
// twice in a row.
func waitAllDrained(t testing.TB, c *client.Client, group string, within time.Duration, alive ...*proc) {
	t.Helper()
	deadline := time.Now().Add(within)
	seen := 0
	for seen < 2 {
		if _, done := totalLag(t, c, group); done {
			seen++
		} else {
			seen = 0
		}
		for _, p := range alive {
			select {
			case <-p.done:
				t.Fatalf("%s exited: %v", p.name, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			n, _ := totalLag(t, c, group)
			t.Fatalf("group %s not drained after %s: lag %d", group, within, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkShop compares the outputs with the oracles: every order status exactly once
// (by value, and by input-position header), the final enriched-orders table (from
// the output topic and from the join's changelog) equal to the oracle's.
func checkShop(t *testing.T, c *client.Client, app string, budget int) {
	t.Helper()
	ins := shopInputsBack(t, c)
	want, late := shop.OracleStatuses(ins, budget)
	var got []string
	dups := 0
	seen := map[string]bool{}
	for _, r := range readAll(t, c, shop.Statuses) {
		pos := header(r, "strata-input")
		if seen[pos] || pos == "" {
			dups++
		}
		seen[pos] = true
		k, _ := r.KeyBytes()
		v, _ := r.ValueBytes()
		var s shop.Status
		if err := json.Unmarshal(v, &s); err != nil {
			t.Fatal(err)
		}
		got = append(got, shop.StatusKey(string(k), s, r.Timestamp.UnixMilli()))
	}
	if m, x := compare(t, "order statuses", got, want); m+x > 0 {
		t.Errorf("order statuses differ from the oracle: %d missing, %d extra (of %d)", m, x, len(want))
	}
	final := map[string]shop.EnrichedOrder{}
	for _, r := range readAll(t, c, shop.Enriched) {
		pos := header(r, "strata-input")
		if seen[pos] || pos == "" {
			dups++
		}
		seen[pos] = true
		k, _ := r.KeyBytes()
		v, _ := r.ValueBytes()
		var e shop.EnrichedOrder
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatal(err)
		}
		if e.Deleted {
			delete(final, string(k))
		} else {
			final[string(k)] = e
		}
	}
	if dups > 0 {
		t.Errorf("%d outputs repeat (or lack) an input-position header", dups)
	}
	oracle := shop.OracleEnriched(ins)
	if !maps.Equal(final, oracle) {
		t.Errorf("enriched orders: %d, %d differ from the oracle's %d", len(final), diffCount(final, oracle), len(oracle))
	}
	changelog := map[string]shop.EnrichedOrder{}
	for _, r := range readAll(t, c, app+"-order-customer-changelog") {
		k, _ := r.KeyBytes()
		v, _ := r.ValueBytes()
		if v == nil {
			delete(changelog, string(k))
			continue
		}
		var e shop.EnrichedOrder
		if len(v) < 8 || json.Unmarshal(v[8:], &e) != nil {
			t.Fatalf("changelog value %q", v)
		}
		changelog[string(k)] = e
	}
	if !maps.Equal(changelog, oracle) {
		t.Errorf("the join's changelog: %d, %d differ from the oracle's %d", len(changelog), diffCount(changelog, oracle), len(oracle))
	}
	t.Logf("oracle: %d order statuses (%d late inputs), %d enriched orders", len(want), late, len(oracle))
	if len(want) == 0 || len(oracle) == 0 || late == 0 {
		t.Errorf("the data makes no statuses, enriched orders or late records: the comparison proves little")
	}
}

func diffCount(a, b map[string]shop.EnrichedOrder) int {
	n := 0
	for k, v := range b {
		if w, ok := a[k]; !ok || w != v {
			n++
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			n++
		}
	}
	return n
}

// TestShopCrashExactlyOnce: the joins example under three instances, one of which,
// chosen at random, is SIGKILLed and restarted 10 times (half the time with its state
// directory deleted), paced by the lag. After draining: every order status (a
// windowed join's output) equals the single-threaded oracle's — none missing, none
// twice — and the foreign-key join's final table, in its output and its changelog,
// equals the oracle's; no output repeats an input-position header.
func TestShopCrashExactlyOnce(t *testing.T) {
	n, kills := 60_000, 10
	if long() {
		n = 300_000
	}
	nd, c := setupShop(t, n)
	var ins []*instance
	for _, name := range []string{"shop-a", "shop-b", "shop-c"} {
		ins = append(ins, newShopInstance(t, nd.url, name, slow...))
	}
	for _, in := range ins {
		in.waitTasks(1, time.Minute)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var lag0 int64
	deadline := time.Now().Add(time.Minute)
	for lag0 <= 0 {
		if lag0, _ = totalLag(t, c, "shop"); time.Now().After(deadline) {
			t.Fatal("no lag to pace the kills by")
		}
	}
	step := lag0 / int64(kills+1)
	start := time.Now()
	wiped := 0
	for k := range kills {
		target := lag0 - int64(k+1)*step + rng.Int64N(2*step/3+1) - step/3
		deadline := time.Now().Add(3 * time.Minute)
		lag, _ := totalLag(t, c, "shop")
		for ; lag > target; lag, _ = totalLag(t, c, "shop") {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: the lag stayed at %d, above %d, for 3 minutes", k+1, lag, target)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if k == kills-1 {
			if lag == 0 {
				t.Errorf("drained before the last kill: the test proves little")
			} else {
				t.Logf("lag before the last kill: %d of %d", lag, lag0)
			}
		}
		victim := ins[rng.IntN(len(ins))]
		wipe := k%2 == 0
		if wipe {
			wiped++
		}
		victim.restart(wipe)
	}
	t.Logf("%d kills (%d with the state directory deleted) in %s", kills, wiped, time.Since(start).Round(time.Millisecond))
	var alive []*proc
	for _, in := range ins {
		alive = append(alive, in.p)
	}
	waitAllDrained(t, c, "shop", 10*time.Minute, alive...)
	for _, in := range ins {
		in.p.stop(30 * time.Second)
	}
	checkShop(t, c, "shop", 400/16)
}
