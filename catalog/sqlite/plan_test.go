package sqlite

import (
	"strings"
	"testing"
	"time"
)

// TestQueryPlans seeds a million chunk rows and checks that the read path's lookups are
// index searches, never scans of chunks — before and after ANALYZE, since statistics
// change the planner's choices — and that they answer right at that size.
func TestQueryPlans(t *testing.T) {
	ctx := t.Context()
	c := openTest(t)
	tp, err := c.CreateTopic(ctx, "big", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 1_000_000
	start := time.Now()
	if _, err := c.w.ExecContext(ctx, `INSERT INTO segments (id, key, size, state, created_at) VALUES (1, 'seed', 1000, 'live', 0)`); err != nil {
		t.Fatal(err)
	}
	// Row i is chunk k = i%10000 of partition p = i/10000: offsets [10k, 10k+9], running
	// max timestamp 100k+p. Rows go in index order, so every index is appended to, and
	// without foreign key checks (the one writer connection keeps the pragma; restored
	// below): a million rows take seconds, not tens of them.
	if _, err := c.w.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.w.ExecContext(ctx, `INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id,
			pos, len, max_timestamp, running_max_timestamp)
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?2)
		SELECT ?1, i / 10000, (i % 10000) * 10, (i % 10000) * 10 + 9, 1, 0, 1000,
			(i % 10000) * 100 + i / 10000, (i % 10000) * 100 + i / 10000 FROM n`, tp.ID, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := c.w.ExecContext(ctx, `PRAGMA foreign_keys = ON`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.w.ExecContext(ctx, `UPDATE partitions SET high_watermark = ? WHERE topic_id = ?`, rows/100*10, tp.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d chunk rows in %s", rows, time.Since(start).Round(time.Millisecond))

	queries := []struct {
		name, sql, index string
		args             []any
	}{
		{"chunks by offset", chunksByOffset, "chunks_by_offset", []any{tp.ID, 7, 50_005, MaxChunks}},
		{"chunk by time", chunkByTime, "chunks_by_time", []any{tp.ID, 7, 500_000}},
		{"chunks of a segment", selectSegmentChunks, "chunks_by_segment", []any{1}},
	}
	check := func(stage string) {
		for _, q := range queries {
			plan := queryPlan(t, c, q.sql, q.args...)
			all := strings.Join(plan, "; ")
			for _, d := range plan {
				if strings.HasPrefix(d, "SCAN c") || strings.Contains(d, "SCAN chunks") {
					t.Errorf("%s %s: scans chunks: %s", stage, q.name, all)
				}
			}
			if !strings.Contains(all, "SEARCH") || !strings.Contains(all, "USING INDEX "+q.index) && !strings.Contains(all, "USING COVERING INDEX "+q.index) {
				t.Errorf("%s %s: no search of %s: %s", stage, q.name, q.index, all)
			}
			t.Logf("%s %s: %s", stage, q.name, all)
		}
	}
	check("before ANALYZE")
	if _, err := c.w.ExecContext(ctx, `PRAGMA analysis_limit = 1000; ANALYZE`); err != nil {
		t.Fatal(err)
	}
	check("after ANALYZE")

	// And the answers at this size. Partition 7 holds rows n = 100k+7: offsets [10k,
	// 10k+9] with running max timestamp 100k+7.
	l, err := c.Chunks(ctx, tp.ID, 7, 50_005, 2500)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Chunks) != 2 || l.Chunks[0].BaseOffset != 50_000 || l.Chunks[1].BaseOffset != 50_010 || l.Partition.HighWatermark != 100_000 {
		t.Fatalf("Chunks = %+v", l)
	}
	for _, tc := range []struct{ ts, want int64 }{{0, 0}, {7, 0}, {8, 10}, {500_007, 50_000}, {500_008, 50_010}, {2_000_000, 100_000}} {
		if got, err := c.OffsetForTime(ctx, tp.ID, 7, tc.ts); err != nil || got != tc.want {
			t.Fatalf("OffsetForTime(%d) = %d, %v; want %d", tc.ts, got, err, tc.want)
		}
	}
}

// queryPlan returns the details of a statement's EXPLAIN QUERY PLAN, in order.
func queryPlan(t *testing.T, c *Catalog, sql string, args ...any) []string {
	t.Helper()
	rs, err := c.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rs.Close()
	var plan []string
	for rs.Next() {
		var id, parent, unused int
		var detail string
		if err := rs.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
