package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// ClassicCatalog is a catalog with both kinds of groups.
type ClassicCatalog interface {
	catalog.Catalog
	catalog.Groups
	catalog.ClassicGroups
}

// runClassic runs the classic-group conformance suite. open returns a catalog for a
// subtest and arranges its Close; calls within one subtest return catalogs on the same
// database, as several nodes would use.
func runClassic(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) ClassicCatalog)
	}{
		{"join_sync_across_nodes", testClassicAcrossNodes},
		{"member_id_required", testClassicMemberIDRequired},
		{"timed_transitions", testClassicTimed},
		{"bad_input_changes_nothing", testClassicBadInput},
		{"type_rule", testClassicTypeRule},
		{"type_rule_consumer_member", testClassicToConsumer},
		{"offsets", testClassicOffsets},
		{"delete_offsets", testClassicDeleteOffsets},
		{"static_member", testClassicStatic},
		{"notifications", testClassicNotify},
		{"concurrent_joins", testClassicConcurrentJoins},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// classicJoin is a consumer-protocol join of id (newID for a new member).
func classicJoin(group, id, newID string, topics ...string) catalog.ClassicJoin {
	return catalog.ClassicJoin{Group: group, MemberID: id, NewMemberID: newID, ClientID: "client", ClientHost: "/127.0.0.1",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, ProtocolType: "consumer",
		Protocols: []catalog.ClassicProtocol{{Name: "range", Metadata: []byte("meta-" + newID + id)}}, Topics: topics}
}

func mustClassicJoin(t testing.TB, c catalog.ClassicGroups, j catalog.ClassicJoin) catalog.ClassicJoinResult {
	t.Helper()
	res, err := c.JoinGroup(t.Context(), j)
	if err != nil {
		t.Fatalf("join %s%s: %v", j.MemberID, j.NewMemberID, err)
	}
	return res
}

func readClassic(t testing.TB, c catalog.ClassicGroups, group string) catalog.ClassicDescription {
	t.Helper()
	g, err := c.DescribeClassicGroup(t.Context(), group)
	if err != nil {
		t.Fatalf("read classic group %s: %v", group, err)
	}
	return g
}

// stableClassic makes group a stable classic group of the members ids on catalog c,
// each subscribed to topics; the leader assigns "a-<id>" to each.
func stableClassic(t testing.TB, c catalog.ClassicGroups, group string, topics []string, ids ...string) catalog.ClassicDescription {
	t.Helper()
	for _, id := range ids {
		mustClassicJoin(t, c, classicJoin(group, "", id, topics...))
	}
	for _, id := range ids {
		if readClassic(t, c, group).State == catalog.ClassicPreparingRebalance {
			mustClassicJoin(t, c, classicJoin(group, id, "", topics...))
		}
	}
	g := readClassic(t, c, group)
	var plan []catalog.ClassicAssignment
	for _, id := range ids {
		plan = append(plan, catalog.ClassicAssignment{MemberID: id, Assignment: []byte("a-" + id)})
	}
	if _, err := c.SyncGroup(t.Context(), catalog.ClassicSync{Group: group, MemberID: g.Leader, Generation: g.Generation, Assignments: plan}); err != nil {
		t.Fatalf("leader sync: %v", err)
	}
	g = readClassic(t, c, group)
	if g.State != catalog.ClassicStable {
		t.Fatalf("group %s is %s, want Stable", group, g.State)
	}
	return g
}

// testClassicAcrossNodes: members on two catalogs (nodes) join, sync and heartbeat one
// group; a held join is answered from the state another node wrote.
func testClassicAcrossNodes(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	n1, n2 := open(t), open(t)
	group := Name(t, "cg")
	res := mustClassicJoin(t, n1, classicJoin(group, "", "a"))
	if res.Answer == nil || res.Answer.Generation != 1 || res.Answer.Leader != "a" {
		t.Fatalf("first join: %+v", res)
	}
	if _, err := n1.SyncGroup(t.Context(), catalog.ClassicSync{Group: group, MemberID: "a", Generation: 1,
		Assignments: []catalog.ClassicAssignment{{MemberID: "a", Assignment: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	// b joins on node 2: a rebalance starts, b's join waits.
	rb := mustClassicJoin(t, n2, classicJoin(group, "", "b"))
	if rb.Answer != nil {
		t.Fatalf("b answered before a rejoined: %+v", rb.Answer)
	}
	reb, err := n1.ClassicHeartbeat(t.Context(), catalog.ClassicHeartbeat{Group: group, MemberID: "a", Generation: 1})
	if err != nil || !reb {
		t.Fatalf("a's heartbeat: %v %v, want rebalancing", reb, err)
	}
	ra := mustClassicJoin(t, n1, classicJoin(group, "a", ""))
	if ra.Answer == nil || ra.Answer.Generation != 2 || len(ra.Answer.Members) != 2 {
		t.Fatalf("a's rejoin (leader): %+v", ra.Answer)
	}
	// b's held join, polled on node 2.
	ans, poll, err := n2.PollJoin(t.Context(), group, "b", "", rb.WaitGeneration)
	if !poll.Done || err != nil || ans.Generation != 2 || ans.Leader != "a" {
		t.Fatalf("b's held join: %+v %v %v", ans, poll, err)
	}
	sb, err := n2.SyncGroup(t.Context(), catalog.ClassicSync{Group: group, MemberID: "b", Generation: 2})
	if err != nil || sb.Ready {
		t.Fatalf("b's sync: %+v %v, want to wait", sb, err)
	}
	if _, err := n1.SyncGroup(t.Context(), catalog.ClassicSync{Group: group, MemberID: "a", Generation: 2,
		Assignments: []catalog.ClassicAssignment{{MemberID: "a", Assignment: []byte("A")}, {MemberID: "b", Assignment: []byte("B")}}}); err != nil {
		t.Fatal(err)
	}
	s, poll, err := n2.PollSync(t.Context(), group, "b", "", 2)
	if !poll.Done || err != nil || string(s.Assignment) != "B" {
		t.Fatalf("b's held sync: %q %v %v", s.Assignment, poll, err)
	}
	// The mirror makes them live members for the other rules.
	d, err := n2.DescribeGroup(t.Context(), group)
	if err != nil || len(d.Members) != 2 {
		t.Fatalf("describe: %d members %v, want 2", len(d.Members), err)
	}
	wantErr(t, "delete a group with live classic members", n2.DeleteGroup(t.Context(), group), catalog.ErrGroupNotEmpty)
	// Both leave (batched): the group is empty at a later generation.
	errs, err := n2.LeaveGroup(t.Context(), group, []catalog.ClassicLeaver{{MemberID: "a"}, {MemberID: "b"}, {MemberID: "zz"}})
	if err != nil || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], catalog.ErrUnknownMember) {
		t.Fatalf("leave: %v %v", errs, err)
	}
	g := readClassic(t, n1, group)
	if g.State != catalog.ClassicEmpty || g.Generation != 3 || len(g.Members) != 0 {
		t.Fatalf("after leaving: %s gen %d, %d members", g.State, g.Generation, len(g.Members))
	}
	d, err = n1.DescribeGroup(t.Context(), group)
	if err != nil || len(d.Members) != 0 {
		t.Fatalf("describe after leaving: %d members %v", len(d.Members), err)
	}
	if err := n1.DeleteGroup(t.Context(), group); err != nil {
		t.Fatalf("delete the empty group: %v", err)
	}
	if _, err := n1.DescribeClassicGroup(t.Context(), group); !errors.Is(err, catalog.ErrNotClassicGroup) {
		t.Fatalf("read a deleted group: %v", err)
	}
}

func testClassicMemberIDRequired(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	n1, n2 := open(t), open(t)
	group := Name(t, "cg")
	j := classicJoin(group, "", "m-1")
	j.RequireKnownMemberID = true
	res := mustClassicJoin(t, n1, j)
	if !res.MemberIDRequired || res.MemberID != "m-1" {
		t.Fatalf("%+v, want MEMBER_ID_REQUIRED", res)
	}
	res = mustClassicJoin(t, n2, classicJoin(group, "m-1", "")) // the rejoin lands on another node
	if res.Answer == nil || res.Answer.Leader != "m-1" {
		t.Fatalf("rejoin with the given id: %+v", res)
	}
	_, err := n2.JoinGroup(t.Context(), classicJoin(group, "never-given", ""))
	wantErr(t, "join with an id never given", err, catalog.ErrUnknownMember)
}

// testClassicTimed: deadlines are the database clock's and are applied by a tick or by
// the next request.
func testClassicTimed(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	group := Name(t, "cg")
	ja := classicJoin(group, "", "a")
	ja.SessionTimeout, ja.RebalanceTimeout = 400*time.Millisecond, 400*time.Millisecond
	mustClassicJoin(t, c, ja)
	if _, err := c.SyncGroup(t.Context(), catalog.ClassicSync{Group: group, MemberID: "a", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	jb := classicJoin(group, "", "b")
	jb.SessionTimeout, jb.RebalanceTimeout = 10*time.Second, 300*time.Millisecond
	rb := mustClassicJoin(t, c, jb)
	_, poll, err := c.PollJoin(t.Context(), group, "b", "", rb.WaitGeneration)
	if err != nil || poll.Done {
		t.Fatalf("b's join answered before the rebalance deadline: %+v %v", poll, err)
	}
	if poll.Wait <= 0 || poll.Wait > 500*time.Millisecond {
		t.Fatalf("next deadline in %v, want within a's 400ms timeouts", poll.Wait)
	}
	time.Sleep(poll.Wait + 50*time.Millisecond)
	// The poll applies the due transition (a never rejoined) under the lock.
	ans, poll, err := c.PollJoin(t.Context(), group, "b", "", rb.WaitGeneration)
	if err != nil || !poll.Done || ans.Leader != "b" || ans.Generation != 2 {
		t.Fatalf("b's join after the deadline: %+v %+v %v", ans, poll, err)
	}
	g := readClassic(t, c, group)
	if len(g.Members) != 1 || g.State != catalog.ClassicCompletingRebalance {
		t.Fatalf("after the deadline: %s with %d members", g.State, len(g.Members))
	}
	// b never syncs: the next request after the sync deadline (300ms) applies it.
	time.Sleep(400 * time.Millisecond)
	_, err = c.ClassicHeartbeat(t.Context(), catalog.ClassicHeartbeat{Group: group, MemberID: "b", Generation: 2})
	wantErr(t, "heartbeat after the sync deadline", err, catalog.ErrUnknownMember)
	g = readClassic(t, c, group)
	if g.State != catalog.ClassicEmpty || g.Generation != 3 {
		t.Fatalf("the refused heartbeat did not keep the transition: %s gen %d", g.State, g.Generation)
	}
}

// testClassicBadInput: each refusal answers its error and leaves the group as it was.
func testClassicBadInput(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	group := Name(t, "cg")
	stableClassic(t, c, group, nil, "a", "b")
	before := readClassic(t, c, group)
	ctx := t.Context()
	other := classicJoin(group, "", "x")
	other.ProtocolType = "connect"
	_, joinErr := c.JoinGroup(ctx, other)
	_, unknownJoin := c.JoinGroup(ctx, classicJoin(group, "ghost", ""))
	_, hbUnknown := c.ClassicHeartbeat(ctx, catalog.ClassicHeartbeat{Group: group, MemberID: "ghost", Generation: before.Generation})
	_, hbStale := c.ClassicHeartbeat(ctx, catalog.ClassicHeartbeat{Group: group, MemberID: "a", Generation: before.Generation - 1})
	_, syncStale := c.SyncGroup(ctx, catalog.ClassicSync{Group: group, MemberID: "a", Generation: before.Generation + 1})
	_, syncNoJoin := c.SyncGroup(ctx, catalog.ClassicSync{Group: Name(t, "nogroup"), MemberID: "a", Generation: 1})
	for _, tc := range []struct {
		what string
		err  error
		want error
	}{
		{"wrong protocol type", joinErr, catalog.ErrInconsistentGroupProtocol},
		{"join as an unknown member", unknownJoin, catalog.ErrUnknownMember},
		{"heartbeat of an unknown member", hbUnknown, catalog.ErrUnknownMember},
		{"heartbeat at a stale generation", hbStale, catalog.ErrIllegalGeneration},
		{"sync at another generation", syncStale, catalog.ErrIllegalGeneration},
		{"sync before join", syncNoJoin, catalog.ErrUnknownMember},
		{"commit at a stale generation", c.CommitClassicOffsets(ctx, catalog.ClassicCommit{Group: group, MemberID: "a", Generation: before.Generation - 1,
			Offsets: []catalog.CommitOffset{{Topic: "t", Offset: 0}}}), catalog.ErrIllegalGeneration},
	} {
		wantErr(t, tc.what, tc.err, tc.want)
	}
	if after := readClassic(t, c, group); !reflect.DeepEqual(after, before) {
		t.Fatalf("refusals changed the group:\n%+v\nwant\n%+v", after, before)
	}
	// A leader's plan naming a member that is not in the generation.
	mustClassicJoin(t, c, classicJoin(group, "", "c"))
	mustClassicJoin(t, c, classicJoin(group, "a", ""))
	mustClassicJoin(t, c, classicJoin(group, "b", ""))
	mid := readClassic(t, c, group)
	_, err := c.SyncGroup(ctx, catalog.ClassicSync{Group: group, MemberID: mid.Leader, Generation: mid.Generation,
		Assignments: []catalog.ClassicAssignment{{MemberID: "a"}, {MemberID: "intruder"}}})
	wantErr(t, "a plan naming an unknown member", err, catalog.ErrInvalidGroupRequest)
	after := readClassic(t, c, group)
	if after.State != catalog.ClassicCompletingRebalance || after.Generation != mid.Generation {
		t.Fatalf("the refused plan changed the group: %s gen %d", after.State, after.Generation)
	}
	if !reflect.DeepEqual(after, mid) {
		t.Fatalf("the refused plan changed the group:\n%+v\nwant\n%+v", after, mid)
	}
	if _, err := c.DescribeClassicGroup(ctx, Name(t, "nogroup")); !errors.Is(err, catalog.ErrGroupNotFound) {
		t.Fatalf("sync before join created a group: %v", err)
	}
}

// testClassicTypeRule: a classic member cannot join a consumer group with live members;
// an empty consumer group becomes classic and keeps its offsets.
func testClassicTypeRule(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	tp := SeedTopic(t, c, "cgt", 2, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 10)
	group := Name(t, "cg")
	hb := catalog.Heartbeat{Group: group, MemberID: "http-1", MemberEpoch: catalog.JoinEpoch, Topics: []string{tp.Name}, SessionTimeout: 300 * time.Millisecond}
	if _, err := c.Heartbeat(t.Context(), hb); err != nil {
		t.Fatal(err)
	}
	_, err := c.JoinGroup(t.Context(), classicJoin(group, "", "k1", tp.Name))
	wantErr(t, "a classic member in a consumer group with a live member", err, catalog.ErrInconsistentGroupProtocol)
	if _, err := c.DescribeClassicGroup(t.Context(), group); !errors.Is(err, catalog.ErrNotClassicGroup) {
		t.Fatalf("the refused join made the group classic: %v", err)
	}
	time.Sleep(400 * time.Millisecond) // the HTTP member's lease ends
	if err := c.CommitOffsets(t.Context(), catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 7}}}); err != nil {
		t.Fatal(err)
	}
	res := mustClassicJoin(t, c, classicJoin(group, "", "k1", tp.Name))
	if res.Answer == nil {
		t.Fatalf("join of the empty group: %+v", res)
	}
	kinds, err := c.GroupKinds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(kinds, func(k catalog.GroupKind) bool { return k.Name == group })
	if i < 0 || kinds[i].Type != catalog.GroupTypeClassic || kinds[i].ProtocolType != "consumer" || kinds[i].ClassicState != catalog.ClassicCompletingRebalance {
		t.Fatalf("group kinds: %+v", kinds)
	}
	offs, err := c.GroupOffsets(t.Context(), group)
	if err != nil || len(offs) != 1 || offs[0].Offset != 7 {
		t.Fatalf("offsets after the type change: %+v %v", offs, err)
	}
	// A commit from outside the group is refused while the classic member lives.
	err = c.CommitOffsets(t.Context(), catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 1}}})
	wantErr(t, "a commit from outside a classic group with a live member", err, catalog.ErrGroupNotEmpty)
	ls, err := c.GroupLag(t.Context(), group)
	if err != nil || len(ls) != 2 {
		t.Fatalf("lag of the classic member's subscription: %+v %v", ls, err)
	}
}

