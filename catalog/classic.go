package catalog

// Classic groups (docs/design.md "Kafka front end"): Kafka's JoinGroup/SyncGroup
// protocol, in which a leader member computes the assignment and the coordinator only
// relays it. On stateless nodes the coordinator is the catalog: a group's state,
// generation, members with their protocols and deadlines, and the assignment are rows,
// every timer is a database-clock deadline, and every step runs under the group's row
// lock (the "groups" place of the lock order). This file holds the calls' types, the one
// rule about a group's type and the checks of a request's shape; the state machine both
// backends run (Advance, then one of Join, Sync, Heartbeat, Leave, CheckCommit), the
// group's loaded state and the encoding of its protocols, and what a waiting JoinGroup or
// SyncGroup reads its answer from (JoinAnswerFor, SyncAnswerFor) are the backends' alone:
// catalog/internal/engine (classic.go, classic_engine.go, classic_rows.go).
//
// A classic member is also a row of group_members (its "mirror": epoch = generation,
// lease = the time until which the classic rules keep it), so that every rule about a
// group's live members — a commit from outside the group, a reset, a delete, the lag
// and listings of the HTTP API — holds for both types without a second copy.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Group types. A group has one, kept in its catalog row; a member of the other type is
// refused while the group has live members, and an empty group takes the type of the
// member that joins it (Kafka converts empty groups the same way), keeping its offsets.
const (
	// GroupTypeConsumer: server-side assignment (KIP-848): HTTP members and Kafka
	// ConsumerGroupHeartbeat members, side by side.
	GroupTypeConsumer = "consumer"
	// GroupTypeClassic: Kafka's JoinGroup/SyncGroup protocol.
	GroupTypeClassic = "classic"
)

// Classic group states, named as Kafka's DescribeGroups and ListGroups answer them.
const (
	ClassicEmpty               = "Empty"
	ClassicPreparingRebalance  = "PreparingRebalance"
	ClassicCompletingRebalance = "CompletingRebalance"
	ClassicStable              = "Stable"
	// ClassicDead is what a group that does not exist is described as.
	ClassicDead = "Dead"
)

