package compactor

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-io/strata/catalog"
)

// TestDueAtScale is the figure: with 200,000 partitions on Postgres (20,000 on
// SQLite), a topic with 60s retention created last is trimmed within two passes — first
// with every other partition idle (a pass visits it alone), then with all 200,000 due
// at once behind it (a pass takes the most overdue first). Before, a pass visited the
// 1,000 partitions visited longest ago, and the new topic waited hours for its turn.
func TestDueAtScale(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		backend string
		topics  int // of catalog.MaxPartitions (10,000) partitions each
	}{{"postgres", 20}, {"sqlite", 2}} {
		t.Run(b.backend, func(t *testing.T) {
			testDueAtScale(t, newEnv(t, b.backend), b.topics, catalog.MaxPartitions)
		})
	}
}

func testDueAtScale(t *testing.T, e *env, topics int, per int32) {
	start := time.Now()
	var big []catalog.Topic
	for i := range topics {
		big = append(big, e.topic(fmt.Sprintf("big-%02d", i), per, nil))
	}
	total := topics * int(per)
	t.Logf("%s: created %d topics of %d partitions in %s", e.name, topics, per, time.Since(start).Round(time.Millisecond))

	// Created last, with 60s retention: its records were stamped two minutes ago, as
	// if the test had waited for them to expire.
	tp := e.topic("retention-60s", 1, map[string]string{"retention.ms": "60000"})
	twoMinutesAgo := func() int64 { return time.Now().Add(-2 * time.Minute).UnixMilli() }
	e.produce(tp, newGen(21, 50, twoMinutesAgo()), 200)
	hwm := e.partition(tp.ID, 0).HighWatermark

	reg := prometheus.NewRegistry()
	c := New(e.store, e.cat, Config{GracePeriod: testGracePeriod, SweepInterval: time.Hour}, nil, reg)
	passWorked := passPartitions(t, c)
	worked := 0 // partitions the last pass worked on
	pass := func(what string) {
		t.Helper()
		start := time.Now()
		if err := c.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		worked = passWorked()
		t.Logf("%s: %s: the pass worked on %d partitions in %s; %v due after it, the most overdue for %.1fs", e.name, what,
			worked, took.Round(time.Millisecond), testutil.ToFloat64(c.m.due), testutil.ToFloat64(c.m.overdue))
	}
	trimmedWithin := func(what string, passes int) {
		t.Helper()
		for i := 1; i <= passes; i++ {
			pass(fmt.Sprintf("%s, pass %d", what, i))
			if got := e.partition(tp.ID, 0).LogStartOffset; got == hwm {
				return
			}
		}
		t.Fatalf("%s: log start %d after %d passes, want %d: the expired records are still there", what, e.partition(tp.ID, 0).LogStartOffset, passes, hwm)
	}

	// 1. Every other partition idle: nothing else is visited.
	trimmedWithin("others idle", 2)
	if worked != 1 {
		t.Errorf("the pass worked on %d partitions, want only the one due", worked)
	}

	// 2. Every other partition due (new configs), the retention topic most overdue:
	// its new records expired a minute before the configs changed.
	for _, b := range big {
		if _, err := e.cat.UpdateTopic(e.ctx, b.Name, 0, map[string]string{"retention.ms": "86400000"}); err != nil {
			t.Fatal(err)
		}
	}
	e.produce(tp, newGen(22, 50, twoMinutesAgo()), 200)
	hwm = e.partition(tp.ID, 0).HighWatermark
	before := testutil.ToFloat64(c.m.logStartAdvances)
	trimmedWithin(fmt.Sprintf("%d others due", total), 2)
	if testutil.ToFloat64(c.m.logStartAdvances) == before {
		t.Error("no log start advanced")
	}
	if worked != DefaultMaxPartitions {
		t.Errorf("the pass worked on %d partitions, want a full batch of %d", worked, DefaultMaxPartitions)
	}
	// The rest of the backlog: everything due but what the pass worked on — and the
	// retention topic again if the pass outlasted the settle age of its rows, which
	// it left below the log start to drop once settled.
	if due, want := int(testutil.ToFloat64(c.m.due)), total-(DefaultMaxPartitions-1); due != want && due != want+1 {
		t.Errorf("%d partitions due after the pass, want %d", due, want)
	}
	if testutil.ToFloat64(c.m.overdue) <= 0 {
		t.Error("overdue_seconds is 0 with partitions due")
	}
}

// passPartitions returns a func that tells how many partitions the last pass worked
// on: what the pass_partitions histogram gained since the func's previous call.
func passPartitions(t *testing.T, c *Compactor) func() int {
	last := 0
	return func() int {
		t.Helper()
		var m dto.Metric
		if err := c.m.passPartitions.Write(&m); err != nil {
			t.Fatal(err)
		}
		sum := int(m.GetHistogram().GetSampleSum())
		n := sum - last
		last = sum
		return n
	}
}
