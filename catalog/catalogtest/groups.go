package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// GroupCatalog is a catalog with consumer groups.
type GroupCatalog interface {
	catalog.Catalog
	catalog.Groups
}

// RunGroups runs the consumer-group conformance suite. open returns a catalog for a
// subtest and arranges its Close with t.Cleanup; calls within one subtest must return
// catalogs on the same database (the concurrency test spreads members over several, as
// several nodes would be). Every subtest names its groups and topics uniquely.
func RunGroups(t *testing.T, open func(t *testing.T) GroupCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c GroupCatalog)
	}{
		{"sticky/join_one_by_one", testStickyJoins},
		{"sticky/fourth_member_moves_minimum", testStickyFourthMember},
		{"sticky/eight_partitions_fourth_moves_two", testStickyEightPartitions},
		{"revocation_needs_acknowledgement", testRevocationProtocol},
		{"epochs", testEpochs},
		{"lease_expiry_frees_partitions", testLeaseExpiry},
		{"leave", testLeave},
		{"rejoin_starts_afresh", testRejoin},
		{"more_members_than_partitions", testMoreMembersThanPartitions},
		{"range_copartitions", testRangeAssignor},
		{"roundrobin", testRoundRobinAssignor},
		{"assignor_change", testAssignorChange},
		{"subscription_change_and_topic_growth", testSubscriptionChange},
		{"offsets/commit_and_fetch", testOffsets},
		{"offsets/refusals", testOffsetRefusals},
		{"offsets/reset_and_delete", testResetAndDelete},
		{"offsets/flush_check_agrees", testFlushOffsetsAgree},
		{"lag", testLag},
		{"describe_and_list", testDescribeAndList},
		{"invalid_requests", testInvalidGroupRequests},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
	t.Run("concurrent_heartbeats", func(t *testing.T) { testConcurrentHeartbeats(t, open) })
}

// member drives one group member through Heartbeat the way a well-behaved client does:
// it reports as owned what the last answer assigned it, so revocations are acknowledged
// on the next heartbeat.
type member struct {
	c        catalog.Groups
	group    string
	id       string
	topics   []string
	session  time.Duration
	assignor string
	epoch    int32
	owned    []catalog.TopicPartitions
}

func newMember(c catalog.Groups, group, id string, topics ...string) *member {
	return &member{c: c, group: group, id: id, topics: topics, session: 30 * time.Second}
}

func (m *member) heartbeat(ctx context.Context) (catalog.HeartbeatResult, error) {
	hb := catalog.Heartbeat{Group: m.group, MemberID: m.id, MemberEpoch: m.epoch, Owned: m.owned, SessionTimeout: m.session, Assignor: m.assignor}
	if m.epoch == catalog.JoinEpoch {
		hb.Topics = m.topics
	}
	res, err := m.c.Heartbeat(ctx, hb)
	if err != nil {
		return res, err
	}
	m.epoch = res.MemberEpoch
	m.owned = res.Assignment
	return res, nil
}

func (m *member) beat(t testing.TB) catalog.HeartbeatResult {
	t.Helper()
	res, err := m.heartbeat(t.Context())
	if err != nil {
		t.Fatalf("heartbeat of %s: %v", m.id, err)
	}
	return res
}

// partitionsOf flattens an assignment of one topic.
func partitionsOf(a []catalog.TopicPartitions, topic string) []int32 {
	for _, tp := range a {
		if tp.Topic == topic {
			return tp.Partitions
		}
	}
	return nil
}

// settle heartbeats every member in turn until two full rounds in a row change nothing.
// One quiet round is not enough: a member may acknowledge a revocation in it after the
// partition's next owner has already heartbeated, and neither answer changes; the grant
// shows only in the next round.
func settle(t testing.TB, ms ...*member) {
	t.Helper()
	quiet := 0
	for round := 0; round < 20; round++ {
		changed := false
		for _, m := range ms {
			before := fmt.Sprint(m.owned, m.epoch)
			m.beat(t)
			if fmt.Sprint(m.owned, m.epoch) != before {
				changed = true
			}
		}
		if changed {
			quiet = 0
		} else if quiet++; quiet == 2 {
			return
		}
	}
	t.Fatalf("group did not settle in 20 rounds")
}

func wantPartitions(t testing.TB, m *member, topic string, want ...int32) {
	t.Helper()
	got := partitionsOf(m.owned, topic)
	if !slices.Equal(got, want) {
		t.Fatalf("member %s owns %s %v, want %v", m.id, topic, got, want)
	}
}

func seedGroupTopic(t testing.TB, c GroupCatalog, partitions int32) catalog.Topic {
	t.Helper()
	return SeedTopic(t, c, "grp", partitions, nil)
}

