package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// render shows an assignment as member → "topic/partition" list, sorted, for known
// answers written by hand.
func render(a map[catalog.TopicPartition]string, names map[int64]string) map[string]string {
	by := map[string][]string{}
	for tp, m := range a {
		by[m] = append(by[m], fmt.Sprintf("%s%d", names[tp.TopicID], tp.Partition))
	}
	out := map[string]string{}
	for m, l := range by {
		slices.Sort(l)
		out[m] = fmt.Sprint(l)
	}
	return out
}

func TestAssignors(t *testing.T) {
	x := TopicMeta{ID: 1, Name: "x", Partitions: 4}
	y := TopicMeta{ID: 2, Name: "y", Partitions: 4}
	z := TopicMeta{ID: 3, Name: "z", Partitions: 3}
	names := map[int64]string{1: "x", 2: "y", 3: "z"}
	both := []string{"x", "y"}
	for _, tc := range []struct {
		name     string
		assignor string
		members  []assignMember
		topics   []TopicMeta
		current  map[catalog.TopicPartition]string
		want     map[string]string
	}{
		{"range co-partitions", catalog.AssignorRange,
			[]assignMember{{ID: "b", Topics: both}, {ID: "a", Topics: both}, {ID: "c", Topics: both}}, []TopicMeta{y, x}, nil,
			map[string]string{"a": "[x0 x1 y0 y1]", "b": "[x2 y2]", "c": "[x3 y3]"}},
		{"range only subscribers", catalog.AssignorRange,
			[]assignMember{{ID: "a", Topics: []string{"x"}}, {ID: "b", Topics: []string{"x", "z"}}}, []TopicMeta{x, z}, nil,
			map[string]string{"a": "[x0 x1]", "b": "[x2 x3 z0 z1 z2]"}},
		{"roundrobin deals in turn", catalog.AssignorRoundRobin,
			[]assignMember{{ID: "a", Topics: []string{"x", "z"}}, {ID: "b", Topics: []string{"x", "z"}}, {ID: "c", Topics: []string{"x", "z"}}}, []TopicMeta{x, z}, nil,
			map[string]string{"a": "[x0 x3 z2]", "b": "[x1 z0]", "c": "[x2 z1]"}},
		{"sticky from nothing", catalog.AssignorSticky,
			[]assignMember{{ID: "a", Topics: both}, {ID: "b", Topics: both}, {ID: "c", Topics: both}}, []TopicMeta{x, y}, nil,
			map[string]string{"a": "[x0 x3 y2]", "b": "[x1 y0 y3]", "c": "[x2 y1]"}},
		{"sticky keeps a balanced assignment", catalog.AssignorSticky,
			[]assignMember{{ID: "a", Topics: []string{"x"}}, {ID: "b", Topics: []string{"x"}}}, []TopicMeta{x},
			map[catalog.TopicPartition]string{{TopicID: 1, Partition: 0}: "b", {TopicID: 1, Partition: 1}: "a", {TopicID: 1, Partition: 2}: "b", {TopicID: 1, Partition: 3}: "a"},
			map[string]string{"a": "[x1 x3]", "b": "[x0 x2]"}},
		{"sticky gives a dead member's partitions to the least loaded", catalog.AssignorSticky,
			[]assignMember{{ID: "a", Topics: []string{"x"}}, {ID: "b", Topics: []string{"x"}}}, []TopicMeta{x},
			map[catalog.TopicPartition]string{{TopicID: 1, Partition: 0}: "a", {TopicID: 1, Partition: 1}: "dead", {TopicID: 1, Partition: 2}: "b", {TopicID: 1, Partition: 3}: "b"},
			map[string]string{"a": "[x0 x1]", "b": "[x2 x3]"}},
		{"sticky respects subscriptions", catalog.AssignorSticky,
			[]assignMember{{ID: "a", Topics: []string{"x"}}, {ID: "b", Topics: []string{"x", "z"}}}, []TopicMeta{x, z},
			map[catalog.TopicPartition]string{{TopicID: 1, Partition: 0}: "b", {TopicID: 1, Partition: 1}: "b", {TopicID: 1, Partition: 2}: "b", {TopicID: 1, Partition: 3}: "b", {TopicID: 3, Partition: 0}: "a"},
			map[string]string{"a": "[x1 x2 x3]", "b": "[x0 z0 z1 z2]"}}, // 3 and 4: as balanced as subscriptions allow
		{"no members", catalog.AssignorSticky, nil, []TopicMeta{x}, nil, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := render(assign(tc.assignor, tc.members, tc.topics, tc.current), names)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStickyMovesMinimum: from any balanced assignment of n partitions over m members,
// adding or removing one member moves exactly the minimum the new balance needs.
func TestStickyMovesMinimum(t *testing.T) {
	for n := int32(1); n <= 12; n++ {
		for m := 1; m <= 6; m++ {
			topic := TopicMeta{ID: 1, Name: "t", Partitions: n}
			members := func(k int) []assignMember {
				var out []assignMember
				for i := range k {
					out = append(out, assignMember{ID: fmt.Sprintf("m%d", i), Topics: []string{"t"}})
				}
				return out
			}
			cur := assign(catalog.AssignorSticky, members(m), []TopicMeta{topic}, nil)
			if again := assign(catalog.AssignorSticky, members(m), []TopicMeta{topic}, cur); !maps.Equal(again, cur) {
				t.Fatalf("n=%d m=%d: not a fixed point: %v → %v", n, m, cur, again)
			}
			next := assign(catalog.AssignorSticky, members(m+1), []TopicMeta{topic}, cur)
			moved := 0
			for tp, id := range cur {
				if next[tp] != id {
					moved++
				}
			}
			// The new member needs floor(n/(m+1)) partitions; they all come from others.
			if want := int(n) / (m + 1); moved != want {
				t.Fatalf("n=%d m=%d→%d: moved %d, want %d", n, m, m+1, moved, want)
			}
		}
	}
}

func TestApplyHeartbeatRules(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	topics := map[string]TopicMeta{"t": {ID: 7, Name: "t", Partitions: 2}}
	st := NewGroupState("g", "", now)
	join := func(id string) catalog.HeartbeatResult {
		res, err := ApplyHeartbeat(st, now, catalog.Heartbeat{Group: "g", MemberID: id, Topics: []string{"t"}, SessionTimeout: time.Second}, topics)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := join("a")
	if a.MemberEpoch != 1 || len(a.Assignment) != 1 || len(a.Assignment[0].Partitions) != 2 || a.HeartbeatInterval != 100*time.Millisecond {
		t.Fatalf("join: %+v", a)
	}
	b := join("b")
	if b.MemberEpoch != 2 || len(b.Assignment) != 0 || b.HeartbeatInterval != 25*time.Millisecond {
		t.Fatalf("b joining while a holds everything: %+v (a waiting member heartbeats sooner)", b)
	}
	// a's lease runs out: b gets everything on its next heartbeat, at a new epoch.
	now = now.Add(1500 * time.Millisecond)
	st.Members["b"].ExpiresAt = now.Add(time.Second)
	res, err := ApplyHeartbeat(st, now, catalog.Heartbeat{Group: "g", MemberID: "b", MemberEpoch: 2}, topics)
	if err != nil || res.MemberEpoch != 3 || len(res.Assignment[0].Partitions) != 2 {
		t.Fatalf("after a expired: %+v %v", res, err)
	}
	if _, ok := st.Members["a"]; ok {
		t.Fatal("expired member kept")
	}
}

// TestAssignmentEpoch: a partition keeps the epoch its owner was granted it at while the
// member's epoch moves on with later grants, so a commit at that epoch stays the
// owner's (KIP-1251); a commit before it, or ahead of the member, is stale.
func TestAssignmentEpoch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := TopicMeta{ID: 1, Name: "x", Partitions: 2}
	topics := map[string]TopicMeta{"x": x}
	st := NewGroupState("g", catalog.AssignorRange, now)
	beat := func(id string, epoch int32, owned ...int32) int32 {
		t.Helper()
		hb := catalog.Heartbeat{Group: "g", MemberID: id, MemberEpoch: epoch, Topics: []string{"x"}}
		if len(owned) > 0 {
			hb.Owned = []catalog.TopicPartitions{{Topic: "x", Partitions: owned}}
		}
		res, err := ApplyHeartbeat(st, now, hb, topics)
		if err != nil {
			t.Fatal(err)
		}
		return res.MemberEpoch
	}
	a := beat("a", catalog.JoinEpoch) // a takes both partitions
	b := beat("b", catalog.JoinEpoch) // b targets partition 1, still a's
	a = beat("a", a, 0)               // a gives partition 1 back
	b2 := beat("b", b)                // b is granted partition 1 at a new epoch
	if b2 <= b {
		t.Fatalf("b's epoch %d after its grant, want above %d", b2, b)
	}
	// a leaves: b is granted partition 0 as well, at another epoch.
	beat("a", catalog.LeaveEpoch)
	b3 := beat("b", b2, 1)
	if got := st.Owners[catalog.TopicPartition{TopicID: 1, Partition: 1}].Epoch; got != b2 {
		t.Fatalf("partition 1 granted at epoch %d, want %d", got, b2)
	}
	hws := map[catalog.TopicPartition]int64{{TopicID: 1, Partition: 0}: 10, {TopicID: 1, Partition: 1}: 10}
	commit := func(epoch, part int32) error {
		_, err := CheckOffsetCommit(st, now, catalog.OffsetCommit{Group: "g", MemberID: "b", MemberEpoch: epoch,
			Offsets: []catalog.CommitOffset{{Topic: "x", Partition: part, Offset: 1}}}, true, topics, hws)
		return err
	}
	for _, tc := range []struct {
		epoch, part int32
		ok          bool
	}{{b2, 1, true}, {b3, 1, true}, {b3, 0, true}, {b2, 0, false}, {b, 1, false}, {b3 + 1, 1, false}} {
		if err := commit(tc.epoch, tc.part); (err == nil) != tc.ok || (err != nil && !errors.Is(err, catalog.ErrStaleMemberEpoch)) {
			t.Errorf("commit of partition %d at epoch %d (granted 1 at %d, 0 at %d): %v, want ok=%v", tc.part, tc.epoch, b2, b3, err, tc.ok)
		}
	}
}

// TestReleasedCommit: a member that gave a partition back may still commit it alone at
// its current epoch under Kafka's rule (Released: Kafka takes any commit at the current
// epoch), but not without it, not with
// records, not at an older epoch, and not once another member gave it back in turn or
// it left.
func TestReleasedCommit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := TopicMeta{ID: 1, Name: "x", Partitions: 2}
	topics := map[string]TopicMeta{"x": x}
	st := NewGroupState("g", catalog.AssignorRange, now)
	beat := func(id string, epoch int32, owned ...int32) int32 {
		t.Helper()
		hb := catalog.Heartbeat{Group: "g", MemberID: id, MemberEpoch: epoch, Topics: []string{"x"},
			Owned: []catalog.TopicPartitions{{Topic: "x", Partitions: owned}}}
		res, err := ApplyHeartbeat(st, now, hb, topics)
		if err != nil {
			t.Fatal(err)
		}
		return res.MemberEpoch
	}
	a := beat("a", catalog.JoinEpoch)
	b := beat("b", catalog.JoinEpoch)
	beat("a", a, 0)  // a gives partition 1 back
	b = beat("b", b) // and b is granted it
	hws := map[catalog.TopicPartition]int64{{TopicID: 1, Partition: 0}: 10, {TopicID: 1, Partition: 1}: 10}
	commit := func(id string, epoch int32, alone bool) error {
		_, err := CheckOffsetCommit(st, now, catalog.OffsetCommit{Group: "g", MemberID: id, MemberEpoch: epoch, Released: true,
			Offsets: []catalog.CommitOffset{{Topic: "x", Partition: 1, Offset: 1}}}, alone, topics, hws)
		return err
	}
	if _, err := CheckOffsetCommit(st, now, catalog.OffsetCommit{Group: "g", MemberID: "a", MemberEpoch: a,
		Offsets: []catalog.CommitOffset{{Topic: "x", Partition: 1, Offset: 1}}}, true, topics, hws); !errors.Is(err, catalog.ErrNotOwner) {
		t.Fatalf("a's commit of the partition it gave back, without Kafka's rule: %v, want ErrNotOwner", err)
	}
	if err := commit("a", a, true); err != nil {
		t.Fatalf("a's commit alone of the partition it gave back, at its epoch: %v", err)
	}
	if err := commit("a", a, false); !errors.Is(err, catalog.ErrNotOwner) {
		t.Fatalf("a's commit with records of the partition it gave back: %v, want ErrNotOwner", err)
	}
	if err := commit("a", a-1, true); err == nil {
		t.Fatalf("a's commit at an older epoch of the partition it gave back was accepted")
	}
	beat("b", catalog.LeaveEpoch) // b leaves: partition 1 goes back to a, then a leaves it
	a = beat("a", a, 0)
	beat("a", catalog.LeaveEpoch)
	c := beat("c", catalog.JoinEpoch)
	if err := commit("c", c, true); err != nil {
		t.Fatalf("the new owner's commit: %v", err)
	}
	if err := commit("a", a, true); !errors.Is(err, catalog.ErrUnknownMember) {
		t.Fatalf("the commit of a member that left: %v, want ErrUnknownMember", err)
	}
}