var (
	// ErrInconsistentGroupProtocol: a member of the other group type, or a classic
	// join whose protocol type or protocols the group's members do not share, or a
	// SyncGroup naming another protocol than the group's.
	ErrInconsistentGroupProtocol = errors.New("inconsistent group protocol")
	// ErrIllegalGeneration: a classic request at another generation than the group's.
	ErrIllegalGeneration = errors.New("illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing; the member must join again.
	ErrRebalanceInProgress = errors.New("rebalance in progress")
	// ErrFencedInstance: a static member (group.instance.id) replaced by a newer
	// instance with the same id.
	ErrFencedInstance = errors.New("fenced instance id")
	// ErrInvalidSessionTimeout: a classic join's session timeout outside the bounds.
	ErrInvalidSessionTimeout = errors.New("invalid session timeout")
	// ErrNotClassicGroup: the group exists and is of the consumer type (for calls that
	// then go to the consumer rules), or does not exist.
	ErrNotClassicGroup = errors.New("not a classic group")
)

// ClassicGroups is the classic-group part of the catalog, implemented by both backends
// and proved by catalogtest (its "classic" suite). Every call runs in one transaction under the
// group's lock, first applying the timed transitions that are due (Advance), which are
// kept even when the call itself is refused; a refused call changes nothing else.
type ClassicGroups interface {
	// JoinGroup joins (creating the group) or rejoins a member. The answer comes now
	// (ClassicJoinResult.Answer) or once the rebalance completes: the caller then polls
	// (PollJoin) after each notification (ListenGroups) or wait.
	JoinGroup(ctx context.Context, j ClassicJoin) (ClassicJoinResult, error)
	// PollJoin answers a join of member (with instance, if static) that waits since
	// generation wait, applying the transitions that are due first. Not done: poll
	// again after a notification or ClassicPoll.Wait. An error is the join's answer
	// (the member is gone: ErrUnknownMember or ErrFencedInstance).
	PollJoin(ctx context.Context, group, member, instance string, wait int32) (ClassicJoinAnswer, ClassicPoll, error)
	// SyncGroup takes a member's sync (the leader's carries the assignment). Ready
	// answers now; otherwise poll (PollSync).
	SyncGroup(ctx context.Context, s ClassicSync) (ClassicSyncResult, error)
	// PollSync answers a sync of member at generation that waits for the leader's, as
	// PollJoin does.
	PollSync(ctx context.Context, group, member, instance string, generation int32) (ClassicSyncResult, ClassicPoll, error)
	// ClassicHeartbeat renews a member's session; rebalancing says to join again (the
	// session was renewed all the same).
	ClassicHeartbeat(ctx context.Context, h ClassicHeartbeat) (rebalancing bool, err error)
	// LeaveGroup removes members, answering each one's refusal (nil: left).
	LeaveGroup(ctx context.Context, group string, members []ClassicLeaver) ([]error, error)
	// CommitClassicOffsets commits a classic member's offsets at its generation, all
	// or none: ErrNotClassicGroup when the group is of the consumer type or missing.
	CommitClassicOffsets(ctx context.Context, c ClassicCommit) error
	// DescribeClassicGroup describes a classic group: ErrNotClassicGroup for a
	// consumer group, and also ErrGroupNotFound when there is none.
	DescribeClassicGroup(ctx context.Context, group string) (ClassicDescription, error)
	// GroupKinds lists every group's type, and a classic group's state and protocol
	// type, ordered by name.
	GroupKinds(ctx context.Context) ([]GroupKind, error)
	// DeleteOffsets deletes a group's committed offsets of partitions; a partition of
	// a topic a live member subscribes to is refused (ErrGroupSubscribed), one of a
	// topic that does not exist is ErrTopicNotFound. errs answers offsets by index.
	DeleteOffsets(ctx context.Context, group string, offsets []TopicPartitionName) (errs []error, err error)
	// ListenGroups calls fn with a group's name after each change of its classic state
	// made anywhere (best effort, as Listen: waiters also poll), until ctx ends.
	ListenGroups(ctx context.Context, fn func(group string)) error
}

// ClassicPoll says whether a held request is answered, and if not, how long until the
// group's next timed transition (0: none; poll on notifications).
type ClassicPoll struct {
	Done bool
	Wait time.Duration
}

// ClassicDescription describes a classic group.
type ClassicDescription struct {
	Name         string
	State        string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	Members      []ClassicMemberDescription // ordered by id
}

// ClassicMemberDescription is one member of a classic group.
type ClassicMemberDescription struct {
	ID         string
	InstanceID string
	ClientID   string
	ClientHost string
	Generation int32
	Metadata   []byte // for the group's protocol
	Assignment []byte
}

// ErrGroupSubscribed: offsets of a topic the group's live members consume cannot be
// deleted.
var ErrGroupSubscribed = errors.New("group is subscribed to the topic")

// TopicPartitionName names a partition by topic name.
type TopicPartitionName struct {
	Topic     string
	Partition int32
}

// GroupKind is one group's type as GroupKinds lists it.
type GroupKind struct {
	Name         string
	Type         string
	ClassicState string // classic groups only
	ProtocolType string // classic groups only
}

// ClassicProtocol is one protocol a classic member supports, with its metadata.
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// ClassicJoin is one JoinGroup.
type ClassicJoin struct {
	Group      string
	MemberID   string // "": a new member
	InstanceID string // static membership (group.instance.id), "" for none
	ClientID   string
	ClientHost string
	// SessionTimeout bounds the time between heartbeats; RebalanceTimeout how long a
	// rebalance waits for this member to join again (0: SessionTimeout, as JoinGroup
	// v0). The group waits for the largest of its members'.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []ClassicProtocol // in the member's order of preference
	// Topics is the subscription the member's metadata names (the consumer protocol),
	// for listings and lag; nil for other protocols.
	Topics []string
	// RequireKnownMemberID (JoinGroup v4+): a new dynamic member is first given an id
	// and must join again with it.
	RequireKnownMemberID bool
	// NewMemberID is the id a new member gets: the caller makes it unique.
	NewMemberID string
}

// ClassicJoinResult answers a JoinGroup.
type ClassicJoinResult struct {
	MemberID string
	// MemberIDRequired: the member was given MemberID and must join again with it.
	MemberIDRequired bool
	// Answer is the join's answer when it is ready now; nil while it waits for the
	// rebalance that started at WaitGeneration to complete.
	Answer         *ClassicJoinAnswer
	WaitGeneration int32
}

// ClassicJoinAnswer is what JoinGroup answers once the rebalance completed.
type ClassicJoinAnswer struct {
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	MemberID     string
	// Members, for the leader only: every member of the generation with its metadata
	// of the chosen protocol.
	Members []ClassicJoinMember
	// SkipAssignment: a static leader rejoined without a rebalance; it resends the
	// assignment it computed before (JoinGroup v9).
	SkipAssignment bool
}

// ClassicJoinMember is one member as the leader's join answer lists it.
type ClassicJoinMember struct {
	ID         string
	InstanceID string
	Metadata   []byte
}

// ClassicSync is one SyncGroup.
type ClassicSync struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	// ProtocolType and Protocol (SyncGroup v5+), "" when not given.
	ProtocolType string
	Protocol     string
	// Assignments is the leader's plan: member id → assignment. Members left out get
	// an empty one.
	Assignments []ClassicAssignment
}