// testStickyJoins: members joining one by one end with the hand-worked assignment of
// the sticky assignor (the most loaded member gives up its highest partitions).
func testStickyJoins(t *testing.T, c GroupCatalog) {
	tp := seedGroupTopic(t, c, 6)
	g := Name(t, "g")
	a, b, cc := newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name), newMember(c, g, "c", tp.Name)
	res := a.beat(t)
	wantPartitions(t, a, tp.Name, 0, 1, 2, 3, 4, 5)
	if res.MemberEpoch <= 0 {
		t.Fatalf("joined at epoch %d, want > 0", res.MemberEpoch)
	}
	settle(t, a, b)
	wantPartitions(t, a, tp.Name, 0, 1, 2)
	wantPartitions(t, b, tp.Name, 3, 4, 5)
	settle(t, a, b, cc)
	wantPartitions(t, a, tp.Name, 0, 1)
	wantPartitions(t, b, tp.Name, 3, 4)
	wantPartitions(t, cc, tp.Name, 2, 5)
	d := describe(t, c, g)
	if d.State != catalog.GroupStable || len(d.Members) != 3 {
		t.Fatalf("describe: state %s with %d members, want stable with 3", d.State, len(d.Members))
	}
}

func ownerMap(ms ...*member) map[int32]string {
	out := map[int32]string{}
	for _, m := range ms {
		for _, tp := range m.owned {
			for _, p := range tp.Partitions {
				out[p] = m.id
			}
		}
	}
	return out
}

func moved(before, after map[int32]string) int {
	n := 0
	for p, m := range before {
		if after[p] != m {
			n++
		}
	}
	return n
}

// testStickyFourthMember: 3 members own 2 of 6 partitions each; a 4th joining moves the
// fewest partitions that balance allows. Balanced for 6 over 4 is two members with 2 and
// two with 1, so exactly one partition must move.
func testStickyFourthMember(t *testing.T, c GroupCatalog) {
	tp := seedGroupTopic(t, c, 6)
	g := Name(t, "g")
	ms := []*member{newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name), newMember(c, g, "c", tp.Name)}
	settle(t, ms...)
	for _, m := range ms {
		if n := len(partitionsOf(m.owned, tp.Name)); n != 2 {
			t.Fatalf("member %s owns %d partitions, want 2", m.id, n)
		}
	}
	before := ownerMap(ms...)
	ms = append(ms, newMember(c, g, "d", tp.Name))
	settle(t, ms...)
	after := ownerMap(ms...)
	if len(after) != 6 {
		t.Fatalf("owners after the 4th joined: %v, want all 6 partitions", after)
	}
	if n := moved(before, after); n != 1 {
		t.Fatalf("%d partitions moved (%v → %v), want 1", n, before, after)
	}
	wantPartitions(t, ms[0], tp.Name, 0)
	wantPartitions(t, ms[3], tp.Name, 1)
}

// testStickyEightPartitions: 8 partitions over 3 members (3, 3, 2); a 4th joining
// balances to 2 each by moving exactly 2.
func testStickyEightPartitions(t *testing.T, c GroupCatalog) {
	tp := seedGroupTopic(t, c, 8)
	g := Name(t, "g")
	ms := []*member{newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name), newMember(c, g, "c", tp.Name)}
	settle(t, ms...)
	wantPartitions(t, ms[0], tp.Name, 0, 1, 2)
	wantPartitions(t, ms[1], tp.Name, 4, 5, 6)
	wantPartitions(t, ms[2], tp.Name, 3, 7)
	before := ownerMap(ms...)
	ms = append(ms, newMember(c, g, "d", tp.Name))
	settle(t, ms...)
	after := ownerMap(ms...)
	if n := moved(before, after); n != 2 {
		t.Fatalf("%d partitions moved (%v → %v), want 2", n, before, after)
	}
	wantPartitions(t, ms[3], tp.Name, 2, 6)
	for _, m := range ms {
		if n := len(partitionsOf(m.owned, tp.Name)); n != 2 {
			t.Fatalf("member %s owns %d partitions, want 2", m.id, n)
		}
	}
}

