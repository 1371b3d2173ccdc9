package postgres

import (
	"testing"

	"github.com/strata-io/strata/catalog"
)

// TestAnalyzeAfterGrowth: a topic that adds many partition rows at once, created or
// grown, leaves the partitions table's planner statistics current (pg_class.reltuples
// counts its rows), so commit plans made afterwards do not scan it whole; a small
// topic does not pay for an ANALYZE.
func TestAnalyzeAfterGrowth(t *testing.T) {
	c := openDSN(t, newDatabase(t), catalog.Options{})
	ctx := t.Context()
	estimate := func() float64 {
		t.Helper()
		var n float64
		if err := c.pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'partitions'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := c.CreateTopic(ctx, "small", 8, nil); err != nil {
		t.Fatal(err)
	}
	if n := estimate(); n > 0 {
		t.Fatalf("the statistics count %v rows after an 8-partition topic: analyzed for a small topic", n)
	}
	if _, err := c.CreateTopic(ctx, "large", 2000, nil); err != nil {
		t.Fatal(err)
	}
	if n := estimate(); n < 2008 {
		t.Fatalf("the statistics count %v rows after a 2,000-partition topic, want 2,008", n)
	}
	if _, err := c.UpdateTopic(ctx, "small", 3000, nil); err != nil {
		t.Fatal(err)
	}
	if n := estimate(); n < 5000 {
		t.Fatalf("the statistics count %v rows after growing a topic to 3,000 partitions, want 5,000", n)
	}
}
