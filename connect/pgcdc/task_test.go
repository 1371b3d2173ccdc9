package pgcdc

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/testsvc"
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
