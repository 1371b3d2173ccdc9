package streams

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
)

// cutTransport fails every request once cut: the instance behind it is, to the
// server, dead (its session lapses), though its process goes on.
type cutTransport struct {
	cut atomic.Bool
	rt  http.RoundTripper
}

func (c *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("network cut by the test")
	}
	return c.rt.RoundTrip(r)
}

func standbyTopology(app string) *streams.Builder {
	b := streams.NewBuilder(app)
	counts := streams.Count(streams.GroupByKey(streams.From(b, "sb-in", serde.String, serde.String)), "counts")
	streams.MapValues(counts.Changes(), func(c streams.Change[int64]) string { return fmt.Sprint(*c.New) }).To(app+"-out", serde.String, serde.String)
	return b
}

// failover runs app on two instances over the inputs, kills (cuts off) the first
// once the second's standbys, if any, have caught up, and returns how long the
// second took to restore the first's task; then it checks that the outputs are
// exactly once, with more inputs processed after the failover.
func failover(t *testing.T, c *client.Client, server, app string, standbys int, more []client.Record, inputs int) time.Duration {
	cut := &cutTransport{rt: http.DefaultTransport}
	cfg := func(name string, cl *client.Client) streams.Config {
		return streams.Config{Client: cl, StateDir: t.TempDir(), InstanceID: name, SessionTimeout: 3 * time.Second, RequestTimeout: 3 * time.Second,
			NumStandbyReplicas: standbys, InputPositionHeader: "strata-input", MaxCommitRecords: 5000}
	}
	a, _ := runBg(t, standbyTopology(app), cfg(app+"-a", client.New(server, client.WithHTTPClient(&http.Client{Transport: cut}))))
	b, stopB := runBg(t, standbyTopology(app), cfg(app+"-b", c))
	drain := 5 * time.Minute
	if long() {
		drain = 20 * time.Minute
	}
	waitAllDrained(t, c, app, drain)
	var moved []streams.TaskID
	testwait.Until(t, time.Minute, "each instance running one task", func() bool {
		moved = moved[:0]
		for id, s := range a.TaskStates() {
			if s == streams.TaskRunning {
				moved = append(moved, id)
			}
		}
		return len(moved) == 1 && len(b.TaskStates()) == 1
	})
	if standbys > 0 {
		testwait.Until(t, 3*time.Minute, "the standby of the first instance's task caught up", func() bool {
			lag, ok := b.StandbyLags()[moved[0]]
			return ok && lag == 0
		})
	}
	cut.cut.Store(true)
	testwait.Until(t, 2*time.Minute, "the second instance running both tasks", func() bool {
		n := 0
		for _, s := range b.TaskStates() {
			if s == streams.TaskRunning {
				n++
			}
		}
		return n == 2
	})
	took := b.RestoreDurations()[moved[0]]
	produceAll(t, c, map[string][]client.Record{"sb-in": more})
	waitAllDrained(t, c, app, 2*time.Minute)
	if err := stopB(); err != nil {
		t.Errorf("%s: %v", app, err)
	}
	seen := map[string]bool{}
	recs := readAll(t, c, app+"-out")
	for _, r := range recs {
		pos := header(r, "strata-input")
		if seen[pos] {
			t.Errorf("%s: output for %s twice", app, pos)
		}
		seen[pos] = true
	}
	if len(recs) != inputs {
		t.Errorf("%s: %d outputs for %d inputs, want one each", app, len(recs), inputs)
	}
	return took
}

