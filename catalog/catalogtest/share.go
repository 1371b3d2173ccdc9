package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// ShareCatalog is a catalog with share groups (and consumer groups, whose ids they must
// not take).
type ShareCatalog interface {
	catalog.Catalog
	catalog.Groups
	catalog.ShareGroups
}

// runShareGroups runs the share-group conformance suite: acquisition, acknowledgement,
// lock expiry on the database clock, the delivery limit, the in-flight window, and
// bad acknowledgements that change nothing. Calls within one subtest answer catalogs
// on one store (the concurrency test spreads members over several).
func runShareGroups(t *testing.T, open func(t *testing.T) ShareCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c ShareCatalog)
	}{
		{"acquire_and_accept", testShareAcquireAccept},
		{"bad_acknowledgements_change_nothing", testShareBadAcks},
		{"lock_expiry_redelivers", testShareLockExpiry},
		{"delivery_limit_archives", testShareDeliveryLimit},
		{"window_bounds_acquisition", testShareWindow},
		{"leave_releases", testShareLeave},
		{"renew_extends_lock", testShareRenew},
		{"group_type_exclusive", testShareGroupType},
		{"configs_before_group", testShareConfigs},
		{"group_configs_drive_acquisition", testShareConfigsApply},
		{"offsets_admin_and_delete", testShareOffsetsAdmin},
		{"unknown_member_refused", testShareUnknownMember},
		{"acquisition_tied_acks", testShareAcquisitionAcks},
		{"dead_letter_pending", testShareDLQPending},
		{"dead_letter_commit_once_and_fenced", testShareDLQCommit},
		{"dead_letter_archive_without_copy", testShareDLQArchive},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
	t.Run("concurrent_members_accept_once", func(t *testing.T) { testShareConcurrent(t, open) })
}

// shareSetup makes a topic with records records on partition 0 and a share group with
// member ids joined, and answers the topic and group.
func shareSetup(t *testing.T, c ShareCatalog, partitions int32, records int32, members ...string) (catalog.Topic, string) {
	t.Helper()
	tp := SeedTopic(t, c, "share", partitions, nil)
	if records > 0 {
		SeedRecords(t, c, tp.ID, 0, 1, records)
	}
	group := Name(t, "sg")
	for _, m := range members {
		shareJoin(t, c, group, m, tp.Name)
	}
	return tp, group
}

func shareJoin(t testing.TB, c ShareCatalog, group, member string, topics ...string) catalog.ShareMember {
	t.Helper()
	m, err := c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: group, MemberID: member, MemberEpoch: catalog.JoinEpoch, Topics: topics})
	if err != nil {
		t.Fatalf("join %s to %s: %v", member, group, err)
	}
	return m
}

type acquireOpt struct {
	max, limit, locks int
	lock              time.Duration
}

func acquire(t testing.TB, c ShareCatalog, group, member, topic string, o acquireOpt) []catalog.AcquiredRange {
	t.Helper()
	if o.max == 0 {
		o.max = 100
	}
	res, err := c.ShareAcquire(t.Context(), catalog.ShareAcquire{Group: group, MemberID: member,
		Partitions: []catalog.ShareTP{{Topic: topic, Partition: 0}}, MaxRecords: o.max, LockDuration: o.lock,
		DeliveryLimit: o.limit, MaxLocks: o.locks, ResetEarliest: true})
	if err != nil {
		t.Fatalf("acquire for %s: %v", member, err)
	}
	var out []catalog.AcquiredRange
	for _, a := range res.Partitions {
		out = append(out, a.Ranges...)
	}
	return out
}

func ack(c ShareCatalog, ctx context.Context, group, member, topic string, limit int, bs ...catalog.AckBatch) error {
	res, err := c.ShareAcknowledge(ctx, catalog.ShareAck{Group: group, MemberID: member, DeliveryLimit: limit,
		Partitions: []catalog.ShareAckPartition{{ShareTP: catalog.ShareTP{Topic: topic, Partition: 0}, Batches: bs}}})
	if err != nil {
		return fmt.Errorf("call: %w", err)
	}
	return res[0]
}

func batch(first, last int64, types ...int8) catalog.AckBatch {
	return catalog.AckBatch{First: first, Last: last, Types: types}
}

