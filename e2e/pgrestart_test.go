package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testsvc"
)

// TestPostgresRestartUnderLoad crashes the catalog's Postgres (immediate stop) while
// producers are sending, starts it again, and checks that the same node recovers on
// its own — producers get acknowledgements again — and that every acknowledged record
// is readable at its acknowledged offset, offsets dense, nothing refused visible.
func TestPostgresRestartUnderLoad(t *testing.T) {
	pg := testsvc.StartPrivatePostgres(t)
	s := newStack(t, stackOptions{backend: postgresMinIO, dsn: pg.DSN})
	const topic, clients, batch = "restarted", 3, 50
	createTopic(t, s.url, topic, 3, nil)

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

	if err := waitFor(30*time.Second, func() bool { return l.acked() >= clients*batch*3 }); err != nil {
		t.Fatalf("no load before the restart: %d acknowledged", l.acked())
	}
	before := writerCounts(t, s.url)
	pg.Stop(t, "immediate")
	ph.set(1)
	time.Sleep(2 * time.Second)
	pg.Start(t)
	ph.set(2)
	atRestart := l.acked()
	t.Logf("catalog restarted with %d records acknowledged", atRestart)

	// Recovery: the node answers again without being restarted.
	if err := waitFor(90*time.Second, func() bool { return l.acked() >= atRestart+clients*batch*3 }); err != nil {
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
	failedCommits := m[`strata_writer_commits_total{result="unknown"}`] + m[`strata_writer_commits_total{result="aborted"}`]
	if after.commits <= before.commits || failedCommits == 0 {
		t.Errorf("no commit failed while the catalog was down (commits %v → %v, unknown+aborted %v): the outage was not exercised",
			before.commits, after.commits, failedCommits)
	}
	l.verify(t, s.url, topic)
}
