package catalogtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

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
	// Under Kafka's rule (a KIP-848 member's OffsetCommit), a gave it back at its current
	// epoch: its commit alone of what it processed is taken, as Kafka takes any commit
	// at the member's epoch; not at an older epoch.
	kafkaCommit := func(epoch int32) error {
		return c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: a.id, MemberEpoch: epoch, Released: true,
			Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 5, Offset: 9}}})
	}
	if err := kafkaCommit(a.epoch); err != nil {
		t.Fatalf("a Kafka member's late commit, at its epoch, of a partition it gave back: %v", err)
	}
	if err := kafkaCommit(a.epoch - 1); err == nil && a.epoch > 1 {
		t.Fatalf("a Kafka member's late commit at an older epoch was accepted")
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
	// Two epochs back is stale for a heartbeat. A commit is taken at any epoch from the
	// one each of its partitions was granted at (KIP-1251): partition 1 was b's at eb,
	// partition 0 only since b.epoch.
	_, err = c.Heartbeat(ctx, catalog.Heartbeat{Group: g, MemberID: "b", MemberEpoch: eb - 1, Owned: b.owned})
	wantErr(t, "heartbeat two epochs back", err, catalog.ErrStaleMemberEpoch)
	err = c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: eb,
		Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 0, Offset: 0}}})
	wantErr(t, "commit at the previous epoch of a partition granted since", err, catalog.ErrStaleMemberEpoch)
	err = c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: eb,
		Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 1, Offset: 0}}})
	if err != nil {
		t.Fatalf("commit at the epoch partition 1 was granted at (%d, the member is at %d): %v", eb, b.epoch, err)
	}
	err = c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: eb - 1,
		Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: 1, Offset: 0}}})
	wantErr(t, "commit before partition 1 was granted", err, catalog.ErrStaleMemberEpoch)
	// The same through a flush's group offsets (Postgres checks them in SQL).
	for _, tc := range []struct {
		epoch int32
		part  int32
		want  error
	}{{eb, 1, nil}, {eb, 0, catalog.ErrStaleMemberEpoch}, {eb - 1, 1, catalog.ErrStaleMemberEpoch}} {
		seg := Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 1, Records: 1}))
		seg.Requests[0].GroupOffsets = &catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: tc.epoch,
			Offsets: []catalog.CommitOffset{{Topic: tp.Name, Partition: tc.part, Offset: 0}}}
		if res := commitOne(t, c, seg); !errors.Is(res[0].Err, tc.want) || (tc.want == nil) != (res[0].Err == nil) {
			t.Fatalf("flush committing partition %d at epoch %d (b at %d, granted 1 at %d): %v, want %v", tc.part, tc.epoch, b.epoch, eb, res[0].Err, tc.want)
		}
	}
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