// testClassicToConsumer: a consumer-type member (HTTP or KIP-848) cannot join a classic
// group with a live member, and changes nothing; once the classic members are gone it
// joins, the group becomes a consumer group and keeps its offsets, and a later classic
// member finds the generation where it was left.
func testClassicToConsumer(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	tp := SeedTopic(t, c, "cgc", 2, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 10)
	group := Name(t, "cg")
	if err := c.CommitOffsets(t.Context(), catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 7}}}); err != nil {
		t.Fatal(err)
	}
	j := classicJoin(group, "", "k1", tp.Name)
	j.SessionTimeout, j.RebalanceTimeout = 300*time.Millisecond, 300*time.Millisecond
	first := mustClassicJoin(t, c, j)
	if first.Answer == nil {
		t.Fatalf("join of the empty group: %+v", first)
	}
	before, err := c.DescribeClassicGroup(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	hb := catalog.Heartbeat{Group: group, MemberID: "http-1", MemberEpoch: catalog.JoinEpoch, Topics: []string{tp.Name}, SessionTimeout: 10 * time.Second}
	_, err = c.Heartbeat(t.Context(), hb)
	wantErr(t, "a consumer member in a classic group with a live member", err, catalog.ErrInconsistentGroupProtocol)
	if after, err := c.DescribeClassicGroup(t.Context(), group); err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("the refused heartbeat changed the group: %+v %v, want %+v", after, err, before)
	}
	time.Sleep(500 * time.Millisecond) // k1's session ends
	res, err := c.Heartbeat(t.Context(), hb)
	if err != nil || res.MemberEpoch <= 0 {
		t.Fatalf("a consumer member in the empty classic group: %+v %v", res, err)
	}
	if _, err := c.DescribeClassicGroup(t.Context(), group); !errors.Is(err, catalog.ErrNotClassicGroup) {
		t.Fatalf("the group is still classic: %v", err)
	}
	d, err := c.DescribeGroup(t.Context(), group)
	if err != nil || len(d.Members) != 1 || d.Members[0].ID != "http-1" {
		t.Fatalf("the consumer group: %+v %v", d, err)
	}
	offs, err := c.GroupOffsets(t.Context(), group)
	if err != nil || len(offs) != 1 || offs[0].Offset != 7 {
		t.Fatalf("offsets after the type change: %+v %v", offs, err)
	}
	if _, err := c.Heartbeat(t.Context(), catalog.Heartbeat{Group: group, MemberID: "http-1", MemberEpoch: catalog.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	again := mustClassicJoin(t, c, classicJoin(group, "", "k2", tp.Name))
	if again.Answer == nil || again.Answer.Generation <= first.Answer.Generation {
		t.Fatalf("the classic group again: %+v, want a generation past %d", again, first.Answer.Generation)
	}
}

func testClassicOffsets(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	tp := SeedTopic(t, c, "cgo", 2, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 10)
	group := Name(t, "cg")
	g := stableClassic(t, c, group, []string{tp.Name}, "a")
	commit := func(gen int32, off int64, part int32) error {
		return c.CommitClassicOffsets(t.Context(), catalog.ClassicCommit{Group: group, MemberID: "a", Generation: gen,
			Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: part, Offset: off, Metadata: "m"}}})
	}
	if err := commit(g.Generation, 5, 0); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "an offset past the high watermark", commit(g.Generation, 11, 0), catalog.ErrInvalidOffset)
	wantErr(t, "a partition out of range", commit(g.Generation, 0, 2), catalog.ErrPartitionOutOfRange)
	wantErr(t, "a stale generation", commit(g.Generation-1, 1, 0), catalog.ErrIllegalGeneration)
	offs, err := c.GroupOffsets(t.Context(), group)
	if err != nil || len(offs) != 1 || offs[0].Offset != 5 || offs[0].Metadata != "m" {
		t.Fatalf("offsets: %+v %v", offs, err)
	}
	// A consumer group's member commits go to the consumer rules.
	cgroup := Name(t, "cg")
	if _, err := c.Heartbeat(t.Context(), catalog.Heartbeat{Group: cgroup, MemberID: "m", MemberEpoch: 0, Topics: []string{tp.Name}}); err != nil {
		t.Fatal(err)
	}
	err = c.CommitClassicOffsets(t.Context(), catalog.ClassicCommit{Group: cgroup, MemberID: "m", Generation: 1, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Offset: 1}}})
	wantErr(t, "a classic commit to a consumer group", err, catalog.ErrNotClassicGroup)
}

