package catalog

// Consumer groups (docs/design.md "Groups"): lease-based membership with server-side
// assignment, in the spirit of Kafka's KIP-848. This file holds what callers see of
// them: the Groups interface, its requests and answers, errors, bounds, and the checks
// of a request's shape (ValidateHeartbeat, ValidateOffsetCommit) that a front end may
// run before calling. The rules a heartbeat and an offset commit run against a group's
// state are the engine's (catalog/internal/engine: heartbeat.go, assign.go, offsets.go,
// describe.go), shared by both backends.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Groups is the consumer-group part of the catalog, implemented by both backends beside
// Catalog (kept apart from Catalog so that implementations without groups still compile)
// and proved by catalogtest (its "groups" suite).
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
	// AssignorStreams is the Streams assignor (engine/standby.go): a task is partition n
	// of every topic with the same partition count (co-partitioned, as range), its
	// active kept where it is, moved first to a member caught up on its state (a warm
	// standby), and each member told the standby tasks it keeps (Heartbeat.StandbyReplicas
	// of them per task, never beside the active).
	AssignorStreams = "streams"
	DefaultAssignor = AssignorSticky
)

// Standby bounds.
const (
	// AcceptableRecoveryLag is the most changelog records a member may be behind on a
	// task's state and still count as caught up (Kafka Streams'
	// acceptable.recovery.lag): a task moves to such a member first.
	AcceptableRecoveryLag = 10_000
	// MaxStandbyReplicas bounds Heartbeat.StandbyReplicas.
	MaxStandbyReplicas = 16
	maxTaskLags        = 100_000
)

// Session and metadata bounds.
const (
	DefaultSessionTimeout = 30 * time.Second
	MinSessionTimeout     = 100 * time.Millisecond
	MaxSessionTimeout     = 30 * time.Minute
	// MaxOffsetMetadata bounds a committed offset's metadata, as Kafka's
	// offset.metadata.max.bytes.
	MaxOffsetMetadata = 4096
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
	// TaskLags reports, per task (named by one partition of its input: partition n of
	// a topic stands for partition n of every topic with its partition count), how
	// many changelog records the member's local state of it is behind; tasks left out
	// it holds no state of. nil keeps the last report. Read by AssignorStreams.
	TaskLags []TaskLag
	// StandbyReplicas is how many standby copies of each task the member asks for
	// (AssignorStreams; the group keeps the largest any live member asks for); set on
	// join, 0 for none.
	StandbyReplicas int32
}

// TaskLag is one task's lag in a heartbeat (Heartbeat.TaskLags).
type TaskLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Lag       int64  `json:"lag"`
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
	// Standbys lists the tasks (one partition of each task's topics, as TaskLags names
	// them) whose state the member should keep warm: AssignorStreams only.
	Standbys []TopicPartitions
}

// OffsetCommit commits offsets for a group.
type OffsetCommit struct {
	Group       string
	MemberID    string // "": a commit from outside the group, while it has no live members
	MemberEpoch int32
	Offsets     []CommitOffset
	// Released takes Kafka's rule for a KIP-848 member's OffsetCommit: at its current
	// epoch it may also commit a partition it gave back (Kafka checks a commit at the
	// current epoch against no partition, and its clients commit what they processed of
	// a revoked partition as the revocation completes), until another member gives the
	// partition back in turn. Only for a commit alone: offsets carried with records
	// (Request.GroupOffsets) must always be the owner's.
	Released bool
	// CheckOnly checks the commit and stores nothing: a transaction's offsets
	// (TxnOffsetCommit) are checked against the group's rules when sent, stored when
	// the transaction commits.
	CheckOnly bool
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

// ValidateGroupName applies the name rule of topics (validName) to a group's name.
func ValidateGroupName(name string) error {
	if !validName(name) {
		return fmt.Errorf("%w: %q: use 1 to %d characters of [a-zA-Z0-9._-] (not \".\" or \"..\")", ErrInvalidGroupName, TruncateName(name), maxName)
	}
	return nil
}

// validateMemberID accepts 1 to 255 printable ASCII characters without spaces: ids are
// chosen by clients (a UUID, a host name and pid) and show in logs and listings.
func validateMemberID(id string) error {
	if id == "" || len(id) > maxMemberID {
		return fmt.Errorf("%w: member_id must be 1 to %d characters", ErrInvalidGroupRequest, maxMemberID)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("%w: member_id %q: use printable ASCII without spaces", ErrInvalidGroupRequest, TruncateName(id))
		}
	}
	return nil
}

// validateAssignor accepts the assignor names, and "" (keep or default).
func validateAssignor(name string) error {
	switch name {
	case "", AssignorSticky, AssignorRange, AssignorRoundRobin, AssignorStreams:
		return nil
	}
	return fmt.Errorf("%w: assignor %q: use %s, %s, %s or %s", ErrInvalidGroupRequest, TruncateName(name), AssignorSticky, AssignorRange, AssignorRoundRobin, AssignorStreams)
}