// ranges flattens acquired ranges to [first, last, count] triples.
func ranges(rs []catalog.AcquiredRange) [][3]int64 {
	out := [][3]int64{}
	for _, r := range rs {
		out = append(out, [3]int64{r.First, r.Last, int64(r.DeliveryCount)})
	}
	return out
}

func wantRanges(t testing.TB, what string, got []catalog.AcquiredRange, want ...[3]int64) {
	t.Helper()
	if want == nil {
		want = [][3]int64{}
	}
	if g := ranges(got); !reflect.DeepEqual(g, want) {
		t.Fatalf("%s: acquired %v, want %v", what, g, want)
	}
}

func sharePartition(t testing.TB, c ShareCatalog, group string) catalog.SharePartitionState {
	t.Helper()
	d, err := c.DescribeShareGroup(t.Context(), group)
	if err != nil {
		t.Fatalf("describe %s: %v", group, err)
	}
	if len(d.Partitions) != 1 {
		t.Fatalf("describe %s: %d share-partitions, want 1", group, len(d.Partitions))
	}
	return d.Partitions[0]
}

func testShareAcquireAccept(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 10, "a")
	wantRanges(t, "first", acquire(t, c, g, "a", tp.Name, acquireOpt{max: 4}), [3]int64{0, 3, 1})
	wantRanges(t, "second", acquire(t, c, g, "a", tp.Name, acquireOpt{max: 4}), [3]int64{4, 7, 1})
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(0, 3, catalog.AckAccept)); err != nil {
		t.Fatalf("accept 0-3: %v", err)
	}
	// 5 accepted out of order: the start stays at 4 until 4 is done.
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(5, 5, catalog.AckAccept)); err != nil {
		t.Fatalf("accept 5: %v", err)
	}
	s := sharePartition(t, c, g)
	if s.StartOffset != 4 || s.Acquired != 3 || s.Acknowledged != 1 {
		t.Fatalf("after accepts: %+v, want start 4, 3 acquired, 1 acknowledged", s)
	}
	// Per-offset types: 4 accepted, 6 released, 7 rejected.
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(4, 4, catalog.AckAccept), batch(6, 7, catalog.AckRelease, catalog.AckReject)); err != nil {
		t.Fatalf("mixed acks: %v", err)
	}
	s = sharePartition(t, c, g)
	if s.StartOffset != 6 || s.Available != 1 || s.Archived != 1 {
		t.Fatalf("after mixed acks: %+v, want start 6, 1 available (6), 1 archived (7)", s)
	}
	wantRanges(t, "redelivery first, then new", acquire(t, c, g, "a", tp.Name, acquireOpt{}), [3]int64{6, 6, 2}, [3]int64{8, 9, 1})
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(6, 6, catalog.AckAccept), batch(8, 9, catalog.AckGap)); err != nil {
		t.Fatalf("accept the rest: %v", err)
	}
	offs, err := c.ShareOffsets(t.Context(), g)
	if err != nil || len(offs) != 1 || offs[0].StartOffset != 10 || offs[0].Lag != 0 {
		t.Fatalf("share offsets: %+v, %v; want start 10, lag 0", offs, err)
	}
	wantRanges(t, "nothing left", acquire(t, c, g, "a", tp.Name, acquireOpt{}))
}

