package push_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// gauge reads a push gauge of group from the node's registry (-1: not there).
func gauge(t *testing.T, n *nodetest.Node, name, group string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "group", group) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestOldestUnackedAge: while a failing target keeps the backlog waiting, the oldest
// unacknowledged record's age grows past a second (and the backlog gauge counts the
// records); once the target answers and everything is done, both fall to 0.
func TestOldestUnackedAge(t *testing.T) {
	n := pushNode(t)
	const total = 30
	topic, group := setup(t, n.Broker, total, 0)
	var up atomic.Bool
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	})
	hookURL := serveHook(t, hook)
	if _, err := n.Broker.PutPush(context.Background(), broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: hookURL + "/hook", Timeout: time.Second,
		Retry: catalog.PushRetry{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, PauseAfter: 1_000_000}}}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "the oldest unacknowledged record over a second old", func() bool {
		return gauge(t, n, "strata_push_oldest_unacked_seconds", group) >= 1
	})
	if b := gauge(t, n, "strata_push_backlog_records", group); b != total {
		t.Fatalf("backlog %v while the target fails, want %d", b, total)
	}
	up.Store(true)
	testwait.Until(t, time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	testwait.Until(t, time.Minute, "the oldest age back to 0", func() bool {
		return gauge(t, n, "strata_push_oldest_unacked_seconds", group) == 0 && gauge(t, n, "strata_push_backlog_records", group) == 0
	})
}
