package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// The consumer-group calls (docs/design.md "Groups"): thin over the catalog, whose
// shared Go and SQL twins hold the group rules; the core authorizes them as Kafka does
// (a member reads its group and its topics; describing needs describe; what a caller
// may not describe is left out of its listings), maps their errors, and resolves what
// a reset asks for into offsets.

// CheckSessionTimeout applies the session-timeout rule (catalog.CheckSessionTimeout:
// MinSessionTimeout to MaxSessionTimeout) to a timeout a member gave explicitly, refused
// as the catalog refuses a heartbeat's (CodeInvalidRequest). Heartbeat applies the same
// rule to every timeout but 0, which keeps the member's; a front end whose caller may
// send an explicit 0 calls this first, since the two look alike in catalog.Heartbeat.
func CheckSessionTimeout(d time.Duration) error {
	if err := catalog.CheckSessionTimeout(d); err != nil {
		return groupError("heartbeat", fmt.Errorf("%w: %v", catalog.ErrInvalidGroupRequest, err)).with("field", "session_timeout_ms")
	}
	return nil
}

// Heartbeat joins, renews or leaves a group and answers the member's assignment.
func (b *Broker) Heartbeat(ctx context.Context, who Principal, hb catalog.Heartbeat) (catalog.HeartbeatResult, error) {
	if e := b.check(CapGroups); e != nil {
		return catalog.HeartbeatResult{}, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(hb.Group)); e != nil {
		return catalog.HeartbeatResult{}, e
	}
	if e := b.authorizeTopics(ctx, who, acl.OpRead, hb.Topics); e != nil {
		return catalog.HeartbeatResult{}, e
	}
	if e := validGroup(hb.Group); e != nil {
		return catalog.HeartbeatResult{}, e
	}
	if hb.MemberEpoch == catalog.JoinEpoch {
		if e := b.checkNotShareGroup(ctx, hb.Group); e != nil {
			return catalog.HeartbeatResult{}, e
		}
	}
	res, err := b.d.Groups.Heartbeat(ctx, hb)
	if err != nil {
		return catalog.HeartbeatResult{}, groupError("heartbeat", err, onGroup(hb.Group, hb.MemberID))
	}
	return res, nil
}

// CommitOffsets stores a group's committed offsets, all or none.
func (b *Broker) CommitOffsets(ctx context.Context, who Principal, c catalog.OffsetCommit) error {
	if e := b.check(CapGroups); e != nil {
		return e
	}
	if e := b.authorizeCommit(ctx, who, &c); e != nil {
		return e
	}
	if e := checkOffsetCommit("commit offsets", &c); e != nil {
		return e
	}
	if err := b.d.Groups.CommitOffsets(ctx, c); err != nil {
		return groupError("commit offsets", err, onGroup(c.Group, c.MemberID))
	}
	return nil
}

// authorizeCommit requires read on the group and on every topic committed, as a Kafka
// OffsetCommit does.
func (b *Broker) authorizeCommit(ctx context.Context, who Principal, c *catalog.OffsetCommit) *Error {
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(c.Group)); e != nil {
		return e
	}
	topics := make([]string, len(c.Offsets))
	for i, o := range c.Offsets {
		topics[i] = o.Topic
	}
	return b.authorizeTopics(ctx, who, acl.OpRead, topics)
}

// checkOffsetCommit checks a commit's shape, whichever call carries it (a commit, a
// produce's group offsets, a Kafka OffsetCommit): its group's name; each offset's
// partition and offset, neither negative (a negative partition is CodeInvalidPartition,
// as a record's is, rather than the catalog's out of range); then the catalog's checks
// of the rest.
func checkOffsetCommit(op string, c *catalog.OffsetCommit) *Error {
	if e := validGroup(c.Group); e != nil {
		return e
	}
	for i, o := range c.Offsets {
		if o.Partition < 0 {
			return newError(CodeInvalidPartition, "offsets[%d]: partition %d is negative", i, o.Partition).with("field", "offsets")
		}
		if o.Offset < 0 {
			return newError(CodeInvalidOffset, "offsets[%d]: offset %d is negative: an offset is the next one to read, from 0", i, o.Offset).with("field", "offsets")
		}
	}
	if err := catalog.ValidateOffsetCommit(*c); err != nil {
		return groupError(op, err, onGroup(c.Group, c.MemberID))
	}
	return nil
}

