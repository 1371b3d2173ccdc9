package catalog

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// cj is a consumer join of member id (NewMemberID when id is new) with protocols.
func cj(group, id, newID string, protos ...string) ClassicJoin {
	j := ClassicJoin{Group: group, MemberID: id, NewMemberID: newID, ClientID: "c", ClientHost: "h",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second, ProtocolType: "consumer"}
	if len(protos) == 0 {
		protos = []string{"range"}
	}
	for _, p := range protos {
		j.Protocols = append(j.Protocols, ClassicProtocol{Name: p, Metadata: []byte(p + "-" + newID + id)})
	}
	return j
}

func mustJoin(t *testing.T, g *ClassicGroup, now time.Time, j ClassicJoin) ClassicJoinResult {
	t.Helper()
	g.Advance(now)
	res, err := g.Join(now, j)
	if err != nil {
		t.Fatalf("join %s%s: %v", j.MemberID, j.NewMemberID, err)
	}
	return res
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}

// stableOf makes a stable group of the given members (each joined and synced).
func stableOf(t *testing.T, ids ...string) *ClassicGroup {
	t.Helper()
	g := NewClassicGroup("g", t0)
	for _, id := range ids {
		mustJoin(t, g, t0, cj("g", "", id))
	}
	for _, id := range ids { // all rejoin so the last rebalance completes with everyone
		if g.State == ClassicPreparingRebalance {
			mustJoin(t, g, t0, cj("g", id, ""))
		}
	}
	if g.State != ClassicCompletingRebalance {
		t.Fatalf("state %s, want CompletingRebalance", g.State)
	}
	var plan []ClassicAssignment
	for _, id := range ids {
		plan = append(plan, ClassicAssignment{MemberID: id, Assignment: []byte("a-" + id)})
	}
	if _, err := g.Sync(t0, ClassicSync{Group: "g", MemberID: g.Leader, Generation: g.Generation, Assignments: plan}); err != nil {
		t.Fatal(err)
	}
	if g.State != ClassicStable {
		t.Fatalf("state %s, want Stable", g.State)
	}
	return g
}

func TestClassicFirstMemberAndMemberIDRequired(t *testing.T) {
	g := NewClassicGroup("g", t0)
	j := cj("g", "", "m1")
	j.RequireKnownMemberID = true
	res := mustJoin(t, g, t0, j)
	if !res.MemberIDRequired || res.MemberID != "m1" || res.Answer != nil {
		t.Fatalf("v4 first join: %+v, want MEMBER_ID_REQUIRED with id m1", res)
	}
	if g.State != ClassicEmpty || g.Generation != 0 {
		t.Fatalf("a pending id changed the group: %s gen %d", g.State, g.Generation)
	}
	res = mustJoin(t, g, t0, cj("g", "m1", ""))
	if res.Answer == nil || res.Answer.Generation != 1 || res.Answer.Leader != "m1" || len(res.Answer.Members) != 1 {
		t.Fatalf("join with the id: %+v", res)
	}
	if g.State != ClassicCompletingRebalance || g.Protocol != "range" {
		t.Fatalf("state %s protocol %q", g.State, g.Protocol)
	}
	// A pending id that never joins lapses after its session.
	j2 := cj("g", "", "m2")
	j2.RequireKnownMemberID = true
	mustJoin(t, g, t0, j2)
	g.Advance(t0.Add(11 * time.Second))
	if _, ok := g.Members["m2"]; ok {
		t.Fatal("pending id m2 outlived its session")
	}
	_, err := g.Join(t0.Add(11*time.Second), cj("g", "m2", ""))
	wantIs(t, "join with a lapsed pending id", err, ErrUnknownMember)
}