// CheckSessionTimeout is the one range of a member's session timeout, whichever
// protocol asks for it (a heartbeat's lease, a classic JoinGroup's session timeout):
// MinSessionTimeout to MaxSessionTimeout, as Kafka's group.min/max.session.timeout.ms
// bound it. The error names the bounds; each caller wraps it in its own refusal.
func CheckSessionTimeout(d time.Duration) error {
	if d < MinSessionTimeout || d > MaxSessionTimeout {
		return fmt.Errorf("session_timeout_ms %d: use between %d and %d", d.Milliseconds(), MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
	}
	return nil
}

// validateSessionTimeout checks a heartbeat's session timeout: 0 keeps the member's.
func validateSessionTimeout(d time.Duration) error {
	if d == 0 {
		return nil
	}
	if err := CheckSessionTimeout(d); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidGroupRequest, err)
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
	if err := validateMemberID(hb.MemberID); err != nil {
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
				return fmt.Errorf("%w: owned: partition %d of %q is negative", ErrInvalidGroupRequest, p, TruncateName(o.Topic))
			}
		}
	}
	if err := validateSessionTimeout(hb.SessionTimeout); err != nil {
		return err
	}
	if hb.StandbyReplicas < 0 || hb.StandbyReplicas > MaxStandbyReplicas {
		return fmt.Errorf("%w: standby_replicas %d: use 0 to %d", ErrInvalidGroupRequest, hb.StandbyReplicas, MaxStandbyReplicas)
	}
	if len(hb.TaskLags) > maxTaskLags {
		return fmt.Errorf("%w: task_lags: %d entries, at most %d", ErrInvalidGroupRequest, len(hb.TaskLags), maxTaskLags)
	}
	for _, l := range hb.TaskLags {
		if l.Partition < 0 || l.Lag < 0 {
			return fmt.Errorf("%w: task_lags: partition %d of %q with lag %d: both must be 0 or more", ErrInvalidGroupRequest, l.Partition, TruncateName(l.Topic), l.Lag)
		}
	}
	return validateAssignor(hb.Assignor)
}

// HeartbeatInterval is how often a member with this session timeout should heartbeat:
// a tenth of it (3 s for the 30 s default), so several heartbeats may be lost before
// the lease ends (the front ends tell a member that has no assignment yet).
func HeartbeatInterval(session time.Duration) time.Duration {
	return min(max(session/10, 10*time.Millisecond), 5*time.Second)
}

// TruncateName shortens a name quoted in an error to 64 bytes.
func TruncateName(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}

// ValidateOffsetCommit checks an offset commit's shape, before any SQL.
func ValidateOffsetCommit(c OffsetCommit) error {
	if err := ValidateGroupName(c.Group); err != nil {
		return err
	}
	if c.MemberID != "" {
		if err := validateMemberID(c.MemberID); err != nil {
			return err
		}
		if c.MemberEpoch <= 0 {
			return fmt.Errorf("%w: member_epoch %d: commit at the epoch the last heartbeat answered", ErrStaleMemberEpoch, c.MemberEpoch)
		}
	}
	return validateOffsets(c.Offsets)
}

func validateOffsets(offs []CommitOffset) error {
	if len(offs) == 0 {
		return fmt.Errorf("%w: offsets: none given", ErrInvalidGroupRequest)
	}
	seen := make(map[string]map[int32]bool)
	for _, o := range offs {
		if err := ValidateTopicName(o.Topic); err != nil {
			return fmt.Errorf("%w: %w", ErrTopicNotFound, err)
		}
		if o.Partition < 0 {
			return fmt.Errorf("%w: topic %s partition %d", ErrPartitionOutOfRange, o.Topic, o.Partition)
		}
		if o.Offset < 0 {
			return fmt.Errorf("%w: %s/%d: offset %d is negative", ErrInvalidOffset, o.Topic, o.Partition, o.Offset)
		}
		if len(o.Metadata) > MaxOffsetMetadata || !utf8.ValidString(o.Metadata) {
			return fmt.Errorf("%w: %s/%d: metadata must be UTF-8 of at most %d bytes", ErrInvalidGroupRequest, o.Topic, o.Partition, MaxOffsetMetadata)
		}
		if seen[o.Topic] == nil {
			seen[o.Topic] = map[int32]bool{}
		}
		if seen[o.Topic][o.Partition] {
			return fmt.Errorf("%w: offsets: %s/%d appears twice", ErrInvalidGroupRequest, o.Topic, o.Partition)
		}
		seen[o.Topic][o.Partition] = true
	}
	return nil
}
