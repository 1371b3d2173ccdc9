package catalog

// Consumer groups (DESIGN.md "Groups"): lease-based membership with server-side
// assignment, in the spirit of Kafka's KIP-848. This file holds the group domain shared
// by both backends: types, errors, validation, the assignors, and the state machine a
// heartbeat runs (ApplyHeartbeat); offsets.go holds what an offset commit is checked
// against (CheckOffsetCommit). A backend loads a group's rows into a GroupState inside one
// transaction that holds the group's lock, runs these functions, and writes back what
// DiffGroup says changed; the backends differ only in SQL.
//
// The protocol, per partition of a subscribed topic, keeps two names:
//   - the target: the member the assignor wants the partition at;
//   - the owner: the member currently entitled to it (granted and not yet given back).
//
// A partition is granted to its target (owner set) only while it has no owner. When the
// target moves away from the owner, the partition is being revoked: it stays the owner's
// (its commits are still accepted) until the owner acknowledges by leaving it out of the
// `owned` list of a heartbeat, or until the owner's lease expires. A member's epoch is
// bumped (to the group's next epoch) when it joins and whenever it is granted partitions;
// offset commits are accepted only at the member's current epoch.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Groups is the consumer-group part of the catalog, implemented by both backends beside
// Catalog (kept apart from Catalog so that implementations without groups still compile)
// and proved by catalogtest.RunGroups.
//
// Every lease time is the database clock's. Errors are the Err* sentinels below,
// wrapped, or ErrTopicNotFound / ErrPartitionOutOfRange for offsets of partitions that do
// not exist.
type Groups interface {
	// Heartbeat joins (MemberEpoch JoinEpoch), renews (the member's current epoch, or the
	// one before it when an answer was lost) or leaves (LeaveEpoch) a group, and answers
	// with the member's epoch and the partitions it owns now. Joining creates the group.
	Heartbeat(ctx context.Context, hb Heartbeat) (HeartbeatResult, error)
	// CommitOffsets stores committed offsets (the next offset to read) atomically: all or
	// none. A member commits at its current epoch, for partitions it owns (assigned or
	// being revoked); a commit without a member (MemberID "") is accepted only while the
	// group has no live members, and creates the group.
	CommitOffsets(ctx context.Context, c OffsetCommit) error
	// GroupOffsets lists a group's committed offsets of live topics, by topic name and
	// partition.
	GroupOffsets(ctx context.Context, group string) ([]GroupOffset, error)
	// GroupLag answers, per partition of the topics the live members subscribe to and of
	// those with committed offsets, the committed offset against the high watermark.
	GroupLag(ctx context.Context, group string) ([]PartitionLag, error)
	// ListGroups lists every group, ordered by name.
	ListGroups(ctx context.Context) ([]GroupSummary, error)
	// DescribeGroup answers a group's state, members, epochs and assignments.
	DescribeGroup(ctx context.Context, group string) (GroupDescription, error)
	// DeleteGroup deletes a group and its offsets; ErrGroupNotEmpty while it has live
	// members.
	DeleteGroup(ctx context.Context, group string) error
	// ResetOffsets sets committed offsets while the group has no live members
	// (ErrGroupNotEmpty otherwise), creating the group if needed. The caller resolves
	// earliest/latest/timestamp to offsets first; the no-live-members check is made
	// again inside the transaction that writes.
	ResetOffsets(ctx context.Context, group string, offsets []CommitOffset) error
}

var (
	// ErrGroupNotFound: no group of that name.
	ErrGroupNotFound = errors.New("group not found")
	// ErrUnknownMember: the member is not in the group — it never joined, it left, or
	// its lease expired. It must stop processing and join again (epoch 0).
	ErrUnknownMember = errors.New("unknown member")
	// ErrStaleMemberEpoch: the epoch is not the member's current one (older, or from
	// the future). The member has been fenced and must join again.
	ErrStaleMemberEpoch = errors.New("stale member epoch")
	// ErrNotOwner: an offset commit for a partition the member neither owns nor is
	// giving back.
	ErrNotOwner = errors.New("partition not owned by member")
	// ErrGroupNotEmpty: the operation needs a group without live members.
	ErrGroupNotEmpty = errors.New("group has live members")
	// ErrInvalidGroupName: a group name that cannot exist.
	ErrInvalidGroupName = errors.New("invalid group name")
	// ErrInvalidOffset: a negative offset, or one beyond the partition's high watermark.
	ErrInvalidOffset = errors.New("invalid offset")
	// ErrInvalidGroupRequest: any other malformed group request (member id,
	// subscription, session timeout, assignor, metadata); the message says what to fix.
	ErrInvalidGroupRequest = errors.New("invalid group request")
)

