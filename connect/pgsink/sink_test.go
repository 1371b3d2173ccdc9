package pgsink

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

type sinkContext struct{}

func (sinkContext) Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func rec(off int64, key, value string) connect.Record {
	r := connect.Record{Topic: "cdc.public.src", Partition: 0, Offset: off}
	dec := func(s string) any {
		if s == "" {
			return nil
		}
		var v any
		d := json.NewDecoder(stringsReader(s))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			panic(err)
		}
		return v
	}
	r.Key, r.Value = dec(key), dec(value)
	return r
}

func rows(t *testing.T, db *pgx.Conn) map[int]string {
	t.Helper()
	rs, err := db.Query(context.Background(), `SELECT id, coalesce(v, 'NULL') || '/' || n FROM dst`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	var id int
	var s string
	_, err = pgx.ForEachRow(rs, []any{&id, &s}, func() error { out[id] = s; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSink: upserts by key (Debezium envelopes and plain rows), deletes on a delete
// event and on a tombstone, keeps columns a record leaves out, empties the table on a
// truncate; a replay of records below the offsets it stored changes nothing, and a bad
// record fails alone, after the records before it were written.
func TestSink(t *testing.T) {
	dsn := testsvc.CreateDatabase(t, testsvc.Require(t, "STRATA_TEST_POSTGRES"))
	db, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(t.Context(), `CREATE TABLE dst (id int PRIMARY KEY, v text, n int NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	tk := &task{}
	if err := tk.Start(t.Context(), map[string]string{"name": "s", "connection.url": dsn, "table.name.format": "dst"}, sinkContext{}); err != nil {
		t.Fatal(err)
	}
	defer tk.Stop()
	tp := connect.TopicPartition{Topic: "cdc.public.src", Partition: 0}
	if err := tk.Open(t.Context(), map[connect.TopicPartition]int64{tp: 0}); err != nil {
		t.Fatal(err)
	}
	batch := []connect.Record{
		rec(0, `{"id":1}`, `{"op":"r","source":{},"after":{"id":1,"v":"a","n":1}}`),
		rec(1, `{"id":2}`, `{"op":"c","source":{},"after":{"id":2,"v":"b","n":2}}`),
		rec(2, `{"id":1}`, `{"op":"u","source":{},"after":{"id":1,"n":3},"unchanged_toast":["v"]}`),
		rec(3, `{"id":2}`, `{"op":"d","source":{},"before":{"id":2}}`),
		rec(4, `{"id":2}`, ``),
		rec(5, `{"id":3}`, `{"id":3,"v":"plain","n":4}`),
		rec(6, `{"id":3}`, ``),
		rec(7, `{"id":4}`, `{"id":4,"v":"x","n":5}`),
	}
	if err := tk.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{1: "a/3", 4: "x/5"}
	if got := rows(t, db); !equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	// A replay (the group's offset behind the database's) changes nothing.
	if err := tk.Put(t.Context(), []connect.Record{rec(5, `{"id":3}`, `{"id":3,"v":"again","n":9}`), rec(7, `{"id":4}`, `{"id":4,"v":"old","n":0}`)}); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, db); !equal(got, want) {
		t.Fatalf("after a replay: rows %v, want %v", got, want)
	}
	pc, _ := tk.PreCommit(t.Context())
	if pc[tp] != 8 {
		t.Fatalf("PreCommit %v, want 8", pc)
	}
	// A bad record: those before it are written, it alone is refused.
	err = tk.Put(t.Context(), []connect.Record{rec(8, `{"id":5}`, `{"id":5,"v":"y","n":6}`), rec(9, `{"id":6}`, `[1,2]`)})
	var bad *connect.BadRecordError
	if !errors.As(err, &bad) || bad.Index != 1 {
		t.Fatalf("bad record: %v", err)
	}
	if got := rows(t, db); got[5] != "y/6" {
		t.Fatalf("the record before the bad one was not written: %v", got)
	}
	if err := tk.Put(t.Context(), []connect.Record{rec(10, ``, `{"op":"t","source":{}}`)}); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, db); len(got) != 0 {
		t.Fatalf("after a truncate: %v", got)
	}
	// A new instance resumes from the database's offsets, not the group's.
	task2 := &task{}
	if err := task2.Start(t.Context(), map[string]string{"name": "s", "connection.url": dsn, "table.name.format": "dst"}, sinkContext{}); err != nil {
		t.Fatal(err)
	}
	defer task2.Stop()
	if err := task2.Open(t.Context(), map[connect.TopicPartition]int64{tp: 3}); err != nil {
		t.Fatal(err)
	}
	if pc, _ := task2.PreCommit(t.Context()); pc[tp] != 11 {
		t.Fatalf("the new instance starts at %v, want 11", pc)
	}
}

func equal(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