// testRevocationProtocol: a partition moves only after its owner leaves it out of owned;
// until then the owner may still commit it and the new target waits.
func testRevocationProtocol(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 6)
	SeedRecords(t, c, tp.ID, 5, 1, 10)
	g := Name(t, "g")
	a, b := newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name)
	a.beat(t)
	all := a.owned
	resB := b.beat(t)
	if len(resB.Assignment) != 0 {
		t.Fatalf("b was granted %v while a still owns everything", resB.Assignment)
	}
	a.beat(t) // answer drops 3, 4, 5: they are being revoked from a
	wantPartitions(t, a, tp.Name, 0, 1, 2)
	// a has not acknowledged: keep reporting everything as owned.
	a.owned = all
	if _, err := a.heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	a.owned = all
	d := describe(t, c, g)
	if d.State != catalog.GroupReconciling {
		t.Fatalf("state %s while revoking, want %s", d.State, catalog.GroupReconciling)
	}
	if rev := memberDesc(t, d, "a").Revoking; len(rev) != 1 || !slices.Equal(rev[0].Partitions, []int32{3, 4, 5}) {
		t.Fatalf("a revoking %v, want 3, 4, 5", rev)
	}
	if pend := memberDesc(t, d, "b").Pending; len(pend) != 1 || !slices.Equal(pend[0].Partitions, []int32{3, 4, 5}) {
		t.Fatalf("b pending %v, want 3, 4, 5", pend)
	}
	epochB := b.epoch
	if res := b.beat(t); len(res.Assignment) != 0 || res.MemberEpoch != epochB {
		t.Fatalf("b granted %v at epoch %d before a acknowledged", res.Assignment, res.MemberEpoch)
	}
	// Still a's: its commit for a partition being revoked is accepted.
	commit := func(m *member, p int32, off int64) error {
		return c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: m.id, MemberEpoch: m.epoch,
			Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: p, Offset: off}}})
	}
	if err := commit(a, 5, 7); err != nil {
		t.Fatalf("commit of a partition being revoked: %v", err)
	}
	if err := commit(b, 5, 8); !errors.Is(err, catalog.ErrNotOwner) {
		t.Fatalf("commit by the target before the grant: %v, want ErrNotOwner", err)
	}
	// a acknowledges.
	a.owned = []catalog.TopicPartitions{{Topic: tp.Name, Partitions: []int32{0, 1, 2}}}
	a.beat(t)
	res := b.beat(t)
	wantPartitions(t, b, tp.Name, 3, 4, 5)
	if res.MemberEpoch <= epochB {
		t.Fatalf("b granted at epoch %d, want above %d", res.MemberEpoch, epochB)
	}
	if err := commit(a, 5, 9); !errors.Is(err, catalog.ErrNotOwner) {
		t.Fatalf("late commit after the partition moved: %v, want ErrNotOwner", err)
	}
	if err := commit(b, 5, 10); err != nil {
		t.Fatalf("commit by the new owner: %v", err)
	}
	if d := describe(t, c, g); d.State != catalog.GroupStable {
		t.Fatalf("state %s after the move, want stable", d.State)
	}
}

func testEpochs(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 2)
	g := Name(t, "g")
	a := newMember(c, g, "a", tp.Name)
	e1 := a.beat(t).MemberEpoch
	hb := func(epoch int32) error {
		_, err := c.Heartbeat(ctx, catalog.Heartbeat{Group: g, MemberID: "a", MemberEpoch: epoch, Owned: a.owned})
		return err
	}
	if err := hb(e1 + 1); !errors.Is(err, catalog.ErrStaleMemberEpoch) {
		t.Fatalf("heartbeat from the future: %v, want ErrStaleMemberEpoch", err)
	}
	if err := hb(e1); err != nil {
		t.Fatalf("heartbeat at the current epoch: %v", err)
	}
	// b joins and takes partition 1 from a; b's grant bumps b only.
	b := newMember(c, g, "b", tp.Name)
	settle(t, a, b)
	if a.epoch != e1 {
		t.Fatalf("a's epoch moved from %d to %d though it was granted nothing", e1, a.epoch)
	}
	// a leaves; b is granted partition 0 at a new epoch.
	eb := b.epoch
	a.epoch = catalog.LeaveEpoch
	a.beat(t)
	b.beat(t)
	if b.epoch <= eb {
		t.Fatalf("b's epoch %d after a grant, want above %d", b.epoch, eb)
	}
	// A lost answer: b heartbeats again at its previous epoch and is answered.
	res, err := c.Heartbeat(ctx, catalog.Heartbeat{Group: g, MemberID: "b", MemberEpoch: eb, Owned: b.owned})
	if err != nil || res.MemberEpoch != b.epoch {
		t.Fatalf("heartbeat at the previous epoch: %+v, %v; want epoch %d", res, err, b.epoch)
	}
	// Two epochs back is stale; commits need the current one exactly.
	_, err = c.Heartbeat(ctx, catalog.Heartbeat{Group: g, MemberID: "b", MemberEpoch: eb - 1, Owned: b.owned})
	wantErr(t, "heartbeat two epochs back", err, catalog.ErrStaleMemberEpoch)
	err = c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: eb,
		Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 0}}})
	wantErr(t, "commit at the previous epoch", err, catalog.ErrStaleMemberEpoch)
	err = c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: b.epoch + 1,
		Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 0}}})
	wantErr(t, "commit at a future epoch", err, catalog.ErrStaleMemberEpoch)
	_, err = c.Heartbeat(ctx, catalog.Heartbeat{Group: g, MemberID: "nobody", MemberEpoch: 3})
	wantErr(t, "heartbeat of an unknown member", err, catalog.ErrUnknownMember)
	_, err = c.Heartbeat(ctx, catalog.Heartbeat{Group: Name(t, "nogroup"), MemberID: "a", MemberEpoch: 3})
	wantErr(t, "heartbeat to an unknown group", err, catalog.ErrGroupNotFound)
	_, err = c.Heartbeat(ctx, catalog.Heartbeat{Group: g, MemberID: "b", MemberEpoch: -2})
	wantErr(t, "heartbeat at epoch -2", err, catalog.ErrStaleMemberEpoch)
}

