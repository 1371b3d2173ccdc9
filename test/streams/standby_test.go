package streams

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

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