func testShareBadAcks(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 20, "a", "b")
	wantRanges(t, "a", acquire(t, c, g, "a", tp.Name, acquireOpt{max: 6}), [3]int64{0, 5, 1})
	wantRanges(t, "b", acquire(t, c, g, "b", tp.Name, acquireOpt{max: 4}), [3]int64{6, 9, 1})
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(0, 0, catalog.AckAccept), batch(2, 2, catalog.AckRelease)); err != nil {
		t.Fatalf("setup acks: %v", err)
	}
	before := sharePartition(t, c, g)
	for _, tc := range []struct {
		name    string
		batches []catalog.AckBatch
		want    error
	}{
		{"held by another member", []catalog.AckBatch{batch(6, 6, catalog.AckAccept)}, catalog.ErrShareRecordState},
		{"never acquired (released)", []catalog.AckBatch{batch(2, 2, catalog.AckAccept)}, catalog.ErrShareRecordState},
		{"already acknowledged", []catalog.AckBatch{batch(0, 0, catalog.AckAccept)}, catalog.ErrShareRecordState},
		{"out of range", []catalog.AckBatch{batch(10, 12, catalog.AckAccept)}, catalog.ErrShareAckOutOfRange},
		{"good then bad: all refused", []catalog.AckBatch{batch(1, 1, catalog.AckAccept), batch(6, 6, catalog.AckAccept)}, catalog.ErrShareRecordState},
		{"overlapping ranges", []catalog.AckBatch{batch(3, 4, catalog.AckAccept), batch(4, 5, catalog.AckAccept)}, catalog.ErrInvalidShareAck},
		{"types not one per offset", []catalog.AckBatch{batch(3, 5, catalog.AckAccept, catalog.AckAccept)}, catalog.ErrInvalidShareAck},
		{"unknown type", []catalog.AckBatch{batch(3, 3, 9)}, catalog.ErrInvalidShareAck},
		{"first after last", []catalog.AckBatch{batch(4, 3, catalog.AckAccept)}, catalog.ErrInvalidShareAck},
	} {
		wantErr(t, tc.name, ack(c, t.Context(), g, "a", tp.Name, 0, tc.batches...), tc.want)
		if after := sharePartition(t, c, g); after != before {
			t.Fatalf("%s changed the share-partition: %+v, was %+v", tc.name, after, before)
		}
	}
	// Nothing in flight at all on another group: out of range, nothing created.
	g2 := Name(t, "sg")
	shareJoin(t, c, g2, "x", tp.Name)
	wantErr(t, "ack on an untouched share-partition", ack(c, t.Context(), g2, "x", tp.Name, 0, batch(0, 0, catalog.AckAccept)), catalog.ErrShareAckOutOfRange)
	if d, err := c.DescribeShareGroup(t.Context(), g2); err != nil || len(d.Partitions) != 0 {
		t.Fatalf("untouched group: %+v, %v; want no share-partitions", d, err)
	}
}

func testShareLockExpiry(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 3, "a", "b")
	const lock = 500 * time.Millisecond
	first := acquire(t, c, g, "a", tp.Name, acquireOpt{lock: lock})
	wantRanges(t, "a", first, [3]int64{0, 2, 1})
	// b finds nothing while a's lock holds; once it has passed (database clock), b gets
	// the records at delivery 2.
	var again []catalog.AcquiredRange
	deadline := time.Now().Add(30 * time.Second)
	for len(again) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("records never redelivered after their lock expired")
		}
		again = acquire(t, c, g, "b", tp.Name, acquireOpt{lock: lock})
	}
	wantRanges(t, "b after expiry", again, [3]int64{0, 2, 2})
	// b's acquisition time (its deadline less the lock) is at or after a's deadline,
	// both by the database clock: not before.
	if at := again[0].Deadline.Add(-lock); at.Before(first[0].Deadline) {
		t.Fatalf("redelivered at %v, before the lock deadline %v", at, first[0].Deadline)
	}
	// a's late acknowledgement is refused and does not accept b's delivery.
	wantErr(t, "late ack", ack(c, t.Context(), g, "a", tp.Name, 0, batch(0, 2, catalog.AckAccept)), catalog.ErrShareRecordState)
	if s := sharePartition(t, c, g); s.Acquired != 3 || s.Acknowledged != 0 {
		t.Fatalf("after the late ack: %+v, want 3 acquired by b", s)
	}
}

func testShareDeliveryLimit(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 2, "a")
	const limit = 3
	for i := 1; i <= limit; i++ {
		got := acquire(t, c, g, "a", tp.Name, acquireOpt{limit: limit, max: 1})
		wantRanges(t, fmt.Sprintf("delivery %d", i), got, [3]int64{0, 0, int64(i)})
		if err := ack(c, t.Context(), g, "a", tp.Name, limit, batch(0, 0, catalog.AckRelease)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	s := sharePartition(t, c, g)
	if s.StartOffset != 1 {
		t.Fatalf("after %d releases: %+v, want offset 0 archived and the start at 1", limit, s)
	}
	// Lock expiry at the limit archives too.
	wantRanges(t, "offset 1", acquire(t, c, g, "a", tp.Name, acquireOpt{limit: 1, lock: time.Millisecond}), [3]int64{1, 1, 1})
	deadline := time.Now().Add(30 * time.Second)
	for sharePartition(t, c, g).StartOffset != 2 {
		if time.Now().After(deadline) {
			t.Fatal("an expired lock at the delivery limit was never archived")
		}
		wantRanges(t, "nothing to redeliver", acquire(t, c, g, "a", tp.Name, acquireOpt{limit: 1}))
	}
}

func testShareWindow(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 10, "a")
	wantRanges(t, "window of 4", acquire(t, c, g, "a", tp.Name, acquireOpt{locks: 4}), [3]int64{0, 3, 1})
	wantRanges(t, "window full", acquire(t, c, g, "a", tp.Name, acquireOpt{locks: 4}))
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(0, 1, catalog.AckAccept)); err != nil {
		t.Fatal(err)
	}
	wantRanges(t, "window moved", acquire(t, c, g, "a", tp.Name, acquireOpt{locks: 4}), [3]int64{4, 5, 1})
}