// testLeaseExpiry: a member that stops heartbeating loses its partitions to the others
// once its lease (database clock) has run out; its commits are refused even before
// anyone else has noticed.
func testLeaseExpiry(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 6)
	SeedRecords(t, c, tp.ID, 0, 1, 5)
	SeedRecords(t, c, tp.ID, 3, 1, 5)
	g := Name(t, "g")
	a, b := newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name)
	b.session = 400 * time.Millisecond
	settle(t, a, b)
	wantPartitions(t, b, tp.Name, 3, 4, 5)
	start := time.Now()
	time.Sleep(b.session + 150*time.Millisecond)
	err := c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: b.epoch,
		Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 3, Offset: 1}}})
	wantErr(t, "commit after the lease ran out", err, catalog.ErrUnknownMember)
	a.beat(t)
	wantPartitions(t, a, tp.Name, 0, 1, 2, 3, 4, 5)
	if el := time.Since(start); el > b.session+2*time.Second {
		t.Fatalf("reassignment took %v", el)
	}
	_, err = b.heartbeat(ctx)
	wantErr(t, "heartbeat after the lease ran out", err, catalog.ErrUnknownMember)
	// It joins again, afresh, and gets its share back once a acknowledges.
	b.epoch, b.owned = 0, nil
	settle(t, a, b)
	if n := len(partitionsOf(b.owned, tp.Name)); n != 3 {
		t.Fatalf("b owns %d partitions after rejoining, want 3", n)
	}
}

func testLeave(t *testing.T, c GroupCatalog) {
	tp := seedGroupTopic(t, c, 4)
	g := Name(t, "g")
	a, b := newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name)
	settle(t, a, b)
	b.epoch = catalog.LeaveEpoch
	if res := b.beat(t); res.MemberEpoch != catalog.LeaveEpoch || len(res.Assignment) != 0 {
		t.Fatalf("leave answered %+v", res)
	}
	a.beat(t)
	wantPartitions(t, a, tp.Name, 0, 1, 2, 3)
	if d := describe(t, c, g); len(d.Members) != 1 {
		t.Fatalf("%d members after a leave, want 1", len(d.Members))
	}
}

// testRejoin: a member joining again under its id (after fencing itself) gives up what
// its old incarnation held, at once, and gets a higher epoch.
func testRejoin(t *testing.T, c GroupCatalog) {
	tp := seedGroupTopic(t, c, 4)
	g := Name(t, "g")
	a, b := newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name)
	settle(t, a, b)
	old := a.epoch
	a.epoch, a.owned = 0, nil
	res := a.beat(t)
	if res.MemberEpoch <= old {
		t.Fatalf("rejoined at epoch %d, want above %d", res.MemberEpoch, old)
	}
	settle(t, a, b)
	if len(ownerMap(a, b)) != 4 {
		t.Fatalf("after rejoin: %v", ownerMap(a, b))
	}
}

func testMoreMembersThanPartitions(t *testing.T, c GroupCatalog) {
	tp := seedGroupTopic(t, c, 3)
	g := Name(t, "g")
	var ms []*member
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		ms = append(ms, newMember(c, g, id, tp.Name))
	}
	settle(t, ms...)
	with := 0
	for _, m := range ms {
		switch n := len(partitionsOf(m.owned, tp.Name)); n {
		case 0:
		case 1:
			with++
		default:
			t.Fatalf("member %s owns %d partitions", m.id, n)
		}
	}
	if with != 3 {
		t.Fatalf("%d members own a partition, want 3", with)
	}
	if d := describe(t, c, g); d.State != catalog.GroupStable || len(d.Members) != 5 {
		t.Fatalf("describe: %s with %d members", d.State, len(d.Members))
	}
}

func testRangeAssignor(t *testing.T, c GroupCatalog) {
	t1, t2 := seedGroupTopic(t, c, 4), seedGroupTopic(t, c, 4)
	g := Name(t, "g")
	var ms []*member
	for _, id := range []string{"a", "b", "c"} {
		m := newMember(c, g, id, t1.Name, t2.Name)
		m.assignor = catalog.AssignorRange
		ms = append(ms, m)
	}
	settle(t, ms...)
	want := map[string][]int32{"a": {0, 1}, "b": {2}, "c": {3}}
	for _, m := range ms {
		for _, topic := range []string{t1.Name, t2.Name} {
			if got := partitionsOf(m.owned, topic); !slices.Equal(got, want[m.id]) {
				t.Fatalf("range: %s owns %s %v, want %v", m.id, topic, got, want[m.id])
			}
		}
	}
	if d := describe(t, c, g); d.Assignor != catalog.AssignorRange {
		t.Fatalf("assignor %q", d.Assignor)
	}
}

