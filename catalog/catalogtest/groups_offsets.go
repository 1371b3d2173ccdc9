package catalogtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

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
		{"too many standby replicas", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{tp.Name}, Assignor: catalog.AssignorStreams, StandbyReplicas: catalog.MaxStandbyReplicas + 1}, catalog.ErrInvalidGroupRequest},
		{"negative standby replicas", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{tp.Name}, StandbyReplicas: -1}, catalog.ErrInvalidGroupRequest},
		{"negative task lag", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{tp.Name}, TaskLags: []catalog.TaskLag{{Topic: tp.Name, Lag: -1}}}, catalog.ErrInvalidGroupRequest},
		{"negative task partition", catalog.Heartbeat{Group: g, MemberID: "m", Topics: []string{tp.Name}, TaskLags: []catalog.TaskLag{{Topic: tp.Name, Partition: -1}}}, catalog.ErrInvalidGroupRequest},
	} {
		_, err := c.Heartbeat(ctx, tc.hb)
		wantErr(t, tc.name, err, tc.want)
	}
	if _, err := c.DescribeGroup(ctx, g); !errors.Is(err, catalog.ErrGroupNotFound) {
		t.Fatalf("refused joins created the group: %v", err)
	}
}
