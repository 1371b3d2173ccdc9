package node

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/writer"
)

func newConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	cat, err := sqlite.Open(t.Context(), filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	store, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	return Config{Catalog: cat, Store: store, Writer: true, Reader: true, Compactor: true,
		CompactorConfig: compactor.Config{Interval: time.Hour}}
}

func post(url, body string) (int, string, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestServeDrains: a produce waiting for its flush when the node is told to stop gets
// its answer — requests finish before the writer stops — and the node then stops.
func TestServeDrains(t *testing.T) {
	cfg := newConfig(t)
	cfg.WriterConfig = writer.Config{Linger: 700 * time.Millisecond}
	cfg.HTTP.Listen, cfg.ShutdownTimeout = "127.0.0.1:0", 10*time.Second
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := n.URL
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()

	resp, err := http.Get(url + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", err, resp)
	}
	resp.Body.Close()
	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		s, b, err := post(url+"/v1/topics/t/records", `{"records":[{"value":1}]}`)
		done <- answer{s, b, err}
	}()
	// Stop once the produce waits for its linger (700 ms) in the writer's buffer.
	testwait.Until(t, 10*time.Second, "the produce in the writer's buffer", func() bool {
		mfs, err := n.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "strata_writer_requests_total" {
				return mf.GetMetric()[0].GetCounter().GetValue() == 1
			}
		}
		return false
	})
	stop()
	a := <-done
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, `"offset":0`) {
		t.Fatalf("a produce in flight at shutdown: %d %s %v", a.status, a.body, a.err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the node did not stop")
	}
	if _, _, err := post(url+"/v1/topics/t/records", `{"records":[{"value":1}]}`); err == nil {
		t.Error("the node still serves after stopping")
	}
}

// TestLambda: no background loop runs between invocations; the compactor is built for
// scheduled passes, and a pass runs.
func TestLambda(t *testing.T) {
	cfg := newConfig(t)
	cfg.Lambda = true
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	if n.Compactor == nil || n.Reader == nil || n.Writer == nil {
		t.Fatalf("roles: compactor %v reader %v writer %v", n.Compactor, n.Reader, n.Writer)
	}
	if err := n.Compactor.Pass(t.Context()); err != nil {
		t.Fatalf("a scheduled pass: %v", err)
	}
	stream := n.NewAPI(n.API.Config())
	if stream == n.API || stream.Handler() == nil {
		t.Fatal("no second API")
	}
}

func TestStartNeedsCatalogAndStore(t *testing.T) {
	if _, err := Start(t.Context(), Config{}); err == nil {
		t.Fatal("a node without a catalog or a store started")
	}
	cfg := newConfig(t)
	cfg.CompactorConfig = compactor.Config{Interval: 50 * time.Millisecond}
	if _, err := Start(t.Context(), cfg); err == nil {
		t.Fatal("a node with an invalid compactor configuration started")
	}
}

// TestBrokerWiring: the node hands the broker the writer's submit and the reader's
// watch. Submit then only buffers (it returns long before the flush that a 700 ms
// linger holds back; without the writer's submit it would produce and wait), and a
// waiting FetchPartitions is woken by the commit's notification (counted by the
// reader; without the watch it polls, and nothing counts).
func TestBrokerWiring(t *testing.T) {
	cfg := newConfig(t)
	cfg.WriterConfig = writer.Config{Linger: 700 * time.Millisecond}
	cfg.Registry = prometheus.NewRegistry()
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	ctx := t.Context()
	fetched := make(chan []broker.PartitionBatches, 1)
	go func() {
		res, _ := n.Broker.FetchPartitions(ctx, broker.Anonymous, broker.PartitionsFetch{
			Partitions: []broker.FetchRequest{{Topic: "t"}}, Wait: 5 * time.Second})
		fetched <- res
	}()
	p, err := n.Broker.PrepareBatches(ctx, broker.Anonymous, broker.BatchesRequest{
		Topic: "t", Batches: batchtest.Batch(t, batchtest.Some(3, time.Now().UnixMilli()), 0, -1, -1, -1)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.Submit(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 350*time.Millisecond {
		t.Fatalf("Submit took %v: it waited for the flush (linger 700ms), so the broker has no Submitter", d)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	select {
	case res := <-fetched:
		if len(res) != 1 || res[0].Err != nil || len(res[0].Batches) == 0 {
			t.Fatalf("FetchPartitions answered %+v, want the batch", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("FetchPartitions not answered after the commit")
	}
	t.Logf("fetch answered %v after the produce's answer", time.Since(committed))
	if got := notifyWakeups(t, cfg.Registry); got == 0 {
		t.Fatal("no long-poll woken by a notification: the broker has no Watcher")
	}
}

// notifyWakeups reads strata_reader_longpoll_wakeups_total{by="notify"}.
func notifyWakeups(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "strata_reader_longpoll_wakeups_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "by" && l.GetValue() == "notify" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