func testRoundRobinAssignor(t *testing.T, c GroupCatalog) {
	t1, t2 := seedGroupTopic(t, c, 3), seedGroupTopic(t, c, 3)
	if t1.Name > t2.Name {
		t1, t2 = t2, t1
	}
	g := Name(t, "g")
	a, b := newMember(c, g, "a", t1.Name, t2.Name), newMember(c, g, "b", t1.Name, t2.Name)
	a.assignor, b.assignor = catalog.AssignorRoundRobin, catalog.AssignorRoundRobin
	settle(t, a, b)
	// Dealt in turn: (t1,0)a (t1,1)b (t1,2)a (t2,0)b (t2,1)a (t2,2)b.
	wantPartitions(t, a, t1.Name, 0, 2)
	wantPartitions(t, a, t2.Name, 1)
	wantPartitions(t, b, t1.Name, 1)
	wantPartitions(t, b, t2.Name, 0, 2)
}

func testAssignorChange(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 2)
	g := Name(t, "g")
	a, b := newMember(c, g, "a", tp.Name), newMember(c, g, "b", tp.Name)
	settle(t, a, b)
	b.assignor = catalog.AssignorRange
	_, err := b.heartbeat(ctx)
	wantErr(t, "changing the assignor under a live member", err, catalog.ErrInvalidGroupRequest)
	if d := describe(t, c, g); d.Assignor != catalog.AssignorSticky {
		t.Fatalf("assignor %q after a refused change", d.Assignor)
	}
}

// testSubscriptionChange: a member changing its subscription, and a topic growing, are
// assigned at the next heartbeat; a subscription to a topic that does not exist assigns
// nothing of it.
func testSubscriptionChange(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	t1, t2 := seedGroupTopic(t, c, 2), seedGroupTopic(t, c, 1)
	g := Name(t, "g")
	missing := Name(t, "missing")
	a := newMember(c, g, "a", t1.Name, missing)
	a.beat(t)
	wantPartitions(t, a, t1.Name, 0, 1)
	res, err := c.Heartbeat(ctx, catalog.Heartbeat{Group: g, MemberID: "a", MemberEpoch: a.epoch, Owned: a.owned, Topics: []string{t1.Name, t2.Name}})
	if err != nil {
		t.Fatal(err)
	}
	a.epoch, a.owned = res.MemberEpoch, res.Assignment
	wantPartitions(t, a, t2.Name, 0)
	if _, err := c.UpdateTopic(ctx, t1.Name, 3, nil); err != nil {
		t.Fatal(err)
	}
	a.beat(t)
	wantPartitions(t, a, t1.Name, 0, 1, 2)
}

func testOffsets(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 2)
	SeedRecords(t, c, tp.ID, 0, 2, 10) // high watermark 20
	SeedRecords(t, c, tp.ID, 1, 1, 5)  // 5
	g := Name(t, "g")
	a := newMember(c, g, "a", tp.Name)
	a.beat(t)
	commit := func(offs ...catalog.CommitOffset) error {
		return c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch, Offsets: offs})
	}
	if err := commit(catalog.CommitOffset{Topic: tp.Name, Partition: 0, Offset: 12, Metadata: "m0"},
		catalog.CommitOffset{Topic: tp.Name, Partition: 1, Offset: 5}); err != nil {
		t.Fatal(err)
	}
	offs := groupOffsets(t, c, g)
	if len(offs) != 2 || offs[0].Offset != 12 || offs[0].Metadata != "m0" || offs[0].Partition != 0 ||
		offs[1].Offset != 5 || offs[1].Partition != 1 || offs[0].Topic != tp.Name || offs[0].TopicID != tp.ID {
		t.Fatalf("offsets %+v", offs)
	}
	// Backwards is a seek, and allowed; the high watermark itself is allowed.
	if err := commit(catalog.CommitOffset{Topic: tp.Name, Partition: 0, Offset: 3}); err != nil {
		t.Fatalf("backward commit: %v", err)
	}
	if err := commit(catalog.CommitOffset{Topic: tp.Name, Partition: 0, Offset: 20}); err != nil {
		t.Fatalf("commit at the high watermark: %v", err)
	}
	offs = groupOffsets(t, c, g)
	if offs[0].Offset != 20 || offs[0].Metadata != "" {
		t.Fatalf("after recommit: %+v", offs[0])
	}
	if offs[0].CommittedAt.IsZero() {
		t.Fatal("no commit time")
	}
}