// TestStandbyFailover: a count over a large store (200,000 keys; 1,000,000 with
// STRATA_LONG) on two instances. With one standby replica, the instance that takes
// over a dead instance's task finds a warm copy and restores only the tail: under
// 2 s. Without, it replays the whole changelog. Both in this run; outputs exactly once
// across the failover either way.
func TestStandbyFailover(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	n := 200_000
	if long() {
		n = 1_000_000
	}
	stringTopics(t, c, 2, "sb-in", "sb1-out", "sb0-out")
	recs := make([]client.Record, n)
	for i := range recs {
		recs[i] = client.Record{Key: client.String(fmt.Sprintf("key-%07d", i)), Value: client.String("x")}
	}
	produceAll(t, c, map[string][]client.Record{"sb-in": recs})
	more := make([]client.Record, 2000)
	for i := range more {
		more[i] = client.Record{Key: client.String(fmt.Sprintf("key-%07d", i*97%n)), Value: client.String("y")}
	}
	warm := failover(t, c, nd.url, "sb1", 1, more, n+len(more))
	cold := failover(t, c, nd.url, "sb0", 0, more, n+2*len(more))
	t.Logf("restore of a %d-key store's task after its instance died: %v with a standby, %v without", n/2, warm, cold)
	if warm >= 2*time.Second {
		t.Errorf("with a standby the restore took %v, want under 2s", warm)
	}
	if warm >= cold {
		t.Errorf("with a standby the restore took %v, without %v: the standby did not help", warm, cold)
	}
}

// handover runs app on three instances over six tasks of the inputs, with standbys
// standby replicas, cuts the first off once every standby has caught up, and returns
// the changelog records the two survivors replayed to take over its tasks, and how
// many of those tasks landed on the instance that kept their standby. Outputs are
// exactly once across it, with more inputs processed after.
func handover(t *testing.T, c *client.Client, server, app string, standbys int, more []client.Record, inputs int) (restored int64, warm int, took time.Duration) {
	cut := &cutTransport{rt: http.DefaultTransport}
	cfg := func(name string, cl *client.Client) streams.Config {
		return streams.Config{Client: cl, StateDir: t.TempDir(), InstanceID: name, SessionTimeout: 3 * time.Second, RequestTimeout: 3 * time.Second,
			NumStandbyReplicas: standbys, InputPositionHeader: "strata-input", MaxCommitRecords: 5000}
	}
	a, _ := runBg(t, handoverTopology(app), cfg(app+"-a", client.New(server, client.WithHTTPClient(&http.Client{Transport: cut}))))
	b, stopB := runBg(t, handoverTopology(app), cfg(app+"-b", c))
	d, stopD := runBg(t, handoverTopology(app), cfg(app+"-c", c))
	survivors := []*streams.App{b, d}
	waitAllDrained(t, c, app, 5*time.Minute)
	running := func(x *streams.App) []streams.TaskID {
		var out []streams.TaskID
		for id, s := range x.TaskStates() {
			if s == streams.TaskRunning {
				out = append(out, id)
			}
		}
		return out
	}
	var moved []streams.TaskID
	testwait.Until(t, time.Minute, "each instance running two tasks", func() bool {
		moved = running(a)
		return len(moved) == 2 && len(running(b)) == 2 && len(running(d)) == 2
	})
	keeper := map[streams.TaskID]int{} // which survivor keeps the standby of each moved task
	if standbys > 0 {
		testwait.Until(t, 3*time.Minute, "every standby caught up, never beside its active", func() bool {
			all := 0
			for i, x := range []*streams.App{a, b, d} {
				mine := running(x)
				for id, lag := range x.StandbyLags() {
					for _, r := range mine {
						if r == id {
							t.Fatalf("instance %d keeps a standby of %s, which it runs", i, id)
						}
					}
					if lag != 0 {
						return false
					}
					all++
					if i > 0 {
						keeper[id] = i - 1
					}
				}
			}
			return all == 6
		})
	}
	before := b.Metrics().RestoredRecords + d.Metrics().RestoredRecords
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s: tasks of b %v, c %v; standbys of b %v, c %v", app, b.TaskStates(), d.TaskStates(), b.StandbyLags(), d.StandbyLags())
		}
	})
	cut.cut.Store(true)
	testwait.Until(t, 2*time.Minute, "the two survivors running all six tasks", func() bool {
		return len(running(b))+len(running(d)) == 6
	})
	restored = b.Metrics().RestoredRecords + d.Metrics().RestoredRecords - before
	for _, id := range moved {
		if k, ok := keeper[id]; ok && slices.Contains(running(survivors[k]), id) {
			warm++
		}
		for _, x := range survivors {
			if d, ok := x.RestoreDurations()[id]; ok && slices.Contains(running(x), id) {
				took = max(took, d)
			}
		}
	}
	produceAll(t, c, map[string][]client.Record{app + "-in": more})
	waitAllDrained(t, c, app, 2*time.Minute)
	for _, stop := range []func() error{stopB, stopD} {
		if err := stop(); err != nil {
			t.Errorf("%s: %v", app, err)
		}
	}
	seen := map[string]bool{}
	recs := readAll(t, c, app+"-out")
	for _, r := range recs {
		pos := header(r, "strata-input")
		if seen[pos] {
			t.Errorf("%s: output for %s twice", app, pos)
		}
		seen[pos] = true
	}
	if len(recs) != inputs {
		t.Errorf("%s: %d outputs for %d inputs, want one each", app, len(recs), inputs)
	}
	return restored, warm, took
}