// ClassicAssignment is one member's assignment in the leader's plan.
type ClassicAssignment struct {
	MemberID   string
	Assignment []byte
}

// ClassicSyncResult answers a SyncGroup: Ready with the member's assignment, or not
// yet (the leader has not synced): read the group until SyncAnswerFor is done.
type ClassicSyncResult struct {
	Ready        bool
	Assignment   []byte
	ProtocolType string
	Protocol     string
}

// ClassicHeartbeat is one Heartbeat.
type ClassicHeartbeat struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
}

// ClassicLeaver is one member of a LeaveGroup: by member id, or by instance id (v3+,
// static members), or both.
type ClassicLeaver struct {
	MemberID   string
	InstanceID string
}

// ClassicCommit is a classic member's offset commit (OffsetCommit with a member id):
// Generation is the group generation the member is at.
type ClassicCommit struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
	Offsets    []CommitOffset
	// CheckOnly checks the commit and stores nothing (OffsetCommit's CheckOnly).
	CheckOnly bool
}

// CheckGroupType is the rule about a group's type, for every kind of member: current is
// the group's type ("" for a new group), live its live members. It answers the type the
// group has once the member joins.
func CheckGroupType(group, current string, live int, want string) (string, error) {
	if current == "" || current == want || live == 0 {
		return want, nil
	}
	return "", fmt.Errorf("%w: group %s is a %s group with %d live members: a %s member cannot join it (use another group id, or wait until it is empty)",
		ErrInconsistentGroupProtocol, group, current, live, want)
}

// Bounds of classic joins, as Kafka's defaults for protocol names and member counts.
const (
	maxClassicProtocols   = 64
	maxClassicMetadata    = 1 << 20
	maxClassicName        = 255
	maxClassicAssignments = 100_000
	// MaxClassicMembers bounds a classic group's members (Kafka's group.max.size is
	// unbounded by default; a bound keeps one group's rows loadable in one round trip).
	MaxClassicMembers = 1000
)

// ValidateClassicJoin checks a join's shape, before any SQL.
func ValidateClassicJoin(j ClassicJoin) error {
	if err := ValidateGroupName(j.Group); err != nil {
		return err
	}
	if j.MemberID != "" {
		if err := validateMemberID(j.MemberID); err != nil {
			return err
		}
	} else if err := validateMemberID(j.NewMemberID); err != nil {
		return fmt.Errorf("new member id: %w", err)
	}
	if j.InstanceID != "" {
		if err := validateMemberID(j.InstanceID); err != nil {
			return fmt.Errorf("%w (group.instance.id)", err)
		}
	}
	if err := CheckSessionTimeout(j.SessionTimeout); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSessionTimeout, err)
	}
	if j.RebalanceTimeout < 0 || j.RebalanceTimeout > MaxSessionTimeout {
		return fmt.Errorf("%w: rebalance timeout %d ms: use at most %d", ErrInvalidGroupRequest, j.RebalanceTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
	}
	if j.ProtocolType == "" || len(j.ProtocolType) > maxClassicName {
		return fmt.Errorf("%w: a join needs a protocol type (e.g. \"consumer\") of at most %d bytes", ErrInconsistentGroupProtocol, maxClassicName)
	}
	if len(j.Protocols) == 0 || len(j.Protocols) > maxClassicProtocols {
		return fmt.Errorf("%w: a join needs 1 to %d protocols", ErrInconsistentGroupProtocol, maxClassicProtocols)
	}
	seen := map[string]bool{}
	for _, p := range j.Protocols {
		if p.Name == "" || len(p.Name) > maxClassicName || seen[p.Name] {
			return fmt.Errorf("%w: protocol names must be 1 to %d bytes and distinct", ErrInvalidGroupRequest, maxClassicName)
		}
		if len(p.Metadata) > maxClassicMetadata {
			return fmt.Errorf("%w: protocol %s: metadata over %d bytes", ErrInvalidGroupRequest, TruncateName(p.Name), maxClassicMetadata)
		}
		seen[p.Name] = true
	}
	if j.Topics != nil {
		if _, err := NormalizeTopics(j.Topics); err != nil {
			return err
		}
	}
	return nil
}

// ValidateClassicSync checks a sync's shape, before any SQL.
func ValidateClassicSync(s ClassicSync) error {
	if err := ValidateGroupName(s.Group); err != nil {
		return err
	}
	if err := validateMemberID(s.MemberID); err != nil {
		return err
	}
	if len(s.Assignments) > maxClassicAssignments {
		return fmt.Errorf("%w: at most %d assignments", ErrInvalidGroupRequest, maxClassicAssignments)
	}
	return nil
}
