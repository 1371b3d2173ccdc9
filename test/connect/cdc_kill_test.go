package connect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// generator inserts 1–max rows per transaction into ledger until stopped.
type generator struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	txns int
	err  error
}

func startGenerator(t testing.TB, dsn string, maxRows int, seed uint64) *generator {
	g := &generator{stop: make(chan struct{}), done: make(chan struct{})}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(g.done)
		defer conn.Close(context.Background())
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := 0; ; i++ {
			select {
			case <-g.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := conn.Exec(context.Background(), `INSERT INTO ledger (batch) SELECT $1 FROM generate_series(1, $2)`, i, 1+rng.IntN(maxRows)); err != nil {
				g.mu.Lock()
				g.err = err
				g.mu.Unlock()
				return
			}
			g.mu.Lock()
			g.txns++
			g.mu.Unlock()
		}
	}()
	return g
}

func (g *generator) halt(t testing.TB) {
	close(g.stop)
	<-g.done
	if g.err != nil {
		t.Fatalf("generator: %v", g.err)
	}
}

// crashAt restarts the worker armed with a failpoint and waits for it to crash there.
func crashAt(t testing.TB, c *cluster, w *worker, fp string, n int) *worker {
	t.Helper()
	w.kill()
	w = c.start("w", fmt.Sprintf("STRATA_CONNECT_FAILPOINTS=%s=%d", fp, n))
	code, exited := w.exitCode(90 * time.Second)
	if !exited || code != 137 || !strings.Contains(w.out.String(), "failpoint "+fp+" reached") {
		t.Fatalf("failpoint %s=%d: exited %v with code %d", fp, n, exited, code)
	}
	t.Logf("failpoint %s: crashed at its pass %d", fp, n)
	return c.start("w")
}

// checkLedger checks the ledger's topic against the table: the last snapshot epoch
// complete (each pre-existing row once), every later row once as an insert, nothing
// else, in commit order, each (commit LSN, index) once.
func checkLedger(t testing.TB, recs []cdcRecord, tableIDs map[int64]bool, pre int, wantEpoch int) (missing int) {
	t.Helper()
	last := 0
	for _, r := range recs {
		if r.op == "r" {
			last = max(last, r.epoch)
		}
	}
	if last != wantEpoch {
		t.Fatalf("the last snapshot epoch is %d, want %d", last, wantEpoch)
	}
	seen := map[int64]int{}
	lsnSeq := map[string]bool{}
	prevLSN := ""
	earlier := 0
	for _, r := range recs {
		id, _ := strconv.ParseInt(fmt.Sprint(r.after["id"]), 10, 64)
		switch {
		case r.op == "r" && r.epoch < last:
			earlier++
			continue
		case r.op == "r":
			if id > int64(pre) {
				t.Fatalf("snapshot row %d was inserted after the snapshot", id)
			}
		case r.op == "c":
			k := r.commitLSN + "/" + r.seq
			if lsnSeq[k] {
				t.Fatalf("two records at commit LSN/index %s (id %d)", k, id)
			}
			lsnSeq[k] = true
			if prevLSN != "" && lsnLess(r.commitLSN, prevLSN) {
				t.Fatalf("commit LSN %s after %s: not in commit order", r.commitLSN, prevLSN)
			}
			prevLSN = r.commitLSN
		default:
			t.Fatalf("unexpected op %q", r.op)
		}
		seen[id]++
	}
	dups, extra := 0, 0
	for id, n := range seen {
		if n > 1 {
			dups += n - 1
		}
		if !tableIDs[id] {
			extra++
		}
	}
	for id := range tableIDs {
		if seen[id] == 0 {
			missing++
		}
	}
	if dups > 0 || extra > 0 {
		t.Fatalf("%d duplicates, %d ids not in the table (%d missing)", dups, extra, missing)
	}
	t.Logf("%d records: %d rows of an earlier, unfinished snapshot epoch; %d ids, %d missing", len(recs), earlier, len(seen), missing)
	return missing
}

func lsnLess(a, b string) bool {
	pa, pb := lsnValue(a), lsnValue(b)
	return pa < pb
}

func lsnValue(s string) uint64 {
	hi, lo, _ := strings.Cut(s, "/")
	h, _ := strconv.ParseUint(hi, 16, 32)
	l, _ := strconv.ParseUint(lo, 16, 32)
	return h<<32 | l
}

