package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// The consumer-group calls of the HTTP API (docs/design.md "Groups"). Consumer
// (consumer.go) builds a group member on them; these are also what tools (the CLI's
// groups verbs) use.

// Group error codes the server answers with (HTTP 404 or 409); branch with HasCode.
const (
	CodeGroupNotFound    = "group_not_found"
	CodeUnknownMember    = "unknown_member"
	CodeStaleMemberEpoch = "stale_member_epoch"
	CodeNotOwner         = "not_owner"
	CodeGroupNotEmpty    = "group_not_empty"
)

// TopicPartitions is a set of partitions of one topic.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// HeartbeatRequest is one member heartbeat. MemberEpoch 0 joins (Topics required), -1
// leaves, otherwise it is the epoch the last answer gave.
type HeartbeatRequest struct {
	MemberID    string            `json:"member_id"`
	MemberEpoch int32             `json:"member_epoch"`
	Topics      []string          `json:"topics,omitempty"`
	Owned       []TopicPartitions `json:"owned"`
	// SessionTimeout is the lease; zero keeps it (the server's default on join).
	SessionTimeout time.Duration `json:"-"`
	// Assignor is "sticky" (the default), "range" or "roundrobin"; "" keeps the group's.
	Assignor string `json:"assignor,omitempty"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	MemberEpoch int32
	// Assignment is what the member owns and keeps. A partition it holds that is missing
	// is being revoked: stop processing it, commit, and leave it out of the next Owned.
	Assignment        []TopicPartitions
	HeartbeatInterval time.Duration
}

// Heartbeat sends one heartbeat for group.
func (c *Client) Heartbeat(ctx context.Context, group string, req HeartbeatRequest) (HeartbeatResponse, error) {
	in := struct {
		HeartbeatRequest
		SessionTimeoutMs int64 `json:"session_timeout_ms,omitempty"`
	}{req, req.SessionTimeout.Milliseconds()}
	if in.Owned == nil {
		in.Owned = []TopicPartitions{}
	}
	var out struct {
		MemberEpoch         int32             `json:"member_epoch"`
		Assignment          []TopicPartitions `json:"assignment"`
		HeartbeatIntervalMs int64             `json:"heartbeat_interval_ms"`
	}
	what := fmt.Sprintf("heartbeat %s/%s at epoch %d", group, req.MemberID, req.MemberEpoch)
	if err := c.do(ctx, what, http.MethodPost, nil, in, &out, "v1", "groups", group, "heartbeat"); err != nil {
		return HeartbeatResponse{}, err
	}
	return HeartbeatResponse{
		MemberEpoch:       out.MemberEpoch,
		Assignment:        out.Assignment,
		HeartbeatInterval: time.Duration(out.HeartbeatIntervalMs) * time.Millisecond,
	}, nil
}

// GroupOffset is a committed offset: the next offset to read.
type GroupOffset struct {
	Topic       string    `json:"topic"`
	Partition   int32     `json:"partition"`
	Offset      int64     `json:"offset"`
	Metadata    string    `json:"metadata,omitempty"`
	CommittedAt time.Time `json:"committed_at,omitzero"`
}

// CommitOffsets commits offsets for a group, all or none. A member commits at its
// current epoch for partitions it owns; memberID "" commits from outside the group,
// which the server accepts only while the group has no live members.
func (c *Client) CommitOffsets(ctx context.Context, group, memberID string, epoch int32, offsets []GroupOffset) error {
	in := struct {
		MemberID    string        `json:"member_id,omitempty"`
		MemberEpoch *int32        `json:"member_epoch,omitempty"`
		Offsets     []GroupOffset `json:"offsets"`
	}{MemberID: memberID, Offsets: make([]GroupOffset, len(offsets))}
	if memberID != "" {
		in.MemberEpoch = &epoch
	}
	for i, o := range offsets {
		o.CommittedAt = time.Time{}
		in.Offsets[i] = o
	}
	what := fmt.Sprintf("commit %d offsets of group %s", len(offsets), group)
	return c.do(ctx, what, http.MethodPost, nil, in, nil, "v1", "groups", group, "offsets")
}

// GroupOffsets lists a group's committed offsets.
func (c *Client) GroupOffsets(ctx context.Context, group string) ([]GroupOffset, error) {
	var out struct {
		Offsets []GroupOffset `json:"offsets"`
	}
	if err := c.do(ctx, "offsets of group "+group, http.MethodGet, nil, nil, &out, "v1", "groups", group, "offsets"); err != nil {
		return nil, err
	}
	return out.Offsets, nil
}

// PartitionLag is one partition's lag for a group.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// CommittedOffset is nil when nothing is committed (lag counts from the log start).
	CommittedOffset *int64 `json:"committed_offset"`
	LogStartOffset  int64  `json:"log_start_offset"`
	HighWatermark   int64  `json:"high_watermark"`
	Lag             int64  `json:"lag"`
	Owner           string `json:"owner,omitempty"`
}

// GroupLag is a group's lag per partition and in total.
type GroupLag struct {
	Group      string         `json:"group"`
	TotalLag   int64          `json:"total_lag"`
	Partitions []PartitionLag `json:"partitions"`
}

// GroupLag answers a group's lag.
func (c *Client) GroupLag(ctx context.Context, group string) (GroupLag, error) {
	var out GroupLag
	err := c.do(ctx, "lag of group "+group, http.MethodGet, nil, nil, &out, "v1", "groups", group, "lag")
	return out, err
}

// GroupSummary is one group of ListGroups.
type GroupSummary struct {
	Name     string `json:"name"`
	State    string `json:"state"` // empty, stable or reconciling
	Members  int    `json:"members"`
	Assignor string `json:"assignor"`
}

// ListGroups lists the groups by name.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	var out struct {
		Groups []GroupSummary `json:"groups"`
	}
	if err := c.do(ctx, "list groups", http.MethodGet, nil, nil, &out, "v1", "groups"); err != nil {
		return nil, err
	}
	return out.Groups, nil
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

// Group is a described group.
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

// DescribeGroup answers a group's state, members, assignments and lag.
func (c *Client) DescribeGroup(ctx context.Context, group string) (Group, error) {
	var out Group
	err := c.do(ctx, "describe group "+group, http.MethodGet, nil, nil, &out, "v1", "groups", group)
	return out, err
}

// DeleteGroup deletes a group without live members, with its offsets.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	return c.do(ctx, "delete group "+group, http.MethodDelete, nil, nil, nil, "v1", "groups", group)
}

// OffsetReset says where ResetOffsets moves a group's offsets of one topic.
type OffsetReset struct {
	Topic      string
	Partitions []int32 // nil: every partition
	// To is "earliest", "latest", "timestamp" (Timestamp) or "offset" (Offset).
	To        string
	Timestamp time.Time
	Offset    int64
	// Create positions a group that does not exist yet; without it such a group is
	// refused (group_not_found), so that a mistyped name does not make a new one.
	Create bool
}

// ResetOffsets moves a group's committed offsets while it has no live members, and
// returns the offsets set.
func (c *Client) ResetOffsets(ctx context.Context, group string, r OffsetReset) ([]GroupOffset, error) {
	in := map[string]any{"topic": r.Topic, "to": r.To}
	if r.Create {
		in["create"] = true
	}
	if r.Partitions != nil {
		in["partitions"] = r.Partitions
	}
	switch r.To {
	case "timestamp":
		in["timestamp"] = r.Timestamp.UnixMilli()
	case "offset":
		in["offset"] = r.Offset
	}
	var out struct {
		Offsets []GroupOffset `json:"offsets"`
	}
	if err := c.do(ctx, "reset offsets of group "+group, http.MethodPost, nil, in, &out, "v1", "groups", group, "offsets:reset"); err != nil {
		return nil, err
	}
	return out.Offsets, nil
}