// Member epochs with a meaning of their own.
const (
	JoinEpoch  int32 = 0
	LeaveEpoch int32 = -1
)

// Assignors.
const (
	// AssignorSticky (the default) balances partitions over the members and moves as
	// few as it can when members come and go.
	AssignorSticky = "sticky"
	// AssignorRange gives each member a contiguous range of every topic it subscribes
	// to: with equal partition counts and subscriptions, partition n of every topic
	// goes to the same member (co-partitioning, which stream joins need).
	AssignorRange = "range"
	// AssignorRoundRobin deals partitions (topic by name, then partition) to members in
	// turn.
	AssignorRoundRobin = "roundrobin"
	DefaultAssignor    = AssignorSticky
)

// Session and metadata bounds.
const (
	DefaultSessionTimeout = 30 * time.Second
	MinSessionTimeout     = 100 * time.Millisecond
	MaxSessionTimeout     = 30 * time.Minute
	// MaxOffsetMetadata bounds a committed offset's metadata, as Kafka's
	// offset.metadata.max.bytes.
	MaxOffsetMetadata = 4096
	maxGroupName      = 249
	maxMemberID       = 255
	maxSubscription   = 1000
)

// Group states.
const (
	GroupEmpty       = "empty"       // no live members
	GroupStable      = "stable"      // every partition is at its target
	GroupReconciling = "reconciling" // partitions are being revoked or wait to be granted
)

// Heartbeat is one member's heartbeat.
type Heartbeat struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	// Topics is the subscription; required to join, nil keeps the member's.
	Topics []string
	// Owned lists the partitions the member still holds (processing, or not yet given
	// back). Leaving out a partition being revoked acknowledges its revocation.
	Owned []TopicPartitions
	// SessionTimeout is the member's lease; 0 keeps it (DefaultSessionTimeout on join).
	SessionTimeout time.Duration
	// Assignor chooses the group's assignor; "" keeps the group's. It may change only
	// while no other member is live.
	Assignor string
}

// TopicPartitions is a set of partitions of one topic, by name.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// HeartbeatResult answers a heartbeat.
type HeartbeatResult struct {
	// MemberEpoch is the member's epoch now (LeaveEpoch after a leave).
	MemberEpoch int32
	// Assignment lists the partitions the member owns and keeps: it should be
	// processing exactly these. A partition it holds that is missing here is being
	// revoked: stop processing it, commit, and leave it out of the next Owned.
	Assignment []TopicPartitions
	// HeartbeatInterval is when to heartbeat next.
	HeartbeatInterval time.Duration
}

// OffsetCommit commits offsets for a group.
type OffsetCommit struct {
	Group       string
	MemberID    string // "": a commit from outside the group, while it has no live members
	MemberEpoch int32
	Offsets     []CommitOffset
}

// CommitOffset is one partition's committed offset: the next offset to read.
type CommitOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
}

// GroupOffset is a stored committed offset.
type GroupOffset struct {
	Topic       string
	TopicID     int64
	Partition   int32
	Offset      int64
	Metadata    string
	CommittedAt time.Time
}

// PartitionLag is one partition's lag for a group.
type PartitionLag struct {
	Topic     string
	TopicID   int64
	Partition int32
	// Committed is the committed offset, -1 when none (lag is then counted from the log
	// start).
	Committed      int64
	LogStartOffset int64
	HighWatermark  int64
	Lag            int64
	Owner          string // member owning the partition now, "" when none
}

// GroupSummary is one line of ListGroups.
type GroupSummary struct {
	Name     string
	State    string
	Members  int // live members
	Assignor string
}

// GroupDescription is DescribeGroup's answer.
type GroupDescription struct {
	Name      string
	State     string
	Assignor  string
	Epoch     int32 // the last epoch handed out
	CreatedAt time.Time
	Members   []MemberDescription // live members, ordered by id
}

// MemberDescription is one live member.
type MemberDescription struct {
	ID             string
	Epoch          int32
	Topics         []string
	SessionTimeout time.Duration
	ExpiresAt      time.Time         // lease end, database clock
	Assignment     []TopicPartitions // owned and kept
	Revoking       []TopicPartitions // owned, being revoked
	Pending        []TopicPartitions // assigned, waiting for the previous owner
}

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
}

