package streams

import (
	"testing"
	"time"

	"github.com/strata-io/strata/streams"
)

// TestScaleOutAndIn: three instances; mid-run a fourth joins, then one of the first
// three leaves (SIGTERM). The outputs still equal the oracle, and no task was dropped
// or had a commit refused for a mere epoch bump: commits refused as stale are sent
// again at the new epoch (counted).
func TestScaleOutAndIn(t *testing.T) {
	n := 300_000
	if long() {
		n = 1_000_000
	}
	nd, c := setup(t, n)
	var ins []*instance
	for _, name := range []string{"scale-a", "scale-b", "scale-c"} {
		ins = append(ins, newInstance(t, nd.url, name, slow...))
	}
	for _, in := range ins {
		in.waitTasks(2, time.Minute)
	}
	d := newInstance(t, nd.url, "scale-d", slow...)
	d.waitTasks(1, time.Minute)
	if lag := lagOf(t, c, "retail"); lag == 0 {
		t.Fatal("drained before the scale-out: the test proves little")
	}
	var total streams.MetricsSnapshot
	add := func(in *instance) {
		m, _, err := in.snapshot()
		if err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		total.EpochResends += m.EpochResends
		total.TasksDropped += m.TasksDropped
		total.CommitsRefused += m.CommitsRefused
		total.Commits += m.Commits
	}
	leaving := ins[0]
	time.Sleep(time.Second)
	add(leaving) // its counters just before it leaves; it commits and leaves on SIGTERM
	leaving.p.stop(30 * time.Second)
	if leaving.p.err != nil {
		t.Errorf("%s did not exit cleanly: %v", leaving.name, leaving.p.err)
	}
	rest := append(ins[1:], d)
	var alive []*proc
	for _, in := range rest {
		alive = append(alive, in.p)
	}
	waitDrained(t, c, "retail", 10*time.Minute, alive...)
	for _, in := range rest {
		add(in)
		in.p.stop(30 * time.Second)
	}
	t.Logf("commits %d, resent at a new member epoch %d, refused %d, tasks dropped %d", total.Commits, total.EpochResends, total.CommitsRefused, total.TasksDropped)
	if total.TasksDropped != 0 || total.CommitsRefused != 0 {
		t.Errorf("scaling dropped %d tasks and had %d commits refused, want none", total.TasksDropped, total.CommitsRefused)
	}
	checkAgainstOracle(t, c, "retail")
}