func testShareLeave(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 5, "a", "b")
	wantRanges(t, "a", acquire(t, c, g, "a", tp.Name, acquireOpt{}), [3]int64{0, 4, 1})
	if _, err := c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: g, MemberID: "a", MemberEpoch: catalog.LeaveEpoch}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	wantRanges(t, "b gets a's records", acquire(t, c, g, "b", tp.Name, acquireOpt{}), [3]int64{0, 4, 2})
	_, err := c.ShareAcquire(t.Context(), catalog.ShareAcquire{Group: g, MemberID: "a", Partitions: []catalog.ShareTP{{Topic: tp.Name}}, MaxRecords: 1})
	wantErr(t, "acquire after leaving", err, catalog.ErrUnknownMember)
}

func testShareRenew(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 1, "a")
	wantRanges(t, "a", acquire(t, c, g, "a", tp.Name, acquireOpt{lock: 2 * time.Second}), [3]int64{0, 0, 1})
	res, err := c.ShareAcknowledge(t.Context(), catalog.ShareAck{Group: g, MemberID: "a", LockDuration: time.Hour,
		Partitions: []catalog.ShareAckPartition{{ShareTP: catalog.ShareTP{Topic: tp.Name}, Batches: []catalog.AckBatch{batch(0, 0, catalog.AckRenew)}}}})
	if err != nil || res[0] != nil {
		t.Fatalf("renew: %v, %v", err, res)
	}
	if s := sharePartition(t, c, g); s.Acquired != 1 {
		t.Fatalf("after renew: %+v, want still acquired", s)
	}
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(0, 0, catalog.AckAccept)); err != nil {
		t.Fatalf("accept after renew: %v", err)
	}
}

func testShareGroupType(t *testing.T, c ShareCatalog) {
	tp := SeedTopic(t, c, "share", 1, nil)
	cg := Name(t, "cg")
	if _, err := c.Heartbeat(t.Context(), catalog.Heartbeat{Group: cg, MemberID: "m", MemberEpoch: catalog.JoinEpoch, Topics: []string{tp.Name}}); err != nil {
		t.Fatalf("consumer join: %v", err)
	}
	_, err := c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: cg, MemberID: "s", MemberEpoch: catalog.JoinEpoch, Topics: []string{tp.Name}})
	wantErr(t, "share join on a consumer group", err, catalog.ErrGroupTypeMismatch)
	if ok, err := c.IsShareGroup(t.Context(), cg); err != nil || ok {
		t.Fatalf("IsShareGroup(consumer group) = %v, %v", ok, err)
	}
	_, err = c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: Name(t, "sg"), MemberID: "s", MemberEpoch: 3, Topics: []string{tp.Name}})
	wantErr(t, "heartbeat to no group", err, catalog.ErrGroupNotFound)
}

func testShareConfigs(t *testing.T, c ShareCatalog) {
	g := Name(t, "sg")
	want := map[string]string{catalog.ShareAutoOffsetReset: "earliest", catalog.ShareDeliveryLimit: "3"}
	if err := c.SetGroupConfigs(t.Context(), g, want); err != nil {
		t.Fatalf("set configs before the group exists: %v", err)
	}
	got, err := c.GroupConfigs(t.Context(), g)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("configs: %v, %v; want %v", got, err, want)
	}
	for _, bad := range []map[string]string{
		{catalog.ShareDeliveryLimit: "1"},
		{catalog.ShareAutoOffsetReset: "sometimes"},
		{catalog.ShareLockDurationMs: "10"},
		{"no.such.config": "x"},
	} {
		wantErr(t, fmt.Sprint("set ", bad), c.SetGroupConfigs(t.Context(), g, bad), catalog.ErrInvalidConfig)
	}
	if got, _ := c.GroupConfigs(t.Context(), g); !reflect.DeepEqual(got, want) {
		t.Fatalf("bad configs changed them: %v", got)
	}
	if err := c.SetGroupConfigs(t.Context(), g, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GroupConfigs(t.Context(), g); len(got) != 0 {
		t.Fatalf("cleared configs: %v", got)
	}
}