func ledgerIDs(t testing.TB, db *pgx.Conn) map[int64]bool {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id FROM ledger`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// TestCDCKills: the worker crashes during the snapshot (after its third commit) and
// the snapshot starts again under epoch 2; then, under a generator writing 1–500 rows
// per transaction, the worker is SIGKILLed at random moments (4 times; 30 with
// STRATA_LONG=1) and crashes once at each failure point (after a poll before its
// commit; after the commit before the slot's acknowledgement), restarted each time.
// The topic's ids then equal the table's: no duplicate, no gap, in commit order.
func TestCDCKills(t *testing.T) {
	kills, pre := 4, 3000
	if long() {
		kills = 30
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dsn, db := cdcDB(t)
	mustExec(t, db, `CREATE TABLE ledger (id bigserial PRIMARY KEY, batch int NOT NULL)`)
	mustExec(t, db, `INSERT INTO ledger (batch) SELECT -1 FROM generate_series(1, $1)`, pre)

	c := newCluster(t, 2*time.Second)
	w := c.start("w", "STRATA_CONNECT_FAILPOINTS=source.after_commit=3")
	createTopic(t, w.url, "cdc.public.ledger", 1)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "cdc",
		"config": cdcConfig(dsn, "ledger", "cdc_ledger", "max.batch.size", "500")}, 201, nil)
	code, exited := w.exitCode(90 * time.Second)
	if !exited || code != 137 {
		t.Fatalf("the worker did not crash mid-snapshot: exited %v, code %d", exited, code)
	}
	w = c.start("w")
	// The kills below are after the snapshot: wait for epoch 2 to be whole.
	testwait.Until(t, 2*time.Minute, "the second snapshot epoch", func() bool {
		n := 0
		for _, r := range readCDC(t, w.url, "cdc.public.ledger") {
			if r.op == "r" && r.epoch == 2 {
				n++
			}
		}
		return n >= pre
	})

	gen := startGenerator(t, dsn, 500, seed)
	for k := range kills {
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))) // a kill at a random moment
		w.kill()
		t.Logf("kill %d", k+1)
		w = c.start("w")
	}
	w = crashAt(t, c, w, "source.after_poll", 1+rng.IntN(4))
	w = crashAt(t, c, w, "source.after_commit", 1+rng.IntN(4))
	time.Sleep(time.Second) // the generator runs on under the restarted worker before it stops
	gen.halt(t)
	ids := ledgerIDs(t, db)
	t.Logf("%d transactions, %d rows", gen.txns, len(ids))
	var recs []cdcRecord
	start, n := time.Now(), 0
	defer func() {
		t.Logf("%d of %d rows in the topic after %s", n, len(ids), time.Since(start).Round(time.Millisecond))
	}()
	testwait.Until(t, 3*time.Minute, "every row in the topic", func() bool {
		recs = readCDC(t, w.url, "cdc.public.ledger")
		n = 0
		for _, r := range recs {
			if r.op == "c" || (r.op == "r" && r.epoch == 2) {
				n++
			}
		}
		return n >= len(ids)
	})
	time.Sleep(2 * time.Second) // an absence: a duplicate would come now (two heartbeats)
	recs = readCDC(t, w.url, "cdc.public.ledger")
	if missing := checkLedger(t, recs, ids, pre, 2); missing > 0 {
		t.Fatalf("%d rows missing", missing)
	}
	// The slot was acknowledged to what the catalog holds: nothing beyond.
	var lag int64
	testwait.Until(t, 30*time.Second, "the slot acknowledged to the end of the WAL", func() bool {
		if err := db.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) FROM pg_replication_slots WHERE slot_name = 'cdc_ledger'`).Scan(&lag); err != nil {
			t.Fatal(err)
		}
		return lag < 1<<20
	})
}