// GroupOffsets lists a group's committed offsets, of the topics the caller may
// describe.
func (b *Broker) GroupOffsets(ctx context.Context, who Principal, group string) ([]catalog.GroupOffset, error) {
	if e := b.check(CapGroups); e != nil {
		return nil, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return nil, e
	}
	if e := validGroup(group); e != nil {
		return nil, e
	}
	offs, err := b.d.Groups.GroupOffsets(ctx, group)
	if err != nil {
		return nil, groupError("group offsets", err, onGroup(group, ""))
	}
	return visible(b, who, offs, func(o catalog.GroupOffset) acl.Resource { return acl.Topic(o.Topic) }), nil
}

// visible keeps the items whose resource (a topic, a group) who may describe: what a
// listing shows.
func visible[T any](b *Broker, who Principal, items []T, res func(T) acl.Resource) []T {
	if b.d.Authorizer == nil {
		return items
	}
	out := items[:0:0]
	for _, it := range items {
		if b.may(who, acl.OpDescribe, res(it)) {
			out = append(out, it)
		}
	}
	return out
}

// GroupLag answers a group's committed offsets against the high watermarks.
func (b *Broker) GroupLag(ctx context.Context, who Principal, group string) ([]catalog.PartitionLag, error) {
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return nil, e
	}
	return b.groupLag(ctx, who, "group lag", group)
}

// groupLag is the lag of the partitions of topics who may describe.
func (b *Broker) groupLag(ctx context.Context, who Principal, op, group string) ([]catalog.PartitionLag, error) {
	if e := b.check(CapGroups); e != nil {
		return nil, e
	}
	if e := validGroup(group); e != nil {
		return nil, e
	}
	ls, err := b.d.Groups.GroupLag(ctx, group)
	if err != nil {
		return nil, groupError(op, err, onGroup(group, ""))
	}
	return visible(b, who, ls, func(l catalog.PartitionLag) acl.Resource { return acl.Topic(l.Topic) }), nil
}

// ListGroups lists the groups the caller may describe.
func (b *Broker) ListGroups(ctx context.Context, who Principal) ([]catalog.GroupSummary, error) {
	if e := b.check(CapGroups); e != nil {
		return nil, e
	}
	gs, err := b.d.Groups.ListGroups(ctx)
	if err != nil {
		return nil, groupError("list groups", err)
	}
	return visible(b, who, gs, func(g catalog.GroupSummary) acl.Resource { return acl.Group(g.Name) }), nil
}

// DescribeGroup answers a group's state, members and assignments, and its lag.
func (b *Broker) DescribeGroup(ctx context.Context, who Principal, group string) (catalog.GroupDescription, []catalog.PartitionLag, error) {
	if e := b.check(CapGroups); e != nil {
		return catalog.GroupDescription{}, nil, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return catalog.GroupDescription{}, nil, e
	}
	if e := validGroup(group); e != nil {
		return catalog.GroupDescription{}, nil, e
	}
	d, err := b.d.Groups.DescribeGroup(ctx, group)
	if err != nil {
		return catalog.GroupDescription{}, nil, groupError("describe group", err, onGroup(group, ""))
	}
	ls, err := b.groupLag(ctx, who, "describe group", group)
	if err != nil {
		return catalog.GroupDescription{}, nil, err
	}
	return d, ls, nil
}

// DeleteGroup deletes a group without live members, and its offsets.
func (b *Broker) DeleteGroup(ctx context.Context, who Principal, group string) error {
	if e := b.check(CapGroups); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpDelete, acl.Group(group)); e != nil {
		return e
	}
	if e := validGroup(group); e != nil {
		return e
	}
	if ok, err := b.IsShareGroup(ctx, group); err != nil {
		return err
	} else if ok {
		return b.DeleteShareGroup(ctx, who, group)
	}
	ctx = withAudit(ctx, who, "group.delete", acl.Group(group), nil)
	if err := b.d.Groups.DeleteGroup(ctx, group); err != nil {
		return groupError("delete group", err, onGroup(group, ""))
	}
	return nil
}