// testShareConfigsApply: acquire and acknowledge read the group's configs in their
// transaction: the reset, the delivery limit and the lock duration.
func testShareConfigsApply(t *testing.T, c ShareCatalog) {
	tp := SeedTopic(t, c, "share", 1, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 3)
	g := Name(t, "sg")
	if err := c.SetGroupConfigs(t.Context(), g, map[string]string{catalog.ShareAutoOffsetReset: "earliest",
		catalog.ShareDeliveryLimit: "2", catalog.ShareLockDurationMs: "45000"}); err != nil {
		t.Fatal(err)
	}
	shareJoin(t, c, g, "a", tp.Name)
	req := catalog.ShareAcquire{Group: g, MemberID: "a", Partitions: []catalog.ShareTP{{Topic: tp.Name}}, MaxRecords: 1}
	for i := 1; i <= 2; i++ {
		res, err := c.ShareAcquire(t.Context(), req)
		if err != nil || len(res.Partitions) != 1 || res.LockDuration != 45*time.Second {
			t.Fatalf("acquire %d: %+v, %v", i, res, err)
		}
		wantRanges(t, fmt.Sprintf("delivery %d from the earliest", i), res.Partitions[0].Ranges, [3]int64{0, 0, int64(i)})
		if err := ack(c, t.Context(), g, "a", tp.Name, 0, batch(0, 0, catalog.AckRelease)); err != nil {
			t.Fatal(err)
		}
	}
	if s := sharePartition(t, c, g); s.StartOffset != 1 {
		t.Fatalf("after two releases at the group's limit 2: %+v, want offset 0 archived", s)
	}
}