func testClassicDeleteOffsets(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	sub, other := SeedTopic(t, c, "cgd", 1, nil), SeedTopic(t, c, "cgd", 1, nil)
	SeedRecords(t, c, sub.ID, 0, 1, 10)
	SeedRecords(t, c, other.ID, 0, 1, 10)
	group := Name(t, "cg")
	if err := c.CommitOffsets(t.Context(), catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{
		{Topic: sub.Name, Offset: 3}, {Topic: other.Name, Offset: 4}}}); err != nil {
		t.Fatal(err)
	}
	stableClassic(t, c, group, []string{sub.Name}, "a")
	errs, err := c.DeleteOffsets(t.Context(), group, []catalog.TopicPartitionName{{Topic: sub.Name}, {Topic: other.Name}, {Topic: "no-such-topic"}, {Topic: other.Name, Partition: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], catalog.ErrGroupSubscribed) || errs[1] != nil || !errors.Is(errs[2], catalog.ErrTopicNotFound) || !errors.Is(errs[3], catalog.ErrPartitionOutOfRange) {
		t.Fatalf("delete offsets: %v", errs)
	}
	offs, err := c.GroupOffsets(t.Context(), group)
	if err != nil || len(offs) != 1 || offs[0].Topic != sub.Name {
		t.Fatalf("offsets left: %+v %v", offs, err)
	}
	if _, err := c.DeleteOffsets(t.Context(), Name(t, "none"), []catalog.TopicPartitionName{{Topic: sub.Name}}); !errors.Is(err, catalog.ErrGroupNotFound) {
		t.Fatalf("delete offsets of no group: %v", err)
	}
}

