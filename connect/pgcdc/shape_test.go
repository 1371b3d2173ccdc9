package pgcdc

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/strata-io/strata/connect"
)

func header(r connect.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

func envelope(t *testing.T, r connect.Record) map[string]any {
	t.Helper()
	v, ok := r.Value.(map[string]any)
	if !ok {
		t.Fatalf("value %#v is not an envelope", r.Value)
	}
	return v
}

func streamingHarness(t *testing.T, table string) (*harness, func(string, ...any)) {
	dsn, db := cdcDB(t)
	exec(t, db, table)
	h := newHarness(t, baseConfig(dsn))
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.task.Stop() })
	h.poll()
	h.poll()
	return h, func(sql string, args ...any) { exec(t, db, sql, args...) }
}

// TestSchemaChanges: add, alter and drop a column — the records before each change
// keep their shape, those after carry the new columns and a new schema version; and a
// task restarted between an ALTER and the next insert sees the new shape too (the
// relation cache is rebuilt from the stream, never stored).
func TestSchemaChanges(t *testing.T) {
	h, sql := streamingHarness(t, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	sql(`INSERT INTO t VALUES (1, 'a')`)
	h.pollUntil(1)
	sql(`ALTER TABLE t ADD COLUMN c int DEFAULT 1`)
	h.task.Stop() // a restart between the ALTER and the next row
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	sql(`INSERT INTO t VALUES (2, 'b', 5)`)
	h.pollUntil(2)
	sql(`ALTER TABLE t ALTER COLUMN c TYPE bigint`)
	sql(`INSERT INTO t VALUES (3, 'c', 6)`)
	sql(`ALTER TABLE t DROP COLUMN v`)
	sql(`INSERT INTO t VALUES (4, 7)`)
	h.pollUntil(4)
	var versions []string
	var cols []string
	for _, r := range h.recs {
		versions = append(versions, header(r, HeaderSchemaVersion))
		after := envelope(t, r)["after"].(map[string]any)
		keys := make([]string, 0, len(after))
		for k := range after {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		cols = append(cols, strings.Join(keys, ","))
	}
	if want := []string{"id,v", "c,id,v", "c,id,v", "c,id"}; !slices.Equal(cols, want) {
		t.Fatalf("columns %v, want %v", cols, want)
	}
	if versions[0] == versions[1] || versions[1] == versions[2] || versions[2] == versions[3] || slices.Contains(versions, "") {
		t.Fatalf("schema versions %v: want a new one at each change", versions)
	}
}

// TestToast: an update that leaves a TOASTed column unchanged: under REPLICA IDENTITY
// DEFAULT the column is left out and listed in unchanged_toast, never invented; under
// FULL its value is there.
func TestToast(t *testing.T) {
	h, sql := streamingHarness(t, `CREATE TABLE t (id int PRIMARY KEY, n int, big text)`)
	// Random text does not compress below the TOAST threshold.
	sql(`INSERT INTO t SELECT 1, 0, string_agg(md5(random()::text), '') FROM generate_series(1, 4000)`)
	sql(`UPDATE t SET n = 1 WHERE id = 1`)
	sql(`ALTER TABLE t REPLICA IDENTITY FULL`)
	sql(`UPDATE t SET n = 2 WHERE id = 1`)
	h.pollUntil(3)
	ins, def, full := envelope(t, h.recs[0]), envelope(t, h.recs[1]), envelope(t, h.recs[2])
	big := ins["after"].(map[string]any)["big"].(string)
	if len(big) != 128000 {
		t.Fatalf("inserted big of %d bytes", len(big))
	}
	if _, ok := def["after"].(map[string]any)["big"]; ok || !slices.Equal(def["unchanged_toast"].([]any), []any{"big"}) {
		t.Fatalf("DEFAULT: after %v, unchanged_toast %v", def["after"], def["unchanged_toast"])
	}
	if full["after"].(map[string]any)["big"] != big || full["unchanged_toast"] != nil {
		t.Fatalf("FULL: the unchanged value is not carried (unchanged_toast %v)", full["unchanged_toast"])
	}
	if full["before"].(map[string]any)["n"] != json.Number("1") {
		t.Fatalf("FULL: before %v", full["before"])
	}
}

// TestTruncateAndDelete: a truncate is a t event (no key); a delete is a d event keyed
// by the primary key, followed by its tombstone.
func TestTruncateAndDelete(t *testing.T) {
	h, sql := streamingHarness(t, `CREATE TABLE t (a int, b text, v text, PRIMARY KEY (a, b))`)
	sql(`INSERT INTO t VALUES (1, 'x', 'v')`)
	sql(`DELETE FROM t WHERE a = 1`)
	sql(`TRUNCATE t`)
	sql(`INSERT INTO t VALUES (5, 'y', 'v')`)
	sql(`UPDATE t SET a = 6 WHERE a = 5`) // a new key: delete, tombstone, create
	h.pollUntil(8)
	ops := []string{}
	for _, r := range h.recs {
		if r.Value == nil {
			ops = append(ops, "tombstone")
			continue
		}
		ops = append(ops, envelope(t, r)["op"].(string))
	}
	if !slices.Equal(ops, []string{"c", "d", "tombstone", "t", "c", "d", "tombstone", "c"}) {
		t.Fatalf("ops %v", ops)
	}
	key, _ := json.Marshal(h.recs[1].Key)
	tomb, _ := json.Marshal(h.recs[2].Key)
	if string(key) != `{"a":1,"b":"x"}` || string(tomb) != string(key) || h.recs[3].Key != nil {
		t.Fatalf("keys: delete %s, tombstone %s, truncate %v", key, tomb, h.recs[3].Key)
	}
	if header(h.recs[1], HeaderCommitLSN) == "" || header(h.recs[1], HeaderXID) == "" || header(h.recs[2], HeaderSeq) != "1" {
		t.Fatalf("headers %v / %v", h.recs[1].Headers, h.recs[2].Headers)
	}
	oldKey, _ := json.Marshal(h.recs[6].Key)
	newKey, _ := json.Marshal(h.recs[7].Key)
	if string(oldKey) != `{"a":5,"b":"y"}` || string(newKey) != `{"a":6,"b":"y"}` || header(h.recs[7], HeaderSeq) != "2" {
		t.Fatalf("a key change: tombstone key %s, create key %s, seq %s", oldKey, newKey, header(h.recs[7], HeaderSeq))
	}
}
