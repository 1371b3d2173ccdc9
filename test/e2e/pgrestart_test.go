package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestPostgresRestartUnderLoad crashes the catalog's Postgres (immediate stop) while
// producers are sending, starts it again, and checks that the same node recovers on
// its own — producers get acknowledgements again — and that every acknowledged record
// is readable at its acknowledged offset, offsets dense, nothing refused visible; and
// that a tail (the Go client's, which resumes with Last-Event-ID) opened before the
// crash sees partition 0 whole, once and in order.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := testsvc.StartPrivatePostgres(t)
	s := newStack(t, stackOptions{backend: postgresMinIO, dsn: pg.DSN})
	const topic, clients, batch = "restarted", 3, 50
	createTopic(t, s.url, topic, 3, nil)

	var tailMu sync.Mutex
	var tailed []client.Record
	retries := 0
	tailCtx, stopTail := context.WithCancel(context.Background())
	tailDone := make(chan error, 1)
	go func() {
		tailDone <- s.client.TailWith(tailCtx, topic, 0, 0, client.TailOptions{
			MaxBackoff: time.Second,
			OnRetry:    func(error, time.Duration) { tailMu.Lock(); retries++; tailMu.Unlock() },
		}, func(r client.Record) error {
			tailMu.Lock()
			tailed = append(tailed, r)
			tailMu.Unlock()
			return nil
		})
	}()
	endTail := sync.OnceValue(func() error { stopTail(); return <-tailDone })
	defer endTail()

	l := newLedger()
	var ph phase // 0 running, 1 catalog down, 2 back, 3 stop
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runLoad(t, ctx, loadConfig{
			topic: topic, clients: clients, batchSize: batch,
			target: func(int, int) string { return s.url },
			more:   func(int, int) bool { return ph.get() < 3 },
		}, l)
	}()

	if !testwait.Within(30*time.Second, func() bool { return l.acked() >= clients*batch*3 }) {
		t.Fatalf("no load before the restart: %d acknowledged", l.acked())
	}
	before := writerCounts(t, s.url)
	pg.Stop(t, "immediate")
	ph.set(1)
	time.Sleep(2 * time.Second) // the outage: the load runs against a stopped catalog
	pg.Start(t)
	ph.set(2)
	atRestart := l.acked()
	t.Logf("catalog restarted with %d records acknowledged", atRestart)

	// Recovery: the node answers again without being restarted.
	if !testwait.Within(90*time.Second, func() bool { return l.acked() >= atRestart+clients*batch*3 }) {
		ph.set(3)
		<-done
		t.Fatalf("the node did not recover within 90s of the catalog's restart: %d acknowledged since; answers %v", l.acked()-atRestart, l.codeCounts())
	}
	ph.set(3)
	<-done
	if ctx.Err() != nil {
		t.Fatal("the load did not finish in time")
	}
	if res := do(t, http.MethodGet, s.url+"/readyz", "", nil); res.status != http.StatusOK {
		t.Errorf("/readyz after the restart: HTTP %d %s", res.status, res.body)
	}
	after := writerCounts(t, s.url)
	m := metrics(t, s.url)
	// A commit under way when the catalog stopped ends unknown (then settled) or
	// aborted; one that could not reach it at all failed for certain. Which of them
	// the outage hit is a matter of timing.
	failedCommits := m[`strata_writer_commits_total{result="unknown"}`] + m[`strata_writer_commits_total{result="aborted"}`] +
		m[`strata_writer_commits_total{result="failed"}`]
	if after.commits <= before.commits || failedCommits == 0 {
		t.Errorf("no commit failed while the catalog was down (commits %v → %v, unknown+aborted+failed %v): the outage was not exercised",
			before.commits, after.commits, failedCommits)
	}
	l.verify(t, s.url, topic)

	// The tail: partition 0 whole, in order, each record once.
	p0 := partitions(t, s.url, topic)[0]
	log := readPartition(t, s.url, topic, p0)
	if !testwait.Within(30*time.Second, func() bool {
		tailMu.Lock()
		defer tailMu.Unlock()
		return int64(len(tailed)) >= p0.HighWatermark
	}) {
		tailMu.Lock()
		t.Errorf("the tail delivered %d records of %d within 30s", len(tailed), p0.HighWatermark)
		tailMu.Unlock()
	}
	if err := endTail(); err != context.Canceled {
		t.Errorf("tail ended with %v, want context.Canceled", err)
	}
	tailMu.Lock()
	defer tailMu.Unlock()
	t.Logf("the tail delivered %d records, reconnecting %d times", len(tailed), retries)
	if int64(len(tailed)) != p0.HighWatermark {
		t.Errorf("the tail delivered %d records; partition 0 holds %d", len(tailed), p0.HighWatermark)
	}
	for i := range min(len(tailed), len(log)) {
		if tailed[i].Offset != int64(i) || string(tailed[i].Value) != string(log[i].Value) {
			t.Fatalf("tail record %d: offset %d value %s; the log has offset %d value %s",
				i, tailed[i].Offset, truncate(string(tailed[i].Value), 80), log[i].Offset, truncate(string(log[i].Value), 80))
		}
	}
}

