package pgcdc

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// fakeContext is a source context whose offsets are what the test committed.
type fakeContext struct {
	offs    []connect.Offset
	metrics map[string]any
}

func (f *fakeContext) Offsets(context.Context) ([]connect.Offset, error) { return f.offs, nil }
func (f *fakeContext) ReportMetrics(_ context.Context, m map[string]any) error {
	f.metrics = m
	return nil
}
func (f *fakeContext) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// harness runs a task in-process, committing each batch's offsets into fc as the
// runtime would after a successful commit.
type harness struct {
	t    *testing.T
	fc   *fakeContext
	task *task
	cfg  map[string]string
	recs []connect.Record
}

func newHarness(t *testing.T, cfg map[string]string) *harness {
	return &harness{t: t, fc: &fakeContext{}, cfg: cfg}
}

func (h *harness) start() error {
	h.task = &task{}
	return h.task.Start(h.t.Context(), h.cfg, h.fc)
}

// poll polls once and "commits" what it got.
func (h *harness) poll() connect.SourceBatch {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 10*time.Second)
	defer cancel()
	b, err := h.task.Poll(ctx)
	if err != nil {
		h.t.Fatalf("poll: %v", err)
	}
	h.recs = append(h.recs, b.Records...)
	if len(b.Offsets) > 0 {
		h.fc.offs = b.Offsets
		if err := h.task.Committed(ctx, b); err != nil {
			h.t.Fatal(err)
		}
	}
	return b
}

// pollUntil polls until n records were taken in all.
func (h *harness) pollUntil(n int) {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(h.recs) < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d records, want %d", len(h.recs), n)
		}
		h.poll()
	}
}

func cdcDB(t *testing.T) (string, *pgx.Conn) {
	dsn := testsvc.CDCPostgresDSN(t)
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return dsn, c
}