func TestClassicRebalanceWaitsForEveryMember(t *testing.T) {
	g := stableOf(t, "a", "b")
	if g.Generation != 2 {
		t.Fatalf("generation %d, want 2 (a alone, then a and b)", g.Generation)
	}
	now := t0.Add(time.Second)
	res := mustJoin(t, g, now, cj("g", "", "c"))
	if res.Answer != nil || g.State != ClassicPreparingRebalance || !g.Deadline.Equal(now.Add(30*time.Second)) {
		t.Fatalf("c's join: answer %v, state %s, deadline %v", res.Answer, g.State, g.Deadline)
	}
	// a's heartbeat says to rejoin, and still renews a's session.
	reb, err := g.Heartbeat(now.Add(5*time.Second), ClassicHeartbeat{Group: "g", MemberID: "a", Generation: 2})
	if err != nil || !reb {
		t.Fatalf("heartbeat during the rebalance: %v %v, want rebalancing", reb, err)
	}
	if !g.Members["a"].SessionDeadline.Equal(now.Add(15 * time.Second)) {
		t.Fatalf("a's session not renewed: %v", g.Members["a"].SessionDeadline)
	}
	mustJoin(t, g, now.Add(6*time.Second), cj("g", "a", ""))
	if g.State != ClassicPreparingRebalance {
		t.Fatal("completed without b")
	}
	mustJoin(t, g, now.Add(7*time.Second), cj("g", "b", ""))
	if g.State != ClassicCompletingRebalance || g.Generation != 3 || g.Leader != "a" {
		t.Fatalf("after all joined: %s gen %d leader %s", g.State, g.Generation, g.Leader)
	}
	a, done, err := g.JoinAnswerFor("c", "", res.WaitGeneration)
	if !done || err != nil || a.Generation != 3 || a.Leader != "a" || len(a.Members) != 0 {
		t.Fatalf("c's held join: %+v %v %v", a, done, err)
	}
	a, _, _ = g.JoinAnswerFor("a", "", 2)
	if len(a.Members) != 3 {
		t.Fatalf("the leader's answer lists %d members, want 3", len(a.Members))
	}
}

