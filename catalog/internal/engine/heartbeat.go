package engine

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The heartbeat state machine (docs/design.md "Groups"). A backend loads a group's rows
// into a GroupState inside one transaction that holds the group's lock, runs
// ApplyHeartbeat (or an offset commit's checks, offsets.go), and writes back what
// DiffGroup says changed; the backends differ only in SQL. The assignors are in
// assign.go, DescribeGroup's and GroupLag's views in describe.go.
//
// The protocol, per partition of a subscribed topic, keeps two names:
//   - the target: the member the assignor wants the partition at;
//   - the owner: the member currently entitled to it (granted and not yet given back).
//
// A partition is granted to its target (owner set) only while it has no owner. When the
// target moves away from the owner, the partition is being revoked: it stays the owner's
// (its commits are still accepted) until the owner acknowledges by leaving it out of the
// `owned` list of a heartbeat, or until the owner's lease expires. A member's epoch is
// bumped (to the group's next epoch) when it joins and whenever it is granted partitions.
// An offset commit is accepted at any epoch of the member from the one at which each of
// its partitions was granted (Ownership.Epoch) up to its current one, as Kafka accepts
// them (KIP-1251): a commit sent just before a heartbeat that granted the member more
// partitions is still the owner's. A Kafka client that gave a partition back may still
// commit it alone at its current epoch (Ownership.ReleasedBy, catalog.OffsetCommit's
// Released), until another member gives it back in turn.

// TopicMeta is a live topic as assignment sees it.
type TopicMeta struct {
	ID         int64
	Name       string
	Partitions int32
}

// GroupMember is one member row.
type GroupMember struct {
	ID        string
	Epoch     int32
	PrevEpoch int32 // the epoch before the last bump, still accepted from heartbeats
	Topics    []string
	// SessionTimeout is the lease length; ExpiresAt the lease end (database clock).
	SessionTimeout time.Duration
	ExpiresAt      time.Time
	JoinedAt       time.Time
	// Lags is the member's last report of its tasks' state (catalog.Heartbeat.TaskLags)
	// and StandbyReplicas the standbys it asked for on join: the Streams assignor's.
	Lags            []catalog.TaskLag
	StandbyReplicas int32
}

// Ownership is one partition's row: its owner and its target ("" for none), the
// owner's member epoch when it was granted the partition (its assignment epoch), and
// the member that last gave it back (acknowledged its revocation), "" for none.
type Ownership struct {
	Owner      string
	Target     string
	Epoch      int32
	ReleasedBy string
}

// GroupState is a group as loaded by a backend under the group's lock.
type GroupState struct {
	Name     string
	Assignor string
	// Type is the group row's type (catalog.GroupTypeConsumer or GroupTypeClassic): a
	// heartbeat of a classic group is refused while it has live members, and turns an
	// empty one into a consumer group.
	Type      string
	Epoch     int32
	CreatedAt time.Time
	Members   map[string]*GroupMember
	Owners    map[catalog.TopicPartition]*Ownership
}

// NewGroupState returns an empty group.
func NewGroupState(name, assignor string, createdAt time.Time) *GroupState {
	if assignor == "" {
		assignor = catalog.DefaultAssignor
	}
	return &GroupState{
		Name: name, Assignor: assignor, Type: catalog.GroupTypeConsumer, CreatedAt: createdAt,
		Members: map[string]*GroupMember{}, Owners: map[catalog.TopicPartition]*Ownership{},
	}
}

// Clone deep-copies st, so a backend can diff after mutating.
func (st *GroupState) Clone() *GroupState {
	c := *st
	c.Members = make(map[string]*GroupMember, len(st.Members))
	for id, m := range st.Members {
		mc := *m
		mc.Topics = slices.Clone(m.Topics)
		mc.Lags = slices.Clone(m.Lags)
		c.Members[id] = &mc
	}
	c.Owners = make(map[catalog.TopicPartition]*Ownership, len(st.Owners))
	for tp, o := range st.Owners {
		oc := *o
		c.Owners[tp] = &oc
	}
	return &c
}

// LiveMembers counts members whose lease has not expired at now.
func (st *GroupState) LiveMembers(now time.Time) int {
	n := 0
	for _, m := range st.Members {
		if m.ExpiresAt.After(now) {
			n++
		}
	}
	return n
}

// State is the group's state at now.
func (st *GroupState) State(now time.Time) string {
	if st.LiveMembers(now) == 0 {
		return catalog.GroupEmpty
	}
	for _, o := range st.Owners {
		if o.Owner != o.Target {
			return catalog.GroupReconciling
		}
	}
	return catalog.GroupStable
}