func testOffsetRefusals(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 2)
	SeedRecords(t, c, tp.ID, 0, 1, 10)
	g := Name(t, "g")
	a := newMember(c, g, "a", tp.Name)
	a.beat(t)
	commit := func(offs ...catalog.CommitOffset) error {
		return c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch, Offsets: offs})
	}
	for _, tc := range []struct {
		name string
		offs []catalog.CommitOffset
		want error
	}{
		{"beyond the high watermark", []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 11}}, catalog.ErrInvalidOffset},
		{"negative", []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: -1}}, catalog.ErrInvalidOffset},
		{"unknown topic", []catalog.CommitOffset{{Topic: Name(t, "nope"), Partition: 0, Offset: 0}}, catalog.ErrTopicNotFound},
		{"partition out of range", []catalog.CommitOffset{{Topic: tp.Name, Partition: 2, Offset: 0}}, catalog.ErrPartitionOutOfRange},
		{"one bad among good", []catalog.CommitOffset{{Topic: tp.Name, Partition: 1, Offset: 0}, {Topic: tp.Name, Partition: 0, Offset: 99}}, catalog.ErrInvalidOffset},
		{"twice the same partition", []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 1}, {Topic: tp.Name, Partition: 0, Offset: 2}}, catalog.ErrInvalidGroupRequest},
		{"none", nil, catalog.ErrInvalidGroupRequest},
		{"metadata too long", []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 1, Metadata: string(make([]byte, catalog.MaxOffsetMetadata+1))}}, catalog.ErrInvalidGroupRequest},
	} {
		wantErr(t, tc.name, commit(tc.offs...), tc.want)
	}
	if offs := groupOffsets(t, c, g); len(offs) != 0 {
		t.Fatalf("refused commits left offsets %+v", offs)
	}
	err := c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 1}}})
	wantErr(t, "commit from outside a group with live members", err, catalog.ErrGroupNotEmpty)
	err = c.CommitOffsets(ctx, catalog.OffsetCommit{Group: Name(t, "nogroup"), MemberID: "a", MemberEpoch: 1, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 1}}})
	wantErr(t, "member commit to an unknown group", err, catalog.ErrGroupNotFound)
	err = c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "zz", MemberEpoch: 1, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 1}}})
	wantErr(t, "commit by an unknown member", err, catalog.ErrUnknownMember)
}

func testResetAndDelete(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 2)
	SeedRecords(t, c, tp.ID, 0, 1, 10)
	g := Name(t, "g")
	// A commit from outside a group creates it (a consumer assigning partitions itself).
	if err := c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 4}}}); err != nil {
		t.Fatal(err)
	}
	a := newMember(c, g, "a", tp.Name)
	a.beat(t)
	err := c.ResetOffsets(ctx, g, []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 0}})
	wantErr(t, "reset with a live member", err, catalog.ErrGroupNotEmpty)
	wantErr(t, "delete with a live member", c.DeleteGroup(ctx, g), catalog.ErrGroupNotEmpty)
	a.epoch = catalog.LeaveEpoch
	a.beat(t)
	if err := c.ResetOffsets(ctx, g, []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 10}, {Topic: tp.Name, Partition: 1, Offset: 0}}); err != nil {
		t.Fatalf("reset: %v", err)
	}
	offs := groupOffsets(t, c, g)
	if len(offs) != 2 || offs[0].Offset != 10 || offs[1].Offset != 0 {
		t.Fatalf("after reset: %+v", offs)
	}
	err = c.ResetOffsets(ctx, g, []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 11}})
	wantErr(t, "reset beyond the high watermark", err, catalog.ErrInvalidOffset)
	if err := c.DeleteGroup(ctx, g); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = c.DescribeGroup(ctx, g)
	wantErr(t, "describe after delete", err, catalog.ErrGroupNotFound)
	_, err = c.GroupOffsets(ctx, g)
	wantErr(t, "offsets after delete", err, catalog.ErrGroupNotFound)
	wantErr(t, "delete again", c.DeleteGroup(ctx, g), catalog.ErrGroupNotFound)
	// Recreated: no old offsets.
	a.epoch = 0
	a.beat(t)
	if offs := groupOffsets(t, c, g); len(offs) != 0 {
		t.Fatalf("recreated group has offsets %+v", offs)
	}
}

func testLag(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 3)
	SeedRecords(t, c, tp.ID, 0, 2, 10) // 20
	SeedRecords(t, c, tp.ID, 1, 1, 7)  // 7
	g := Name(t, "g")
	a := newMember(c, g, "a", tp.Name)
	a.beat(t)
	if err := c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch,
		Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 15}}}); err != nil {
		t.Fatal(err)
	}
	lag, err := c.GroupLag(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		p                 int32
		committed, hw, lg int64
		owner             string
	}
	want := []row{{0, 15, 20, 5, "a"}, {1, -1, 7, 7, "a"}, {2, -1, 0, 0, "a"}}
	if len(lag) != len(want) {
		t.Fatalf("lag %+v", lag)
	}
	for i, w := range want {
		l := lag[i]
		if l.Partition != w.p || l.Committed != w.committed || l.HighWatermark != w.hw || l.Lag != w.lg || l.Owner != w.owner || l.Topic != tp.Name {
			t.Fatalf("lag[%d] = %+v, want %+v", i, l, w)
		}
	}
	_, err = c.GroupLag(ctx, Name(t, "nogroup"))
	wantErr(t, "lag of an unknown group", err, catalog.ErrGroupNotFound)
}

