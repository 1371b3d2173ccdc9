package kafka_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
)

// The classic protocol by hand: the held requests, the empty assignment of a member the
// leader left out, and bad input — each answered with its Kafka error code and changing
// nothing.

func (r raw) join(group, member string, protocolType string) *kmsg.JoinGroupResponse {
	r.t.Helper()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Group, j.MemberID, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = group, member, 10000, 10000, protocolType
	p := kmsg.NewJoinGroupRequestProtocol()
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{"bad"}}
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	j.Protocols = append(j.Protocols, p)
	return r.do(j).(*kmsg.JoinGroupResponse)
}

// joinNew joins a new member: MEMBER_ID_REQUIRED, then again with the id.
func (r raw) joinNew(group string) (string, *kmsg.JoinGroupResponse) {
	r.t.Helper()
	first := r.join(group, "", "consumer")
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		r.t.Fatalf("first join: error %d id %q, want MEMBER_ID_REQUIRED with an id", first.ErrorCode, first.MemberID)
	}
	return first.MemberID, r.join(group, first.MemberID, "consumer")
}

func (r raw) sync(group, member string, gen int32, plan map[string][]byte) *kmsg.SyncGroupResponse {
	r.t.Helper()
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = group, member, gen
	for id, a := range plan {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		s.GroupAssignment = append(s.GroupAssignment, ga)
	}
	return r.do(s).(*kmsg.SyncGroupResponse)
}

func (r raw) heartbeat(group, member string, gen int32) int16 {
	r.t.Helper()
	h := kmsg.NewPtrHeartbeatRequest()
	h.Group, h.MemberID, h.Generation = group, member, gen
	return r.do(h).(*kmsg.HeartbeatResponse).ErrorCode
}