func testClassicStatic(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	group := Name(t, "cg")
	for _, id := range []string{"a", "b"} {
		j := classicJoin(group, "", id)
		j.InstanceID = "inst-" + id
		j.Protocols[0].Metadata = []byte("same")
		mustClassicJoin(t, c, j)
	}
	ja := classicJoin(group, "a", "")
	ja.InstanceID, ja.Protocols[0].Metadata = "inst-a", []byte("same")
	mustClassicJoin(t, c, ja)
	if _, err := c.SyncGroup(t.Context(), catalog.ClassicSync{Group: group, MemberID: "a", Generation: 2,
		Assignments: []catalog.ClassicAssignment{{MemberID: "a", Assignment: []byte("A")}, {MemberID: "b", Assignment: []byte("B")}}}); err != nil {
		t.Fatal(err)
	}
	j := classicJoin(group, "", "b-2")
	j.InstanceID, j.Protocols[0].Metadata = "inst-b", []byte("same")
	res := mustClassicJoin(t, c, j)
	if res.Answer == nil || res.Answer.Generation != 2 {
		t.Fatalf("static rejoin: %+v, want generation 2 at once", res)
	}
	s, err := c.SyncGroup(t.Context(), catalog.ClassicSync{Group: group, MemberID: "b-2", InstanceID: "inst-b", Generation: 2})
	if err != nil || string(s.Assignment) != "B" {
		t.Fatalf("the new instance's sync: %q %v", s.Assignment, err)
	}
	_, err = c.ClassicHeartbeat(t.Context(), catalog.ClassicHeartbeat{Group: group, MemberID: "b", InstanceID: "inst-b", Generation: 2})
	wantErr(t, "the replaced instance", err, catalog.ErrFencedInstance)
	errs, err := c.LeaveGroup(t.Context(), group, []catalog.ClassicLeaver{{InstanceID: "inst-b", MemberID: "b"}, {InstanceID: "inst-b"}})
	if err != nil || !errors.Is(errs[0], catalog.ErrFencedInstance) || errs[1] != nil {
		t.Fatalf("leave by instance: %v %v", errs, err)
	}
}

