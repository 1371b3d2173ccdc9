package client

import (
	"context"
	"net/http"
	"strconv"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
)

// The share-group calls of the HTTP API (docs/design.md "Share groups"): queues on
// the log. ShareConsumer (share_consumer.go) builds a member on them; tools (the
// CLI's share verbs) use them as they are.

// Share-group error codes the server answers with; branch with HasCode.
const (
	CodeGroupTypeMismatch  = v1.CodeGroupTypeMismatch
	CodeAcquisitionNotHeld = v1.CodeAcquisitionNotHeld
	CodeAckOutOfRange      = v1.CodeAckOutOfRange
)

// Acknowledgement types.
const (
	AckAccept  = v1.AckAccept
	AckRelease = v1.AckRelease
	AckReject  = v1.AckReject
	AckRenew   = v1.AckRenew
)

// ShareAcquisition is the records acquired from one partition and the id they are
// acknowledged by.
type ShareAcquisition = v1.ShareAcquisition

// ShareGroup is a share group's members and share-partitions.
type ShareGroup = v1.ShareGroup

// ShareAcquireRequest asks for records of a share group.
type ShareAcquireRequest struct {
	// MemberID is the id the first acquisition answered; "" joins under a new one.
	MemberID string
	Topics   []string
	// MaxRecords bounds the records acquired (0: the server's default, 500).
	MaxRecords int
	// Wait is how long the server waits for records when none are available.
	Wait time.Duration
}

// ShareAcquireResult answers an acquisition.
type ShareAcquireResult struct {
	MemberID     string
	LockDuration time.Duration
	Partitions   []ShareAcquisition
}

// AcquireShareRecords joins (or keeps) a member of a share group and acquires records
// for it.
func (c *Client) AcquireShareRecords(ctx context.Context, group string, req ShareAcquireRequest) (ShareAcquireResult, error) {
	in := v1.ShareRecordsRequest{MemberID: req.MemberID, Topics: req.Topics, MaxRecords: req.MaxRecords, WaitMs: req.Wait.Milliseconds()}
	var out v1.ShareRecordsResponse
	err := c.do(ctx, "acquire records of share group "+group, http.MethodPost, nil, in, &out, "v1", "share-groups", group, "records")
	return ShareAcquireResult{MemberID: out.MemberID, LockDuration: time.Duration(out.LockDurationMs) * time.Millisecond,
		Partitions: out.Partitions}, err
}

// ShareAckRange acknowledges offsets First to Last of an acquisition with Type
// (AckAccept, AckRelease, AckReject or AckRenew).
type ShareAckRange struct {
	First, Last int64
	Type        string
}

// ShareAck acknowledges records of one acquisition.
type ShareAck struct {
	AcquisitionID string
	Ranges        []ShareAckRange
}

// AcknowledgeShareRecords applies a member's acknowledgements, all or nothing. An
// acquisition whose lock passed or whose records were delivered again is refused
// (HasCode(err, CodeAcquisitionNotHeld)).
func (c *Client) AcknowledgeShareRecords(ctx context.Context, group, memberID string, acks []ShareAck) error {
	in := v1.ShareAckRequest{MemberID: memberID, Acks: make([]v1.ShareAck, len(acks))}
	for i, a := range acks {
		in.Acks[i].AcquisitionID = a.AcquisitionID
		for _, r := range a.Ranges {
			in.Acks[i].Ranges = append(in.Acks[i].Ranges, v1.ShareAckRange{First: &r.First, Last: &r.Last, Type: r.Type})
		}
	}
	return c.do(ctx, "acknowledge records of share group "+group, http.MethodPost, nil, in, nil, "v1", "share-groups", group, "acks")
}

// ShareGroupSummary is a share group in ListShareGroups.
type ShareGroupSummary = v1.ShareGroupSummary

// ListShareGroups lists the share groups the key may describe, by name.
func (c *Client) ListShareGroups(ctx context.Context) ([]ShareGroupSummary, error) {
	var out v1.ShareGroupList
	if err := c.do(ctx, "list share groups", http.MethodGet, nil, nil, &out, "v1", "share-groups"); err != nil {
		return nil, err
	}
	return out.ShareGroups, nil
}

// DescribeShareGroup answers a share group's members and share-partitions.
func (c *Client) DescribeShareGroup(ctx context.Context, group string) (ShareGroup, error) {
	var out ShareGroup
	err := c.do(ctx, "describe share group "+group, http.MethodGet, nil, nil, &out, "v1", "share-groups", group)
	return out, err
}

// DeleteShareGroup deletes a share group without live members.
func (c *Client) DeleteShareGroup(ctx context.Context, group string) error {
	return c.do(ctx, "delete share group "+group, http.MethodDelete, nil, nil, nil, "v1", "share-groups", group)
}

// ConfigureShareGroup sets a share group's configs (replacing those set before; the
// group need not exist yet) and answers every config, defaults included.
func (c *Client) ConfigureShareGroup(ctx context.Context, group string, configs map[string]string) (map[string]string, error) {
	if configs == nil {
		configs = map[string]string{}
	}
	var out v1.ShareGroupConfigs
	err := c.do(ctx, "configure share group "+group, http.MethodPut, nil, v1.ShareGroupConfigs{Configs: configs}, &out, "v1", "share-groups", group)
	return out.Configs, err
}

// ResetShareOffsets moves a share group's start offsets of one topic while it has no
// live members, dropping what was in flight there, and returns the offsets set.
func (c *Client) ResetShareOffsets(ctx context.Context, group string, r OffsetReset) ([]GroupOffset, error) {
	in := v1.ResetOffsetsRequest{Topic: r.Topic, To: r.To, Partitions: r.Partitions, Create: r.Create}
	switch r.To {
	case "timestamp":
		in.Timestamp = strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)
	case "offset":
		in.Offset = &r.Offset
	}
	var out v1.GroupOffsets
	if err := c.do(ctx, "reset offsets of share group "+group, http.MethodPost, nil, in, &out, "v1", "share-groups", group, "offsets:reset"); err != nil {
		return nil, err
	}
	return out.Offsets, nil
}

// LeaveShareGroup takes a member out of a share group, releasing the records it holds
// for other members at once.
func (c *Client) LeaveShareGroup(ctx context.Context, group, memberID string) error {
	return c.do(ctx, "leave share group "+group, http.MethodDelete, nil, nil, nil, "v1", "share-groups", group, "members", memberID)
}
