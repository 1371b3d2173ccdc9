package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// streamsGroup drives members of a Streams-assignor group through heartbeats until
// every partition is at its target: each member reports its active tasks caught up
// (lag 0) and its standbys at lag behind.
type streamsGroup struct {
	t        *testing.T
	st       *GroupState
	now      time.Time
	topics   map[string]TopicMeta
	epochs   map[string]int32
	active   map[string][]int32 // member → partitions of "in" it owns
	standbys map[string][]int32 // member → standby partitions of "in"
	lag      int64              // reported lag of every standby
}

func newStreamsGroup(t *testing.T, partitions int32) *streamsGroup {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &streamsGroup{t: t, st: NewGroupState("app", catalog.AssignorStreams, now), now: now,
		topics: map[string]TopicMeta{"in": {ID: 1, Name: "in", Partitions: partitions}, "rep": {ID: 2, Name: "rep", Partitions: partitions}},
		epochs: map[string]int32{}, active: map[string][]int32{}, standbys: map[string][]int32{}}
}

func (g *streamsGroup) heartbeat(id string) {
	g.t.Helper()
	hb := catalog.Heartbeat{Group: "app", MemberID: id, MemberEpoch: g.epochs[id], SessionTimeout: time.Minute}
	if g.epochs[id] == 0 {
		hb.Topics, hb.Assignor, hb.StandbyReplicas = []string{"in", "rep"}, catalog.AssignorStreams, 1
	} else {
		hb.Owned = []catalog.TopicPartitions{{Topic: "in", Partitions: g.active[id]}, {Topic: "rep", Partitions: g.active[id]}}
		hb.TaskLags = []catalog.TaskLag{}
		for _, p := range g.active[id] {
			hb.TaskLags = append(hb.TaskLags, catalog.TaskLag{Topic: "in", Partition: p})
		}
		for _, p := range g.standbys[id] {
			hb.TaskLags = append(hb.TaskLags, catalog.TaskLag{Topic: "in", Partition: p, Lag: g.lag})
		}
	}
	res, err := ApplyHeartbeat(g.st, g.now, hb, g.topics)
	if err != nil {
		g.t.Fatalf("heartbeat of %s: %v", id, err)
	}
	g.epochs[id] = res.MemberEpoch
	g.active[id], g.standbys[id] = nil, nil
	var in, rep []int32
	for _, a := range res.Assignment {
		switch a.Topic {
		case "in":
			in = a.Partitions
		case "rep":
			rep = a.Partitions
		}
	}
	if !slices.Equal(in, rep) {
		g.t.Fatalf("%s: in %v and rep %v: a task's co-partitioned topics split", id, in, rep)
	}
	g.active[id] = in
	for _, s := range res.Standbys {
		if s.Topic == "in" {
			g.standbys[id] = s.Partitions
		}
	}
}

// settle heartbeats every member in turn until no partition waits to move.
func (g *streamsGroup) settle(members ...string) {
	g.t.Helper()
	for range 10 {
		for _, id := range members {
			g.heartbeat(id)
		}
		if g.st.State(g.now) == catalog.GroupStable {
			for _, id := range members { // the answers after the last grant
				g.heartbeat(id)
			}
			return
		}
	}
	g.t.Fatalf("group not stable after 10 rounds")
}

// check asserts every task has one active and one standby, never on one member, and
// both balanced over members.
func (g *streamsGroup) check(members ...string) {
	g.t.Helper()
	where := map[int32]string{}
	sb := map[int32]string{}
	for _, id := range members {
		for _, p := range g.active[id] {
			where[p] = id
		}
		for _, p := range g.standbys[id] {
			if sb[p] != "" {
				g.t.Errorf("task %d: standbys on %s and %s, want one", p, sb[p], id)
			}
			sb[p] = id
		}
	}
	n := g.topics["in"].Partitions
	for p := range n {
		if where[p] == "" || sb[p] == "" || where[p] == sb[p] {
			g.t.Errorf("task %d: active on %q, standby on %q", p, where[p], sb[p])
		}
	}
	for _, id := range members {
		if a, s := len(g.active[id]), len(g.standbys[id]); a*len(members) < int(n)-len(members) || a*len(members) > int(n)+len(members) ||
			s*len(members) < int(n)-len(members) || s*len(members) > int(n)+len(members) {
			g.t.Errorf("%s: %d actives, %d standbys of %d tasks over %d members: unbalanced", id, a, s, n, len(members))
		}
	}
}