// takeConsumerType is the type rule (catalog.CheckGroupType) for a heartbeat: a classic
// group's members are its classic members' mirrors (classic_rows.go), so while one is
// live the heartbeat is refused; an empty classic group becomes a consumer group, its
// expired mirrors dropped (the classic rows go with the type: the backend's write), its
// offsets kept.
func takeConsumerType(st *GroupState, now time.Time) error {
	if st.Type != catalog.GroupTypeClassic {
		return nil
	}
	t, err := catalog.CheckGroupType(st.Name, st.Type, st.LiveMembers(now), catalog.GroupTypeConsumer)
	if err != nil {
		return err
	}
	st.Type = t
	clear(st.Members)
	clear(st.Owners)
	return nil
}

// ApplyHeartbeat runs one heartbeat against st, the group loaded under its lock, at the
// database clock's now. topics holds the live topics named by any subscription in st and
// in hb (a name missing from it is a topic that does not exist: its members get nothing
// of it). It expires lapsed members, applies the heartbeat, recomputes the targets with
// the group's assignor and grants the caller what it may have. On error st must be
// discarded (the backend rolls back).
func ApplyHeartbeat(st *GroupState, now time.Time, hb catalog.Heartbeat, topics map[string]TopicMeta) (catalog.HeartbeatResult, error) {
	if err := catalog.ValidateHeartbeat(hb); err != nil {
		return catalog.HeartbeatResult{}, err
	}
	if err := takeConsumerType(st, now); err != nil {
		return catalog.HeartbeatResult{}, err
	}
	expireMembers(st, now)

	id := hb.MemberID
	if hb.Assignor != "" && hb.Assignor != st.Assignor {
		for other, m := range st.Members {
			if other != id && m.ExpiresAt.After(now) {
				return catalog.HeartbeatResult{}, fmt.Errorf("%w: group %s uses assignor %s; it can change only while no other member is live", catalog.ErrInvalidGroupRequest, st.Name, st.Assignor)
			}
		}
		st.Assignor = hb.Assignor
	}

	var bump bool
	switch {
	case hb.MemberEpoch == catalog.LeaveEpoch:
		removeMember(st, id)
		assignTargets(st, topics)
		return catalog.HeartbeatResult{MemberEpoch: catalog.LeaveEpoch}, nil

	case hb.MemberEpoch == catalog.JoinEpoch:
		subs, _ := catalog.NormalizeTopics(hb.Topics) // validated above
		session := hb.SessionTimeout
		if session == 0 {
			session = catalog.DefaultSessionTimeout
		}
		// A member joining again under its id starts afresh: its client has stopped
		// processing whatever the old incarnation held.
		removeMember(st, id)
		st.Members[id] = &GroupMember{ID: id, Topics: subs, SessionTimeout: session, ExpiresAt: now.Add(session), JoinedAt: now,
			Lags: normalizeLags(hb.TaskLags), StandbyReplicas: hb.StandbyReplicas}
		bump = true

	default:
		m := st.Members[id]
		if m == nil {
			return catalog.HeartbeatResult{}, fmt.Errorf("%w: %s is not a member of group %s (its lease may have expired): join again with epoch 0", catalog.ErrUnknownMember, id, st.Name)
		}
		switch {
		case hb.MemberEpoch > m.Epoch:
			return catalog.HeartbeatResult{}, fmt.Errorf("%w: epoch %d of member %s is ahead of its epoch %d", catalog.ErrStaleMemberEpoch, hb.MemberEpoch, id, m.Epoch)
		case hb.MemberEpoch < m.Epoch && hb.MemberEpoch != m.PrevEpoch:
			return catalog.HeartbeatResult{}, fmt.Errorf("%w: epoch %d of member %s is older than its epoch %d", catalog.ErrStaleMemberEpoch, hb.MemberEpoch, id, m.Epoch)
		}
		if hb.SessionTimeout != 0 {
			m.SessionTimeout = hb.SessionTimeout
		}
		m.ExpiresAt = now.Add(m.SessionTimeout)
		if hb.Topics != nil {
			m.Topics, _ = catalog.NormalizeTopics(hb.Topics)
		}
		if hb.TaskLags != nil {
			m.Lags = normalizeLags(hb.TaskLags)
		}
		owned := ownedSet(hb.Owned, topics)
		for tp, o := range st.Owners {
			// Leaving a partition out of owned acknowledges its revocation. A kept
			// partition left out is only a lost answer: it is answered again below.
			if o.Owner == id && o.Target != id && !owned[tp] {
				o.Owner, o.Epoch, o.ReleasedBy = "", 0, id
			}
		}
	}

	assignTargets(st, topics)

	m := st.Members[id]
	var granted []*Ownership
	for _, o := range st.Owners {
		if o.Target == id && o.Owner == "" {
			o.Owner = id
			granted = append(granted, o)
			bump = true
		}
	}
	if bump {
		st.Epoch++
		m.PrevEpoch, m.Epoch = m.Epoch, st.Epoch
	}
	for _, o := range granted {
		o.Epoch = m.Epoch
	}
	res := catalog.HeartbeatResult{MemberEpoch: m.Epoch, HeartbeatInterval: catalog.HeartbeatInterval(m.SessionTimeout)}
	names := topicNames(topics)
	var mine []catalog.TopicPartition
	pending := false
	for tp, o := range st.Owners {
		switch {
		case o.Owner == id && o.Target == id:
			mine = append(mine, tp)
		case o.Target == id:
			pending = true
		}
	}
	res.Assignment = groupByTopic(mine, names)
	res.Standbys = groupByTopic(memberStandbys(st, topics, id), names)
	if pending {
		// It waits for other members to give partitions back: ask sooner.
		res.HeartbeatInterval = max(res.HeartbeatInterval/4, 10*time.Millisecond)
	}
	return res, nil
}

