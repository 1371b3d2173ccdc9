package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// cdcDB is a fresh database on the change-data-capture Postgres, and a connection.
func cdcDB(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	dsn := testsvc.CDCPostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return dsn, c
}

func mustExec(t testing.TB, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// cdcRecord is a change event read back from a topic.
type cdcRecord struct {
	offset    int64
	key       string // canonical JSON ("" for none)
	op        string // "" for a tombstone
	after     map[string]any
	before    map[string]any
	toast     []any
	commitLSN string
	seq       string
	xid       string
	epoch     int
	schema    string
}

// readCDC reads a topic's change events in order (one partition).
func readCDC(t testing.TB, base, topic string) []cdcRecord {
	t.Helper()
	c := client.New(base)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out []cdcRecord
	off := int64(0)
	for {
		res, err := c.FetchBinary(ctx, topic, 0, client.FetchOptions{Offset: off, MaxRecords: 10000})
		if err != nil {
			t.Fatalf("fetch %s at %d: %v", topic, off, err)
		}
		for _, r := range res.Records {
			cr := cdcRecord{offset: r.Offset, key: canon(t, r.Key)}
			for _, h := range r.Headers {
				switch h.Key {
				case "pg.commit_lsn":
					cr.commitLSN = string(h.Value)
				case "pg.seq":
					cr.seq = string(h.Value)
				case "pg.xid":
					cr.xid = string(h.Value)
				case "pg.snapshot_epoch":
					cr.epoch, _ = strconv.Atoi(string(h.Value))
				case "pg.schema_version":
					cr.schema = string(h.Value)
				}
			}
			if r.Value != nil {
				var v struct {
					Op     string         `json:"op"`
					After  map[string]any `json:"after"`
					Before map[string]any `json:"before"`
					Toast  []any          `json:"unchanged_toast"`
				}
				d := json.NewDecoder(bytes.NewReader(r.Value))
				d.UseNumber()
				if err := d.Decode(&v); err != nil {
					t.Fatalf("record %d: %v: %s", r.Offset, err, r.Value)
				}
				cr.op, cr.after, cr.before, cr.toast = v.Op, v.After, v.Before, v.Toast
			}
			out = append(out, cr)
		}
		if res.NextOffset >= res.HighWatermark || len(res.Records) == 0 {
			return out
		}
		off = res.NextOffset
	}
}

func canon(t testing.TB, b []byte) string {
	if b == nil {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// highWatermark is a one-partition topic's end.
func highWatermark(t testing.TB, base, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := client.New(base).FetchBinary(ctx, topic, 0, client.FetchOptions{Offset: 0, MaxRecords: 1})
	if err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	return res.HighWatermark
}

// reduceByKey applies change events in order: the state a compacted topic keeps.
func reduceByKey(recs []cdcRecord) map[string]string {
	state := map[string]string{}
	for _, r := range recs {
		switch r.op {
		case "c", "u", "r":
			b, _ := json.Marshal(r.after)
			state[r.key] = string(b)
		case "d", "":
			delete(state, r.key)
		case "t":
			clear(state)
		}
	}
	return state
}

// tableState is a table's rows as key (its id) → row, in the events' JSON form.
func tableState(t testing.TB, c *pgx.Conn, table string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rows, err := c.Query(ctx, `SELECT id::text, row_to_json(x)::text FROM `+table+` x`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var id, js string
		if err := rows.Scan(&id, &js); err != nil {
			t.Fatal(err)
		}
		out[`{"id":`+id+`}`] = canon(t, []byte(js))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// diffStates describes how two states differ (empty: equal).
func diffStates(want, got map[string]string) string {
	missing, extra, differ := 0, 0, 0
	example := ""
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing++
			if example == "" {
				example = "missing " + k
			}
		case g != w:
			differ++
			if example == "" {
				example = fmt.Sprintf("%s: want %s, got %s", k, w, g)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra++
			if example == "" {
				example = "extra " + k
			}
		}
	}
	if missing+extra+differ == 0 {
		return ""
	}
	return fmt.Sprintf("%d missing, %d extra, %d different (e.g. %s)", missing, extra, differ, example)
}

// cdcConfig is a CDC source connector's config.
func cdcConfig(dsn, tables, slot string, extra ...string) map[string]string {
	cfg := map[string]string{"connector.class": "PostgresCdcSource", "database.url": dsn, "table.include.list": tables,
		"topic.prefix": "cdc", "slot.name": slot, "heartbeat.interval.ms": "1000", "max.batch.size": "1000"}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i]] = extra[i+1]
	}
	return cfg
}

// taskStatus is a connector's first task's state and trace.
func taskStatus(t testing.TB, base, name string) (string, string) {
	t.Helper()
	var st struct {
		Tasks []struct {
			State string `json:"state"`
			Trace string `json:"trace"`
		} `json:"tasks"`
	}
	rest(t, base, "GET", "/connectors/"+name+"/status", nil, 200, &st)
	if len(st.Tasks) == 0 {
		return "", ""
	}
	return st.Tasks[0].State, st.Tasks[0].Trace
}