func testDescribeAndList(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 2)
	g1, g2 := Name(t, "ga"), Name(t, "gb")
	a := newMember(c, g1, "a", tp.Name)
	a.session = 5 * time.Second
	a.beat(t)
	b := newMember(c, g2, "b", tp.Name)
	b.beat(t)
	b.epoch = catalog.LeaveEpoch
	b.beat(t)
	d := describe(t, c, g1)
	if d.Name != g1 || d.State != catalog.GroupStable || d.Assignor != catalog.AssignorSticky || d.Epoch != a.epoch || len(d.Members) != 1 {
		t.Fatalf("describe %+v", d)
	}
	m := d.Members[0]
	if m.ID != "a" || m.Epoch != a.epoch || !slices.Equal(m.Topics, []string{tp.Name}) || m.SessionTimeout != 5*time.Second ||
		len(m.Assignment) != 1 || !slices.Equal(m.Assignment[0].Partitions, []int32{0, 1}) || len(m.Revoking)+len(m.Pending) != 0 {
		t.Fatalf("member %+v", m)
	}
	now, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left := m.ExpiresAt.Sub(now); left <= 0 || left > 5*time.Second {
		t.Fatalf("lease ends %v from now", left)
	}
	list, err := c.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]catalog.GroupSummary{}
	var names []string
	for _, s := range list {
		got[s.Name] = s
		names = append(names, s.Name)
	}
	if !slices.IsSorted(names) {
		t.Fatalf("list not ordered: %v", names)
	}
	if s := got[g1]; s.State != catalog.GroupStable || s.Members != 1 || s.Assignor != catalog.AssignorSticky {
		t.Fatalf("list %s: %+v", g1, s)
	}
	if s := got[g2]; s.State != catalog.GroupEmpty || s.Members != 0 {
		t.Fatalf("list %s: %+v", g2, s)
	}
	_, err = c.DescribeGroup(ctx, Name(t, "nogroup"))
	wantErr(t, "describe an unknown group", err, catalog.ErrGroupNotFound)
	_, err = c.DescribeGroup(ctx, "bad name!")
	wantErr(t, "describe an impossible group name", err, catalog.ErrGroupNotFound)
}

func testInvalidGroupRequests(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	tp := seedGroupTopic(t, c, 1)
	g := Name(t, "g")
	for _, tc := range []struct {
		name string
		hb   catalog.Heartbeat
		want error
	}{
		{"bad group name", catalog.Heartbeat{Group: "a/b", MemberID: "m", Topics: []string{tp.Name}}, catalog.ErrInvalidGroupName},
		{"empty member id", catalog.Heartbeat{Group: g, Topics: []string{tp.Name}}, catalog.ErrInvalidGroupRequest},
		{"member id with a space", catalog.Heartbeat{Group: g, MemberID: "a b", Topics: []string{tp.Name}}, catalog.ErrInvalidGroupRequest},
		{"join without topics", catalog.Heartbeat{Group: g, MemberID: "m"}, catalog.ErrInvalidGroupRequest},
		{"bad topic name", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{"a b"}}, catalog.ErrInvalidGroupRequest},
		{"session too short", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{tp.Name}, SessionTimeout: time.Millisecond}, catalog.ErrInvalidGroupRequest},
		{"unknown assignor", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{tp.Name}, Assignor: "best"}, catalog.ErrInvalidGroupRequest},
		{"negative owned partition", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{tp.Name}, Owned: []catalog.TopicPartitions{{Topic: tp.Name, Partitions: []int32{-1}}}}, catalog.ErrInvalidGroupRequest},
	} {
		_, err := c.Heartbeat(ctx, tc.hb)
		wantErr(t, tc.name, err, tc.want)
	}
	if _, err := c.DescribeGroup(ctx, g); !errors.Is(err, catalog.ErrGroupNotFound) {
		t.Fatalf("refused joins created the group: %v", err)
	}
}