// Ownership is one partition's row: its owner and its target ("" for none).
type Ownership struct {
	Owner  string
	Target string
}

// GroupState is a group as loaded by a backend under the group's lock.
type GroupState struct {
	Name     string
	Assignor string
	// Type is the group row's type (GroupTypeConsumer or GroupTypeClassic, classic.go):
	// a heartbeat of a classic group is refused while it has live members, and turns
	// an empty one into a consumer group.
	Type      string
	Epoch     int32
	CreatedAt time.Time
	Members   map[string]*GroupMember
	Owners    map[TopicPartition]*Ownership
}

// NewGroupState returns an empty group.
func NewGroupState(name, assignor string, createdAt time.Time) *GroupState {
	if assignor == "" {
		assignor = DefaultAssignor
	}
	return &GroupState{
		Name: name, Assignor: assignor, Type: GroupTypeConsumer, CreatedAt: createdAt,
		Members: map[string]*GroupMember{}, Owners: map[TopicPartition]*Ownership{},
	}
}

// Clone deep-copies st, so a backend can diff after mutating.
func (st *GroupState) Clone() *GroupState {
	c := *st
	c.Members = make(map[string]*GroupMember, len(st.Members))
	for id, m := range st.Members {
		mc := *m
		mc.Topics = slices.Clone(m.Topics)
		c.Members[id] = &mc
	}
	c.Owners = make(map[TopicPartition]*Ownership, len(st.Owners))
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
		return GroupEmpty
	}
	for _, o := range st.Owners {
		if o.Owner != o.Target {
			return GroupReconciling
		}
	}
	return GroupStable
}

// ValidateGroupName accepts the characters of topic names (they travel in URL paths
// and command lines unescaped), 1 to 249 of them.
func ValidateGroupName(name string) error {
	if !topicName.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("%w: %q: use 1 to %d characters of [a-zA-Z0-9._-] (not \".\" or \"..\")", ErrInvalidGroupName, truncateName(name), maxGroupName)
	}
	return nil
}

// ValidateMemberID accepts 1 to 255 printable ASCII characters without spaces: ids are
// chosen by clients (a UUID, a host name and pid) and show in logs and listings.
func ValidateMemberID(id string) error {
	if id == "" || len(id) > maxMemberID {
		return fmt.Errorf("%w: member_id must be 1 to %d characters", ErrInvalidGroupRequest, maxMemberID)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("%w: member_id %q: use printable ASCII without spaces", ErrInvalidGroupRequest, truncateName(id))
		}
	}
	return nil
}

// ValidateAssignor accepts the assignor names, and "" (keep or default).
func ValidateAssignor(name string) error {
	switch name {
	case "", AssignorSticky, AssignorRange, AssignorRoundRobin:
		return nil
	}
	return fmt.Errorf("%w: assignor %q: use %s, %s or %s", ErrInvalidGroupRequest, truncateName(name), AssignorSticky, AssignorRange, AssignorRoundRobin)
}

