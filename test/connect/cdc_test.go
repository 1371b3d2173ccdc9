package connect

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestCDCSnapshotAndChanges: a table with rows before the connector starts, then
// mixed insert/update/delete transactions while it streams: exactly one r event per
// row of the snapshot, exactly one event per change (and a tombstone per delete), and
// the topic reduced by key equals the table. 5,000 rows and 2,000 transactions in CI;
// 50,000 and 20,000 with STRATA_LONG=1.
func TestCDCSnapshotAndChanges(t *testing.T) {
	rows, txns := 5000, 2000
	if long() {
		rows, txns = 50000, 20000
	}
	dsn, db := cdcDB(t)
	mustExec(t, db, `CREATE TABLE items (id bigint PRIMARY KEY, n int NOT NULL, s text, j jsonb, f double precision)`)
	mustExec(t, db, `INSERT INTO items SELECT g, g % 97, 'row ' || g, jsonb_build_object('g', g), g / 3.0 FROM generate_series(1, $1) g`, rows)

	c := newCluster(t, 2*time.Second)
	w := c.start("w")
	createTopic(t, w.url, "cdc.public.items", 1)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "items", "cdc_items")}, 201, nil)
	// The snapshot first, so that it holds exactly the rows above.
	testwait.Until(t, 2*time.Minute, "the snapshot", func() bool { return highWatermark(t, w.url, "cdc.public.items") >= int64(rows) })

	rng := rand.New(rand.NewPCG(1, 2))
	live := make([]int64, 0, rows+txns)
	for i := 1; i <= rows; i++ {
		live = append(live, int64(i))
	}
	next := int64(rows + 1)
	var creates, updates, deletes int
	ctx := t.Context()
	for range txns {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range 1 + rng.IntN(3) {
			switch k := rng.IntN(10); {
			case k < 4 || len(live) == 0:
				_, err = tx.Exec(ctx, `INSERT INTO items VALUES ($1, $2, $3, '{"new":true}', 0.5)`, next, rng.IntN(1000), fmt.Sprint("ins ", next))
				live, next, creates = append(live, next), next+1, creates+1
			case k < 8:
				id := live[rng.IntN(len(live))]
				_, err = tx.Exec(ctx, `UPDATE items SET n = n + 1, s = $2 WHERE id = $1`, id, fmt.Sprint("upd ", rng.IntN(1e6)))
				updates++
			default:
				i := rng.IntN(len(live))
				_, err = tx.Exec(ctx, `DELETE FROM items WHERE id = $1`, live[i])
				live[i] = live[len(live)-1]
				live, deletes = live[:len(live)-1], deletes+1
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := rows + creates + updates + 2*deletes
	t.Logf("%d snapshot rows, %d transactions: %d inserts, %d updates, %d deletes; %d records expected", rows, txns, creates, updates, deletes, want)
	testwait.Until(t, 5*time.Minute, fmt.Sprintf("%d records", want), func() bool { return highWatermark(t, w.url, "cdc.public.items") >= int64(want) })
	time.Sleep(2 * time.Second) // an absence: a duplicate would come now (two heartbeats)
	recs := readCDC(t, w.url, "cdc.public.items")
	count := map[string]int{}
	ids := map[string]bool{}
	for _, r := range recs {
		count[r.op]++
		if r.op != "r" && r.op != "" {
			id := r.commitLSN + "/" + r.seq
			if ids[id] {
				t.Fatalf("two records at commit LSN and index %s", id)
			}
			ids[id] = true
		}
	}
	if count["r"] != rows || count["c"] != creates || count["u"] != updates || count["d"] != deletes || count[""] != deletes || len(recs) != want {
		t.Fatalf("counts %v (total %d), want r=%d c=%d u=%d d=%d tombstones=%d (total %d)", count, len(recs), rows, creates, updates, deletes, deletes, want)
	}
	if d := diffStates(tableState(t, db, "items"), reduceByKey(recs)); d != "" {
		t.Fatalf("the topic reduced by key is not the table: %s", d)
	}
	var st struct {
		Tasks []struct {
			Metrics map[string]any `json:"source_metrics"`
		} `json:"tasks"`
	}
	testwait.Until(t, 20*time.Second, "slot metrics in the status", func() bool {
		rest(t, w.url, "GET", "/connectors/cdc/status", nil, 200, &st)
		return len(st.Tasks) == 1 && st.Tasks[0].Metrics["wal_status"] != nil && st.Tasks[0].Metrics["slot_lag_bytes"] != nil
	})
	t.Logf("status metrics: %v", st.Tasks[0].Metrics)
}