// testConcurrentHeartbeats runs many members at once, spread over several catalogs on
// one database, joining and leaving while they heartbeat as fast as they can. Each
// member records, per partition, when it started holding it (after the answer granting
// it) and when it stopped (before the heartbeat acknowledging its revocation), on one
// counter shared by all: no two members' intervals for a partition may overlap, and at
// the end every partition has exactly one owner and the counts are balanced.
func testConcurrentHeartbeats(t *testing.T, open func(t *testing.T) GroupCatalog) {
	const (
		catalogs   = 3
		members    = 12
		partitions = 16
	)
	cats := make([]GroupCatalog, catalogs)
	for i := range cats {
		cats[i] = open(t)
	}
	tp := seedGroupTopic(t, cats[0], partitions)
	g := Name(t, "g")
	var clock atomic.Int64
	type interval struct {
		member     string
		start, end int64
	}
	var (
		mu        sync.Mutex
		intervals = map[int32][]interval{}
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, members)
	final := make([]*member, members)
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := newMember(cats[i%catalogs], g, fmt.Sprintf("m%02d", i), tp.Name)
			final[i] = m
			started := map[int32]int64{}
			// Members join staggered; the first three leave half-way and join again.
			time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			left := false
			for ctx.Err() == nil {
				if !left && i < 3 && clock.Load() > 0 && time.Until(deadlineOf(ctx)) < 1500*time.Millisecond {
					left = true
					stop := clock.Add(1)
					for p, s := range started {
						mu.Lock()
						intervals[p] = append(intervals[p], interval{m.id, s, stop})
						mu.Unlock()
					}
					started = map[int32]int64{}
					m.epoch, m.owned = catalog.LeaveEpoch, nil
					if _, err := m.heartbeat(context.Background()); err != nil {
						errs <- fmt.Errorf("leave of %s: %w", m.id, err)
						return
					}
					m.epoch = 0
					continue
				}
				// Stop what the last answer revoked before acknowledging it.
				now := map[int32]bool{}
				for _, p := range partitionsOf(m.owned, tp.Name) {
					now[p] = true
				}
				stop := clock.Add(1)
				for p, s := range started {
					if !now[p] {
						mu.Lock()
						intervals[p] = append(intervals[p], interval{m.id, s, stop})
						mu.Unlock()
						delete(started, p)
					}
				}
				_, err := m.heartbeat(context.Background())
				if err != nil {
					errs <- fmt.Errorf("heartbeat of %s: %w", m.id, err)
					return
				}
				at := clock.Add(1)
				for _, p := range partitionsOf(m.owned, tp.Name) {
					if _, ok := started[p]; !ok {
						started[p] = at
					}
				}
			}
			end := clock.Add(1)
			for p, s := range started {
				mu.Lock()
				intervals[p] = append(intervals[p], interval{m.id, s, end})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for p, ivs := range intervals {
		slices.SortFunc(ivs, func(a, b interval) int { return int(a.start - b.start) })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].start < ivs[i-1].end {
				t.Fatalf("partition %d: %s held it during [%d, %d] and %s from %d", p, ivs[i-1].member, ivs[i-1].start, ivs[i-1].end, ivs[i].member, ivs[i].start)
			}
		}
	}
	if len(intervals) != partitions {
		t.Fatalf("only %d of %d partitions were ever held", len(intervals), partitions)
	}
	// Settle and check the end state.
	settle(t, final...)
	owners := map[int32]string{}
	counts := map[string]int{}
	for _, m := range final {
		for _, p := range partitionsOf(m.owned, tp.Name) {
			if o, ok := owners[p]; ok {
				t.Fatalf("partition %d owned by %s and %s", p, o, m.id)
			}
			owners[p] = m.id
			counts[m.id]++
		}
	}
	if len(owners) != partitions {
		t.Fatalf("%d partitions owned at the end, want %d", len(owners), partitions)
	}
	lo, hi := partitions, 0
	for _, m := range final {
		lo, hi = min(lo, counts[m.id]), max(hi, counts[m.id])
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced: %v", counts)
	}
	t.Logf("%d members, %d holding intervals over %d partitions", members, sumLen(intervals), partitions)
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func sumLen[K comparable, V any](m map[K][]V) int {
	n := 0
	for v := range maps.Values(m) {
		n += len(v)
	}
	return n
}

func describe(t testing.TB, c catalog.Groups, g string) catalog.GroupDescription {
	t.Helper()
	d, err := c.DescribeGroup(t.Context(), g)
	if err != nil {
		t.Fatalf("describe %s: %v", g, err)
	}
	return d
}

func memberDesc(t testing.TB, d catalog.GroupDescription, id string) catalog.MemberDescription {
	t.Helper()
	for _, m := range d.Members {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("group %s has no member %s", d.Name, id)
	return catalog.MemberDescription{}
}

func groupOffsets(t testing.TB, c catalog.Groups, g string) []catalog.GroupOffset {
	t.Helper()
	offs, err := c.GroupOffsets(t.Context(), g)
	if err != nil {
		t.Fatalf("offsets of %s: %v", g, err)
	}
	return offs
}

// BenchmarkHeartbeats is for backends' benchmarks: heartbeats of a stable group of
// members members (one partition each), each member heartbeating in turn as a client
// does, never two at once. "serial" heartbeats one member after another (the latency of
// one heartbeat); "concurrent" runs every member at once (how many heartbeats the
// group's lock lets through: every heartbeat of a group holds it exclusively).
func BenchmarkHeartbeats(b *testing.B, c GroupCatalog, members int) {
	ctx := context.Background()
	tp, err := c.CreateTopic(ctx, Name(b, "bench"), int32(members), nil)
	if err != nil {
		b.Fatal(err)
	}
	g := Name(b, "g")
	ms := make([]*member, members)
	for i := range ms {
		ms[i] = newMember(c, g, fmt.Sprintf("m%03d", i), tp.Name)
	}
	settle(b, ms...)
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := ms[i%members].heartbeat(ctx); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
	})
	b.Run("concurrent", func(b *testing.B) {
		var left atomic.Int64
		left.Store(int64(b.N))
		errs := make(chan error, members)
		var wg sync.WaitGroup
		b.ResetTimer()
		for _, m := range ms {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if _, err := m.heartbeat(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
	})
}