func (r raw) commit(group, member string, gen int32, topic string, partition int32, offset int64) int16 {
	r.t.Helper()
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Group, c.MemberID, c.Generation = group, member, gen
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = partition, offset
	ct.Partitions = append(ct.Partitions, cp)
	c.Topics = append(c.Topics, ct)
	return r.do(c).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// consumerJoin is a KIP-848 member's first ConsumerGroupHeartbeat: its error code.
func (r raw) consumerJoin(group, member, topic string) int16 {
	r.t.Helper()
	h := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	h.Version = 0
	h.Group, h.MemberID, h.MemberEpoch, h.RebalanceTimeoutMillis = group, member, 0, 10000
	h.SubscribedTopicNames = []string{topic}
	return r.do(h).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
}

// snapshot is what a refusal must leave as it was: the group as the catalog describes
// it, and its offsets.
func snapshot(t *testing.T, n *node, group string) any {
	t.Helper()
	info, err := n.core.DescribeAnyGroup(t.Context(), broker.Anonymous, group)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := n.core.GroupOffsets(t.Context(), broker.Anonymous, group)
	if err != nil {
		t.Fatal(err)
	}
	for i := range offs {
		offs[i].CommittedAt = time.Time{}
	}
	return []any{*info.Classic, offs}
}

func TestClassicProtocolByHand(t *testing.T) {
	n := startNode(t, openSQLite(t), kafka.Config{})
	r := rawTo(t, n)
	createTopic(t, n, "bad", 2)
	produceN(t, n, "bad", 20) // 10 on each partition
	const g = "hand"

	// a joins alone (generation 1) and is the leader; b's join starts a rebalance
	// and is held until a joins again.
	a, ja := r.joinNew(g)
	if ja.ErrorCode != 0 || ja.Generation != 1 || ja.LeaderID != a || len(ja.Members) != 1 {
		t.Fatalf("a's join: %+v", ja)
	}
	if s := r.sync(g, a, 1, map[string][]byte{a: []byte("x")}); s.ErrorCode != 0 {
		t.Fatalf("a's sync: %d", s.ErrorCode)
	}
	first := r.join(g, "", "consumer")
	b := first.MemberID
	held := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { held <- r.join(g, b, "consumer") }()
	testwait.Until(t, 5*time.Second, "a is told to rejoin", func() bool { return r.heartbeat(g, a, 1) == kerr.RebalanceInProgress.Code })
	ja = r.join(g, a, "consumer")
	jb := <-held
	if ja.Generation != 2 || jb.Generation != 2 || ja.LeaderID != a || len(ja.Members) != 2 || len(jb.Members) != 0 {
		t.Fatalf("the rebalance: a %+v b %+v", ja, jb)
	}
	// b syncs first and is held; the leader leaves b out: b gets a decodable empty
	// assignment.
	heldSync := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { heldSync <- r.sync(g, b, 2, nil) }()
	if s := r.sync(g, a, 2, map[string][]byte{a: []byte("all of it")}); s.ErrorCode != 0 || string(s.MemberAssignment) != "all of it" {
		t.Fatalf("leader sync: %+v", s)
	}
	sb := <-heldSync
	var empty kmsg.ConsumerMemberAssignment
	if sb.ErrorCode != 0 || len(sb.MemberAssignment) == 0 || empty.ReadFrom(sb.MemberAssignment) != nil || len(empty.Topics) != 0 {
		t.Fatalf("b's held sync: %+v, want an empty consumer assignment", sb)
	}
	if code := r.commit(g, a, 2, "bad", 0, 4); code != 0 {
		t.Fatalf("a's commit: %d", code)
	}

	before := snapshot(t, n, g)
	for _, tc := range []struct {
		what string
		got  int16
		want *kerr.Error
	}{
		{"heartbeat of an unknown member", r.heartbeat(g, "nobody", 2), kerr.UnknownMemberID},
		{"heartbeat at a stale generation", r.heartbeat(g, a, 1), kerr.IllegalGeneration},
		{"join with another protocol type", r.join(g, "", "connect").ErrorCode, kerr.InconsistentGroupProtocol},
		{"join as an unknown member", r.join(g, "nobody", "consumer").ErrorCode, kerr.UnknownMemberID},
		{"sync before join", r.sync(g, "never-joined", 2, nil).ErrorCode, kerr.UnknownMemberID},
		{"sync at a stale generation", r.sync(g, a, 1, nil).ErrorCode, kerr.IllegalGeneration},
		{"commit past the high watermark", r.commit(g, a, 2, "bad", 0, 11), kerr.OffsetOutOfRange},
		{"commit of a partition out of range", r.commit(g, a, 2, "bad", 7, 1), kerr.UnknownTopicOrPartition},
		{"commit at a stale generation", r.commit(g, a, 2-1, "bad", 0, 5), kerr.IllegalGeneration},
		{"commit by an unknown member", r.commit(g, "nobody", 2, "bad", 0, 5), kerr.UnknownMemberID},
		{"commit from outside a group with members", r.commit(g, "", -1, "bad", 0, 5), kerr.UnknownMemberID},
		{"KIP-848 member joining a classic group", r.consumerJoin(g, "kip848-1", "bad"), kerr.InconsistentGroupProtocol},
	} {
		if tc.got != tc.want.Code {
			t.Errorf("%s: error %d, want %s", tc.what, tc.got, tc.want.Message)
		}
	}
	if after := snapshot(t, n, g); !reflect.DeepEqual(after, before) {
		t.Fatalf("bad input changed the group:\n%+v\nwant\n%+v", after, before)
	}

	// A leader's plan naming a member that is not in the generation is refused, and
	// the group stays where it was (completing the rebalance).
	c := r.join(g, "", "consumer").MemberID
	held = make(chan *kmsg.JoinGroupResponse, 3)
	go func() { held <- r.join(g, c, "consumer") }()
	testwait.Until(t, 5*time.Second, "the rebalance for c started", func() bool { return r.heartbeat(g, a, 2) == kerr.RebalanceInProgress.Code })
	go func() { held <- r.join(g, b, "consumer") }()
	ja = r.join(g, a, "consumer")
	<-held
	<-held
	mid := snapshot(t, n, g)
	if code := r.sync(g, a, ja.Generation, map[string][]byte{a: nil, "intruder": []byte("x")}).ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("a plan naming an unknown member: error %d, want INVALID_REQUEST", code)
	}
	if after := snapshot(t, n, g); !reflect.DeepEqual(after, mid) {
		t.Fatalf("the refused plan changed the group:\n%+v\nwant\n%+v", after, mid)
	}
	if s := mid.([]any)[0].(catalog.ClassicDescription); s.State != catalog.ClassicCompletingRebalance || len(s.Members) != 3 {
		t.Fatalf("before the plan: %+v", s)
	}

	// LeaveGroup v3+ batches members: the known ones leave, each unknown one is
	// answered on its own.
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Group = g
	for _, id := range []string{a, "nobody", b} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		l.Members = append(l.Members, m)
	}
	lr := r.do(l).(*kmsg.LeaveGroupResponse)
	if lr.ErrorCode != 0 || len(lr.Members) != 3 || lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code || lr.Members[2].ErrorCode != 0 {
		t.Fatalf("batched leave: %+v", lr)
	}
	info, _ := n.core.DescribeAnyGroup(t.Context(), broker.Anonymous, g)
	if len(info.Classic.Members) != 1 || info.Classic.Members[0].ID != c {
		t.Fatalf("after the leave: %+v", info.Classic)
	}
}
