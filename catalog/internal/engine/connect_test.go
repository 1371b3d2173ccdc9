package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

func ids(s ...string) []catalog.TaskID {
	var out []catalog.TaskID
	for _, x := range s {
		c, n, _ := strings.Cut(x, "/")
		var t int32
		fmt.Sscan(n, &t)
		out = append(out, catalog.TaskID{Connector: c, Task: t})
	}
	return out
}

// TestPlanWorkerBeat: the share-out rule with known answers.
func TestPlanWorkerBeat(t *testing.T) {
	now := time.Unix(1000, 0)
	live, dead := now.Add(time.Minute), now.Add(-time.Second)
	task := func(id, owner string, until time.Time, state string) TaskLease {
		return TaskLease{TaskID: ids(id)[0], Owner: owner, LeaseUntil: until, TargetState: state}
	}
	three := []WorkerRow{{"w1", live}, {"w2", live}, {"w3", live}}
	for _, tc := range []struct {
		name    string
		beat    catalog.WorkerBeat
		workers []WorkerRow
		tasks   []TaskLease
		want    WorkerPlan
	}{
		{"alone, it claims everything runnable",
			catalog.WorkerBeat{Worker: "w1"}, nil,
			[]TaskLease{task("a/0", "", time.Time{}, catalog.StateRunning), task("a/1", "", time.Time{}, catalog.StateRunning), task("s/0", "", time.Time{}, catalog.StateStopped)},
			WorkerPlan{Claim: ids("a/0", "a/1"), Workers: 1}},
		{"three workers, 4+2 tasks: a's extra to w1, b's two to w2 and w3",
			catalog.WorkerBeat{Worker: "w3"}, three,
			[]TaskLease{task("a/0", "", time.Time{}, catalog.StateRunning), task("a/1", "", time.Time{}, catalog.StateRunning),
				task("a/2", "", time.Time{}, catalog.StateRunning), task("a/3", "", time.Time{}, catalog.StateRunning),
				task("b/0", "", time.Time{}, catalog.StateRunning), task("b/1", "", time.Time{}, catalog.StateRunning)},
			WorkerPlan{Claim: ids("a/0", "b/0"), Workers: 3}},
		{"w1 of the same: two of a, none of b",
			catalog.WorkerBeat{Worker: "w1"}, three,
			[]TaskLease{task("a/0", "", time.Time{}, catalog.StateRunning), task("a/1", "", time.Time{}, catalog.StateRunning),
				task("a/2", "", time.Time{}, catalog.StateRunning), task("a/3", "", time.Time{}, catalog.StateRunning),
				task("b/0", "", time.Time{}, catalog.StateRunning), task("b/1", "", time.Time{}, catalog.StateRunning)},
			WorkerPlan{Claim: ids("a/0", "a/1"), Workers: 3}},
		{"a dead worker's tasks are claimable; a live one's are not",
			catalog.WorkerBeat{Worker: "w1"}, []WorkerRow{{"w2", dead}, {"w3", live}},
			[]TaskLease{task("a/0", "w2", dead, catalog.StateRunning), task("a/1", "w3", live, catalog.StateRunning), task("a/2", "w3", live, catalog.StateRunning)},
			WorkerPlan{Claim: ids("a/0"), Workers: 2}},
		{"over its share, the highest tasks are excess; a stopped connector's are released",
			catalog.WorkerBeat{Worker: "w1"}, []WorkerRow{{"w2", live}},
			[]TaskLease{task("a/0", "w1", live, catalog.StateRunning), task("a/1", "w1", live, catalog.StateRunning), task("a/2", "w1", live, catalog.StateRunning),
				task("a/3", "w1", live, catalog.StateRunning), task("s/0", "w1", live, catalog.StateStopped)},
			WorkerPlan{Renew: ids("a/0", "a/1", "a/2", "a/3"), Release: ids("s/0"), Excess: ids("a/2", "a/3"), Workers: 2}},
		{"released tasks are not claimed back in the same beat",
			catalog.WorkerBeat{Worker: "w1", Release: ids("a/1")}, nil,
			[]TaskLease{task("a/0", "w1", live, catalog.StateRunning), task("a/1", "w1", live, catalog.StateRunning)},
			WorkerPlan{Renew: ids("a/0"), Release: ids("a/1"), Workers: 1}},
		{"leaving releases everything, claims nothing",
			catalog.WorkerBeat{Worker: "w1", Leave: true}, []WorkerRow{{"w1", live}},
			[]TaskLease{task("a/0", "w1", live, catalog.StateRunning), task("a/1", "", time.Time{}, catalog.StateRunning)},
			WorkerPlan{Release: ids("a/0"), Workers: 0}},
		{"a paused connector's tasks are held like running ones",
			catalog.WorkerBeat{Worker: "w1"}, nil,
			[]TaskLease{task("p/0", "", time.Time{}, catalog.StatePaused)},
			WorkerPlan{Claim: ids("p/0"), Workers: 1}},
	} {
		got := PlanWorkerBeat(now, tc.beat, tc.workers, tc.tasks)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestPlanWorkerBeatConverges: workers beating in turn end with every runnable task
// held once, each connector spread, and totals differing by one at most.
func TestPlanWorkerBeatConverges(t *testing.T) {
	now := time.Unix(1000, 0)
	until := now.Add(time.Minute)
	var tasks []TaskLease
	for c, n := range map[string]int{"a": 5, "b": 3, "c": 1, "d": 4} {
		for i := range n {
			tasks = append(tasks, TaskLease{TaskID: catalog.TaskID{Connector: c, Task: int32(i)}, TargetState: catalog.StateRunning})
		}
	}
	slices.SortFunc(tasks, func(x, y TaskLease) int { return compareTasks(x.TaskID, y.TaskID) })
	workers := []WorkerRow{{"w1", until}, {"w2", until}, {"w3", until}}
	release := map[string][]catalog.TaskID{}
	for round := range 6 {
		for _, w := range workers {
			p := PlanWorkerBeat(now, catalog.WorkerBeat{Worker: w.ID, Release: release[w.ID]}, workers, tasks)
			release[w.ID] = p.Excess
			for i := range tasks {
				id := tasks[i].TaskID
				switch {
				case slices.Contains(p.Release, id):
					tasks[i].Owner = ""
				case slices.Contains(p.Claim, id):
					tasks[i].Owner, tasks[i].LeaseUntil = w.ID, until
				}
			}
		}
		_ = round
	}
	per := map[string]int{}
	perConn := map[string]map[string]int{}
	for _, tl := range tasks {
		if tl.Owner == "" {
			t.Fatalf("task %v unheld after six rounds", tl.TaskID)
		}
		per[tl.Owner]++
		if perConn[tl.Connector] == nil {
			perConn[tl.Connector] = map[string]int{}
		}
		perConn[tl.Connector][tl.Owner]++
	}
	if fmt.Sprint(per) != "map[w1:5 w2:4 w3:4]" {
		t.Errorf("totals %v", per)
	}
	for c, m := range perConn {
		lo, hi := 99, 0
		for _, w := range workers {
			lo, hi = min(lo, m[w.ID]), max(hi, m[w.ID])
		}
		if hi-lo > 1 {
			t.Errorf("connector %s spread %v", c, m)
		}
	}
}

// TestCheckSources: the flush's fence rule, the later request winning a partition, and
// refusals with their messages.
func TestCheckSources(t *testing.T) {
	f := catalog.TaskFence{Connector: "c", Task: 0, Generation: 5}
	req := func(fence catalog.TaskFence, part, off string) catalog.Request {
		return catalog.Request{Batches: []catalog.Batch{{TopicID: 1, Partition: 0, Records: 1, Len: 10}},
			Source: &catalog.SourceCommit{Fence: fence, Offsets: []catalog.SourceOffset{{Partition: part, Offset: off}}}}
	}
	seg := catalog.Segment{Key: "k", Size: 100, Requests: []catalog.Request{
		req(f, `{"f":"a"}`, `{"p":1}`),
		req(catalog.TaskFence{Connector: "c", Task: 0, Generation: 4}, `{"f":"a"}`, `{"p":2}`),
		req(catalog.TaskFence{Connector: "c", Task: 9, Generation: 5}, `{"f":"a"}`, `{"p":3}`),
		req(f, `{"f":"a"}`, `{"p":4}`),
		req(f, `{"f": "b"}`, `{"p":5}`),
	}}
	for i := range seg.Requests {
		seg.Requests[i].Batches[0].Pos = int64(10 * i)
	}
	p, err := PlanSegment(seg)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Fences(); !slices.Equal(got, []catalog.TaskID{{Connector: "c", Task: 0}, {Connector: "c", Task: 9}}) {
		t.Fatalf("fences %v", got)
	}
	sc := p.CheckSources(make([]error, 5), map[catalog.TaskID]int64{{Connector: "c", Task: 0}: 5})
	if sc.Errs[0] != nil || sc.Errs[3] != nil {
		t.Fatalf("current fences refused: %v %v", sc.Errs[0], sc.Errs[3])
	}
	if want := "stale connector task generation: connector c task 0 runs at generation 5, not 4"; sc.Errs[1] == nil || !strings.Contains(sc.Errs[1].Error(), want) {
		t.Fatalf("stale: %v", sc.Errs[1])
	}
	if want := "connector c has no task 9"; !errors.Is(sc.Errs[2], catalog.ErrStaleGeneration) || !strings.Contains(sc.Errs[2].Error(), want) {
		t.Fatalf("unknown task: %v", sc.Errs[2])
	}
	if !errors.Is(sc.Errs[4], catalog.ErrInvalidConnector) {
		t.Fatalf("a partition not in canonical form: %v", sc.Errs[4])
	}
	results := make([]catalog.Result, 5)
	for i, e := range sc.Errs {
		results[i].Err = e
	}
	rows := sc.Rows(results)
	if len(rows) != 1 || rows[0].Offset != `{"p":4}` {
		t.Fatalf("rows %+v: want the later of the two accepted requests", rows)
	}
	results[3].Duplicate = true
	if rows := sc.Rows(results); len(rows) != 1 || rows[0].Offset != `{"p":1}` {
		t.Fatalf("rows %+v: a duplicate stores nothing", rows)
	}
}

func TestCanonicalJSONObject(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":{"d":2,"c":[3,{"f":1.50,"e":null}]}}`, `{"a":{"c":[3,{"e":null,"f":1.50}],"d":2},"b":1}`},
		{` { "x" : "<&>" } `, `{"x":"<&>"}`},
		{`{"big":123456789012345678901234567890}`, `{"big":123456789012345678901234567890}`},
	} {
		got, err := catalog.CanonicalJSONObject([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[1]`, `"s"`, `{"a":1} {"b":2}`, `{`, ``, `null`} {
		if _, err := catalog.CanonicalJSONObject([]byte(bad)); !errors.Is(err, catalog.ErrInvalidConnector) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzCanonicalJSONObject(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"b":[1,2,{"c":null}],"a":"x"}`, `{`, `[]`, `{"a":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := catalog.CanonicalJSONObject(b)
		if err != nil {
			return
		}
		again, err := catalog.CanonicalJSONObject([]byte(c))
		if err != nil || again != c {
			t.Fatalf("canonical form %q is not stable: %q %v", c, again, err)
		}
	})
}