// ResetRequest says where ResetOffsets moves a group's offsets of one topic.
type ResetRequest struct {
	Topic      string
	Partitions []int32 // none: every partition
	// To is where the offsets go, as ListOffset takes it: Earliest, Latest, or a time
	// (unix ms: the earliest offset at or after it); with ToOffset, the offset To.
	To       int64
	ToOffset bool
	// Create positions a group that does not exist yet (before its first consumer);
	// without it, a group that does not exist is CodeGroupNotFound, so that a mistyped
	// name does not make a new group.
	Create bool
}

// resetTarget is where a reset puts one partition.
type resetTarget struct {
	partition int32
	offset    int64
}

// resetTargets resolves req on each partition of t it names (every partition when it
// names none) from their current state: the log start, the end, an offset, or the
// first record at or after a time. Consumer-group and share-group resets both use it.
func (b *Broker) resetTargets(ctx context.Context, op string, t catalog.Topic, req ResetRequest) ([]resetTarget, error) {
	parts, err := b.d.Catalog.Partitions(ctx, t.ID)
	if err != nil {
		return nil, catalogError(op, err, onTopic(t.Name))
	}
	want := map[int32]bool{}
	for _, p := range req.Partitions {
		if p < 0 || p >= t.Partitions {
			return nil, newError(CodePartitionOutOfRange, "topic %s has %d partitions, not %d", t.Name, t.Partitions, p)
		}
		want[p] = true
	}
	var out []resetTarget
	for _, pi := range parts {
		if len(want) > 0 && !want[pi.Partition] {
			continue
		}
		o := resetTarget{partition: pi.Partition}
		switch {
		case req.ToOffset:
			o.offset = req.To
		case req.To == Earliest:
			o.offset = pi.LogStartOffset
		case req.To == Latest:
			o.offset = pi.HighWatermark
		default:
			off, e := b.offsetAtTime(ctx, TopicInfo{Topic: t}, pi.Partition, req.To)
			if e != nil {
				return nil, e
			}
			o.offset = off
		}
		out = append(out, o)
	}
	return out, nil
}

// ResetOffsets resolves a reset into offsets from the partitions' current state and
// stores them while the group has no live members (the catalog checks that again when
// it writes). It answers the offsets stored. A group that does not exist is refused
// unless req.Create.
func (b *Broker) ResetOffsets(ctx context.Context, who Principal, group string, req ResetRequest) ([]catalog.CommitOffset, error) {
	const op = "reset offsets"
	if e := b.check(CapGroups); e != nil {
		return nil, e
	}
	if e := b.authorizeCommit(ctx, who, &catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{{Topic: req.Topic}}}); e != nil {
		return nil, e
	}
	if e := validGroup(group); e != nil {
		return nil, e
	}
	switch {
	case req.ToOffset && req.To < 0:
		return nil, newError(CodeInvalidOffset, "offset is required with \"to\":\"offset\" and must not be negative")
	case !req.ToOffset && req.To < Earliest:
		return nil, newError(CodeInvalidTimestamp, "timestamp %d: use unix milliseconds", req.To)
	}
	t, err := b.topic(ctx, op, req.Topic)
	if err != nil {
		return nil, err
	}
	if !req.Create {
		// A group deleted between this look and the write below comes back with the
		// reset's offsets, as a reset with Create would have made it.
		if _, err := b.d.Groups.GroupOffsets(ctx, group); err != nil {
			e := groupError(op, err, onGroup(group, ""))
			if e.Code == CodeGroupNotFound {
				e = e.hint(`to position a new group before its first consumer, reset with "create": true`)
			}
			return nil, e
		}
	}
	targets, err := b.resetTargets(ctx, op, t, req)
	if err != nil {
		return nil, err
	}
	offs := make([]catalog.CommitOffset, 0, len(targets))
	for _, o := range targets {
		offs = append(offs, catalog.CommitOffset{Topic: t.Name, Partition: o.partition, Offset: o.offset})
	}
	to := map[string]any{"topic": req.Topic, "partitions": len(offs)}
	switch {
	case req.ToOffset:
		to["offset"] = req.To
	case req.To == Earliest:
		to["to"] = "earliest"
	case req.To == Latest:
		to["to"] = "latest"
	default:
		to["timestamp"] = req.To
	}
	ctx = withAudit(ctx, who, "group.reset_offsets", acl.Group(group), to)
	if err := b.d.Groups.ResetOffsets(ctx, group, offs); err != nil {
		return nil, groupError(op, err, onGroup(group, ""))
	}
	return offs, nil
}
