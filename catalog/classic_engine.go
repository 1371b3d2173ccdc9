package catalog

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// The classic state machine (after franz-go's kfake and Kafka's GroupCoordinator; see
// ../shared/notes/kafka-protocol.md §2). Every method runs on a group loaded under its
// lock at the database clock's now; a backend calls Advance first, then the request's
// method, and writes what changed. On an error the backend writes only what Advance
// changed.
//
//	Empty ──join──► PreparingRebalance ──all joined, or deadline──► CompletingRebalance
//	                     ▲                                                │ leader syncs
//	                     └──── join with new metadata, leave, expiry ◄── Stable
//
// Generations only grow: a completed rebalance bumps it, even one that leaves the group
// empty.

// Advance applies the transitions due at now: ids handed out by MEMBER_ID_REQUIRED
// and sessions that expired, a rebalance whose deadline passed or whose members have
// all joined again, a sync deadline. It reports whether anything changed.
func (g *ClassicGroup) Advance(now time.Time) bool {
	changed := false
	for range 4 { // each round moves at most one phase; a few suffice
		if !g.advanceOnce(now) {
			break
		}
		changed = true
	}
	return changed
}

func (g *ClassicGroup) advanceOnce(now time.Time) bool {
	changed := false
	for id, m := range g.Members {
		if m.Pending && !m.SessionDeadline.After(now) {
			delete(g.Members, id)
			changed = true
		}
	}
	expired := func(m *ClassicMember) bool { return !m.Pending && !m.SessionDeadline.After(now) }
	switch g.State {
	case ClassicStable:
		if g.removeWhere(expired) {
			g.rebalance(now)
			return true
		}
	case ClassicPreparingRebalance:
		// A member waiting in JoinGroup is not expired: the rebalance deadline
		// bounds it.
		changed = g.removeWhere(func(m *ClassicMember) bool { return !m.Joining && expired(m) }) || changed
		if !g.Deadline.After(now) || g.allJoined() {
			g.complete(now)
			return true
		}
	case ClassicCompletingRebalance:
		if !g.Deadline.After(now) {
			g.removeWhere(func(m *ClassicMember) bool { return !m.Pending && !m.Syncing })
			g.rebalance(now)
			return true
		}
		// A member waiting in SyncGroup is bounded by the sync deadline.
		if g.removeWhere(func(m *ClassicMember) bool { return !m.Syncing && expired(m) }) {
			g.rebalance(now)
			return true
		}
	}
	return changed
}

// Due reports whether Advance would change anything at now.
func (g *ClassicGroup) Due(now time.Time) bool { return g.Clone().Advance(now) }

// NextDeadline is when the group's next timed transition falls due (zero: none), so a
// waiter knows when to apply it.
func (g *ClassicGroup) NextDeadline() time.Time {
	var next time.Time
	at := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	at(g.Deadline)
	for _, m := range g.Members {
		switch {
		case m.Pending:
			at(m.SessionDeadline)
		case g.State == ClassicPreparingRebalance && m.Joining, g.State == ClassicCompletingRebalance && m.Syncing:
		default:
			at(m.SessionDeadline)
		}
	}
	return next
}

// members counts members, not pending ids.
func (g *ClassicGroup) members() int {
	n := 0
	for _, m := range g.Members {
		if !m.Pending {
			n++
		}
	}
	return n
}

func (g *ClassicGroup) allJoined() bool {
	for _, m := range g.Members {
		if !m.Pending && !m.Joining {
			return false
		}
	}
	return true
}

// removeWhere removes the members (never pending ids) for which f holds.
func (g *ClassicGroup) removeWhere(f func(*ClassicMember) bool) bool {
	removed := false
	for id, m := range g.Members {
		if !m.Pending && f(m) {
			delete(g.Members, id)
			removed = true
		}
	}
	return removed
}

func (g *ClassicGroup) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.Members {
		if !m.Pending {
			d = max(d, m.RebalanceTimeout)
		}
	}
	return d
}

