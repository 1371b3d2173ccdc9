package connect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestCDCSlotMissing: the connector's slot dropped behind its back while it is
// stopped: on resume the task is FAILED with SLOT_MISSING, takes nothing, and does not
// recreate the slot. Recovery is explicit — the offset set back to the snapshot phase
// (which records that the slot is the connector's) — and snapshots again under a new
// epoch.
func TestCDCSlotMissing(t *testing.T) {
	dsn, db := cdcDB(t)
	mustExec(t, db, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	mustExec(t, db, `INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g`)
	c := newCluster(t, 2*time.Second)
	w := c.start("w")
	createTopic(t, w.url, "cdc.public.t", 1)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "t", "cdc_t")}, 201, nil)
	testwait.Until(t, time.Minute, "the snapshot", func() bool { return highWatermark(t, w.url, "cdc.public.t") >= 100 })

	rest(t, w.url, "PUT", "/connectors/cdc/stop", nil, 204, nil)
	slotCount := func() int {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cdc_t'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testwait.Until(t, 30*time.Second, "the slot released", func() bool {
		var active bool
		_ = db.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = 'cdc_t'`).Scan(&active)
		return !active
	})
	mustExec(t, db, `SELECT pg_drop_replication_slot('cdc_t')`)
	mustExec(t, db, `INSERT INTO t SELECT g, 'w' || g FROM generate_series(101, 110) g`)
	hw := highWatermark(t, w.url, "cdc.public.t")

	rest(t, w.url, "PUT", "/connectors/cdc/resume", nil, 202, nil)
	var trace string
	testwait.Until(t, 30*time.Second, "the task FAILED", func() bool {
		var st string
		st, trace = taskStatus(t, w.url, "cdc")
		return st == "FAILED"
	})
	if !strings.Contains(trace, "SLOT_MISSING") {
		t.Fatalf("trace %q does not name SLOT_MISSING", trace)
	}
	// An absence: a failed task must not come back and recreate the slot or write.
	// Two seconds is two of its heartbeats (heartbeat.interval.ms 1000).
	time.Sleep(2 * time.Second)
	if n := slotCount(); n != 0 {
		t.Fatal("the slot was recreated")
	}
	if got := highWatermark(t, w.url, "cdc.public.t"); got != hw {
		t.Fatalf("the failed task wrote %d records", got-hw)
	}

	// Recovery: stop, set the offset back to the snapshot phase, resume.
	rest(t, w.url, "PUT", "/connectors/cdc/stop", nil, 204, nil)
	rest(t, w.url, "PATCH", "/connectors/cdc/offsets", map[string]any{"offsets": []any{map[string]any{
		"partition": map[string]any{"slot": "cdc_t"}, "offset": map[string]any{"phase": "snapshot", "epoch": 1, "lsn": "0/0"}}}}, 200, nil)
	rest(t, w.url, "PUT", "/connectors/cdc/resume", nil, 202, nil)
	testwait.Until(t, time.Minute, "the second snapshot", func() bool { return highWatermark(t, w.url, "cdc.public.t") >= hw+110 })
	epoch2 := 0
	for _, r := range readCDC(t, w.url, "cdc.public.t") {
		if r.op == "r" && r.epoch == 2 {
			epoch2++
		}
	}
	if epoch2 != 110 || slotCount() != 1 {
		t.Fatalf("epoch 2 snapshot: %d rows (want 110), %d slots", epoch2, slotCount())
	}
	mustExec(t, db, `INSERT INTO t VALUES (1000, 'after')`)
	testwait.Until(t, 30*time.Second, "streaming after the recovery", func() bool { return highWatermark(t, w.url, "cdc.public.t") >= hw+111 })
}

// TestCDCPipeline: a table copied through Strata — Postgres table → CDC source →
// topic → Postgres sink → table in another database — under a random workload of
// inserts, updates (some changing the key) and deletes, with the worker (running both tasks) SIGKILLed at
// random moments (3 times; 10 with STRATA_LONG=1) and crashed once after the sink's
// write before its offsets commit: the two tables end equal.
func TestCDCPipeline(t *testing.T) {
	kills := 3
	if long() {
		kills = 10
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dsn, db := cdcDB(t)
	dstDSN, dst := cdcDB(t)
	for _, c := range []*pgx.Conn{db, dst} {
		mustExec(t, c, `CREATE TABLE acct (id bigint PRIMARY KEY, bal bigint NOT NULL, note text)`)
	}
	mustExec(t, db, `INSERT INTO acct SELECT g, 100, 'init' FROM generate_series(1, 1000) g`)
	c := newCluster(t, 2*time.Second)
	w := c.start("w")
	createTopic(t, w.url, "cdc.public.acct", 1)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "acct", "cdc_acct")}, 201, nil)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "sink", "config": map[string]string{
		"connector.class": "PostgresSink", "connection.url": dstDSN, "topics": "cdc.public.acct", "table.name.format": "acct",
		"offset.flush.interval.ms": "200"}}, 201, nil)

	stop, done := make(chan struct{}), make(chan struct{})
	var werr error
	var mu sync.Mutex
	go func() {
		defer close(done)
		wrng := rand.New(rand.NewPCG(seed, 3))
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			werr = err
			return
		}
		defer conn.Close(context.Background())
		for next := 2000; ; {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var sqls []string
			for range 1 + wrng.IntN(20) {
				id := 1 + wrng.IntN(next)
				switch wrng.IntN(5) {
				case 4: // a key change
					sqls = append(sqls, fmt.Sprintf(`UPDATE acct SET id = %d WHERE id = %d`, next, id))
					next++
				case 0:
					sqls = append(sqls, fmt.Sprintf(`INSERT INTO acct VALUES (%d, 0, 'new') ON CONFLICT (id) DO NOTHING`, next))
					next++
				case 1:
					sqls = append(sqls, fmt.Sprintf(`DELETE FROM acct WHERE id = %d`, id))
				default:
					sqls = append(sqls, fmt.Sprintf(`UPDATE acct SET bal = bal + %d, note = 'u%d' WHERE id = %d`, wrng.IntN(100), wrng.IntN(1000), id))
				}
			}
			if _, err := conn.Exec(context.Background(), "BEGIN; "+strings.Join(sqls, "; ")+"; COMMIT"); err != nil {
				mu.Lock()
				werr = err
				mu.Unlock()
				return
			}
		}
	}()
	for k := range kills {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))) // a kill at a random moment
		w.kill()
		t.Logf("kill %d", k+1)
		w = c.start("w")
	}
	w = crashAt(t, c, w, "sink.after_put", 1+rng.IntN(3))
	time.Sleep(time.Second) // the workload runs a while on the restarted worker before it stops
	close(stop)
	<-done
	if werr != nil {
		t.Fatal(werr)
	}
	want := tableState(t, db, "acct")
	var diff string
	testwait.Until(t, 2*time.Minute, "the sink table equal to the source table", func() bool {
		diff = diffStates(want, tableState(t, dst, "acct"))
		return diff == ""
	})
	t.Logf("%d rows equal", len(want))
}

// TestCDCZombie: two workers; the one running the CDC task is SIGSTOPped past its
// lease under the generator: the other takes the task over, ends the old walsender
// still holding the slot, and streams on. SIGCONTed, the paused instance is refused —
// its commit as a stale generation, or its fenced read before it could take the slot
// back — and the topic's ids equal the table's: no duplicate, no gap.
func TestCDCZombie(t *testing.T) {
	lease := 2 * time.Second
	dsn, db := cdcDB(t)
	mustExec(t, db, `CREATE TABLE ledger (id bigserial PRIMARY KEY, batch int NOT NULL)`)
	mustExec(t, db, `INSERT INTO ledger (batch) SELECT -1 FROM generate_series(1, 100)`)
	c := newCluster(t, lease)
	ws := map[string]*worker{"a": c.start("a"), "b": c.start("b")}
	createTopic(t, ws["a"].url, "cdc.public.ledger", 1)
	rest(t, ws["a"].url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "ledger", "cdc_ledger")}, 201, nil)
	testwait.Until(t, time.Minute, "the snapshot", func() bool { return highWatermark(t, ws["a"].url, "cdc.public.ledger") >= 100 })
	owner := func(base string) string {
		var st status
		rest(t, base, "GET", "/connectors/cdc/status", nil, 200, &st)
		if len(st.Tasks) == 0 || st.Tasks[0].State != "RUNNING" {
			return ""
		}
		return st.Tasks[0].WorkerID[:1]
	}
	zombie := owner(ws["a"].url)
	other := map[string]string{"a": "b", "b": "a"}[zombie]
	gen := startGenerator(t, dsn, 100, 5)
	time.Sleep(time.Second) // the generator runs a while, so the pause catches a stream in flight
	ws[zombie].signal(syscall.SIGSTOP)
	testwait.Until(t, 5*lease, "the task taken over", func() bool { return owner(ws[other].url) == other })
	time.Sleep(2 * time.Second) // the new owner streams a while before the zombie wakes up
	ws[zombie].signal(syscall.SIGCONT)
	out := func() string { return ws[zombie].out.String() }
	testwait.Until(t, 20*time.Second, "the paused instance refused", func() bool {
		return strings.Contains(out(), "stale_generation") || strings.Contains(out(), "fenced")
	})
	t.Logf("zombie %s: %d commits refused as a stale generation, %d fenced reads", zombie,
		strings.Count(out(), "commit refused: this task instance is fenced (stale generation)"), strings.Count(out(), "before taking slot"))
	time.Sleep(time.Second) // the generator runs on under the new owner before it stops
	gen.halt(t)
	ids := ledgerIDs(t, db)
	var recs []cdcRecord
	testwait.Until(t, 2*time.Minute, "every row in the topic", func() bool {
		recs = readCDC(t, ws[other].url, "cdc.public.ledger")
		return len(recs) >= len(ids)
	})
	time.Sleep(2 * time.Second) // an absence: a duplicate would come now (two heartbeats)
	recs = readCDC(t, ws[other].url, "cdc.public.ledger")
	if missing := checkLedger(t, recs, ids, 100, 1); missing > 0 {
		t.Fatalf("%d rows missing", missing)
	}
	if !strings.Contains(ws[other].out.String(), "terminating it") {
		t.Log("the new owner found the slot free (the old walsender had gone)")
	}
}