// ownedSet maps an owned list to partitions; names of topics that no longer exist drop.
func ownedSet(owned []catalog.TopicPartitions, topics map[string]TopicMeta) map[catalog.TopicPartition]bool {
	set := map[catalog.TopicPartition]bool{}
	for _, o := range owned {
		t, ok := topics[o.Topic]
		if !ok {
			continue
		}
		for _, p := range o.Partitions {
			set[catalog.TopicPartition{TopicID: t.ID, Partition: p}] = true
		}
	}
	return set
}

func topicNames(topics map[string]TopicMeta) map[int64]string {
	names := make(map[int64]string, len(topics))
	for _, t := range topics {
		names[t.ID] = t.Name
	}
	return names
}

// groupByTopic turns partitions into per-topic lists ordered by name then partition;
// partitions of topics not in names are left out.
func groupByTopic(tps []catalog.TopicPartition, names map[int64]string) []catalog.TopicPartitions {
	by := map[string][]int32{}
	for _, tp := range tps {
		name, ok := names[tp.TopicID]
		if !ok {
			continue
		}
		by[name] = append(by[name], tp.Partition)
	}
	out := make([]catalog.TopicPartitions, 0, len(by))
	for name, ps := range by {
		slices.Sort(ps)
		out = append(out, catalog.TopicPartitions{Topic: name, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// expireMembers removes members whose lease ended at or before now; their partitions
// are free at once (the member has stopped processing on its own by then).
func expireMembers(st *GroupState, now time.Time) {
	for id, m := range st.Members {
		if !m.ExpiresAt.After(now) {
			removeMember(st, id)
		}
	}
}

func removeMember(st *GroupState, id string) {
	delete(st.Members, id)
	for _, o := range st.Owners {
		if o.Owner == id {
			o.Owner, o.Epoch = "", 0
		}
		if o.ReleasedBy == id {
			o.ReleasedBy = ""
		}
		if o.Target == id {
			o.Target = ""
		}
	}
}

// assignTargets recomputes every partition's target with the group's assignor, drops
// rows of partitions that no longer exist, and rows with neither owner nor target.
func assignTargets(st *GroupState, topics map[string]TopicMeta) {
	byID := make(map[int64]TopicMeta, len(topics))
	for _, t := range topics {
		byID[t.ID] = t
	}
	current := make(map[catalog.TopicPartition]string, len(st.Owners))
	for tp, o := range st.Owners {
		if t, ok := byID[tp.TopicID]; !ok || tp.Partition >= t.Partitions {
			delete(st.Owners, tp) // deleted topic: nothing to process or commit
			continue
		}
		// The sticky assignor keeps what it can of the last target, else of the owner
		// (a partition whose target died while its owner was giving it back).
		switch {
		case o.Target != "":
			current[tp] = o.Target
		case o.Owner != "":
			current[tp] = o.Owner
		}
	}
	members, metas := assignInputs(st, topics)
	target := assign(st.Assignor, members, metas, current)
	for tp, o := range st.Owners {
		o.Target = target[tp]
		delete(target, tp)
	}
	for tp, m := range target {
		st.Owners[tp] = &Ownership{Target: m}
	}
	for tp, o := range st.Owners {
		if o.Owner == "" && o.Target == "" && o.ReleasedBy == "" {
			delete(st.Owners, tp)
		}
	}
}

// assignInputs is st's members and their subscribed live topics as the assignors take
// them (unordered).
func assignInputs(st *GroupState, topics map[string]TopicMeta) ([]assignMember, []TopicMeta) {
	members := make([]assignMember, 0, len(st.Members))
	used := map[string]bool{}
	for _, m := range st.Members {
		members = append(members, assignMember{ID: m.ID, Topics: m.Topics, Lags: m.Lags})
		for _, t := range m.Topics {
			used[t] = true
		}
	}
	var metas []TopicMeta
	for name := range used {
		if t, ok := topics[name]; ok {
			metas = append(metas, t)
		}
	}
	return members, metas
}

// normalizeLags sorts a lag report by topic and partition, keeping the smallest lag of
// a partition named twice; nil stays nil.
func normalizeLags(lags []catalog.TaskLag) []catalog.TaskLag {
	if lags == nil {
		return nil
	}
	out := slices.Clone(lags)
	slices.SortFunc(out, func(a, b catalog.TaskLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Lag, b.Lag))
	})
	return slices.CompactFunc(out, func(a, b catalog.TaskLag) bool { return a.Topic == b.Topic && a.Partition == b.Partition })
}

// OwnerAt returns the live owner of a partition at now, "" when none.
func (st *GroupState) OwnerAt(now time.Time, tp catalog.TopicPartition) string {
	o := st.Owners[tp]
	if o == nil || o.Owner == "" {
		return ""
	}
	if m := st.Members[o.Owner]; m == nil || !m.ExpiresAt.After(now) {
		return ""
	}
	return o.Owner
}

// GroupChanges is what a backend writes after ApplyHeartbeat: DiffGroup(before, after).
type GroupChanges struct {
	GroupChanged  bool // epoch or assignor
	UpsertMembers []*GroupMember
	DeleteMembers []string
	UpsertOwners  map[catalog.TopicPartition]Ownership
	DeleteOwners  []catalog.TopicPartition
}

// DiffGroup says which rows changed between before and after.
func DiffGroup(before, after *GroupState) GroupChanges {
	var ch GroupChanges
	ch.GroupChanged = before.Epoch != after.Epoch || before.Assignor != after.Assignor
	for id, m := range after.Members {
		if b := before.Members[id]; b == nil || !sameMember(b, m) {
			ch.UpsertMembers = append(ch.UpsertMembers, m)
		}
	}
	for id := range before.Members {
		if after.Members[id] == nil {
			ch.DeleteMembers = append(ch.DeleteMembers, id)
		}
	}
	slices.Sort(ch.DeleteMembers)
	slices.SortFunc(ch.UpsertMembers, func(a, b *GroupMember) int { return cmp.Compare(a.ID, b.ID) })
	ch.UpsertOwners = map[catalog.TopicPartition]Ownership{}
	for tp, o := range after.Owners {
		if b := before.Owners[tp]; b == nil || *b != *o {
			ch.UpsertOwners[tp] = *o
		}
	}
	for tp := range before.Owners {
		if after.Owners[tp] == nil {
			ch.DeleteOwners = append(ch.DeleteOwners, tp)
		}
	}
	slices.SortFunc(ch.DeleteOwners, comparePartitions)
	return ch
}

func sameMember(a, b *GroupMember) bool {
	return a.Epoch == b.Epoch && a.PrevEpoch == b.PrevEpoch && slices.Equal(a.Topics, b.Topics) &&
		a.SessionTimeout == b.SessionTimeout && a.ExpiresAt.Equal(b.ExpiresAt) && a.JoinedAt.Equal(b.JoinedAt) &&
		slices.Equal(a.Lags, b.Lags) && a.StandbyReplicas == b.StandbyReplicas
}

// SubscribedTopics lists the topic names any member of st subscribes to, plus extra,
// sorted without duplicates: what a backend loads as topics for ApplyHeartbeat.
func (st *GroupState) SubscribedTopics(extra []string) []string {
	var out []string
	for _, m := range st.Members {
		out = append(out, m.Topics...)
	}
	out = append(out, extra...)
	slices.Sort(out)
	return slices.Compact(out)
}