func testClassicNotify(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	c := open(t)
	group := Name(t, "cg")
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan string, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.ListenGroups(ctx, func(g string) { got <- g }); err != nil {
			t.Errorf("listen: %v", err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	deadline := time.After(10 * time.Second)
	// LISTEN may start after the first change: keep changing the group until heard.
	for i := 0; ; i++ {
		mustClassicJoin(t, c, classicJoin(group, "", fmt.Sprintf("m%d", i)))
		select {
		case g := <-got:
			if g != group {
				t.Fatalf("notified of %q, want %q", g, group)
			}
			return
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notification in 10s")
		}
	}
}

// testClassicConcurrentJoins: members joining at once on several nodes end in one
// generation, each with a join answer.
func testClassicConcurrentJoins(t *testing.T, open func(t *testing.T) ClassicCatalog) {
	group := Name(t, "cg")
	const n = 6
	nodes := []ClassicCatalog{open(t), open(t), open(t)}
	results := make([]catalog.ClassicJoinResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := nodes[i%len(nodes)].JoinGroup(t.Context(), classicJoin(group, "", fmt.Sprintf("m%d", i)))
			if err != nil {
				t.Errorf("join m%d: %v", i, err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	// Everyone rejoins (as clients do on REBALANCE_IN_PROGRESS) until one generation
	// holds all of them.
	for round := 0; round < 5; round++ {
		g := readClassic(t, nodes[0], group)
		if g.State == catalog.ClassicCompletingRebalance && len(g.Members) == n {
			for _, m := range g.Members {
				if m.Generation != g.Generation {
					t.Fatalf("%s is at generation %d, the group at %d", m.ID, m.Generation, g.Generation)
				}
			}
			return
		}
		for i := range n {
			wg.Go(func() {
				if _, err := nodes[i%len(nodes)].JoinGroup(t.Context(), classicJoin(group, fmt.Sprintf("m%d", i), "")); err != nil {
					t.Errorf("rejoin m%d: %v", i, err)
				}
			})
		}
		wg.Wait()
	}
	t.Fatalf("no generation with all %d members", n)
}