// rebalance enters PreparingRebalance: syncs waiting see the state change (and answer
// REBALANCE_IN_PROGRESS); the deadline is set when the state is entered, from the
// largest rebalance timeout of the members (each member's own: librdkafka sends its
// max.poll.interval.ms), and completes at once if every member has joined.
func (g *ClassicGroup) rebalance(now time.Time) {
	for _, m := range g.Members {
		m.Syncing = false
	}
	if g.State != ClassicPreparingRebalance {
		g.State = ClassicPreparingRebalance
		g.Deadline = now.Add(g.maxRebalanceTimeout())
	}
	if g.allJoined() {
		g.complete(now)
	}
}

// complete ends PreparingRebalance: members that did not join again are removed, the
// generation is bumped, the protocol chosen by vote, the leader kept if it joined, and
// every member's session restarts (their joins are answered now).
func (g *ClassicGroup) complete(now time.Time) {
	g.removeWhere(func(m *ClassicMember) bool { return !m.Joining })
	if g.Generation == math.MaxInt32 {
		g.Generation = 0 // wraps to 1 below: 0 is the generation before the first
	}
	g.Generation++
	if g.members() == 0 {
		g.State, g.Protocol, g.Leader, g.Deadline = ClassicEmpty, "", "", time.Time{}
		return
	}
	g.State = ClassicCompletingRebalance
	g.Protocol = g.vote()
	if m := g.Members[g.Leader]; m == nil || m.Pending {
		g.Leader = g.firstMember()
	}
	for _, m := range g.Members {
		if m.Pending {
			continue
		}
		m.Generation, m.Joining, m.Syncing = g.Generation, false, false
		m.SessionDeadline = now.Add(m.SessionTimeout)
	}
	g.Deadline = now.Add(g.maxRebalanceTimeout())
}

// firstMember is the member that joined first (ties by id).
func (g *ClassicGroup) firstMember() string {
	var first *ClassicMember
	for _, m := range g.Members {
		if m.Pending {
			continue
		}
		if first == nil || m.JoinedAt.Before(first.JoinedAt) || m.JoinedAt.Equal(first.JoinedAt) && m.ID < first.ID {
			first = m
		}
	}
	return first.ID
}

// supportedByAll lists the protocols every member supports, but except (a member about
// to change its protocols, or "").
func (g *ClassicGroup) supportedByAll(except string) map[string]bool {
	var common map[string]bool
	for id, m := range g.Members {
		if m.Pending || id == except {
			continue
		}
		mine := map[string]bool{}
		for _, p := range m.Protocols {
			if common == nil || common[p.Name] {
				mine[p.Name] = true
			}
		}
		common = mine
	}
	return common
}

