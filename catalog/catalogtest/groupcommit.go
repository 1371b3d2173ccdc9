package catalogtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// testFlushOffsetsAgree guards the twins of the offset-commit check: CommitOffsets runs
// engine.CheckOffsetCommit in Go on every backend, while a flush that carries group
// offsets may check them in SQL (Postgres's strata_commit_groups, in its one round
// trip). For every refusal, both must answer the same error — sentinel and message,
// worked out here from known figures — and change nothing, while the plain request
// beside the refused one in the flush commits.
func testFlushOffsetsAgree(t *testing.T, c GroupCatalog) {
	ctx := t.Context()
	in := seedGroupTopic(t, c, 2)
	out := seedGroupTopic(t, c, 1)
	SeedRecords(t, c, in.ID, 0, 1, 10) // high watermark 10
	SeedRecords(t, c, in.ID, 1, 1, 5)  // 5
	g := Name(t, "g")
	a, b := newMember(c, g, "a", in.Name), newMember(c, g, "b", in.Name)
	settle(t, a, b) // a owns partition 0, b partition 1 (sticky, members by id)
	wantPartitions(t, a, in.Name, 0)
	wantPartitions(t, b, in.Name, 1)
	// A member whose lease has ended (but that no heartbeat has removed yet).
	late := newMember(c, g, "late", in.Name)
	late.session = catalog.MinSessionTimeout
	late.beat(t)
	lateEpoch := late.epoch
	time.Sleep(2 * catalog.MinSessionTimeout)

	if err := c.CommitOffsets(ctx, catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch,
		Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: 2}}}); err != nil {
		t.Fatal(err)
	}
	offs := func(os ...catalog.CommitOffset) []catalog.CommitOffset { return os }
	at := func(p int32, off int64) catalog.CommitOffset {
		return catalog.CommitOffset{Topic: in.Name, Partition: p, Offset: off}
	}
	nope := Name(t, "nope")
	memberless := Name(t, "solo")
	for _, tc := range []struct {
		name  string
		oc    catalog.OffsetCommit
		want  error
		code  string // catalog.Refused*: the message is OffsetCommitRefusal's
		row   int
		value int64
	}{
		{"not the owner", catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch, Offsets: offs(at(1, 1))},
			catalog.ErrNotOwner, engine.RefusedNotOwner, 0, 0},
		{"stale epoch", catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch + 1, Offsets: offs(at(0, 1))},
			catalog.ErrStaleMemberEpoch, engine.RefusedStaleMemberEpoch, 0, int64(a.epoch)},
		{"an epoch before the partition's grant", catalog.OffsetCommit{Group: g, MemberID: "b", MemberEpoch: b.epoch - 1, Offsets: offs(at(1, 1))},
			catalog.ErrStaleMemberEpoch, engine.RefusedStaleAssignmentEpoch, 0, int64(b.epoch)},
		{"unknown member", catalog.OffsetCommit{Group: g, MemberID: "zz", MemberEpoch: 1, Offsets: offs(at(0, 1))},
			catalog.ErrUnknownMember, engine.RefusedUnknownMember, 0, 0},
		{"lease ended", catalog.OffsetCommit{Group: g, MemberID: "late", MemberEpoch: lateEpoch, Offsets: offs(at(0, 1))},
			catalog.ErrUnknownMember, engine.RefusedUnknownMember, 0, 0},
		{"unknown group", catalog.OffsetCommit{Group: Name(t, "nogroup"), MemberID: "a", MemberEpoch: 1, Offsets: offs(at(0, 1))},
			catalog.ErrGroupNotFound, engine.RefusedGroupNotFound, 0, 0},
		{"unknown topic, second offset", catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch,
			Offsets: offs(at(0, 1), catalog.CommitOffset{Topic: nope, Partition: 0, Offset: 0})},
			catalog.ErrTopicNotFound, engine.RefusedTopicNotFound, 1, 0},
		{"partition out of range", catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch, Offsets: offs(at(2, 0))},
			catalog.ErrPartitionOutOfRange, engine.RefusedPartitionOutOfRange, 0, 2},
		{"beyond the high watermark", catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch, Offsets: offs(at(0, 11))},
			catalog.ErrInvalidOffset, engine.RefusedInvalidOffset, 0, 10},
		{"the first failing offset decides", catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch,
			Offsets: offs(at(0, 11), catalog.CommitOffset{Topic: nope, Partition: 0, Offset: 0})},
			catalog.ErrInvalidOffset, engine.RefusedInvalidOffset, 0, 10},
		{"without a member, beside live members", catalog.OffsetCommit{Group: g, Offsets: offs(at(0, 1))},
			catalog.ErrGroupNotEmpty, engine.RefusedGroupNotEmpty, 0, 0},
		{"without a member, beyond the high watermark", catalog.OffsetCommit{Group: memberless, Offsets: offs(at(1, 6))},
			catalog.ErrInvalidOffset, engine.RefusedInvalidOffset, 0, 5},
		{"malformed, to an unknown group", catalog.OffsetCommit{Group: Name(t, "nogroup"), MemberID: "a", MemberEpoch: 1, Offsets: offs(at(0, -1))},
			catalog.ErrInvalidOffset, "", 0, 0},
	} {
		direct := c.CommitOffsets(ctx, tc.oc)
		oc := tc.oc
		seg := Flush(NewKey(t), Req(B{TopicID: out.ID, Partition: 0, Records: 1}), Req(B{TopicID: out.ID, Partition: 0, Records: 1}))
		seg.Requests[0].GroupOffsets = &oc
		before := Partition(t, c, out.ID, 0).HighWatermark
		res := commitOne(t, c, seg)
		if hw := Partition(t, c, out.ID, 0).HighWatermark; res[1].Err != nil || hw != before+1 {
			t.Fatalf("%s: the flush moved the high watermark from %d to %d (want one record: the plain request's, whose error is %v; the refused one's is %v)",
				tc.name, before, hw, res[1].Err, res[0].Err)
		}
		for _, got := range []struct {
			how string
			err error
		}{{"CommitOffsets", direct}, {"a flush's group offsets", res[0].Err}} {
			if !errors.Is(got.err, tc.want) {
				t.Fatalf("%s, by %s: %v, want %v", tc.name, got.how, got.err, tc.want)
			}
			if tc.code == "" {
				continue
			}
			if msg := engine.OffsetCommitRefusal(tc.oc, tc.code, tc.row, tc.value).Error(); !strings.Contains(got.err.Error(), msg) {
				t.Fatalf("%s, by %s: %q, want it to say %q", tc.name, got.how, got.err, msg)
			}
		}
		if got := committedOffsets(t, c, g); got[0] != 2 || len(got) != 1 {
			t.Fatalf("%s: the group's offsets moved to %v", tc.name, got)
		}
	}
	// The refused commit without a member left no group behind, by either path.
	if _, err := c.DescribeGroup(ctx, memberless); !errors.Is(err, catalog.ErrGroupNotFound) {
		t.Fatalf("a refused commit without a member created its group: %v", err)
	}

	// Accepted: a member's offsets, and two requests of one flush on one partition (the
	// later wins); a commit without a member creates its group.
	seg := Flush(NewKey(t), Req(B{TopicID: out.ID, Partition: 0, Records: 1}), Req(B{TopicID: out.ID, Partition: 0, Records: 1}),
		Req(B{TopicID: out.ID, Partition: 0, Records: 1}))
	seg.Requests[0].GroupOffsets = &catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch, Offsets: offs(at(0, 7))}
	seg.Requests[1].GroupOffsets = &catalog.OffsetCommit{Group: g, MemberID: "a", MemberEpoch: a.epoch, Offsets: offs(at(0, 9))}
	seg.Requests[2].GroupOffsets = &catalog.OffsetCommit{Group: memberless, Offsets: offs(at(1, 5))}
	MustCommit(t, c, seg)
	if got := committedOffsets(t, c, g); got[0] != 9 {
		t.Fatalf("two requests of a flush committed %v, want the later's 9", got)
	}
	if got := groupOffsets(t, c, memberless); len(got) != 1 || got[0].Offset != 5 || got[0].Partition != 1 {
		t.Fatalf("a commit without a member stored %+v, want partition 1 at 5", got)
	}
	if d := describe(t, c, memberless); d.Assignor != catalog.DefaultAssignor || len(d.Members) != 0 {
		t.Fatalf("the group a commit created: %+v", d)
	}
}