func testShareOffsetsAdmin(t *testing.T, c ShareCatalog) {
	tp := SeedTopic(t, c, "share", 1, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 20)
	g := Name(t, "sg")
	if err := c.AlterShareOffsets(t.Context(), g, []catalog.ShareOffset{{ShareTP: catalog.ShareTP{Topic: tp.Name}, StartOffset: 8}}); err != nil {
		t.Fatalf("alter on a new group: %v", err)
	}
	offs, err := c.ShareOffsets(t.Context(), g)
	if err != nil || len(offs) != 1 || offs[0].StartOffset != 8 || offs[0].Lag != 12 {
		t.Fatalf("offsets: %+v, %v; want start 8, lag 12", offs, err)
	}
	groups, err := c.ListShareGroups(t.Context())
	if err != nil || !contains(groups, g) {
		t.Fatalf("list: %v, %v; want %s in it", groups, err, g)
	}
	shareJoin(t, c, g, "a", tp.Name)
	wantRanges(t, "from the altered start", acquire(t, c, g, "a", tp.Name, acquireOpt{max: 2}), [3]int64{8, 9, 1})
	wantErr(t, "alter with a member", c.AlterShareOffsets(t.Context(), g, []catalog.ShareOffset{{ShareTP: catalog.ShareTP{Topic: tp.Name}}}), catalog.ErrGroupNotEmpty)
	wantErr(t, "delete offsets with a member", c.DeleteShareOffsets(t.Context(), g, []int64{tp.ID}), catalog.ErrGroupNotEmpty)
	wantErr(t, "delete group with a member", c.DeleteShareGroup(t.Context(), g), catalog.ErrGroupNotEmpty)
	if _, err := c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: g, MemberID: "a", MemberEpoch: catalog.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteShareOffsets(t.Context(), g, []int64{tp.ID}); err != nil {
		t.Fatalf("delete offsets: %v", err)
	}
	if offs, err := c.ShareOffsets(t.Context(), g); err != nil || len(offs) != 0 {
		t.Fatalf("offsets after delete: %+v, %v", offs, err)
	}
	if err := c.DeleteShareGroup(t.Context(), g); err != nil {
		t.Fatalf("delete group: %v", err)
	}
	_, err = c.DescribeShareGroup(t.Context(), g)
	wantErr(t, "describe deleted", err, catalog.ErrGroupNotFound)
	wantErr(t, "delete twice", c.DeleteShareGroup(t.Context(), g), catalog.ErrGroupNotFound)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func testShareUnknownMember(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 5, "a")
	_, err := c.ShareAcquire(t.Context(), catalog.ShareAcquire{Group: g, MemberID: "nobody", Partitions: []catalog.ShareTP{{Topic: tp.Name}}, MaxRecords: 1})
	wantErr(t, "acquire by a stranger", err, catalog.ErrUnknownMember)
	_, err = c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: g, MemberID: "nobody", MemberEpoch: 1})
	wantErr(t, "heartbeat by a stranger", err, catalog.ErrUnknownMember)
	m := shareJoin(t, c, g, "b", tp.Name)
	_, err = c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: g, MemberID: "b", MemberEpoch: m.Epoch + 5})
	wantErr(t, "heartbeat at a wrong epoch", err, catalog.ErrStaleMemberEpoch)
	if _, err := c.ShareHeartbeat(t.Context(), catalog.ShareHeartbeat{Group: g, MemberID: "b", MemberEpoch: m.Epoch}); err != nil {
		t.Fatalf("heartbeat at its epoch: %v", err)
	}
	// A live member joining again with the same subscription (an HTTP member's every
	// acquire) keeps its epoch and the group's; another subscription is a change.
	before, err := c.DescribeShareGroup(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	if again := shareJoin(t, c, g, "b", tp.Name); again.Epoch != m.Epoch {
		t.Fatalf("rejoin with the same topics: epoch %d, want %d kept", again.Epoch, m.Epoch)
	}
	if after, err := c.DescribeShareGroup(t.Context(), g); err != nil || after.Epoch != before.Epoch {
		t.Fatalf("rejoin with the same topics moved the group epoch %d → %d (%v)", before.Epoch, after.Epoch, err)
	}
	other := SeedTopic(t, c, "share-other", 1, nil)
	if moved := shareJoin(t, c, g, "b", tp.Name, other.Name); moved.Epoch == m.Epoch {
		t.Fatalf("rejoin with another subscription kept epoch %d", m.Epoch)
	}
}