// TestStreamsStandbyPlacement: three members of a Streams group with one standby per
// task. Every task gets an active and a standby on another member, both balanced. When
// a member dies, each of its tasks moves to the member holding its caught-up standby
// (warm handover), and gets a new standby; with lags beyond the acceptable recovery lag
// they go by load alone (the placement stays whole and balanced). That the preference
// beats load is TestStreamsActivePlacement's.
func TestStreamsStandbyPlacement(t *testing.T) {
	for _, tc := range []struct {
		name string
		lag  int64
		warm bool
	}{
		{"caught up", 10, true},
		{"at the acceptable lag", catalog.AcceptableRecoveryLag, true},
		{"beyond the acceptable lag", catalog.AcceptableRecoveryLag + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newStreamsGroup(t, 6)
			g.lag = tc.lag
			g.settle("a", "b", "c")
			g.check("a", "b", "c")
			// Whose standby each of a's tasks is.
			warm := map[int32]string{}
			for _, id := range []string{"b", "c"} {
				for _, p := range g.standbys[id] {
					if slices.Contains(g.active["a"], p) {
						warm[p] = id
					}
				}
			}
			moved := slices.Clone(g.active["a"])
			g.st.Members["a"].ExpiresAt = g.now // a dies
			g.now = g.now.Add(time.Millisecond)
			g.settle("b", "c")
			g.check("b", "c")
			cold := 0
			for _, p := range moved {
				to := "b"
				if slices.Contains(g.active["c"], p) {
					to = "c"
				}
				if to != warm[p] {
					cold++
				}
			}
			if tc.warm && cold > 0 {
				t.Errorf("%d of a's tasks %v went to a member without their standby (standbys %v; now b %v, c %v)",
					cold, moved, warm, g.active["b"], g.active["c"])
			}
		})
	}
}

// TestStreamsActivePlacement checks the rule's parts on the assignor alone: a free task
// goes to a caught-up member before a less loaded one, a lag of -1 (no state) is not
// caught up, a kept task stays, and balancing moves a task its receiver is caught up
// on first.
func TestStreamsActivePlacement(t *testing.T) {
	in := TopicMeta{ID: 1, Name: "in", Partitions: 4}
	tp := func(p int32) catalog.TopicPartition { return catalog.TopicPartition{TopicID: 1, Partition: p} }
	lags := func(ps ...int32) []catalog.TaskLag {
		var out []catalog.TaskLag
		for _, p := range ps {
			out = append(out, catalog.TaskLag{Topic: "in", Partition: p, Lag: 3})
		}
		return out
	}
	// b holds 0, 1 and 2; 3 is free; c is caught up on 3 though a is less loaded...
	// a holds nothing, so both are least loaded: the caught-up one wins.
	members := []assignMember{{ID: "a", Topics: []string{"in"}}, {ID: "b", Topics: []string{"in"}}, {ID: "c", Topics: []string{"in"}, Lags: lags(3)}}
	got := assignStreams(members, []TopicMeta{in}, map[catalog.TopicPartition]string{tp(0): "b", tp(1): "b", tp(2): "b"})
	if got[tp(3)] != "c" {
		t.Errorf("free task 3 went to %s, want c (caught up on it)", got[tp(3)])
	}
	// Balancing takes one of b's three tasks to a: the one a is caught up on (1), not
	// the highest-numbered.
	members[0].Lags = lags(1)
	got = assignStreams(members, []TopicMeta{in}, map[catalog.TopicPartition]string{tp(0): "b", tp(1): "b", tp(2): "b", tp(3): "c"})
	if got[tp(1)] != "a" || got[tp(0)] != "b" || got[tp(2)] != "b" {
		t.Errorf("balanced to %v, want task 1 moved from b to a (a is caught up on it)", got)
	}
	// Without any state the same balance moves the highest-numbered task (2).
	members[0].Lags = nil
	got = assignStreams(members, []TopicMeta{in}, map[catalog.TopicPartition]string{tp(0): "b", tp(1): "b", tp(2): "b", tp(3): "c"})
	if got[tp(2)] != "a" {
		t.Errorf("balanced to %v, want task 2 moved from b to a", got)
	}
}
