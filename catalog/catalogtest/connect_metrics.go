package catalogtest

import (
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// testTaskMetrics: a task instance's metrics are stored and read back with the task, a
// later report replaces them, a malformed or oversized one is refused, and an instance
// whose task moved on (restarted) can change them no more.
func testTaskMetrics(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	putConnector(t, c, "src", 1)
	a := beat(t, c, "w1", time.Minute)
	f := fenceOf(t, a, "src", 0)
	if got := getConnector(t, c, "src").Tasks[0].Metrics; got != "" {
		t.Fatalf("metrics before any report: %q", got)
	}
	for _, m := range []string{`{"slot_lag_bytes":10,"wal_status":"reserved"}`, `{"slot_lag_bytes":0}`} {
		if err := c.ReportTaskMetrics(ctx, f, m); err != nil {
			t.Fatal(err)
		}
		if got := getConnector(t, c, "src").Tasks[0].Metrics; got != m {
			t.Fatalf("metrics %q, want %q", got, m)
		}
	}
	wantErr(t, "metrics that are not an object", c.ReportTaskMetrics(ctx, f, `[1]`), catalog.ErrInvalidConnector)
	wantErr(t, "metrics too large", c.ReportTaskMetrics(ctx, f, `{"x":"`+strings.Repeat("y", catalog.MaxTaskMetrics)+`"}`), catalog.ErrInvalidConnector)
	conn, err := c.RestartTasks(ctx, "src", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	err = c.ReportTaskMetrics(ctx, f, `{"slot_lag_bytes":99}`)
	wantFence(t, "the restarted task's old instance", err, engine.FenceRefusal(f, engine.RefusedStaleGeneration, conn.Tasks[0].Generation))
	if got := getConnector(t, c, "src").Tasks[0].Metrics; got != `{"slot_lag_bytes":0}` {
		t.Fatalf("a refused report changed the metrics to %q", got)
	}
	wantErr(t, "an unknown task", c.ReportTaskMetrics(ctx, catalog.TaskFence{Connector: "zz", Task: 0, Generation: 1}, `{}`), catalog.ErrStaleGeneration)
}