// testShareConcurrent: members on several catalogs (nodes) acquire and accept at once;
// every record is accepted exactly once.
func testShareConcurrent(t *testing.T, open func(t *testing.T) ShareCatalog) {
	c := open(t)
	const records, members = 400, 6
	tp, g := shareSetup(t, c, 2, 0)
	SeedRecords(t, c, tp.ID, 0, 1, records/2)
	SeedRecords(t, c, tp.ID, 1, 1, records/2)
	var (
		mu       sync.Mutex
		accepted = map[[2]int64]int{}
		wg       sync.WaitGroup
		errs     = make(chan error, members)
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := range members {
		cat := c
		if i%2 == 1 {
			cat = open(t)
		}
		id := fmt.Sprintf("m%d", i)
		shareJoin(t, cat, g, id, tp.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				for {
					mu.Lock()
					n := len(accepted)
					mu.Unlock()
					if n == records {
						return nil
					}
					if ctx.Err() != nil {
						return fmt.Errorf("%s: %d of %d accepted: %w", id, n, records, ctx.Err())
					}
					res, err := cat.ShareAcquire(ctx, catalog.ShareAcquire{Group: g, MemberID: id, MaxRecords: 7, ResetEarliest: true,
						Partitions: []catalog.ShareTP{{Topic: tp.Name, Partition: 0}, {Topic: tp.Name, Partition: 1}}})
					if err != nil {
						return fmt.Errorf("%s: acquire: %w", id, err)
					}
					req := catalog.ShareAck{Group: g, MemberID: id}
					for _, a := range res.Partitions {
						if len(a.Ranges) == 0 {
							continue
						}
						p := catalog.ShareAckPartition{ShareTP: a.ShareTP}
						for _, r := range a.Ranges {
							p.Batches = append(p.Batches, batch(r.First, r.Last, catalog.AckAccept))
						}
						req.Partitions = append(req.Partitions, p)
					}
					if len(req.Partitions) == 0 {
						continue
					}
					out, err := cat.ShareAcknowledge(ctx, req)
					if err != nil {
						return fmt.Errorf("%s: ack: %w", id, err)
					}
					mu.Lock()
					for i, p := range req.Partitions {
						if out[i] != nil {
							mu.Unlock()
							return fmt.Errorf("%s: ack %s/%d: %w", id, p.Topic, p.Partition, out[i])
						}
						for _, b := range p.Batches {
							for o := b.First; o <= b.Last; o++ {
								accepted[[2]int64{int64(p.Partition), o}]++
							}
						}
					}
					mu.Unlock()
				}
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for k, n := range accepted {
		if n != 1 {
			t.Fatalf("partition %d offset %d accepted %d times", k[0], k[1], n)
		}
	}
	if len(accepted) != records {
		t.Fatalf("%d records accepted, want %d", len(accepted), records)
	}
}

// testShareAcquisitionAcks: an acknowledgement naming its acquisition (its delivery
// count, as HTTP's acquisition ids carry) is refused once the records were acquired
// again, even by the same member; an all-or-nothing acknowledgement with one refused
// partition changes nothing.
func testShareAcquisitionAcks(t *testing.T, c ShareCatalog) {
	tp, g := shareSetup(t, c, 1, 2, "a")
	const lock = 500 * time.Millisecond
	wantRanges(t, "first", acquire(t, c, g, "a", tp.Name, acquireOpt{lock: lock, max: 2}), [3]int64{0, 1, 1})
	// The same member acquires the same records again once the lock has passed.
	var again []catalog.AcquiredRange
	deadline := time.Now().Add(30 * time.Second)
	for len(again) == 0 || again[0].First != 0 {
		if time.Now().After(deadline) {
			t.Fatal("records never redelivered after their lock expired")
		}
		again = acquire(t, c, g, "a", tp.Name, acquireOpt{lock: time.Minute, max: 2})
	}
	wantRanges(t, "again", again, [3]int64{0, 1, 2})
	stale := catalog.AckBatch{First: 0, Last: 1, Types: []int8{catalog.AckAccept}, DeliveryCount: 1}
	before := sharePartition(t, c, g)
	wantErr(t, "the first acquisition's ack", ack(c, t.Context(), g, "a", tp.Name, 0, stale), catalog.ErrShareAcquisitionStale)
	if after := sharePartition(t, c, g); after != before {
		t.Fatalf("a stale ack changed the share-partition: %+v, was %+v", after, before)
	}
	// All or nothing: the current acquisition's accept and a refused one on the same
	// call: neither applies.
	cur := catalog.AckBatch{First: 0, Last: 1, Types: []int8{catalog.AckAccept}, DeliveryCount: 2}
	res, err := c.ShareAcknowledge(t.Context(), catalog.ShareAck{Group: g, MemberID: "a", AllOrNothing: true,
		Partitions: []catalog.ShareAckPartition{
			{ShareTP: catalog.ShareTP{Topic: tp.Name, Partition: 0}, Batches: []catalog.AckBatch{cur}},
			{ShareTP: catalog.ShareTP{Topic: tp.Name, Partition: 0}, Batches: []catalog.AckBatch{{First: 3, Last: 3, Types: []int8{catalog.AckAccept}, DeliveryCount: 1}}},
		}})
	if err != nil || res[0] != nil || !errors.Is(res[1], catalog.ErrShareAckOutOfRange) {
		t.Fatalf("all-or-nothing ack: %v, %v; want the second refused as out of range", res, err)
	}
	if after := sharePartition(t, c, g); after != before {
		t.Fatalf("a refused all-or-nothing ack changed the share-partition: %+v, was %+v", after, before)
	}
	if err := ack(c, t.Context(), g, "a", tp.Name, 0, cur); err != nil {
		t.Fatalf("the current acquisition's ack: %v", err)
	}
	if s := sharePartition(t, c, g); s.StartOffset != 2 {
		t.Fatalf("after the current ack: %+v, want start 2", s)
	}
	// Once accepted, the same acquisition's ack again is refused as stale.
	wantErr(t, "acknowledged already", ack(c, t.Context(), g, "a", tp.Name, 0, cur), catalog.ErrShareAcquisitionStale)
}