// TestCatalogOutageAnswers: while the catalog is down (a clean stop, so nothing can
// be in flight), the node answers at once with retryable 503s that say what is wrong:
// a fetch gets catalog_unavailable, not a 500 "bug"; a produce whose commit could not
// even connect gets a definite retryable error (nothing was sent, so nothing can have
// been written), not commit_outcome_unknown after the whole settle timeout. Once the
// catalog is back, the node serves again without a restart.
func TestCatalogOutageAnswers(t *testing.T) {
	pg := testsvc.StartPrivatePostgres(t)
	// The topic stays cached, so produce reaches the writer without a catalog read.
	s := newStack(t, stackOptions{backend: postgresMinIO, dsn: pg.DSN, topicCacheTTL: time.Minute})
	const topic = "outage"
	createTopic(t, s.url, topic, 1, nil)
	body := produceBody([]map[string]any{{"value": "before"}})
	if out, _, res, err := produceOnce(context.Background(), s.url, topic, body); err != nil || out != acked {
		t.Fatalf("produce: HTTP %d %s %v", res.status, res.body, err)
	}
	pg.Stop(t, "fast")
	restarted := false
	defer func() {
		if !restarted {
			pg.Start(t) // lets the writer settle and stop
		}
	}()
	// Pooled connections idle for more than a second are checked before use: the
	// commit below then fails to connect, before sending anything.
	time.Sleep(1500 * time.Millisecond)

	res := do(t, http.MethodGet, s.url+"/v1/topics/"+topic+"/partitions/0/records?offset=0", "", nil)
	if p, _ := res.problem(); res.status != http.StatusServiceUnavailable || p.Code != "catalog_unavailable" || res.header.Get("Retry-After") == "" {
		t.Errorf("fetch while the catalog is down: HTTP %d %s (Retry-After %q), want 503 catalog_unavailable with Retry-After",
			res.status, truncate(string(res.body), 300), res.header.Get("Retry-After"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	start := time.Now()
	out, _, res, err := produceOnce(ctx, s.url, topic, produceBody([]map[string]any{{"value": "during"}}))
	cancel()
	p, _ := res.problem()
	switch {
	case err != nil:
		t.Errorf("produce while the catalog is down: no answer after %s (%v), want a retryable 503 at once", time.Since(start).Round(time.Millisecond), err)
	case out != refused || res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "":
		t.Errorf("produce while the catalog is down: HTTP %d %s after %s, want a definite retryable 503 (commit_failed or catalog_unavailable)",
			res.status, truncate(string(res.body), 300), time.Since(start).Round(time.Millisecond))
	default:
		t.Logf("produce while the catalog is down: %s after %s", p.Code, time.Since(start).Round(time.Millisecond))
	}

	pg.Start(t)
	restarted = true
	if !testwait.Within(60*time.Second, func() bool {
		out, _, _, _ := produceOnce(context.Background(), s.url, topic, produceBody([]map[string]any{{"value": "after"}}))
		return out == acked
	}) {
		t.Fatal("no produce succeeded within 60s of the catalog's return")
	}
	if a := fetch(t, s.url, topic, 0, 0, 10); len(a.Records) < 2 || string(a.Records[0].Value) != `"before"` {
		t.Errorf("after the outage the partition holds %+v", a.Records)
	}
}