// TestCDCPostgresCrash: the captured database crashes (pg_ctl stop -m immediate) and
// restarts mid-stream under the generator: the task reconnects from its committed
// position (the slot's saved position may have gone back to the last checkpoint) and
// the topic's ids equal the table's, no duplicate, no gap.
func TestCDCPostgresCrash(t *testing.T) {
	pg := testsvc.StartPrivatePostgres(t, "wal_level=logical", "max_replication_slots=4", "max_wal_senders=4")
	dsn := pg.DSN
	db, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `CREATE TABLE ledger (id bigserial PRIMARY KEY, batch int NOT NULL)`)
	mustExec(t, db, `INSERT INTO ledger (batch) SELECT -1 FROM generate_series(1, 100)`)
	db.Close(context.Background())

	c := newCluster(t, 2*time.Second)
	w := c.start("w")
	createTopic(t, w.url, "cdc.public.ledger", 1)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "ledger", "cdc_ledger")}, 201, nil)
	testwait.Until(t, time.Minute, "the snapshot", func() bool { return highWatermark(t, w.url, "cdc.public.ledger") >= 100 })
	for round := range 2 {
		gen := startGenerator(t, dsn, 200, uint64(round))
		time.Sleep(1500 * time.Millisecond) // the generator runs a while, so the crash cuts a stream in flight
		pg.Stop(t, "immediate")
		<-gen.done // its connection died with the server
		t.Logf("crash %d after %d generator transactions", round+1, gen.txns)
		time.Sleep(500 * time.Millisecond) // the database stays down a while: the task's reconnects fail
		pg.Start(t)
	}
	gen := startGenerator(t, dsn, 200, 9)
	time.Sleep(time.Second) // a last stretch of changes after the crashes
	gen.halt(t)
	db, err = pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	ids := ledgerIDs(t, db)
	var recs []cdcRecord
	testwait.Until(t, 2*time.Minute, "every row in the topic", func() bool {
		recs = readCDC(t, w.url, "cdc.public.ledger")
		return len(recs) >= len(ids)
	})
	time.Sleep(2 * time.Second) // an absence: a duplicate would come now (two heartbeats)
	recs = readCDC(t, w.url, "cdc.public.ledger")
	if missing := checkLedger(t, recs, ids, 100, 1); missing > 0 {
		t.Fatalf("%d rows missing", missing)
	}
	if st, trace := taskStatus(t, w.url, "cdc"); st != "RUNNING" {
		t.Fatalf("task %s: %s", st, trace)
	}
	if !strings.Contains(w.out.String(), "replication stream lost") {
		t.Fatal("the task never lost its stream: the crash was not exercised")
	}
}

// TestCDCLargeTransaction: one transaction of 100,000 rows (1,000,000 with
// STRATA_LONG=1), more than 20 batches, is committed in chunks; the worker is SIGKILLed
// in the middle of it, and the restarted task takes the rest from the chunk's offset:
// exactly one record per row, one commit LSN, indexes 0..n-1 each once.
func TestCDCLargeTransaction(t *testing.T) {
	n := 100_000
	if long() {
		n = 1_000_000
	}
	dsn, db := cdcDB(t)
	mustExec(t, db, `CREATE TABLE big (id int PRIMARY KEY, pad text)`)
	c := newCluster(t, 2*time.Second)
	w := c.start("w")
	createTopic(t, w.url, "cdc.public.big", 1)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "big", "cdc_big", "max.batch.size", "5000")}, 201, nil)
	testwait.Until(t, time.Minute, "the task streaming", func() bool {
		return strings.Contains(w.out.String(), "postgres source: streaming")
	})
	mustExec(t, db, `INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1, $1) g`, n)
	testwait.Until(t, 5*time.Minute, "a third of the transaction", func() bool { return highWatermark(t, w.url, "cdc.public.big") >= int64(n/3) })
	w.kill()
	w = c.start("w")
	testwait.Until(t, 10*time.Minute, "the whole transaction", func() bool { return highWatermark(t, w.url, "cdc.public.big") >= int64(n) })
	// The restart resumed inside the transaction: it skipped the changes taken before.
	m := regexp.MustCompile(`"skip_events":(\d+)`).FindStringSubmatch(w.out.String())
	if m == nil || m[1] == "0" {
		t.Fatalf("the restarted task did not resume inside the transaction (skip_events %v)", m)
	}
	t.Logf("resumed inside the transaction after %s of its changes", m[1])
	time.Sleep(2 * time.Second) // an absence: a duplicate would come now (two heartbeats)
	recs := readCDC(t, w.url, "cdc.public.big")
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	ids, seqs := make([]bool, n+1), make([]bool, n)
	for _, r := range recs {
		id, _ := strconv.Atoi(fmt.Sprint(r.after["id"]))
		seq, _ := strconv.Atoi(r.seq)
		if r.op != "c" || id < 1 || id > n || ids[id] || seq < 0 || seq >= n || seqs[seq] || r.commitLSN != recs[0].commitLSN {
			t.Fatalf("record %d: op %s id %d seq %d lsn %s (first lsn %s): a duplicate or a stranger", r.offset, r.op, id, seq, r.commitLSN, recs[0].commitLSN)
		}
		ids[id], seqs[seq] = true, true
	}
}