func TestClassicRebalanceDeadlineRemovesLaggards(t *testing.T) {
	g := stableOf(t, "a", "b")
	// b's own rebalance timeout is longer: the group waits for the longest.
	j := cj("g", "b", "")
	j.RebalanceTimeout = time.Minute
	j.Protocols[0].Metadata = []byte("new subscription")
	res := mustJoin(t, g, t0.Add(time.Second), j)
	if !g.Deadline.Equal(t0.Add(time.Second + time.Minute)) {
		t.Fatalf("deadline %v, want b's minute", g.Deadline)
	}
	// a keeps heartbeating but never joins again.
	for s := 5; s < 60; s += 5 {
		g.Advance(t0.Add(time.Duration(s) * time.Second))
		if _, err := g.Heartbeat(t0.Add(time.Duration(s)*time.Second), ClassicHeartbeat{Group: "g", MemberID: "a", Generation: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if g.State != ClassicPreparingRebalance {
		t.Fatalf("completed before the deadline: %s", g.State)
	}
	if !g.Due(t0.Add(62 * time.Second)) {
		t.Fatal("not due at the deadline")
	}
	g.Advance(t0.Add(62 * time.Second))
	if g.State != ClassicCompletingRebalance || g.Generation != 3 || g.Members["a"] != nil {
		t.Fatalf("at the deadline: %s gen %d members %d", g.State, g.Generation, len(g.Members))
	}
	if a, done, err := g.JoinAnswerFor("b", "", res.WaitGeneration); !done || err != nil || a.Leader != "b" {
		t.Fatalf("b's answer: %+v %v %v", a, done, err)
	}
	_, err := g.Heartbeat(t0.Add(63*time.Second), ClassicHeartbeat{Group: "g", MemberID: "a", Generation: 2})
	wantIs(t, "removed member's heartbeat", err, ErrUnknownMember)
}

func TestClassicSync(t *testing.T) {
	g := NewClassicGroup("g", t0)
	mustJoin(t, g, t0, cj("g", "", "a"))
	mustJoin(t, g, t0, cj("g", "", "b")) // a completes alone first, then b starts a rebalance
	mustJoin(t, g, t0, cj("g", "a", ""))
	if g.State != ClassicCompletingRebalance || g.Generation != 2 {
		t.Fatalf("%s %d", g.State, g.Generation)
	}
	// Follower first: it waits.
	res, err := g.Sync(t0, ClassicSync{Group: "g", MemberID: "b", Generation: 2})
	if err != nil || res.Ready {
		t.Fatalf("follower sync: %+v %v, want to wait", res, err)
	}
	// Bad plans change nothing.
	before := g.Clone()
	_, err = g.Sync(t0, ClassicSync{Group: "g", MemberID: "a", Generation: 2, Assignments: []ClassicAssignment{{MemberID: "zz"}}})
	wantIs(t, "a plan naming an unknown member", err, ErrInvalidGroupRequest)
	_, err = g.Sync(t0, ClassicSync{Group: "g", MemberID: "a", Generation: 1})
	wantIs(t, "a stale generation", err, ErrIllegalGeneration)
	_, err = g.Sync(t0, ClassicSync{Group: "g", MemberID: "a", Generation: 2, Protocol: "roundrobin"})
	wantIs(t, "another protocol", err, ErrInconsistentGroupProtocol)
	_, err = g.Sync(t0, ClassicSync{Group: "g", MemberID: "nobody", Generation: 2})
	wantIs(t, "an unknown member", err, ErrUnknownMember)
	if ch := DiffClassic(before, g); ch.GroupChanged || len(ch.UpsertMembers)+len(ch.DeleteMembers) > 0 {
		t.Fatalf("refused syncs changed the group: %+v", ch)
	}
	// The leader leaves b out: b gets an empty assignment.
	res, err = g.Sync(t0, ClassicSync{Group: "g", MemberID: "a", Generation: 2, Assignments: []ClassicAssignment{{MemberID: "a", Assignment: []byte("all")}}})
	if err != nil || !res.Ready || string(res.Assignment) != "all" || g.State != ClassicStable {
		t.Fatalf("leader sync: %+v %v %s", res, err, g.State)
	}
	r, done, err := g.SyncAnswerFor("b", "", 2)
	if !done || err != nil || len(r.Assignment) != 0 || !r.Ready {
		t.Fatalf("b's held sync: %+v %v %v", r, done, err)
	}
}

func TestClassicSyncBeforeJoinAndDuringRebalance(t *testing.T) {
	g := NewClassicGroup("g", t0)
	_, err := g.Sync(t0, ClassicSync{Group: "g", MemberID: "a", Generation: 0})
	wantIs(t, "sync before join", err, ErrUnknownMember)
	g = stableOf(t, "a", "b")
	mustJoin(t, g, t0, cj("g", "", "c"))
	_, err = g.Sync(t0, ClassicSync{Group: "g", MemberID: "a", Generation: 2})
	wantIs(t, "sync while preparing", err, ErrRebalanceInProgress)
}

func TestClassicSyncDeadlineRemovesSilentMembers(t *testing.T) {
	g := NewClassicGroup("g", t0)
	mustJoin(t, g, t0, cj("g", "", "a"))
	mustJoin(t, g, t0, cj("g", "", "b"))
	mustJoin(t, g, t0, cj("g", "a", ""))
	// b syncs and waits; the leader a never syncs.
	if res, err := g.Sync(t0, ClassicSync{Group: "g", MemberID: "b", Generation: 2}); err != nil || res.Ready {
		t.Fatalf("%+v %v", res, err)
	}
	for s := 5; s < 30; s += 5 { // both stay alive; the leader just never syncs
		at := t0.Add(time.Duration(s) * time.Second)
		g.Advance(at)
		for _, id := range []string{"a", "b"} {
			if _, err := g.Heartbeat(at, ClassicHeartbeat{Group: "g", MemberID: id, Generation: 2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g.State != ClassicCompletingRebalance {
		t.Fatalf("before the sync deadline: %s", g.State)
	}
	g.Advance(t0.Add(31 * time.Second))
	if g.State != ClassicPreparingRebalance || g.Members["a"] != nil || g.Members["b"] == nil {
		t.Fatalf("after the sync deadline: %s, a removed %v, b kept %v", g.State, g.Members["a"] == nil, g.Members["b"] != nil)
	}
	if _, done, err := g.SyncAnswerFor("b", "", 2); !done || !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("b's held sync: %v %v, want REBALANCE_IN_PROGRESS", done, err)
	}
}

func TestClassicSessionExpiryRebalancesStableGroup(t *testing.T) {
	g := stableOf(t, "a", "b")
	now := t0.Add(8 * time.Second)
	if _, err := g.Heartbeat(now, ClassicHeartbeat{Group: "g", MemberID: "a", Generation: 2}); err != nil {
		t.Fatal(err)
	}
	g.Advance(t0.Add(11 * time.Second)) // b's session (10s from t0) ended
	if g.Members["b"] != nil || g.State != ClassicPreparingRebalance {
		t.Fatalf("b not expired: %s", g.State)
	}
	// a is the only member and has not joined yet: it is told to.
	reb, err := g.Heartbeat(t0.Add(12*time.Second), ClassicHeartbeat{Group: "g", MemberID: "a", Generation: 2})
	if err != nil || !reb {
		t.Fatalf("%v %v", reb, err)
	}
	res := mustJoin(t, g, t0.Add(12*time.Second), cj("g", "a", ""))
	if res.Answer == nil || res.Answer.Generation != 3 {
		t.Fatalf("%+v", res)
	}
}

func TestClassicStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	g := NewClassicGroup("g", t0)
	for _, id := range []string{"a", "b"} {
		j := cj("g", "", id)
		j.InstanceID = "inst-" + id
		mustJoin(t, g, t0, j)
	}
	ja := cj("g", "a", "")
	ja.InstanceID = "inst-a"
	mustJoin(t, g, t0, ja)
	if _, err := g.Sync(t0, ClassicSync{Group: "g", MemberID: "a", Generation: 2, Assignments: []ClassicAssignment{{"a", []byte("A")}, {"b", []byte("B")}}}); err != nil {
		t.Fatal(err)
	}
	gen := g.Generation
	// b restarts: a new process, the same instance id, no member id, and metadata that
	// differs (it owns nothing yet) for the same protocol.
	j := cj("g", "", "b2")
	j.InstanceID = "inst-b"
	res := mustJoin(t, g, t0.Add(time.Second), j)
	if res.Answer == nil || res.Answer.Generation != gen || res.MemberID != "b2" || g.State != ClassicStable {
		t.Fatalf("static rejoin: %+v state %s, want the same generation %d without a rebalance", res, g.State, gen)
	}
	s, err := g.Sync(t0.Add(time.Second), ClassicSync{Group: "g", MemberID: "b2", Generation: gen})
	if err != nil || string(s.Assignment) != "B" {
		t.Fatalf("the new instance's assignment: %q %v, want the old one's", s.Assignment, err)
	}
	_, err = g.Heartbeat(t0.Add(time.Second), ClassicHeartbeat{Group: "g", MemberID: "b", InstanceID: "inst-b", Generation: gen})
	wantIs(t, "the old instance", err, ErrFencedInstance)
	if _, _, err := g.SyncAnswerFor("b", "inst-b", gen); !errors.Is(err, ErrFencedInstance) {
		t.Fatalf("the old instance's held sync: %v", err)
	}
	// The static leader restarting is told to skip assigning.
	j = cj("g", "", "a2")
	j.InstanceID = "inst-a"
	j.Protocols = g.Members["a"].Protocols
	res = mustJoin(t, g, t0.Add(2*time.Second), j)
	if res.Answer == nil || !res.Answer.SkipAssignment || g.Leader != "a2" || g.Generation != gen {
		t.Fatalf("static leader rejoin: %+v leader %s", res.Answer, g.Leader)
	}
	// A restart whose protocols would change the group's choice rebalances.
	j = cj("g", "", "b3", "roundrobin")
	j.InstanceID = "inst-b"
	g.Members["a2"].Protocols = append(g.Members["a2"].Protocols, ClassicProtocol{Name: "roundrobin"})
	res = mustJoin(t, g, t0.Add(3*time.Second), j)
	if res.Answer != nil || g.State != ClassicPreparingRebalance {
		t.Fatalf("a static rejoin that changes the protocol: %+v, state %s, want a rebalance", res.Answer, g.State)
	}
}

func TestClassicLeaveAndGenerationsNeverReset(t *testing.T) {
	g := stableOf(t, "a", "b")
	errs := g.Leave(t0, []ClassicLeaver{{MemberID: "a"}, {MemberID: "zz"}, {InstanceID: "nope"}})
	if errs[0] != nil || !errors.Is(errs[1], ErrUnknownMember) || !errors.Is(errs[2], ErrUnknownMember) {
		t.Fatalf("leave answers: %v", errs)
	}
	if g.State != ClassicPreparingRebalance {
		t.Fatalf("state %s", g.State)
	}
	g.Leave(t0, []ClassicLeaver{{MemberID: "b"}})
	if g.State != ClassicEmpty || g.Generation != 3 {
		t.Fatalf("after the last leave: %s gen %d, want Empty at 3", g.State, g.Generation)
	}
	res := mustJoin(t, g, t0, cj("g", "", "c"))
	if res.Answer == nil || res.Answer.Generation != 4 {
		t.Fatalf("the next member's generation: %+v, want 4", res.Answer)
	}
}

func TestClassicProtocols(t *testing.T) {
	g := NewClassicGroup("g", t0)
	mustJoin(t, g, t0, cj("g", "", "a", "cooperative-sticky", "range"))
	j := cj("g", "", "b", "range", "cooperative-sticky")
	mustJoin(t, g, t0, j)
	mustJoin(t, g, t0, cj("g", "", "c", "cooperative-sticky"))
	mustJoin(t, g, t0, cj("g", "a", "", "cooperative-sticky", "range"))
	mustJoin(t, g, t0, cj("g", "b", "", "range", "cooperative-sticky"))
	if g.State != ClassicCompletingRebalance || g.Protocol != "cooperative-sticky" {
		t.Fatalf("vote: %s %q, want cooperative-sticky (2 votes to 1)", g.State, g.Protocol)
	}
	_, err := g.Join(t0, cj("g", "", "d", "roundrobin"))
	wantIs(t, "a join with no common protocol", err, ErrInconsistentGroupProtocol)
	j = cj("g", "", "e")
	j.ProtocolType = "connect"
	_, err = g.Join(t0, j)
	wantIs(t, "another protocol type", err, ErrInconsistentGroupProtocol)
	j = cj("g", "", "f")
	j.SessionTimeout = time.Millisecond
	_, err = g.Join(t0, j)
	wantIs(t, "a session timeout out of bounds", err, ErrInvalidSessionTimeout)
}

func TestClassicCommitChecks(t *testing.T) {
	g := stableOf(t, "a")
	if err := g.CheckCommit(t0, ClassicCommit{Group: "g", MemberID: "a", Generation: g.Generation}); err != nil {
		t.Fatal(err)
	}
	wantIs(t, "stale generation", g.CheckCommit(t0, ClassicCommit{Group: "g", MemberID: "a", Generation: g.Generation - 1}), ErrIllegalGeneration)
	wantIs(t, "unknown member", g.CheckCommit(t0, ClassicCommit{Group: "g", MemberID: "x", Generation: g.Generation}), ErrUnknownMember)
	mustJoin(t, g, t0, cj("g", "", "b"))
	if err := g.CheckCommit(t0, ClassicCommit{Group: "g", MemberID: "a", Generation: g.Generation}); err != nil {
		t.Fatalf("a commit while preparing is allowed (the member commits before rejoining): %v", err)
	}
	mustJoin(t, g, t0, cj("g", "a", ""))
	wantIs(t, "commit while completing", g.CheckCommit(t0, ClassicCommit{Group: "g", MemberID: "a", Generation: g.Generation}), ErrRebalanceInProgress)
}

func TestClassicMirrorLease(t *testing.T) {
	g := stableOf(t, "a", "b")
	m := g.Mirror()
	if len(m) != 2 || !m["a"].ExpiresAt.Equal(t0.Add(10*time.Second)) || m["a"].Epoch != 2 {
		t.Fatalf("mirror of a stable group: %+v", m["a"])
	}
	mustJoin(t, g, t0.Add(time.Second), cj("g", "a", ""))
	// a waits in the rebalance: its lease covers the deadline and a session after it.
	if got, want := g.Mirror()["a"].ExpiresAt, t0.Add(time.Second+30*time.Second+10*time.Second); !got.Equal(want) {
		t.Fatalf("joining member's lease %v, want %v", got, want)
	}
}

func TestCheckGroupType(t *testing.T) {
	for _, tc := range []struct {
		current string
		live    int
		want    string
		ok      bool
	}{
		{"", 0, GroupTypeClassic, true},
		{GroupTypeConsumer, 0, GroupTypeClassic, true},
		{GroupTypeConsumer, 1, GroupTypeClassic, false},
		{GroupTypeClassic, 3, GroupTypeClassic, true},
		{GroupTypeClassic, 1, GroupTypeConsumer, false},
	} {
		got, err := CheckGroupType("g", tc.current, tc.live, tc.want)
		if tc.ok != (err == nil) || tc.ok && got != tc.want {
			t.Errorf("CheckGroupType(%q, %d, %q) = %q, %v", tc.current, tc.live, tc.want, got, err)
		}
		if err != nil && !errors.Is(err, ErrInconsistentGroupProtocol) {
			t.Errorf("error %v is not ErrInconsistentGroupProtocol", err)
		}
	}
}

func TestClassicProtocolsEncoding(t *testing.T) {
	ps := []ClassicProtocol{{"range", []byte{0, 1, 2}}, {"x", nil}, {"cooperative-sticky", bytes.Repeat([]byte{7}, 300)}}
	got, err := DecodeClassicProtocols(EncodeClassicProtocols(ps))
	if err != nil || !sameProtocols(got, ps) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := DecodeClassicProtocols([]byte{0, 5, 'a'}); err == nil {
		t.Fatal("a truncated encoding decoded")
	}
}

func FuzzDecodeClassicProtocols(f *testing.F) {
	f.Add(EncodeClassicProtocols([]ClassicProtocol{{"range", []byte("meta")}}))
	f.Add([]byte{0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := DecodeClassicProtocols(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeClassicProtocols(ps), b) {
			t.Fatalf("re-encoding %x differs", b)
		}
	})
}
