package sqlite

import (
	"strings"
	"testing"
	"time"
)

// TestDueQueryPlans seeds a million partitions — a tenth due, a third due later, the
// rest idle; a lease row for every tenth — and checks that the compactor's due query
// and the backlog count search the partitions_compact_due index (in due order, with no
// sort) and probe leases by primary key, before and after ANALYZE; and that they answer
// right at that size.
func TestDueQueryPlans(t *testing.T) {
	ctx := t.Context()
	c := openTest(t)
	start := time.Now()
	now := time.Now().UnixMilli()
	if _, err := c.w.ExecContext(ctx, `INSERT INTO topics (name, partitions, created_at)
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT 'due-' || i, 10000, 0 FROM n`); err != nil {
		t.Fatal(err)
	}
	// Partition k (of all): due k ms ago when k % 10 = 0, an hour on when k % 3 = 0, else idle.
	if _, err := c.w.ExecContext(ctx, `INSERT INTO partitions (topic_id, partition, compact_due)
		WITH RECURSIVE n(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM n WHERE k + 1 < 1000000)
		SELECT k / 10000 + 1, k % 10000, CASE WHEN k % 10 = 0 THEN ?1 - 1000000 + k WHEN k % 3 = 0 THEN ?1 + 3600000 END FROM n`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := c.w.ExecContext(ctx, `INSERT INTO compactor_partitions (topic_id, partition)
		SELECT topic_id, partition FROM partitions WHERE partition % 10 = 1`); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded 1,000,000 partitions in %s", time.Since(start).Round(time.Millisecond))

	queries := []struct {
		name, sql string
		args      []any
		want      []string
	}{
		{"due", dueSQL, []any{now, 4}, []string{"SEARCH p USING COVERING INDEX partitions_compact_due (compact_due<?)", "SEARCH c USING PRIMARY KEY"}},
		{"backlog", backlogSQL, []any{now}, []string{"SEARCH partitions USING COVERING INDEX partitions_compact_due (compact_due<?)"}},
	}
	check := func(stage string) {
		for _, q := range queries {
			all := strings.Join(queryPlan(t, c, q.sql, q.args...), "; ")
			for _, w := range q.want {
				if !strings.Contains(all, w) {
					t.Errorf("%s %s: no %q: %s", stage, q.name, w, all)
				}
			}
			if strings.Contains(all, "SCAN") || strings.Contains(all, "TEMP B-TREE") {
				t.Errorf("%s %s: a scan or a sort: %s", stage, q.name, all)
			}
			t.Logf("%s %s: %s", stage, q.name, all)
		}
	}
	check("before ANALYZE")
	if _, err := c.w.ExecContext(ctx, `PRAGMA analysis_limit = 1000; ANALYZE`); err != nil {
		t.Fatal(err)
	}
	check("after ANALYZE")

	b, err := c.CompactionBacklog(ctx)
	if err != nil || b.Due != 100000 || b.Oldest.UnixMilli() != now-1000000 {
		t.Fatalf("backlog %+v, %v: want 100,000 due, the oldest at %d", b, err, now-1000000)
	}
	start = time.Now()
	ls, err := c.AcquirePartitions(ctx, "probe", time.Minute, 4)
	if err != nil || len(ls) != 4 || ls[0].TopicID != 1 || ls[0].Partition != 0 || ls[1].Partition != 10 {
		t.Fatalf("leases %+v, %v: want partitions 0, 10, 20, 30 of topic 1", ls, err)
	}
	t.Logf("leased the 4 most overdue of 100,000 due in %s", time.Since(start).Round(time.Microsecond))
}