func exec(t *testing.T, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func baseConfig(dsn string) map[string]string {
	return map[string]string{"database.url": dsn, "table.include.list": "t", "topic.prefix": "p", "slot.name": "s1",
		"max.batch.size": "100", "heartbeat.interval.ms": "500"}
}

func TestSnapshotThenStream(t *testing.T) {
	dsn, db := cdcDB(t)
	exec(t, db, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	exec(t, db, `INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 250) g`)
	h := newHarness(t, baseConfig(dsn))
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	defer h.task.Stop()
	h.pollUntil(250)
	exec(t, db, `INSERT INTO t VALUES (1000, 'x')`)
	exec(t, db, `UPDATE t SET v = 'y' WHERE id = 1000`)
	exec(t, db, `DELETE FROM t WHERE id = 1000`)
	h.pollUntil(254)
	if len(h.recs) != 254 {
		t.Fatalf("%d records", len(h.recs))
	}
}

func TestStreamUnderLoad(t *testing.T) {
	dsn, db := cdcDB(t)
	exec(t, db, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	exec(t, db, `INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 5000) g`)
	cfg := baseConfig(dsn)
	cfg["max.batch.size"], cfg["heartbeat.interval.ms"] = "1000", "1000"
	h := newHarness(t, cfg)
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	defer h.task.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			if _, err := db.Exec(context.Background(), `INSERT INTO t VALUES ($1, 'w')`, 10000+i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	h.pollUntil(5000)
	<-done
	var n int
	db.QueryRow(t.Context(), `SELECT count(*) FROM t`).Scan(&n)
	h.pollUntil(n)
}

// TestHeartbeatKeepsSlotLagLow: with heartbeat.interval.ms 1000, the published table
// idle and WAL written to another table (about 90 MB; about 0.9 GB with STRATA_LONG=1), the
// task's heartbeats commit the server's position and acknowledge it, so the slot's lag
// stays under 64 MB all along (without them it would hold all of that WAL).
func TestHeartbeatKeepsSlotLagLow(t *testing.T) {
	rounds := 10
	if os.Getenv("STRATA_LONG") != "" {
		rounds = 100
	}
	dsn, db := cdcDB(t)
	exec(t, db, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	exec(t, db, `CREATE TABLE other (id serial PRIMARY KEY, pad text)`)
	cfg := baseConfig(dsn)
	cfg["heartbeat.interval.ms"] = "1000"
	h := newHarness(t, cfg)
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	defer h.task.Stop()
	h.poll() // intent
	h.poll() // snapshot of the empty table
	lag := func() int64 {
		var n int64
		if err := db.QueryRow(t.Context(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = 's1'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var wal, worst int64
	for range rounds { // about 10 MB of WAL a round, none of it published
		var before, after int64
		db.QueryRow(t.Context(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&before)
		exec(t, db, `INSERT INTO other (pad) SELECT repeat('x', 500) FROM generate_series(1, 15000)`)
		db.QueryRow(t.Context(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&after)
		wal += after - before
		worst = max(worst, lag())
		if b := h.poll(); len(b.Records) > 0 {
			t.Fatalf("records from an idle table: %v", b.Records)
		}
	}
	worst = max(worst, lag())
	t.Logf("%d MB of WAL written; the slot's lag at most %d MB", wal>>20, worst>>20)
	if worst > 64<<20 || wal < int64(rounds)*8<<20 {
		t.Fatalf("slot lag up to %d bytes over %d bytes of WAL", worst, wal)
	}
	if h.fc.metrics["wal_status"] == nil {
		t.Fatalf("no slot metrics reported: %v", h.fc.metrics)
	}
}

// TestResumeSkipsWhatWasTaken: a transaction larger than a batch is taken in chunks;
// a new task started from the offset of a chunk takes the rest of it exactly.
func TestResumeSkipsWhatWasTaken(t *testing.T) {
	dsn, db := cdcDB(t)
	exec(t, db, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	h := newHarness(t, baseConfig(dsn))
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	h.poll()
	h.poll()
	exec(t, db, `INSERT INTO t SELECT g, 'v' FROM generate_series(1, 350) g`)
	h.pollUntil(100) // one chunk of 100
	if len(h.recs) != 100 || h.fc.offs[0].Offset["txn_events"] == nil {
		t.Fatalf("%d records, offset %v: want one chunk", len(h.recs), h.fc.offs)
	}
	h.task.Stop()
	if err := h.start(); err != nil { // a restart from the chunk's offset
		t.Fatal(err)
	}
	defer h.task.Stop()
	h.pollUntil(350)
	seen := map[string]bool{}
	for _, r := range h.recs {
		id := string(r.Value.(map[string]any)["after"].(map[string]any)["id"].(json.Number))
		if seen[id] {
			t.Fatalf("id %s twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 350 {
		t.Fatalf("%d ids", len(seen))
	}
}

func TestDecodeText(t *testing.T) {
	for _, c := range []struct {
		oid  uint32
		text string
		want any
	}{
		{oidBool, "t", true}, {oidBool, "f", false}, {oidInt8, "-42", json.Number("-42")},
		{oidNumeric, "1.50", json.Number("1.50")}, {oidNumeric, "NaN", "NaN"}, {oidFloat8, "Infinity", "Infinity"},
		{25, "héllo", "héllo"},
	} {
		got, err := decodeText(c.oid, []byte(c.text))
		if err != nil || got != c.want {
			t.Errorf("decodeText(%d, %q) = %#v, %v; want %#v", c.oid, c.text, got, err, c.want)
		}
	}
	got, err := decodeText(oidJSONB, []byte(`{"a":[1,2.5]}`))
	if err != nil || got.(map[string]any)["a"].([]any)[1] != json.Number("2.5") {
		t.Fatalf("jsonb: %#v %v", got, err)
	}
	if _, err := decodeText(oidJSON, []byte(`{`)); err == nil {
		t.Fatal("broken json accepted")
	}
}

func FuzzDecodeText(f *testing.F) {
	f.Add(uint32(oidJSONB), []byte(`{"a":1}`))
	f.Add(uint32(oidNumeric), []byte("1e5"))
	f.Fuzz(func(t *testing.T, oid uint32, b []byte) {
		v, err := decodeText(oid, b)
		if err == nil && v != nil {
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("decoded %q (oid %d) into %#v, not JSON-encodable: %v", b, oid, v, err)
			}
		}
	})
}

func FuzzParsePosition(f *testing.F) {
	f.Add("stream", "3", "0/16B3748", "0/16B3800", "7")
	f.Fuzz(func(t *testing.T, phase, epoch, lsn, txn, events string) {
		o := map[string]any{"phase": phase, "epoch": json.Number(epoch), "lsn": lsn, "txn_lsn": txn, "txn_events": json.Number(events)}
		p, err := parsePosition(o)
		if err != nil {
			return
		}
		back, err := parsePosition(p.offset("s").Offset)
		if err != nil || back != p {
			t.Fatalf("%+v round-trips to %+v, %v", p, back, err)
		}
	})
}

// TestSlotLost: a stopped task's slot falls behind max_slot_wal_keep_size (256MB on
// the test server) and is invalidated at a checkpoint: the next start fails with
// SLOT_LOST and leaves the slot as it is (not dropped, not recreated).
func TestSlotLost(t *testing.T) {
	dsn, db := cdcDB(t)
	var keep string
	if err := db.QueryRow(t.Context(), `SHOW max_slot_wal_keep_size`).Scan(&keep); err != nil || keep != "256MB" {
		testsvc.Unavailable(t, "max_slot_wal_keep_size is %q (%v), not the test server's 256MB", keep, err)
	}
	exec(t, db, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	exec(t, db, `CREATE TABLE other (id int, pad text)`)
	h := newHarness(t, baseConfig(dsn))
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	h.poll()
	h.poll()
	h.task.Stop()
	status := func() string {
		var s string
		if err := db.QueryRow(t.Context(), `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = 's1'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	i := 0
	for ; status() != "lost"; i++ {
		if i == 12 {
			t.Fatalf("the slot is %q after about 400MB of WAL", status())
		}
		exec(t, db, `INSERT INTO other SELECT g, repeat('x', 1000) FROM generate_series(1, 30000) g`)
		exec(t, db, `CHECKPOINT`)
	}
	t.Logf("the slot lost after %d rounds of about 33MB of WAL", i)
	err := h.start()
	if err == nil || !strings.HasPrefix(err.Error(), CodeSlotLost) {
		t.Fatalf("start on a lost slot: %v", err)
	}
	if status() != "lost" {
		t.Fatal("the lost slot was dropped or recreated")
	}
	h.task.Stop()
}
