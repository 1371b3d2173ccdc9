package v1

import (
	"encoding/json"
	"time"
)

// TopicPartitions is a set of partitions of one topic.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// HeartbeatRequest is POST /v1/groups/{group}/heartbeat: one member's heartbeat, the
// only call of the lease-based group protocol.
type HeartbeatRequest struct {
	// MemberID is chosen by the client (e.g. a UUID).
	MemberID string `json:"member_id"`
	// MemberEpoch is 0 to join (or rejoin afresh), -1 to leave, otherwise the epoch
	// the last heartbeat answered.
	MemberEpoch *int32 `json:"member_epoch"`
	// Topics is the subscription: required to join; omitted keeps it.
	Topics []string `json:"topics,omitempty"`
	// Owned lists the partitions the member still holds. Leaving out a partition being
	// revoked acknowledges its revocation.
	Owned []TopicPartitions `json:"owned"`
	// SessionTimeoutMs is the member's lease; omitted keeps it (the server's default
	// on join).
	SessionTimeoutMs *int64 `json:"session_timeout_ms,omitempty"`
	// Assignor is the group's assignor, sticky, range, roundrobin or streams; "" keeps
	// it.
	Assignor string `json:"assignor,omitempty"`
	// TaskLags reports, per task, how far the member's local state is behind its
	// changelogs (the streams assignor's); omitted or null keeps the last report, []
	// clears it.
	TaskLags []TaskLag `json:"task_lags"`
	// StandbyReplicas asks, on join, for standby copies of each task (streams assignor).
	StandbyReplicas int32 `json:"standby_replicas,omitempty"`
}

// TaskLag is one task's lag: the task is named by one partition of its topics.
type TaskLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Lag       int64  `json:"lag"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	// MemberEpoch is the member's epoch now; -1 after leaving.
	MemberEpoch int32 `json:"member_epoch"`
	// Assignment is what the member owns and keeps. A held partition missing here is
	// being revoked: stop processing it, commit, then leave it out of owned.
	Assignment          []TopicPartitions `json:"assignment"`
	HeartbeatIntervalMs int64             `json:"heartbeat_interval_ms"`
	// Standbys lists the tasks whose state the member keeps warm (streams assignor).
	Standbys []TopicPartitions `json:"standbys,omitempty"`
}

// GroupOffset is a committed offset as the server answers it: the next offset to
// read of one partition.
type GroupOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
	// CommittedAt is when it was committed, in a listing of a group's offsets.
	CommittedAt time.Time `json:"committed_at,omitzero"`
}

// CommitOffset is one offset of a commit (OffsetCommitRequest, TransactGroupOffsets):
// GroupOffset as a request carries it, topic, partition and offset required.
type CommitOffset struct {
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Offset    *int64 `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
	// CommittedAt is read-only: ignored in a commit, so that a listing's offsets can be
	// sent back as they came.
	CommittedAt *time.Time `json:"committed_at,omitempty"`
}

// OffsetCommitRequest is POST /v1/groups/{group}/offsets.
type OffsetCommitRequest struct {
	// MemberID is the committing member; "" commits from outside the group, accepted
	// only while it has no live members.
	MemberID string `json:"member_id,omitempty"`
	// MemberEpoch is required with MemberID: the member's current epoch.
	MemberEpoch *int32         `json:"member_epoch,omitempty"`
	Offsets     []CommitOffset `json:"offsets"`
}

// GroupOffsets answers a commit, a reset and GET /v1/groups/{group}/offsets.
type GroupOffsets struct {
	Group   string        `json:"group"`
	Offsets []GroupOffset `json:"offsets"`
}

// ResetOffsetsRequest is POST /v1/groups/{group}/offsets:reset: it moves a group's
// offsets of one topic while the group has no live members.
type ResetOffsetsRequest struct {
	Topic string `json:"topic"`
	// Partitions omitted: every partition.
	Partitions []int32 `json:"partitions,omitempty"`
	// To is earliest, latest, timestamp (Timestamp) or offset (Offset).
	To string `json:"to"`
	// Timestamp, with to=timestamp, is unix milliseconds or an RFC 3339 string.
	Timestamp json.RawMessage `json:"timestamp,omitempty"`
	// Offset, with to=offset.
	Offset *int64 `json:"offset,omitempty"`
	// Create positions a group that does not exist yet; without it such a group is
	// refused (group_not_found), so that a mistyped name does not make a new one.
	Create bool `json:"create,omitempty"`
}

// PartitionLag is one partition's lag for a group.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// CommittedOffset is null when nothing is committed (lag counts from the log
	// start).
	CommittedOffset *int64 `json:"committed_offset"`
	LogStartOffset  int64  `json:"log_start_offset"`
	HighWatermark   int64  `json:"high_watermark"`
	Lag             int64  `json:"lag"`
	// Owner is the member owning the partition now, when one does.
	Owner string `json:"owner,omitempty"`
}

// GroupLag answers GET /v1/groups/{group}/lag.
type GroupLag struct {
	Group      string         `json:"group"`
	TotalLag   int64          `json:"total_lag"`
	Partitions []PartitionLag `json:"partitions"`
}

// GroupSummary is one group of GroupList.
type GroupSummary struct {
	Name string `json:"name"`
	// State is empty, stable or reconciling.
	State    string `json:"state"`
	Members  int    `json:"members"`
	Assignor string `json:"assignor"`
}

// GroupList answers GET /v1/groups.
type GroupList struct {
	Groups []GroupSummary `json:"groups"`
}

// GroupMember is one live member of a described group.
type GroupMember struct {
	MemberID         string            `json:"member_id"`
	MemberEpoch      int32             `json:"member_epoch"`
	Topics           []string          `json:"topics"`
	SessionTimeoutMs int64             `json:"session_timeout_ms"`
	LeaseExpiresAt   time.Time         `json:"lease_expires_at"`
	Assignment       []TopicPartitions `json:"assignment"`
	Revoking         []TopicPartitions `json:"revoking"`
	Pending          []TopicPartitions `json:"pending"`
}

// Group answers GET /v1/groups/{group}: its state, members, assignments and lag.
type Group struct {
	Name       string         `json:"name"`
	State      string         `json:"state"`
	Assignor   string         `json:"assignor"`
	Epoch      int32          `json:"epoch"`
	CreatedAt  time.Time      `json:"created_at"`
	Members    []GroupMember  `json:"members"`
	TotalLag   int64          `json:"total_lag"`
	Partitions []PartitionLag `json:"partitions"`
}