func handoverTopology(app string) *streams.Builder {
	b := streams.NewBuilder(app)
	counts := streams.Count(streams.GroupByKey(streams.From(b, app+"-in", serde.String, serde.String)), "counts")
	streams.MapValues(counts.Changes(), func(c streams.Change[int64]) string { return fmt.Sprint(*c.New) }).To(app+"-out", serde.String, serde.String)
	return b
}

// TestStandbyWarmHandover: the catalog places standbys (one per task, never beside its
// active, from the lags members report in their heartbeats) and, when an instance of
// three dies, moves each of its tasks to the instance holding its caught-up standby:
// the survivors replay only the changelogs' tails. The same run without standbys
// replays the dead instance's whole changelogs (a third of 120,000 keys). Outputs are
// exactly once either way.
func TestStandbyWarmHandover(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	n := 120_000
	if long() {
		n = 1_000_000
	}
	for _, app := range []string{"wh1", "wh0"} {
		stringTopics(t, c, 6, app+"-in", app+"-out")
	}
	recs := make([]client.Record, n)
	for i := range recs {
		recs[i] = client.Record{Key: client.String(fmt.Sprintf("key-%07d", i)), Value: client.String("x")}
	}
	more := make([]client.Record, 2000)
	for i := range more {
		more[i] = client.Record{Key: client.String(fmt.Sprintf("key-%07d", i*97%n)), Value: client.String("y")}
	}
	produceAll(t, c, map[string][]client.Record{"wh1-in": recs, "wh0-in": recs})
	warmRestored, warm, warmTook := handover(t, c, nd.url, "wh1", 1, more, n+len(more))
	coldRestored, _, coldTook := handover(t, c, nd.url, "wh0", 0, more, n+len(more))
	t.Logf("changelog records replayed to take over a dead instance's 2 of 6 tasks (%d keys): %d with a caught-up standby (%d of 2 tasks moved to it; slowest restore %v), %d without (%v)",
		n, warmRestored, warm, warmTook, coldRestored, coldTook)
	if warm != 2 {
		t.Errorf("%d of the dead instance's 2 tasks moved to the instance holding their caught-up standby, want 2", warm)
	}
	if warmRestored > 2*catalog.AcceptableRecoveryLag || warmRestored*10 > coldRestored {
		t.Errorf("with standbys the survivors replayed %d records, without %d: want the tail only (at most %d, a tenth of the full restore)",
			warmRestored, coldRestored, 2*catalog.AcceptableRecoveryLag)
	}
	if coldRestored < int64(n)/6 {
		t.Errorf("without standbys the survivors replayed %d records, want the dead instance's whole changelogs (about %d)", coldRestored, n/3)
	}
}
