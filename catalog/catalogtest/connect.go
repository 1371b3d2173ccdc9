package catalogtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// ConnectCatalog is what the connector suite needs: the catalog, its connectors, and
// groups (a flush may commit group and source offsets side by side).
type ConnectCatalog interface {
	catalog.Catalog
	catalog.Connect
	catalog.Groups
}

// runConnect runs the connector conformance suite. open returns a fresh catalog (its own
// database) for each subtest: workers share out every task in the catalog, so subtests
// must not see each other's.
func runConnect(t *testing.T, open func(t *testing.T) ConnectCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c ConnectCatalog)
	}{
		{"connectors/put_get_delete", testConnectorCRUD},
		{"connectors/config_change_fences_changed_tasks", testConnectorReconfigure},
		{"connectors/new_principal_fences_every_task", testConnectorNewPrincipal},
		{"workers/share_and_rebalance", testWorkerShare},
		{"workers/lease_expiry_moves_tasks", testWorkerExpiry},
		{"workers/stop_releases_and_fences", testConnectorStop},
		{"fence/flush", testFenceInFlush},
		{"fence/flush_with_group_offsets", testFenceBesideGroups},
		{"fence/offsets_only", testOffsetsOnly},
		{"offsets/alter_only_when_stopped", testAlterOffsets},
		{"tasks/report_and_restart", testReportAndRestart},
		{"connectors/topics", testConnectorTopics},
		{"tasks/metrics", testTaskMetrics},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func cfgOf(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func putConnector(t testing.TB, c catalog.Connect, name string, tasks int) catalog.Connector {
	t.Helper()
	spec := catalog.ConnectorSpec{Name: name, Type: catalog.ConnectorSource, Config: cfgOf("connector.class", "FileStreamSource", "tasks.max", fmt.Sprint(tasks))}
	for i := range tasks {
		spec.Tasks = append(spec.Tasks, cfgOf("file", fmt.Sprintf("/in/%d", i)))
	}
	conn, created, err := c.PutConnector(t.Context(), spec, false)
	if err != nil || !created {
		t.Fatalf("create connector %s: created %v, %v", name, created, err)
	}
	return conn
}

func getConnector(t testing.TB, c catalog.Connect, name string) catalog.Connector {
	t.Helper()
	conn, err := c.Connector(t.Context(), name)
	if err != nil {
		t.Fatalf("connector %s: %v", name, err)
	}
	return conn
}

func beat(t testing.TB, c catalog.Connect, worker string, lease time.Duration, release ...catalog.TaskID) catalog.WorkerAssignment {
	t.Helper()
	a, err := c.WorkerHeartbeat(t.Context(), catalog.WorkerBeat{Worker: worker, Lease: lease, Release: release})
	if err != nil {
		t.Fatalf("heartbeat of %s: %v", worker, err)
	}
	return a
}

func heldIDs(a catalog.WorkerAssignment) []string {
	var out []string
	for _, t := range a.Tasks {
		out = append(out, fmt.Sprintf("%s/%d", t.Connector, t.Task))
	}
	return out
}

// fenceOf is the fence of the task a worker holds.
func fenceOf(t testing.TB, a catalog.WorkerAssignment, conn string, task int32) catalog.TaskFence {
	t.Helper()
	for _, at := range a.Tasks {
		if at.Connector == conn && at.Task == task {
			return at.TaskFence
		}
	}
	t.Fatalf("the worker does not hold %s/%d: it holds %v", conn, task, heldIDs(a))
	return catalog.TaskFence{}
}

func testConnectorCRUD(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	b := putConnector(t, c, "b-conn", 2)
	a := putConnector(t, c, "a-conn", 1)
	if b.TargetState != catalog.StateRunning || len(b.Tasks) != 2 || b.Tasks[1].Config["file"] != "/in/1" || b.Tasks[0].Owner != "" {
		t.Fatalf("created connector: %+v", b)
	}
	if b.Tasks[0].Generation <= 0 || b.Tasks[0].Generation == b.Tasks[1].Generation || a.Tasks[0].Generation == b.Tasks[0].Generation {
		t.Fatalf("generations must be positive and never shared: %d %d %d", b.Tasks[0].Generation, b.Tasks[1].Generation, a.Tasks[0].Generation)
	}
	_, _, err := c.PutConnector(ctx, catalog.ConnectorSpec{Name: "a-conn", Type: catalog.ConnectorSource, Config: cfgOf()}, false)
	wantErr(t, "create again", err, catalog.ErrConnectorExists)
	_, _, err = c.PutConnector(ctx, catalog.ConnectorSpec{Name: "a-conn", Type: catalog.ConnectorSink, Config: cfgOf()}, true)
	wantErr(t, "a source replaced by a sink", err, catalog.ErrInvalidConnector)
	_, _, err = c.PutConnector(ctx, catalog.ConnectorSpec{Name: "no/slash", Type: catalog.ConnectorSource}, false)
	wantErr(t, "a name with a slash", err, catalog.ErrInvalidConnector)
	_, _, err = c.PutConnector(ctx, catalog.ConnectorSpec{Name: "x", Type: "both"}, false)
	wantErr(t, "a bad type", err, catalog.ErrInvalidConnector)

	all, err := c.Connectors(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "a-conn" || all[1].Name != "b-conn" || len(all[1].Tasks) != 2 {
		t.Fatalf("connectors: %+v, %v", all, err)
	}
	stopped, created, err := c.PutConnector(ctx, catalog.ConnectorSpec{Name: "c-conn", Type: catalog.ConnectorSink,
		Config: cfgOf("topics", "t"), TargetState: catalog.StateStopped, Principal: "alice", Worker: "w9"}, true)
	if err != nil || !created || stopped.TargetState != catalog.StateStopped || stopped.Principal != "alice" || stopped.Worker != "w9" || len(stopped.Tasks) != 0 {
		t.Fatalf("upsert that creates, stopped: %+v created %v, %v", stopped, created, err)
	}
	if err := c.DeleteConnector(ctx, "b-conn"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Connector(ctx, "b-conn")
	wantErr(t, "a deleted connector", err, catalog.ErrConnectorNotFound)
	wantErr(t, "delete again", c.DeleteConnector(ctx, "b-conn"), catalog.ErrConnectorNotFound)
	_, err = c.Connector(ctx, "no/such")
	wantErr(t, "an impossible name", err, catalog.ErrConnectorNotFound)
	// Re-created under its name, its tasks get generations never seen before.
	b2 := putConnector(t, c, "b-conn", 2)
	if b2.Tasks[0].Generation <= b.Tasks[1].Generation {
		t.Fatalf("re-created task generation %d; the deleted connector's were %d and %d", b2.Tasks[0].Generation, b.Tasks[0].Generation, b.Tasks[1].Generation)
	}
}

func testConnectorReconfigure(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	old := putConnector(t, c, "conn", 3)
	a := beat(t, c, "w1", time.Minute)
	if len(a.Tasks) != 3 {
		t.Fatalf("one worker holds %v, want all 3 tasks", heldIDs(a))
	}
	spec := catalog.ConnectorSpec{Name: "conn", Type: catalog.ConnectorSource, Config: cfgOf("tasks.max", "2"),
		Tasks: []map[string]string{cfgOf("file", "/in/0"), cfgOf("file", "/in/other")}, Worker: "w2"}
	conn, created, err := c.PutConnector(ctx, spec, true)
	if err != nil || created {
		t.Fatalf("reconfigure: created %v, %v", created, err)
	}
	if len(conn.Tasks) != 2 || conn.Config["tasks.max"] != "2" || conn.Worker != "w2" {
		t.Fatalf("reconfigured: %+v", conn)
	}
	held := fenceOf(t, a, "conn", 0)
	if conn.Tasks[0].Generation != held.Generation {
		t.Fatalf("task 0's config did not change, yet its generation moved from %d to %d", held.Generation, conn.Tasks[0].Generation)
	}
	if conn.Tasks[1].Generation == fenceOf(t, a, "conn", 1).Generation || conn.Tasks[1].Owner != "w1" {
		t.Fatalf("task 1's config changed: want a new generation, same owner; got %+v (was %d)", conn.Tasks[1], old.Tasks[1].Generation)
	}
	a = beat(t, c, "w1", time.Minute)
	if got := heldIDs(a); !slices.Equal(got, []string{"conn/0", "conn/1"}) {
		t.Fatalf("after the reconfiguration the worker holds %v", got)
	}
	if fenceOf(t, a, "conn", 1).Generation != conn.Tasks[1].Generation || a.Tasks[1].Config["file"] != "/in/other" {
		t.Fatalf("the worker's view of task 1: %+v", a.Tasks[1])
	}
}

// testConnectorNewPrincipal: a config stored by another principal makes the connector
// run as it: every task gets a new generation (its instances ran as the old one), even
// those whose config did not change; stored again by the same principal, nothing moves.
func testConnectorNewPrincipal(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	spec := catalog.ConnectorSpec{Name: "conn", Type: catalog.ConnectorSource, Config: cfgOf("a", "1"),
		Tasks: []map[string]string{cfgOf("file", "/in/0"), cfgOf("file", "/in/1")}, Principal: "User:alice"}
	if _, _, err := c.PutConnector(ctx, spec, false); err != nil {
		t.Fatal(err)
	}
	a := beat(t, c, "w1", time.Minute)
	if at := a.Tasks[0]; at.Principal != "User:alice" {
		t.Fatalf("assigned task runs as %q, want User:alice", at.Principal)
	}
	old := getConnector(t, c, "conn") // with the generations the worker's claim gave
	same, _, err := c.PutConnector(ctx, spec, true)
	if err != nil || same.Principal != "User:alice" || same.Tasks[0].Generation != old.Tasks[0].Generation || same.Tasks[1].Generation != old.Tasks[1].Generation {
		t.Fatalf("stored again as the same principal: %+v, %v (generations were %d, %d)", same, err, old.Tasks[0].Generation, old.Tasks[1].Generation)
	}
	spec.Principal = "User:bob"
	conn, created, err := c.PutConnector(ctx, spec, true)
	if err != nil || created || conn.Principal != "User:bob" {
		t.Fatalf("stored by bob: %+v, created %v, %v", conn, created, err)
	}
	for i, tk := range conn.Tasks {
		if tk.Generation == old.Tasks[i].Generation {
			t.Fatalf("task %d kept generation %d under a new principal", i, tk.Generation)
		}
	}
	if got := getConnector(t, c, "conn").Principal; got != "User:bob" {
		t.Fatalf("read back: principal %q", got)
	}
	a = beat(t, c, "w1", time.Minute)
	for _, at := range a.Tasks {
		if at.Principal != "User:bob" {
			t.Fatalf("task %d assigned to run as %q, want User:bob", at.Task, at.Principal)
		}
	}
	wantFence(t, "the old instance's report", c.ReportTaskState(ctx, catalog.TaskFence{Connector: "conn", Task: 0, Generation: old.Tasks[0].Generation}, "w1", catalog.StateRunning, ""), catalog.ErrStaleGeneration)
}

func testWorkerShare(t *testing.T, c ConnectCatalog) {
	putConnector(t, c, "a", 3)
	putConnector(t, c, "b", 1)
	a1 := beat(t, c, "w1", time.Minute)
	if got := heldIDs(a1); len(got) != 4 || a1.Workers != 1 || len(a1.Excess) != 0 {
		t.Fatalf("the only worker holds %v (workers %d, excess %v), want all 4", got, a1.Workers, a1.Excess)
	}
	a2 := beat(t, c, "w2", time.Minute)
	if len(a2.Tasks) != 0 || a2.Workers != 2 {
		t.Fatalf("w2 took %v while w1 holds everything (workers %d)", heldIDs(a2), a2.Workers)
	}
	// Shared connector by connector: a's 3 tasks 2 + 1 (w1 gets the extra), then b's
	// one task goes on to w2. w1 still holds all four: it stops the excess first.
	a1 = beat(t, c, "w1", time.Minute)
	want := []catalog.TaskID{{Connector: "a", Task: 2}, {Connector: "b", Task: 0}}
	if !slices.Equal(a1.Excess, want) || len(a1.Tasks) != 4 {
		t.Fatalf("w1: excess %v holding %v; want excess %v, still holding 4", a1.Excess, heldIDs(a1), want)
	}
	gens := map[string]int64{"a/2": fenceOf(t, a1, "a", 2).Generation, "b/0": fenceOf(t, a1, "b", 0).Generation}
	a1 = beat(t, c, "w1", time.Minute, a1.Excess...)
	if got := heldIDs(a1); !slices.Equal(got, []string{"a/0", "a/1"}) || len(a1.Excess) != 0 {
		t.Fatalf("w1 after releasing: %v excess %v", got, a1.Excess)
	}
	a2 = beat(t, c, "w2", time.Minute)
	if got := heldIDs(a2); !slices.Equal(got, []string{"a/2", "b/0"}) {
		t.Fatalf("w2 claimed %v, want a/2 and b/0", got)
	}
	for _, at := range a2.Tasks {
		if old := gens[fmt.Sprintf("%s/%d", at.Connector, at.Task)]; at.Generation <= old {
			t.Fatalf("%s/%d claimed at generation %d, not above its old %d", at.Connector, at.Task, at.Generation, old)
		}
		if at.Type != catalog.ConnectorSource || at.TargetState != catalog.StateRunning || at.ConnectorConfig["connector.class"] != "FileStreamSource" {
			t.Fatalf("assigned task: %+v", at)
		}
	}
	// Stable: nobody moves again.
	if a1, a2 = beat(t, c, "w1", time.Minute), beat(t, c, "w2", time.Minute); len(a1.Tasks) != 2 || len(a2.Tasks) != 2 || len(a1.Excess)+len(a2.Excess) != 0 {
		t.Fatalf("not stable: w1 %v w2 %v", heldIDs(a1), heldIDs(a2))
	}
	// Leaving gives everything back, and the other takes it all.
	if _, err := c.WorkerHeartbeat(t.Context(), catalog.WorkerBeat{Worker: "w2", Leave: true}); err != nil {
		t.Fatal(err)
	}
	if a1 = beat(t, c, "w1", time.Minute); len(a1.Tasks) != 4 || a1.Workers != 1 {
		t.Fatalf("after w2 left, w1 holds %v (workers %d)", heldIDs(a1), a1.Workers)
	}
}

func testWorkerExpiry(t *testing.T, c ConnectCatalog) {
	putConnector(t, c, "a", 2)
	lease := 500 * time.Millisecond
	a1 := beat(t, c, "w1", lease)
	old := fenceOf(t, a1, "a", 0)
	a2 := beat(t, c, "w2", time.Minute)
	if len(a2.Tasks) != 0 {
		t.Fatalf("w2 took %v from a live worker", heldIDs(a2))
	}
	time.Sleep(lease + 200*time.Millisecond)
	a2 = beat(t, c, "w2", time.Minute)
	if got := heldIDs(a2); !slices.Equal(got, []string{"a/0", "a/1"}) || a2.Workers != 1 {
		t.Fatalf("after w1's lease ended w2 holds %v (workers %d)", got, a2.Workers)
	}
	now := fenceOf(t, a2, "a", 0)
	if now.Generation <= old.Generation {
		t.Fatalf("task moved without a new generation: %d then %d", old.Generation, now.Generation)
	}
	// The old instance is fenced everywhere it writes.
	err := c.ReportTaskState(t.Context(), old, "w1", catalog.StateRunning, "")
	wantFence(t, "the old owner's status", err, engine.FenceRefusal(old, engine.RefusedStaleGeneration, now.Generation))
	err = c.CommitSourceOffsets(t.Context(), catalog.SourceCommit{Fence: old, Offsets: []catalog.SourceOffset{{Partition: `{"f":"x"}`, Offset: `{"pos":1}`}}})
	wantFence(t, "the old owner's offsets", err, engine.FenceRefusal(old, engine.RefusedStaleGeneration, now.Generation))
	// w1 comes back: it holds nothing of what moved.
	if a1 = beat(t, c, "w1", lease); len(a1.Tasks) != 0 {
		t.Fatalf("the returning worker still holds %v", heldIDs(a1))
	}
}

func wantFence(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, catalog.ErrStaleGeneration) || !strings.Contains(err.Error(), want.Error()) {
		t.Fatalf("%s: %v; want %q", what, err, want)
	}
}

func testConnectorStop(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	putConnector(t, c, "a", 2)
	a := beat(t, c, "w1", time.Minute)
	held := fenceOf(t, a, "a", 1)
	if err := c.SetTargetState(ctx, "a", catalog.StatePaused); err != nil {
		t.Fatal(err)
	}
	if a = beat(t, c, "w1", time.Minute); len(a.Tasks) != 2 || a.Tasks[0].TargetState != catalog.StatePaused || fenceOf(t, a, "a", 1) != held {
		t.Fatalf("paused: the worker keeps its tasks at their generations, told to pause: %+v", a.Tasks)
	}
	if err := c.SetTargetState(ctx, "a", catalog.StateStopped); err != nil {
		t.Fatal(err)
	}
	conn := getConnector(t, c, "a")
	if conn.TargetState != catalog.StateStopped || conn.Tasks[1].Owner != "" || conn.Tasks[1].Generation == held.Generation {
		t.Fatalf("stopped: tasks released at a new generation: %+v", conn.Tasks)
	}
	err := c.CommitSourceOffsets(ctx, catalog.SourceCommit{Fence: held, Offsets: []catalog.SourceOffset{{Partition: `{"f":"x"}`, Offset: `{"pos":1}`}}})
	wantFence(t, "an instance of a stopped connector", err, engine.FenceRefusal(held, engine.RefusedStaleGeneration, conn.Tasks[1].Generation))
	if a = beat(t, c, "w1", time.Minute); len(a.Tasks) != 0 {
		t.Fatalf("a stopped connector's tasks were claimed: %v", heldIDs(a))
	}
	if err := c.SetTargetState(ctx, "a", catalog.StateRunning); err != nil {
		t.Fatal(err)
	}
	if a = beat(t, c, "w1", time.Minute); len(a.Tasks) != 2 {
		t.Fatalf("resumed: the worker holds %v", heldIDs(a))
	}
	wantErr(t, "an unknown state", c.SetTargetState(ctx, "a", "SLEEPING"), catalog.ErrInvalidConnector)
	wantErr(t, "an unknown connector", c.SetTargetState(ctx, "zz", catalog.StatePaused), catalog.ErrConnectorNotFound)
}

// sourceReq is a one-batch request to tp/0 committing offsets under f.
func sourceReq(seg *catalog.Segment, ri int, f catalog.TaskFence, offs ...string) {
	sc := &catalog.SourceCommit{Fence: f}
	for i := 0; i+1 < len(offs); i += 2 {
		sc.Offsets = append(sc.Offsets, catalog.SourceOffset{Partition: offs[i], Offset: offs[i+1]})
	}
	seg.Requests[ri].Source = sc
}

func offsetMap(t testing.TB, c catalog.Connect, name string) map[string]string {
	t.Helper()
	offs, err := c.ConnectorOffsets(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, o := range offs {
		m[o.Partition] = o.Offset
	}
	return m
}

func testFenceInFlush(t *testing.T, c ConnectCatalog) {
	tp := SeedTopic(t, c, "src", 1, nil)
	putConnector(t, c, "src", 2)
	a := beat(t, c, "w1", time.Minute)
	f0, f1 := fenceOf(t, a, "src", 0), fenceOf(t, a, "src", 1)
	one := Req(B{TopicID: tp.ID, Partition: 0, Records: 1})

	// Accepted: records and offsets together; two requests of one flush setting one
	// partition: the later wins.
	seg := Flush(NewKey(t), one, one, one)
	sourceReq(&seg, 0, f0, `{"file":"a"}`, `{"position":10}`, `{"file":"b"}`, `{"position":5}`)
	sourceReq(&seg, 1, f1, `{"file":"c"}`, `{"position":7}`)
	sourceReq(&seg, 2, f0, `{"file":"a"}`, `{"position":20}`)
	res := MustCommit(t, c, seg)
	if res[0].BaseOffsets[0] != 0 || res[2].BaseOffsets[0] != 2 {
		t.Fatalf("offsets %v", offsets(res))
	}
	want := map[string]string{`{"file":"a"}`: `{"position":20}`, `{"file":"b"}`: `{"position":5}`, `{"file":"c"}`: `{"position":7}`}
	if got := offsetMap(t, c, "src"); !mapsEqual(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}

	// Refused, each beside a plain request that commits; nothing of theirs stored.
	stale := f0
	stale.Generation = f0.Generation - 1
	gone := catalog.TaskFence{Connector: "src", Task: 7, Generation: f0.Generation}
	for _, tc := range []struct {
		name string
		f    catalog.TaskFence
		part string
		want error // a fence refusal: the message is FenceRefusal's
		is   error
	}{
		{"stale generation", stale, `{"file":"a"}`, engine.FenceRefusal(stale, engine.RefusedStaleGeneration, f0.Generation), catalog.ErrStaleGeneration},
		{"a generation from the future", catalog.TaskFence{Connector: "src", Task: 0, Generation: f1.Generation + 1000}, `{"file":"a"}`,
			engine.FenceRefusal(catalog.TaskFence{Connector: "src", Task: 0, Generation: f1.Generation + 1000}, engine.RefusedStaleGeneration, f0.Generation), catalog.ErrStaleGeneration},
		{"unknown task", gone, `{"file":"a"}`, engine.FenceRefusal(gone, engine.RefusedUnknownTask, 0), catalog.ErrStaleGeneration},
		{"unknown connector", catalog.TaskFence{Connector: "nope", Task: 0, Generation: 1}, `{"file":"a"}`,
			engine.FenceRefusal(catalog.TaskFence{Connector: "nope", Task: 0, Generation: 1}, engine.RefusedUnknownTask, 0), catalog.ErrStaleGeneration},
		{"a partition not in canonical form", f0, `{ "file": "a" }`, nil, catalog.ErrInvalidConnector},
	} {
		before := Partition(t, c, tp.ID, 0).HighWatermark
		seg := Flush(NewKey(t), one, one)
		sourceReq(&seg, 0, tc.f, tc.part, `{"position":99}`)
		res := commitOne(t, c, seg)
		if res[1].Err != nil || Partition(t, c, tp.ID, 0).HighWatermark != before+1 {
			t.Fatalf("%s: the plain request beside: %v; high watermark %d → %d", tc.name, res[1].Err, before, Partition(t, c, tp.ID, 0).HighWatermark)
		}
		if !errors.Is(res[0].Err, tc.is) || (tc.want != nil && !strings.Contains(res[0].Err.Error(), tc.want.Error())) {
			t.Fatalf("%s: %v; want %v (%v)", tc.name, res[0].Err, tc.is, tc.want)
		}
		if got := offsetMap(t, c, "src"); !mapsEqual(got, want) {
			t.Fatalf("%s: offsets moved to %v", tc.name, got)
		}
	}

	// A request refused for its records (a deleted topic) stores none of its offsets.
	gone2 := SeedTopic(t, c, "gone", 1, nil)
	if err := c.DeleteTopic(t.Context(), gone2.Name); err != nil {
		t.Fatal(err)
	}
	seg = Flush(NewKey(t), Req(B{TopicID: gone2.ID, Partition: 0, Records: 1}))
	sourceReq(&seg, 0, f0, `{"file":"a"}`, `{"position":99}`)
	if res := commitOne(t, c, seg); !errors.Is(res[0].Err, catalog.ErrTopicNotFound) {
		t.Fatalf("records to a deleted topic: %v", res[0].Err)
	}
	if got := offsetMap(t, c, "src"); !mapsEqual(got, want) {
		t.Fatalf("a refused request's offsets were stored: %v", got)
	}

	// One request may not carry both kinds of offsets.
	seg = Flush(NewKey(t), one)
	sourceReq(&seg, 0, f0, `{"file":"a"}`, `{"position":1}`)
	seg.Requests[0].GroupOffsets = &catalog.OffsetCommit{Group: "g", Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 0}}}
	_, err := c.Commit(t.Context(), seg)
	wantErr(t, "group and source offsets in one request", err, catalog.ErrInvalidSegment)

	// After the task moves (a restart gives it a new generation), the old fence fails.
	conn, err := c.RestartTasks(t.Context(), "src", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	seg = Flush(NewKey(t), one)
	sourceReq(&seg, 0, f0, `{"file":"a"}`, `{"position":100}`)
	res = commitOne(t, c, seg)
	wantFence(t, "after a restart", res[0].Err, engine.FenceRefusal(f0, engine.RefusedStaleGeneration, conn.Tasks[0].Generation))
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// testFenceBesideGroups commits a flush holding a request with group offsets and one
// with source offsets (on Postgres: both functions' checks in one statement).
func testFenceBesideGroups(t *testing.T, c ConnectCatalog) {
	tp := SeedTopic(t, c, "mixed", 1, nil)
	putConnector(t, c, "src", 1)
	f := fenceOf(t, beat(t, c, "w1", time.Minute), "src", 0)
	one := Req(B{TopicID: tp.ID, Partition: 0, Records: 1})
	g := Name(t, "g")
	stale := f
	stale.Generation--
	seg := Flush(NewKey(t), one, one, one)
	seg.Requests[0].GroupOffsets = &catalog.OffsetCommit{Group: g, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 0}}}
	sourceReq(&seg, 1, f, `{"file":"a"}`, `{"position":1}`)
	sourceReq(&seg, 2, stale, `{"file":"b"}`, `{"position":1}`)
	res := commitOne(t, c, seg)
	if res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("group offsets: %v; source offsets: %v", res[0].Err, res[1].Err)
	}
	wantFence(t, "the stale request", res[2].Err, engine.FenceRefusal(stale, engine.RefusedStaleGeneration, f.Generation))
	if got := offsetMap(t, c, "src"); !mapsEqual(got, map[string]string{`{"file":"a"}`: `{"position":1}`}) {
		t.Fatalf("source offsets %v", got)
	}
	if offs := groupOffsets(t, c, g); len(offs) != 1 || offs[0].Offset != 0 {
		t.Fatalf("group offsets %+v", offs)
	}
}

func testOffsetsOnly(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	putConnector(t, c, "src", 1)
	f := fenceOf(t, beat(t, c, "w1", time.Minute), "src", 0)
	offs, err := c.SourceOffsets(ctx, f)
	if err != nil || len(offs) != 0 {
		t.Fatalf("a new connector's offsets: %v, %v", offs, err)
	}
	hb := catalog.SourceCommit{Fence: f, Offsets: []catalog.SourceOffset{{Partition: `{"slot":"s"}`, Offset: `{"lsn":"0/16B3748"}`}}}
	if err := c.CommitSourceOffsets(ctx, hb); err != nil {
		t.Fatal(err)
	}
	hb.Offsets[0].Offset = `{"lsn":"0/16B3800"}`
	if err := c.CommitSourceOffsets(ctx, hb); err != nil {
		t.Fatal(err)
	}
	offs, err = c.SourceOffsets(ctx, f)
	if err != nil || len(offs) != 1 || offs[0].Offset != `{"lsn":"0/16B3800"}` {
		t.Fatalf("after two heartbeats: %v, %v", offs, err)
	}
	stale := f
	stale.Generation--
	_, err = c.SourceOffsets(ctx, stale)
	wantFence(t, "a stale instance reading offsets", err, engine.FenceRefusal(stale, engine.RefusedStaleGeneration, f.Generation))
	hb.Fence = stale
	wantFence(t, "a stale heartbeat", c.CommitSourceOffsets(ctx, hb), engine.FenceRefusal(stale, engine.RefusedStaleGeneration, f.Generation))
	hb.Fence, hb.Offsets = f, nil
	wantErr(t, "a heartbeat without offsets", c.CommitSourceOffsets(ctx, hb), catalog.ErrInvalidConnector)
	hb.Offsets = []catalog.SourceOffset{{Partition: `["not","an","object"]`, Offset: `{}`}}
	wantErr(t, "a partition that is not an object", c.CommitSourceOffsets(ctx, hb), catalog.ErrInvalidConnector)
	if got := offsetMap(t, c, "src"); !mapsEqual(got, map[string]string{`{"slot":"s"}`: `{"lsn":"0/16B3800"}`}) {
		t.Fatalf("refusals changed the offsets: %v", got)
	}
}

func testAlterOffsets(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	putConnector(t, c, "src", 1)
	f := fenceOf(t, beat(t, c, "w1", time.Minute), "src", 0)
	set := func(p, o string) catalog.SourceOffset { return catalog.SourceOffset{Partition: p, Offset: o} }
	if err := c.CommitSourceOffsets(ctx, catalog.SourceCommit{Fence: f, Offsets: []catalog.SourceOffset{set(`{"f":"a"}`, `{"pos":1}`), set(`{"f":"b"}`, `{"pos":2}`)}}); err != nil {
		t.Fatal(err)
	}
	err := c.AlterConnectorOffsets(ctx, "src", []catalog.SourceOffset{set(`{"f":"a"}`, `{"pos":0}`)}, false)
	wantErr(t, "altering a running connector's offsets", err, catalog.ErrConnectorNotStopped)
	wantErr(t, "resetting a running connector's offsets", c.AlterConnectorOffsets(ctx, "src", nil, true), catalog.ErrConnectorNotStopped)
	if err := c.SetTargetState(ctx, "src", catalog.StateStopped); err != nil {
		t.Fatal(err)
	}
	before := getConnector(t, c, "src").Tasks[0].Generation
	if err := c.AlterConnectorOffsets(ctx, "src", []catalog.SourceOffset{set(`{"f":"a"}`, `{"pos":0}`), set(`{"f":"b"}`, ""), set(`{"f":"c"}`, `{"pos":3}`)}, false); err != nil {
		t.Fatal(err)
	}
	if got := offsetMap(t, c, "src"); !mapsEqual(got, map[string]string{`{"f":"a"}`: `{"pos":0}`, `{"f":"c"}`: `{"pos":3}`}) {
		t.Fatalf("altered offsets: %v", got)
	}
	if after := getConnector(t, c, "src").Tasks[0].Generation; after == before {
		t.Fatalf("an offsets edit left the generation at %d", after)
	}
	wantErr(t, "a partition twice", c.AlterConnectorOffsets(ctx, "src", []catalog.SourceOffset{set(`{"f":"a"}`, `{}`), set(`{"f":"a"}`, `{}`)}, false), catalog.ErrInvalidConnector)
	wantErr(t, "an offset that is not an object", c.AlterConnectorOffsets(ctx, "src", []catalog.SourceOffset{set(`{"f":"a"}`, `7`)}, false), catalog.ErrInvalidConnector)
	if err := c.AlterConnectorOffsets(ctx, "src", nil, true); err != nil {
		t.Fatal(err)
	}
	if got := offsetMap(t, c, "src"); len(got) != 0 {
		t.Fatalf("after a reset: %v", got)
	}
	wantErr(t, "an unknown connector", c.AlterConnectorOffsets(ctx, "zz", nil, true), catalog.ErrConnectorNotFound)
	// Offsets outlive their connector, as Kafka Connect's do.
	if err := c.AlterConnectorOffsets(ctx, "src", []catalog.SourceOffset{set(`{"f":"a"}`, `{"pos":5}`)}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteConnector(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if got := offsetMap(t, c, "src"); len(got) != 1 {
		t.Fatalf("a deleted connector's offsets: %v", got)
	}
}

func testReportAndRestart(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	putConnector(t, c, "src", 3)
	a := beat(t, c, "w1", time.Minute)
	for i, st := range []string{catalog.StateRunning, catalog.TaskFailed, catalog.TaskFailed} {
		if err := c.ReportTaskState(ctx, fenceOf(t, a, "src", int32(i)), "w1", st, fmt.Sprintf("trace %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "an unknown state", c.ReportTaskState(ctx, fenceOf(t, a, "src", 0), "w1", "DANCING", ""), catalog.ErrInvalidConnector)
	conn := getConnector(t, c, "src")
	if conn.Tasks[1].State != catalog.TaskFailed || conn.Tasks[1].Trace != "trace 1" || conn.Tasks[1].Worker != "w1" {
		t.Fatalf("reported: %+v", conn.Tasks[1])
	}
	conn, err := c.RestartTasks(ctx, "src", -1, true)
	if err != nil {
		t.Fatal(err)
	}
	if conn.Tasks[0].Generation != fenceOf(t, a, "src", 0).Generation || conn.Tasks[0].State != catalog.StateRunning {
		t.Fatalf("onlyFailed restarted a running task: %+v", conn.Tasks[0])
	}
	for _, i := range []int{1, 2} {
		if conn.Tasks[i].Generation == fenceOf(t, a, "src", int32(i)).Generation || conn.Tasks[i].State != catalog.TaskRestarting || conn.Tasks[i].Owner != "w1" {
			t.Fatalf("restarted task %d: %+v", i, conn.Tasks[i])
		}
	}
	err = c.ReportTaskState(ctx, fenceOf(t, a, "src", 1), "w1", catalog.StateRunning, "")
	wantFence(t, "the restarted task's old instance", err, engine.FenceRefusal(fenceOf(t, a, "src", 1), engine.RefusedStaleGeneration, conn.Tasks[1].Generation))
	_, err = c.RestartTasks(ctx, "src", 9, false)
	wantErr(t, "an unknown task", err, catalog.ErrTaskNotFound)
	long := strings.Repeat("x", catalog.MaxTrace+100)
	a = beat(t, c, "w1", time.Minute)
	if err := c.ReportTaskState(ctx, fenceOf(t, a, "src", 2), "w1", catalog.TaskFailed, long); err != nil {
		t.Fatal(err)
	}
	if tr := getConnector(t, c, "src").Tasks[2].Trace; len(tr) != catalog.MaxTrace {
		t.Fatalf("a long trace kept %d bytes, want %d", len(tr), catalog.MaxTrace)
	}
}

func testConnectorTopics(t *testing.T, c ConnectCatalog) {
	ctx := t.Context()
	putConnector(t, c, "src", 1)
	if err := c.AddConnectorTopics(ctx, "src", []string{"b", "a"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddConnectorTopics(ctx, "src", []string{"a", "c"}); err != nil {
		t.Fatal(err)
	}
	if got := getConnector(t, c, "src").Topics; !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("topics %v", got)
	}
	if err := c.ResetConnectorTopics(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if got := getConnector(t, c, "src").Topics; len(got) != 0 {
		t.Fatalf("topics after a reset: %v", got)
	}
	wantErr(t, "an unknown connector", c.ResetConnectorTopics(ctx, "zz"), catalog.ErrConnectorNotFound)
	wantErr(t, "an unknown connector", c.AddConnectorTopics(ctx, "zz", []string{"a"}), catalog.ErrConnectorNotFound)
}