// vote chooses the protocol, as Kafka: among those every member supports, each member
// votes for the first in its order of preference; the most votes win (ties by name).
func (g *ClassicGroup) vote() string {
	candidates := g.supportedByAll("")
	votes := map[string]int{}
	for _, m := range g.Members {
		if m.Pending {
			continue
		}
		for _, p := range m.Protocols {
			if candidates[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for name, v := range votes {
		if best == "" || v > votes[best] || v == votes[best] && name < best {
			best = name
		}
	}
	return best
}

// accepts reports whether a joiner with these protocols fits the group: the same
// protocol type, and one protocol every member supports.
func (g *ClassicGroup) accepts(protocolType string, protocols []ClassicProtocol, self string) bool {
	others := 0
	for id, m := range g.Members {
		if !m.Pending && id != self {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if protocolType != g.ProtocolType {
		return false
	}
	common := g.supportedByAll(self)
	for _, p := range protocols {
		if common[p.Name] {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []ClassicProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y ClassicProtocol) bool {
		return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata)
	})
}

// byInstance finds the member (or pending id) of a static instance.
func (g *ClassicGroup) byInstance(instance string) *ClassicMember {
	for _, m := range g.Members {
		if m.InstanceID == instance {
			return m
		}
	}
	return nil
}

// checkInstance: a request naming an instance must come from its current member.
func (g *ClassicGroup) checkInstance(instance, memberID string) error {
	if instance == "" {
		return nil
	}
	m := g.byInstance(instance)
	if m == nil {
		return fmt.Errorf("%w: no member of group %s has group.instance.id %s", ErrUnknownMember, g.Name, instance)
	}
	if m.ID != memberID {
		return fmt.Errorf("%w: group.instance.id %s of group %s belongs to member %s now, not %s", ErrFencedInstance, instance, g.Name, m.ID, memberID)
	}
	return nil
}

// member finds a member (not a pending id), or answers why not.
func (g *ClassicGroup) member(id, instance string) (*ClassicMember, error) {
	if err := g.checkInstance(instance, id); err != nil {
		return nil, err
	}
	m := g.Members[id]
	if m == nil || m.Pending {
		return nil, fmt.Errorf("%w: %s is not a member of group %s (its session may have expired): join again", ErrUnknownMember, id, g.Name)
	}
	return m, nil
}

// gone answers a waiter whose member is no longer in the group: fenced by a newer
// instance with the same group.instance.id, or unknown.
func (g *ClassicGroup) gone(id, instance string) error {
	if instance != "" {
		if m := g.byInstance(instance); m != nil && m.ID != id {
			return fmt.Errorf("%w: group.instance.id %s of group %s was taken over by member %s", ErrFencedInstance, instance, g.Name, m.ID)
		}
	}
	return fmt.Errorf("%w: %s is no longer a member of group %s: join again", ErrUnknownMember, id, g.Name)
}

// Join applies a JoinGroup (after Advance). The type rule (CheckGroupType) is the
// backend's, which knows the other type's live members.
func (g *ClassicGroup) Join(now time.Time, j ClassicJoin) (ClassicJoinResult, error) {
	if err := ValidateClassicJoin(j); err != nil {
		return ClassicJoinResult{}, err
	}
	if j.RebalanceTimeout == 0 {
		j.RebalanceTimeout = j.SessionTimeout
	}
	self := j.MemberID
	if old := g.byInstance(j.InstanceID); self == "" && j.InstanceID != "" && old != nil {
		self = old.ID // a static member's new instance replaces it
	}
	if !g.accepts(j.ProtocolType, j.Protocols, self) {
		return ClassicJoinResult{}, fmt.Errorf("%w: group %s uses protocol type %q and protocols its members all support; this member supports none of them",
			ErrInconsistentGroupProtocol, g.Name, g.ProtocolType)
	}
	if j.MemberID == "" {
		if j.InstanceID != "" {
			if old := g.byInstance(j.InstanceID); old != nil {
				return g.replaceStatic(now, old, j), nil
			}
		}
		if len(g.Members) >= MaxClassicMembers {
			return ClassicJoinResult{}, fmt.Errorf("%w: group %s has %d members, the most a classic group may have", ErrInvalidGroupRequest, g.Name, MaxClassicMembers)
		}
		m := g.newMember(now, j)
		if j.RequireKnownMemberID && j.InstanceID == "" {
			m.Pending = true
			g.Members[m.ID] = m
			return ClassicJoinResult{MemberID: m.ID, MemberIDRequired: true}, nil
		}
		return g.joinAndWait(now, m, j.ProtocolType), nil
	}
	if err := g.checkInstance(j.InstanceID, j.MemberID); err != nil {
		return ClassicJoinResult{}, err
	}
	m := g.Members[j.MemberID]
	if m == nil {
		return ClassicJoinResult{}, fmt.Errorf("%w: %s is not a member of group %s: join with an empty member id", ErrUnknownMember, j.MemberID, g.Name)
	}
	if m.Pending {
		m.Pending = false
		g.update(now, m, j)
		return g.joinAndWait(now, m, j.ProtocolType), nil
	}
	switch g.State {
	case ClassicCompletingRebalance:
		if sameProtocols(m.Protocols, j.Protocols) {
			return g.answerNow(now, m, false), nil
		}
	case ClassicStable:
		if m.ID != g.Leader && sameProtocols(m.Protocols, j.Protocols) {
			return g.answerNow(now, m, false), nil
		}
	case ClassicEmpty:
		return ClassicJoinResult{}, fmt.Errorf("%w: %s is not a member of group %s", ErrUnknownMember, m.ID, g.Name)
	}
	g.update(now, m, j)
	return g.joinAndWait(now, m, j.ProtocolType), nil
}

func (g *ClassicGroup) newMember(now time.Time, j ClassicJoin) *ClassicMember {
	m := &ClassicMember{ID: j.NewMemberID, JoinedAt: now}
	g.update(now, m, j)
	return m
}

// update takes a join's details into m.
func (g *ClassicGroup) update(now time.Time, m *ClassicMember, j ClassicJoin) {
	m.InstanceID, m.ClientID, m.ClientHost = j.InstanceID, j.ClientID, j.ClientHost
	m.SessionTimeout, m.RebalanceTimeout = j.SessionTimeout, j.RebalanceTimeout
	m.Protocols = slices.Clone(j.Protocols)
	m.Topics, _ = NormalizeTopics(j.Topics) // validated; nil stays nil
	if j.Topics == nil {
		m.Topics = nil
	}
	m.SessionDeadline = now.Add(m.SessionTimeout)
}

// joinAndWait makes m wait in the rebalance (starting one if needed): answered now if
// that completes it, else once a later generation completes.
func (g *ClassicGroup) joinAndWait(now time.Time, m *ClassicMember, protocolType string) ClassicJoinResult {
	delete(g.Members, m.ID)
	if g.members() == 0 {
		g.ProtocolType = protocolType // the first member sets it (accepts checked the others)
	}
	g.Members[m.ID] = m
	m.Joining = true
	wait := g.Generation
	g.rebalance(now)
	res := ClassicJoinResult{MemberID: m.ID, WaitGeneration: wait}
	if a, done, _ := g.JoinAnswerFor(m.ID, m.InstanceID, wait); done {
		res.Answer = &a
	}
	return res
}

// answerNow answers a join from the current generation without a rebalance.
func (g *ClassicGroup) answerNow(now time.Time, m *ClassicMember, skip bool) ClassicJoinResult {
	m.SessionDeadline = now.Add(m.SessionTimeout)
	a := g.answer(m.ID)
	a.SkipAssignment = skip && m.ID == g.Leader
	return ClassicJoinResult{MemberID: m.ID, Answer: &a, WaitGeneration: g.Generation}
}

// replaceStatic takes a static member's rejoin under a new id (KIP-345): the old id is
// fenced; a stable group whose vote would still choose its protocol keeps its
// generation and the assignment (the leader is told to skip assigning), as Kafka does —
// the metadata may differ (a restarted consumer owns nothing yet) —, otherwise it
// rebalances.
func (g *ClassicGroup) replaceStatic(now time.Time, old *ClassicMember, j ClassicJoin) ClassicJoinResult {
	delete(g.Members, old.ID)
	m := g.newMember(now, j)
	if old.Pending {
		return g.joinAndWait(now, m, j.ProtocolType)
	}
	m.JoinedAt, m.Generation, m.Assignment = old.JoinedAt, old.Generation, old.Assignment
	if g.Leader == old.ID {
		g.Leader = m.ID
	}
	g.Members[m.ID] = m
	if g.State == ClassicStable && g.supportedByAll("")[g.Protocol] && g.vote() == g.Protocol {
		return g.answerNow(now, m, true)
	}
	return g.joinAndWait(now, m, j.ProtocolType)
}

// answer is the join answer of member id at the current generation.
func (g *ClassicGroup) answer(id string) ClassicJoinAnswer {
	a := ClassicJoinAnswer{Generation: g.Generation, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Leader: g.Leader, MemberID: id}
	if id != g.Leader {
		return a
	}
	for _, m := range g.sortedMembers() {
		if m.Generation != g.Generation {
			continue
		}
		jm := ClassicJoinMember{ID: m.ID, InstanceID: m.InstanceID}
		for _, p := range m.Protocols {
			if p.Name == g.Protocol {
				jm.Metadata = p.Metadata
				break
			}
		}
		a.Members = append(a.Members, jm)
	}
	return a
}

// sortedMembers lists the members (not pending ids) by join time, then id.
func (g *ClassicGroup) sortedMembers() []*ClassicMember {
	out := make([]*ClassicMember, 0, len(g.Members))
	for _, m := range g.Members {
		if !m.Pending {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *ClassicMember) int {
		return cmp.Or(a.JoinedAt.Compare(b.JoinedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// JoinAnswerFor answers a join of member id that waits since generation wait: done is
// false while the rebalance has not completed; err when the member is gone.
func (g *ClassicGroup) JoinAnswerFor(id, instance string, wait int32) (ClassicJoinAnswer, bool, error) {
	if g.Generation == wait {
		return ClassicJoinAnswer{}, false, nil
	}
	m := g.Members[id]
	if m == nil || m.Pending || m.Generation != g.Generation {
		return ClassicJoinAnswer{}, true, g.gone(id, instance)
	}
	return g.answer(id), true, nil
}

// Sync applies a SyncGroup (after Advance). The leader's stores the plan and makes the
// group stable; a follower's waits for it.
func (g *ClassicGroup) Sync(now time.Time, s ClassicSync) (ClassicSyncResult, error) {
	if err := ValidateClassicSync(s); err != nil {
		return ClassicSyncResult{}, err
	}
	m, err := g.member(s.MemberID, s.InstanceID)
	if err != nil {
		return ClassicSyncResult{}, err
	}
	if s.Generation != g.Generation {
		return ClassicSyncResult{}, fmt.Errorf("%w: sync at generation %d, group %s is at %d", ErrIllegalGeneration, s.Generation, g.Name, g.Generation)
	}
	if s.ProtocolType != "" && s.ProtocolType != g.ProtocolType || s.Protocol != "" && s.Protocol != g.Protocol {
		return ClassicSyncResult{}, fmt.Errorf("%w: group %s uses %s/%s, not %s/%s", ErrInconsistentGroupProtocol, g.Name, g.ProtocolType, g.Protocol, s.ProtocolType, s.Protocol)
	}
	switch g.State {
	case ClassicPreparingRebalance:
		return ClassicSyncResult{}, fmt.Errorf("%w: group %s is rebalancing: join again", ErrRebalanceInProgress, g.Name)
	case ClassicStable:
		m.SessionDeadline = now.Add(m.SessionTimeout)
		return g.syncAnswer(m), nil
	case ClassicCompletingRebalance:
	default:
		return ClassicSyncResult{}, fmt.Errorf("%w: %s is not a member of group %s", ErrUnknownMember, m.ID, g.Name)
	}
	if m.ID != g.Leader {
		m.Syncing = true
		return ClassicSyncResult{ProtocolType: g.ProtocolType, Protocol: g.Protocol}, nil
	}
	plan := make(map[string][]byte, len(s.Assignments))
	var unknown []string
	for _, a := range s.Assignments {
		if o := g.Members[a.MemberID]; o == nil || o.Pending {
			unknown = append(unknown, a.MemberID)
			continue
		}
		if _, dup := plan[a.MemberID]; dup {
			return ClassicSyncResult{}, fmt.Errorf("%w: the assignment names member %s twice", ErrInvalidGroupRequest, a.MemberID)
		}
		plan[a.MemberID] = a.Assignment
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return ClassicSyncResult{}, fmt.Errorf("%w: the assignment names %d members that are not in generation %d of group %s (first %s)",
			ErrInvalidGroupRequest, len(unknown), g.Generation, g.Name, truncateName(unknown[0]))
	}
	for _, o := range g.Members {
		if o.Pending {
			continue
		}
		o.Assignment = plan[o.ID]
		if o.Syncing || o.ID == m.ID {
			o.SessionDeadline = now.Add(o.SessionTimeout) // answered now
		}
		o.Syncing = false
	}
	g.State, g.SyncedGeneration, g.Deadline = ClassicStable, g.Generation, time.Time{}
	return g.syncAnswer(m), nil
}

func (g *ClassicGroup) syncAnswer(m *ClassicMember) ClassicSyncResult {
	return ClassicSyncResult{Ready: true, Assignment: m.Assignment, ProtocolType: g.ProtocolType, Protocol: g.Protocol}
}

// SyncAnswerFor answers a sync of member id at generation gen that waits for the
// leader's: done is false while it still should.
func (g *ClassicGroup) SyncAnswerFor(id, instance string, gen int32) (ClassicSyncResult, bool, error) {
	m := g.Members[id]
	if m == nil || m.Pending {
		return ClassicSyncResult{}, true, g.gone(id, instance)
	}
	if g.Generation == gen && g.State == ClassicCompletingRebalance {
		return ClassicSyncResult{}, false, nil
	}
	if g.Generation == gen && g.SyncedGeneration == gen {
		return g.syncAnswer(m), true, nil
	}
	return ClassicSyncResult{}, true, fmt.Errorf("%w: group %s started another rebalance: join again", ErrRebalanceInProgress, g.Name)
}

// Heartbeat renews a member's session (after Advance); rebalancing says a rebalance is
// in progress (the session is renewed all the same, so a member busy in its poll loop is
// not expired before it can join again).
func (g *ClassicGroup) Heartbeat(now time.Time, h ClassicHeartbeat) (rebalancing bool, err error) {
	m, err := g.member(h.MemberID, h.InstanceID)
	if err != nil {
		return false, err
	}
	if h.Generation != g.Generation {
		return false, fmt.Errorf("%w: heartbeat at generation %d, group %s is at %d", ErrIllegalGeneration, h.Generation, g.Name, g.Generation)
	}
	switch g.State {
	case ClassicPreparingRebalance:
		m.SessionDeadline = now.Add(m.SessionTimeout)
		return true, nil
	case ClassicCompletingRebalance, ClassicStable:
		m.SessionDeadline = now.Add(m.SessionTimeout)
		return false, nil
	}
	return false, fmt.Errorf("%w: %s is not a member of group %s", ErrUnknownMember, m.ID, g.Name)
}

// Leave removes members (after Advance): each answer is nil or why that one could not
// leave. One rebalance follows if any member left.
func (g *ClassicGroup) Leave(now time.Time, leavers []ClassicLeaver) []error {
	errs := make([]error, len(leavers))
	left := false
	for i, l := range leavers {
		id := l.MemberID
		if l.InstanceID != "" {
			m := g.byInstance(l.InstanceID)
			switch {
			case m == nil:
				errs[i] = fmt.Errorf("%w: no member of group %s has group.instance.id %s", ErrUnknownMember, g.Name, l.InstanceID)
				continue
			case id != "" && m.ID != id:
				errs[i] = fmt.Errorf("%w: group.instance.id %s belongs to member %s, not %s", ErrFencedInstance, l.InstanceID, m.ID, id)
				continue
			}
			id = m.ID
		}
		m := g.Members[id]
		if m == nil {
			errs[i] = fmt.Errorf("%w: %s is not a member of group %s", ErrUnknownMember, id, g.Name)
			continue
		}
		delete(g.Members, id)
		left = left || !m.Pending
	}
	if left {
		g.rebalance(now)
	}
	return errs
}

// CheckCommit checks a member's offset commit (after Advance) and renews its session:
// the member is in the group at its generation, which is not completing a rebalance.
// The offsets themselves are checked by CheckOffsetCommit's rules.
func (g *ClassicGroup) CheckCommit(now time.Time, c ClassicCommit) error {
	m, err := g.member(c.MemberID, c.InstanceID)
	if err != nil {
		return err
	}
	if c.Generation != g.Generation {
		return fmt.Errorf("%w: commit at generation %d, group %s is at %d", ErrIllegalGeneration, c.Generation, g.Name, g.Generation)
	}
	if g.State == ClassicCompletingRebalance {
		return fmt.Errorf("%w: group %s is completing a rebalance: commit after SyncGroup", ErrRebalanceInProgress, g.Name)
	}
	m.SessionDeadline = now.Add(m.SessionTimeout)
	return nil
}
