package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// The consumer-group calls of the HTTP API (docs/design.md "Groups"). Consumer
// (consumer.go) builds a group member on them; these are also what tools (the CLI's
// groups verbs) use.

// Group error codes the server answers with (HTTP 404 or 409); branch with HasCode.
const (
	CodeGroupNotFound    = v1.CodeGroupNotFound
	CodeUnknownMember    = v1.CodeUnknownMember
	CodeStaleMemberEpoch = v1.CodeStaleMemberEpoch
	CodeNotOwner         = v1.CodeNotOwner
	CodeGroupNotEmpty    = v1.CodeGroupNotEmpty
)

// TopicPartitions is a set of partitions of one topic.
type TopicPartitions = v1.TopicPartitions

// HeartbeatRequest is one member heartbeat (v1.HeartbeatRequest, with the lease as a
// duration). MemberEpoch 0 joins (Topics required), -1 leaves, otherwise it is the
// epoch the last answer gave.
type HeartbeatRequest struct {
	MemberID    string
	MemberEpoch int32
	Topics      []string
	Owned       []TopicPartitions
	// SessionTimeout is the lease; zero keeps it (the server's default on join).
	SessionTimeout time.Duration
	// Assignor is "sticky" (the default), "range", "roundrobin" or "streams"; "" keeps
	// the group's.
	Assignor string
	// TaskLags reports the member's per-task state lags (streams assignor); nil keeps
	// the last report.
	TaskLags []TaskLag
	// StandbyReplicas asks on join for standby copies of each task (streams assignor).
	StandbyReplicas int32
}

// TaskLag is one task's state lag in a heartbeat.
type TaskLag = v1.TaskLag

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	MemberEpoch int32
	// Assignment is what the member owns and keeps. A partition it holds that is missing
	// is being revoked: stop processing it, commit, and leave it out of the next Owned.
	Assignment        []TopicPartitions
	HeartbeatInterval time.Duration
	// Standbys lists the tasks whose state the member should keep warm (streams
	// assignor).
	Standbys []TopicPartitions
}

// Heartbeat sends one heartbeat for group.
func (c *Client) Heartbeat(ctx context.Context, group string, req HeartbeatRequest) (HeartbeatResponse, error) {
	in := v1.HeartbeatRequest{MemberID: req.MemberID, MemberEpoch: &req.MemberEpoch, Topics: req.Topics, Owned: req.Owned, Assignor: req.Assignor,
		TaskLags: req.TaskLags, StandbyReplicas: req.StandbyReplicas}
	if ms := req.SessionTimeout.Milliseconds(); ms != 0 {
		in.SessionTimeoutMs = &ms
	}
	if len(in.Topics) == 0 {
		in.Topics = nil // omitted: keep the subscription
	}
	if in.Owned == nil {
		in.Owned = []TopicPartitions{}
	}
	var out v1.HeartbeatResponse
	what := fmt.Sprintf("heartbeat %s/%s at epoch %d", group, req.MemberID, req.MemberEpoch)
	if err := c.do(ctx, what, http.MethodPost, nil, in, &out, "v1", "groups", group, "heartbeat"); err != nil {
		return HeartbeatResponse{}, err
	}
	return HeartbeatResponse{
		MemberEpoch:       out.MemberEpoch,
		Assignment:        out.Assignment,
		HeartbeatInterval: time.Duration(out.HeartbeatIntervalMs) * time.Millisecond,
		Standbys:          out.Standbys,
	}, nil
}

// GroupOffset is a committed offset: the next offset to read.
type GroupOffset = v1.GroupOffset

// commitOffsets are offsets as a commit carries them (CommittedAt is the server's).
func commitOffsets(offsets []GroupOffset) []v1.CommitOffset {
	out := make([]v1.CommitOffset, len(offsets))
	for i := range offsets {
		o := &offsets[i]
		out[i] = v1.CommitOffset{Topic: o.Topic, Partition: &o.Partition, Offset: &o.Offset, Metadata: o.Metadata}
	}
	return out
}

// CommitOffsets commits offsets for a group, all or none. A member commits at its
// current epoch for partitions it owns; memberID "" commits from outside the group,
// which the server accepts only while the group has no live members.
func (c *Client) CommitOffsets(ctx context.Context, group, memberID string, epoch int32, offsets []GroupOffset) error {
	in := v1.OffsetCommitRequest{MemberID: memberID, Offsets: commitOffsets(offsets)}
	if memberID != "" {
		in.MemberEpoch = &epoch
	}
	what := fmt.Sprintf("commit %d offsets of group %s", len(offsets), group)
	return c.do(ctx, what, http.MethodPost, nil, in, nil, "v1", "groups", group, "offsets")
}

// GroupOffsets lists a group's committed offsets.
func (c *Client) GroupOffsets(ctx context.Context, group string) ([]GroupOffset, error) {
	var out v1.GroupOffsets
	if err := c.do(ctx, "offsets of group "+group, http.MethodGet, nil, nil, &out, "v1", "groups", group, "offsets"); err != nil {
		return nil, err
	}
	return out.Offsets, nil
}

// PartitionLag is one partition's lag for a group. CommittedOffset is nil when nothing
// is committed (lag counts from the log start).
type PartitionLag = v1.PartitionLag

// GroupLag is a group's lag per partition and in total.
type GroupLag = v1.GroupLag

// GroupLag answers a group's lag.
func (c *Client) GroupLag(ctx context.Context, group string) (GroupLag, error) {
	var out GroupLag
	err := c.do(ctx, "lag of group "+group, http.MethodGet, nil, nil, &out, "v1", "groups", group, "lag")
	return out, err
}

// GroupSummary is one group of ListGroups; State is empty, stable or reconciling.
type GroupSummary = v1.GroupSummary

// ListGroups lists the groups by name.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	var out v1.GroupList
	if err := c.do(ctx, "list groups", http.MethodGet, nil, nil, &out, "v1", "groups"); err != nil {
		return nil, err
	}
	return out.Groups, nil
}

// GroupMember is one live member of a described group.
type GroupMember = v1.GroupMember

// Group is a described group.
type Group = v1.Group

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
	in := v1.ResetOffsetsRequest{Topic: r.Topic, To: r.To, Partitions: r.Partitions, Create: r.Create}
	switch r.To {
	case "timestamp":
		in.Timestamp = strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)
	case "offset":
		in.Offset = &r.Offset
	}
	var out v1.GroupOffsets
	if err := c.do(ctx, "reset offsets of group "+group, http.MethodPost, nil, in, &out, "v1", "groups", group, "offsets:reset"); err != nil {
		return nil, err
	}
	return out.Offsets, nil
}