func validateSessionTimeout(d time.Duration) error {
	if d != 0 && (d < MinSessionTimeout || d > MaxSessionTimeout) {
		return fmt.Errorf("%w: session_timeout_ms %d: use between %d and %d", ErrInvalidGroupRequest, d.Milliseconds(), MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
	}
	return nil
}

// NormalizeTopics validates a subscription and returns it sorted without duplicates.
func NormalizeTopics(topics []string) ([]string, error) {
	if len(topics) == 0 {
		return nil, fmt.Errorf("%w: topics: subscribe to at least one topic", ErrInvalidGroupRequest)
	}
	if len(topics) > maxSubscription {
		return nil, fmt.Errorf("%w: topics: at most %d", ErrInvalidGroupRequest, maxSubscription)
	}
	out := slices.Clone(topics)
	for _, t := range out {
		if err := ValidateTopicName(t); err != nil {
			return nil, fmt.Errorf("%w: topics: %w", ErrInvalidGroupRequest, err)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ValidateHeartbeat checks a heartbeat's shape, before any SQL.
func ValidateHeartbeat(hb Heartbeat) error {
	if err := ValidateGroupName(hb.Group); err != nil {
		return err
	}
	if err := ValidateMemberID(hb.MemberID); err != nil {
		return err
	}
	if hb.MemberEpoch < LeaveEpoch {
		return fmt.Errorf("%w: member_epoch %d: use 0 to join, -1 to leave, or the epoch last answered", ErrStaleMemberEpoch, hb.MemberEpoch)
	}
	if hb.MemberEpoch == JoinEpoch && hb.Topics == nil {
		return fmt.Errorf("%w: topics: a joining member must subscribe to at least one topic", ErrInvalidGroupRequest)
	}
	if hb.Topics != nil {
		if _, err := NormalizeTopics(hb.Topics); err != nil {
			return err
		}
	}
	for _, o := range hb.Owned {
		for _, p := range o.Partitions {
			if p < 0 {
				return fmt.Errorf("%w: owned: partition %d of %q is negative", ErrInvalidGroupRequest, p, truncateName(o.Topic))
			}
		}
	}
	if err := validateSessionTimeout(hb.SessionTimeout); err != nil {
		return err
	}
	return ValidateAssignor(hb.Assignor)
}

// HeartbeatInterval is how often a member with this session timeout should heartbeat:
// a tenth of it (3 s for the 30 s default), so several heartbeats may be lost before
// the lease ends.
func HeartbeatInterval(session time.Duration) time.Duration {
	return min(max(session/10, 10*time.Millisecond), 5*time.Second)
}

// takeConsumerType is the type rule (CheckGroupType) for a heartbeat: a classic group's
// members are its classic members' mirrors (classic_rows.go), so while one is live the
// heartbeat is refused; an empty classic group becomes a consumer group, its expired
// mirrors dropped (the classic rows go with the type: the backend's write), its offsets
// kept.
func takeConsumerType(st *GroupState, now time.Time) error {
	if st.Type != GroupTypeClassic {
		return nil
	}
	live := 0
	for _, m := range st.Members {
		if m.ExpiresAt.After(now) {
			live++
		}
	}
	t, err := CheckGroupType(st.Name, st.Type, live, GroupTypeConsumer)
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
func ApplyHeartbeat(st *GroupState, now time.Time, hb Heartbeat, topics map[string]TopicMeta) (HeartbeatResult, error) {
	if err := ValidateHeartbeat(hb); err != nil {
		return HeartbeatResult{}, err
	}
	if err := takeConsumerType(st, now); err != nil {
		return HeartbeatResult{}, err
	}
	expireMembers(st, now)

	id := hb.MemberID
	if hb.Assignor != "" && hb.Assignor != st.Assignor {
		for other, m := range st.Members {
			if other != id && m.ExpiresAt.After(now) {
				return HeartbeatResult{}, fmt.Errorf("%w: group %s uses assignor %s; it can change only while no other member is live", ErrInvalidGroupRequest, st.Name, st.Assignor)
			}
		}
		st.Assignor = hb.Assignor
	}

	var bump bool
	switch {
	case hb.MemberEpoch == LeaveEpoch:
		removeMember(st, id)
		assignTargets(st, topics)
		return HeartbeatResult{MemberEpoch: LeaveEpoch}, nil

	case hb.MemberEpoch == JoinEpoch:
		subs, _ := NormalizeTopics(hb.Topics) // validated above
		session := hb.SessionTimeout
		if session == 0 {
			session = DefaultSessionTimeout
		}
		// A member joining again under its id starts afresh: its client has stopped
		// processing whatever the old incarnation held.
		removeMember(st, id)
		st.Members[id] = &GroupMember{ID: id, Topics: subs, SessionTimeout: session, ExpiresAt: now.Add(session), JoinedAt: now}
		bump = true

	default:
		m := st.Members[id]
		if m == nil {
			return HeartbeatResult{}, fmt.Errorf("%w: %s is not a member of group %s (its lease may have expired): join again with epoch 0", ErrUnknownMember, id, st.Name)
		}
		switch {
		case hb.MemberEpoch > m.Epoch:
			return HeartbeatResult{}, fmt.Errorf("%w: epoch %d of member %s is ahead of its epoch %d", ErrStaleMemberEpoch, hb.MemberEpoch, id, m.Epoch)
		case hb.MemberEpoch < m.Epoch && hb.MemberEpoch != m.PrevEpoch:
			return HeartbeatResult{}, fmt.Errorf("%w: epoch %d of member %s is older than its epoch %d", ErrStaleMemberEpoch, hb.MemberEpoch, id, m.Epoch)
		}
		if hb.SessionTimeout != 0 {
			m.SessionTimeout = hb.SessionTimeout
		}
		m.ExpiresAt = now.Add(m.SessionTimeout)
		if hb.Topics != nil {
			m.Topics, _ = NormalizeTopics(hb.Topics)
		}
		owned := ownedSet(hb.Owned, topics)
		for tp, o := range st.Owners {
			// Leaving a partition out of owned acknowledges its revocation. A kept
			// partition left out is only a lost answer: it is answered again below.
			if o.Owner == id && o.Target != id && !owned[tp] {
				o.Owner = ""
			}
		}
	}

	assignTargets(st, topics)

	m := st.Members[id]
	for _, o := range st.Owners {
		if o.Target == id && o.Owner == "" {
			o.Owner = id
			bump = true
		}
	}
	if bump {
		st.Epoch++
		m.PrevEpoch, m.Epoch = m.Epoch, st.Epoch
	}
	res := HeartbeatResult{MemberEpoch: m.Epoch, HeartbeatInterval: HeartbeatInterval(m.SessionTimeout)}
	names := topicNames(topics)
	var mine []TopicPartition
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
	if pending {
		// It waits for other members to give partitions back: ask sooner.
		res.HeartbeatInterval = max(res.HeartbeatInterval/4, 10*time.Millisecond)
	}
	return res, nil
}

// ownedSet maps an owned list to partitions; names of topics that no longer exist drop.
func ownedSet(owned []TopicPartitions, topics map[string]TopicMeta) map[TopicPartition]bool {
	set := map[TopicPartition]bool{}
	for _, o := range owned {
		t, ok := topics[o.Topic]
		if !ok {
			continue
		}
		for _, p := range o.Partitions {
			set[TopicPartition{t.ID, p}] = true
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
func groupByTopic(tps []TopicPartition, names map[int64]string) []TopicPartitions {
	by := map[string][]int32{}
	for _, tp := range tps {
		name, ok := names[tp.TopicID]
		if !ok {
			continue
		}
		by[name] = append(by[name], tp.Partition)
	}
	out := make([]TopicPartitions, 0, len(by))
	for name, ps := range by {
		slices.Sort(ps)
		out = append(out, TopicPartitions{Topic: name, Partitions: ps})
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
			o.Owner = ""
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
	current := make(map[TopicPartition]string, len(st.Owners))
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
	members := make([]AssignMember, 0, len(st.Members))
	used := map[string]bool{}
	for _, m := range st.Members {
		members = append(members, AssignMember{ID: m.ID, Topics: m.Topics})
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
	target := Assign(st.Assignor, members, metas, current)
	for tp, o := range st.Owners {
		o.Target = target[tp]
		delete(target, tp)
	}
	for tp, m := range target {
		st.Owners[tp] = &Ownership{Target: m}
	}
	for tp, o := range st.Owners {
		if o.Owner == "" && o.Target == "" {
			delete(st.Owners, tp)
		}
	}
}

// Describe renders st at now for DescribeGroup; names maps topic ids to names.
func (st *GroupState) Describe(now time.Time, names map[int64]string) GroupDescription {
	d := GroupDescription{Name: st.Name, State: st.State(now), Assignor: st.Assignor, Epoch: st.Epoch, CreatedAt: st.CreatedAt}
	ids := make([]string, 0, len(st.Members))
	for id, m := range st.Members {
		if m.ExpiresAt.After(now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := st.Members[id]
		var own, rev, pend []TopicPartition
		for tp, o := range st.Owners {
			switch {
			case o.Owner == id && o.Target == id:
				own = append(own, tp)
			case o.Owner == id:
				rev = append(rev, tp)
			case o.Target == id:
				pend = append(pend, tp)
			}
		}
		d.Members = append(d.Members, MemberDescription{
			ID: id, Epoch: m.Epoch, Topics: slices.Clone(m.Topics), SessionTimeout: m.SessionTimeout,
			ExpiresAt: m.ExpiresAt, Assignment: groupByTopic(own, names),
			Revoking: groupByTopic(rev, names), Pending: groupByTopic(pend, names),
		})
	}
	return d
}

// OwnerAt returns the live owner of a partition at now, "" when none.
func (st *GroupState) OwnerAt(now time.Time, tp TopicPartition) string {
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
	UpsertOwners  map[TopicPartition]Ownership
	DeleteOwners  []TopicPartition
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
	ch.UpsertOwners = map[TopicPartition]Ownership{}
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
		a.SessionTimeout == b.SessionTimeout && a.ExpiresAt.Equal(b.ExpiresAt) && a.JoinedAt.Equal(b.JoinedAt)
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

// LagReader is what GroupLagOf reads: any catalog with groups.
type LagReader interface {
	DescribeGroup(ctx context.Context, group string) (GroupDescription, error)
	GroupOffsets(ctx context.Context, group string) ([]GroupOffset, error)
	Topic(ctx context.Context, name string) (Topic, error)
	TopicByID(ctx context.Context, id int64) (Topic, error)
	Partitions(ctx context.Context, topicID int64) ([]PartitionInfo, error)
}

// GroupLagOf computes GroupLag from the other reads, for both backends: lag is a view,
// so it needs no snapshot of its own (each partition's figures are consistent; the
// partitions are read one topic at a time).
func GroupLagOf(ctx context.Context, r LagReader, group string) ([]PartitionLag, error) {
	d, err := r.DescribeGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	offs, err := r.GroupOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	committed := map[TopicPartition]GroupOffset{}
	topicIDs := map[int64]string{}
	for _, o := range offs {
		committed[TopicPartition{o.TopicID, o.Partition}] = o
		topicIDs[o.TopicID] = o.Topic
	}
	owners := map[string]string{} // "topic/partition" → member
	for _, m := range d.Members {
		for _, list := range [][]TopicPartitions{m.Assignment, m.Revoking} {
			for _, tps := range list {
				for _, p := range tps.Partitions {
					owners[fmt.Sprintf("%s/%d", tps.Topic, p)] = m.ID
				}
			}
		}
		for _, name := range m.Topics {
			t, err := r.Topic(ctx, name)
			if errors.Is(err, ErrTopicNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			topicIDs[t.ID] = t.Name
		}
	}
	ids := make([]int64, 0, len(topicIDs))
	for id := range topicIDs {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int64) int { return cmp.Compare(topicIDs[a], topicIDs[b]) })
	var out []PartitionLag
	for _, id := range ids {
		parts, err := r.Partitions(ctx, id)
		if errors.Is(err, ErrTopicNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			l := PartitionLag{Topic: topicIDs[id], TopicID: id, Partition: p.Partition, Committed: -1,
				LogStartOffset: p.LogStartOffset, HighWatermark: p.HighWatermark,
				Owner: owners[fmt.Sprintf("%s/%d", topicIDs[id], p.Partition)]}
			from := p.LogStartOffset
			if o, ok := committed[TopicPartition{id, p.Partition}]; ok {
				l.Committed = o.Offset
				from = max(o.Offset, p.LogStartOffset)
			}
			l.Lag = max(p.HighWatermark-from, 0)
			out = append(out, l)
		}
	}
	return out, nil
}

func truncateName(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}

// AssignMember is a member as an assignor sees it.
type AssignMember struct {
	ID     string
	Topics []string // sorted
}

// Assign computes targets: partition → member id, for the partitions of topics that
// some member subscribes to. Members are taken in id order, topics in name order, so
// the answer depends only on its inputs. current is the previous target (used by the
// sticky assignor). An unknown assignor name assigns as the default.
func Assign(assignor string, members []AssignMember, topics []TopicMeta, current map[TopicPartition]string) map[TopicPartition]string {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b AssignMember) int { return cmp.Compare(a.ID, b.ID) })
	topics = slices.Clone(topics)
	slices.SortFunc(topics, func(a, b TopicMeta) int { return cmp.Compare(a.Name, b.Name) })
	switch assignor {
	case AssignorRange:
		return assignRange(members, topics)
	case AssignorRoundRobin:
		return assignRoundRobin(members, topics)
	}
	return assignSticky(members, topics, current)
}

func subscribers(members []AssignMember, topic string) []string {
	var out []string
	for _, m := range members {
		if _, ok := slices.BinarySearch(m.Topics, topic); ok {
			out = append(out, m.ID)
		}
	}
	return out
}

// assignRange gives the i-th subscriber of each topic the i-th contiguous range; the
// first n%m subscribers take one more.
func assignRange(members []AssignMember, topics []TopicMeta) map[TopicPartition]string {
	out := map[TopicPartition]string{}
	for _, t := range topics {
		subs := subscribers(members, t.Name)
		if len(subs) == 0 {
			continue
		}
		n, m := int(t.Partitions), len(subs)
		p := 0
		for i, id := range subs {
			count := n / m
			if i < n%m {
				count++
			}
			for k := 0; k < count; k++ {
				out[TopicPartition{t.ID, int32(p)}] = id
				p++
			}
		}
	}
	return out
}

// assignRoundRobin deals every partition, topic by topic, to the next member in turn
// that subscribes to its topic.
func assignRoundRobin(members []AssignMember, topics []TopicMeta) map[TopicPartition]string {
	out := map[TopicPartition]string{}
	if len(members) == 0 {
		return out
	}
	next := 0
	for _, t := range topics {
		if len(subscribers(members, t.Name)) == 0 {
			continue
		}
		for p := int32(0); p < t.Partitions; p++ {
			for {
				m := members[next%len(members)]
				next++
				if _, ok := slices.BinarySearch(m.Topics, t.Name); ok {
					out[TopicPartition{t.ID, p}] = m.ID
					break
				}
			}
		}
	}
	return out
}

// assignSticky keeps every current target that is still valid, hands the free
// partitions to the least loaded eligible members, then moves partitions one at a time
// from the most loaded member to the least loaded one that may take them while their
// counts differ by two or more. With equal subscriptions that ends balanced (counts
// within one) having moved the fewest partitions possible: each move takes a partition
// from a member above the final ceiling or gives one to a member below the floor, and no
// partition moves twice.
func assignSticky(members []AssignMember, topics []TopicMeta, current map[TopicPartition]string) map[TopicPartition]string {
	out := map[TopicPartition]string{}
	if len(members) == 0 {
		return out
	}
	subs := map[string]map[int64]bool{} // member → topic ids
	byName := map[string]TopicMeta{}
	for _, t := range topics {
		byName[t.Name] = t
	}
	for _, m := range members {
		s := map[int64]bool{}
		for _, name := range m.Topics {
			if t, ok := byName[name]; ok {
				s[t.ID] = true
			}
		}
		subs[m.ID] = s
	}
	held := map[string][]TopicPartition{}
	var free []TopicPartition
	for _, t := range topics {
		for p := int32(0); p < t.Partitions; p++ {
			tp := TopicPartition{t.ID, p}
			eligible := false
			for _, m := range members {
				if subs[m.ID][t.ID] {
					eligible = true
					break
				}
			}
			if !eligible {
				continue
			}
			if cur, ok := current[tp]; ok && subs[cur] != nil && subs[cur][t.ID] {
				held[cur] = append(held[cur], tp)
				continue
			}
			free = append(free, tp)
		}
	}
	// least returns the least loaded member eligible for topic, ties by id.
	least := func(topic int64) string {
		best := ""
		for _, m := range members {
			if !subs[m.ID][topic] {
				continue
			}
			if best == "" || len(held[m.ID]) < len(held[best]) {
				best = m.ID
			}
		}
		return best
	}
	for _, tp := range free {
		id := least(tp.TopicID)
		held[id] = append(held[id], tp)
	}
	// Balance: at most one pass per partition; each move strictly lowers the sum of
	// squared counts, so the loop ends.
	total := 0
	for _, hs := range held {
		total += len(hs)
	}
	for range total + 1 {
		// Counts within one of each other cannot improve: the common case of a
		// heartbeat that changes nothing ends here.
		lo, hi := total, 0
		for _, m := range members {
			lo, hi = min(lo, len(held[m.ID])), max(hi, len(held[m.ID]))
		}
		if hi-lo <= 1 {
			break
		}
		donors := make([]string, 0, len(members))
		for _, m := range members {
			donors = append(donors, m.ID)
		}
		sort.SliceStable(donors, func(i, j int) bool { return len(held[donors[i]]) > len(held[donors[j]]) })
		moved := false
		for _, d := range donors {
			hs := held[d]
			slices.SortFunc(hs, comparePartitions)
			// Give away the highest-numbered partitions first, so that which ones move is
			// stable.
			for i := len(hs) - 1; i >= 0 && !moved; i-- {
				r := least(hs[i].TopicID)
				if r == "" || len(held[r])+2 > len(hs) {
					continue
				}
				held[r] = append(held[r], hs[i])
				held[d] = slices.Delete(hs, i, i+1)
				moved = true
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	for id, hs := range held {
		for _, tp := range hs {
			out[tp] = id
		}
	}
	return out
}
