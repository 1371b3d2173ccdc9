package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// TestDueQueryUsesIndex seeds a million partitions — a tenth due, a third due later, the
// rest idle; a lease row for every tenth — and checks that the compactor's due query
// (the lease statement) and the backlog count are scans of the partitions_compact_due
// index, under custom and generic plans: the cost of finding work must not grow with
// the partitions that have none. It checks the answers at that size too.
func TestDueQueryUsesIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds a million partitions")
	}
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	start := time.Now()
	const topics, per = 100, 10000
	mustExec(t, c, `INSERT INTO topics (name, partitions) SELECT 'due-' || g, 10000 FROM generate_series(1, 100) AS g`)
	// Partition n: due n seconds ago when n % 10 = 0, an hour on when n % 3 = 0, else idle.
	mustExec(t, c, `INSERT INTO partitions (topic_id, partition, compact_due)
		SELECT t.id, g, CASE WHEN (t.id * 10000 + g) % 10 = 0 THEN now() - (t.id * 10000 + g) * interval '1 second'
		                     WHEN (t.id * 10000 + g) % 3 = 0 THEN now() + interval '1 hour' END
		FROM topics t, generate_series(0, 9999) AS g WHERE t.name LIKE 'due-%'`)
	mustExec(t, c, `INSERT INTO compactor_partitions (topic_id, partition) SELECT topic_id, partition FROM partitions WHERE partition % 10 = 1`)
	mustExec(t, c, `ANALYZE topics; ANALYZE partitions; ANALYZE compactor_partitions`)
	t.Logf("seeded %d partitions in %v", topics*per, time.Since(start).Round(time.Millisecond))

	b, err := c.CompactionBacklog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wantDue int64
	var oldest time.Time
	if err := c.pool.QueryRow(ctx, `SELECT count(*), min(compact_due) FROM partitions WHERE compact_due <= now()`).Scan(&wantDue, &oldest); err != nil {
		t.Fatal(err)
	}
	if b.Due != wantDue || !b.Oldest.Equal(oldest.UTC()) || wantDue < topics*per/10 {
		t.Errorf("backlog %+v, want %d due, the oldest at %v", b, wantDue, oldest)
	}
	start = time.Now()
	ls, err := c.AcquirePartitions(ctx, "probe", time.Minute, 4)
	if err != nil || len(ls) != 4 || !ls[0].Due.Equal(oldest.UTC()) {
		t.Fatalf("leases %+v, %v: want 4, the first due at %v", ls, err, oldest)
	}
	t.Logf("leased the 4 most overdue of %d due partitions in %v; counted them in a backlog query", wantDue, time.Since(start).Round(time.Microsecond))

	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []struct {
		name  string
		sql   string
		types string
		args  []any
	}{
		{"acquire", fmt.Sprintf(acquireSQL, 4), "text, bigint", []any{"probe", int64(60000)}},
		{"backlog", backlogSQL, "", nil},
	} {
		custom, generic := plans(t, conn.Conn(), q.sql, q.types, q.args...)
		checkDuePlan(t, q.name+" (custom plan)", custom)
		checkDuePlan(t, q.name+" (generic plan)", generic)
	}
	analyzed := explain(t, conn.Conn(), "EXPLAIN (ANALYZE, BUFFERS) "+backlogSQL)
	t.Logf("backlog count of %d due partitions among %d:\n%s", wantDue, topics*per, analyzed)
}

func checkDuePlan(t *testing.T, name, plan string) {
	t.Helper()
	if strings.Contains(plan, "Seq Scan on partitions") || strings.Contains(plan, "Seq Scan on compactor_partitions") ||
		!(strings.Contains(plan, "Index Scan using partitions_compact_due") || strings.Contains(plan, "Index Only Scan using partitions_compact_due") ||
			strings.Contains(plan, "Bitmap Index Scan on partitions_compact_due")) {
		t.Errorf("%s: not a scan of the partitions_compact_due index:\n%s", name, plan)
	} else {
		t.Logf("%s:\n%s", name, plan)
	}
}
