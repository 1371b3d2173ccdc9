package push_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/objstore/fs"
)

// countingCatalog counts the share-group calls that are each one catalog transaction
// (catalog.ShareGroups: a heartbeat, an acquisition, an acknowledgement).
type countingCatalog struct {
	catalog.Backend
	txns atomic.Int64
}

func (c *countingCatalog) ShareHeartbeat(ctx context.Context, hb catalog.ShareHeartbeat) (catalog.ShareMember, error) {
	c.txns.Add(1)
	return c.Backend.ShareHeartbeat(ctx, hb)
}

func (c *countingCatalog) ShareAcquire(ctx context.Context, req catalog.ShareAcquire) (catalog.ShareAcquireResult, error) {
	c.txns.Add(1)
	return c.Backend.ShareAcquire(ctx, req)
}

func (c *countingCatalog) ShareAcknowledge(ctx context.Context, req catalog.ShareAck) ([]error, error) {
	c.txns.Add(1)
	return c.Backend.ShareAcknowledge(ctx, req)
}

// TestPushFigures measures (STRATA_PUSH_FIGURES=1; STRATA_PUSH_FIGURES_PG=1 on the test
// Postgres instead of SQLite) the records and calls per second one node delivers to a
// webhook that answers at once, and the catalog transactions per delivered batch.
func TestPushFigures(t *testing.T) {
	if os.Getenv("STRATA_PUSH_FIGURES") != "1" {
		t.Skip("figures: STRATA_PUSH_FIGURES=1")
	}
	ctx := context.Background()
	var inner catalog.Backend
	var err error
	if os.Getenv("STRATA_PUSH_FIGURES_PG") == "1" {
		inner, err = postgres.Open(ctx, testsvc.PostgresDSN(t), catalog.Options{})
	} else {
		inner, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inner.Close() })
	store, err := fs.New(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cat := &countingCatalog{Backend: inner}
	n := pushNode(t, nodetest.On(cat, store))
	const total = 20_000
	topic, group := setup(t, n.Broker, total, 0)
	var calls atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	before := cat.txns.Load()
	start := time.Now()
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: "http://" + ln.Addr().String() + "/"}}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	el := time.Since(start).Seconds()
	txns := cat.txns.Load() - before
	t.Logf("FIGURES: %d records in %.1fs: %.0f records/s, %.0f calls/s (batch size 10, concurrency 8, one node); %d share transactions for %d calls: %.2f per delivered batch",
		total, el, total/el, float64(calls.Load())/el, txns, calls.Load(), float64(txns)/float64(calls.Load()))
}
