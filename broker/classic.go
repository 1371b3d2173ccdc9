package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// The classic group calls (Kafka's JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the
// member commits), thin over the catalog's classic state machine (catalog/classic*.go):
// the core makes member ids, holds the requests that wait for other members
// (groupwait.go) and maps the refusals.

// JoinGroupRequest is a classic member's JoinGroup.
type JoinGroupRequest struct {
	Group      string
	MemberID   string // "": a new member
	InstanceID string // static membership, "" for none
	ClientID   string
	ClientHost string
	// SessionTimeout and RebalanceTimeout are the member's own (0 rebalance timeout:
	// the session timeout).
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []catalog.ClassicProtocol
	// Topics is the subscription the metadata names, when the front end can read it
	// (Kafka's consumer protocol), for listings and lag.
	Topics []string
	// RequireKnownMemberID: a new dynamic member first gets its id (JoinGroup v4+).
	RequireKnownMemberID bool
}

// JoinGroupResult answers a JoinGroup: MemberIDRequired with the member's new id, or
// the join's answer.
type JoinGroupResult struct {
	MemberIDRequired bool
	catalog.ClassicJoinAnswer
}

// JoinGroup joins a member to a classic group and answers once the rebalance it takes
// part in has completed (or at once when it need not wait). ctx bounds the wait.
func (b *Broker) JoinGroup(ctx context.Context, who Principal, req JoinGroupRequest) (JoinGroupResult, error) {
	if e := b.check(CapClassicGroups); e != nil {
		return JoinGroupResult{}, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(req.Group)); e != nil {
		return JoinGroupResult{}, e
	}
	if req.MemberID == "" {
		if e := b.checkNotShareGroup(ctx, req.Group); e != nil {
			return JoinGroupResult{}, e
		}
	}
	j := catalog.ClassicJoin{
		Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, ClientID: req.ClientID,
		ClientHost: req.ClientHost, SessionTimeout: req.SessionTimeout, RebalanceTimeout: req.RebalanceTimeout,
		ProtocolType: req.ProtocolType, Protocols: req.Protocols, RequireKnownMemberID: req.RequireKnownMemberID,
	}
	if topics, err := catalog.NormalizeTopics(req.Topics); err == nil {
		j.Topics = topics // a subscription that cannot be read is only not shown
	}
	if req.MemberID == "" {
		j.NewMemberID = newMemberID(req.ClientID)
	}
	wake, done := b.waits.subscribe(req.Group)
	defer done()
	res, err := b.d.Classic.JoinGroup(ctx, j)
	if err != nil {
		return JoinGroupResult{}, groupError("join group", err)
	}
	b.waits.notify(req.Group) // the requests this node holds see it at once
	switch {
	case res.MemberIDRequired:
		return JoinGroupResult{MemberIDRequired: true, ClassicJoinAnswer: catalog.ClassicJoinAnswer{MemberID: res.MemberID}}, nil
	case res.Answer != nil:
		return JoinGroupResult{ClassicJoinAnswer: *res.Answer}, nil
	}
	var out JoinGroupResult
	err = b.awaitClassic(ctx, wake, func(ctx context.Context) (catalog.ClassicPoll, error) {
		a, p, err := b.d.Classic.PollJoin(ctx, req.Group, res.MemberID, req.InstanceID, res.WaitGeneration)
		out.ClassicJoinAnswer = a
		return p, err
	})
	if err != nil {
		return JoinGroupResult{}, classicWaitError("join group", err)
	}
	return out, nil
}

// classicWaitError maps the end of a wait: its own refusal, or a context that ended
// (the client left, or the node is stopping).
func classicWaitError(op string, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return newError(CodeShuttingDown, "%s: the request ended before the group answered; join again", op)
	}
	return groupError(op, err)
}

// newMemberID makes a member id as Kafka does: the client id, a dash and a random UUID.
// Characters a member id cannot carry are left out of the client id.
func newMemberID(clientID string) string {
	var prefix []byte
	for i := 0; i < len(clientID) && len(prefix) < 200; i++ {
		if c := clientID[i]; c > ' ' && c <= '~' {
			prefix = append(prefix, c)
		}
	}
	if len(prefix) == 0 {
		prefix = []byte("member")
	}
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails
	u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// SyncGroupRequest is a classic member's SyncGroup; the leader's carries the plan.
type SyncGroupRequest = catalog.ClassicSync

// SyncGroupResult is a member's assignment (nil: the leader gave it none).
type SyncGroupResult struct {
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// SyncGroup stores the leader's plan, or waits for it, and answers the member's
// assignment.
func (b *Broker) SyncGroup(ctx context.Context, who Principal, req SyncGroupRequest) (SyncGroupResult, error) {
	if e := b.check(CapClassicGroups); e != nil {
		return SyncGroupResult{}, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(req.Group)); e != nil {
		return SyncGroupResult{}, e
	}
	wake, done := b.waits.subscribe(req.Group)
	defer done()
	res, err := b.d.Classic.SyncGroup(ctx, req)
	if err != nil {
		return SyncGroupResult{}, groupError("sync group", err)
	}
	b.waits.notify(req.Group)
	if !res.Ready {
		err = b.awaitClassic(ctx, wake, func(ctx context.Context) (catalog.ClassicPoll, error) {
			r, p, err := b.d.Classic.PollSync(ctx, req.Group, req.MemberID, req.InstanceID, req.Generation)
			res = r
			return p, err
		})
		if err != nil {
			return SyncGroupResult{}, classicWaitError("sync group", err)
		}
	}
	return SyncGroupResult{ProtocolType: res.ProtocolType, Protocol: res.Protocol, Assignment: res.Assignment}, nil
}

// ClassicHeartbeat renews a classic member's session: CodeRebalanceInProgress says to
// join again (the session was renewed all the same).
func (b *Broker) ClassicHeartbeat(ctx context.Context, who Principal, h catalog.ClassicHeartbeat) error {
	if e := b.check(CapClassicGroups); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(h.Group)); e != nil {
		return e
	}
	rebalancing, err := b.d.Classic.ClassicHeartbeat(ctx, h)
	if err != nil {
		return groupError("heartbeat", err)
	}
	if rebalancing {
		return newError(CodeRebalanceInProgress, "group %s is rebalancing: join again", h.Group)
	}
	return nil
}

// LeaveGroup removes classic members (by member or instance id), answering each one's
// refusal (nil: it left).
func (b *Broker) LeaveGroup(ctx context.Context, who Principal, group string, members []catalog.ClassicLeaver) ([]error, error) {
	if e := b.check(CapClassicGroups); e != nil {
		return nil, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(group)); e != nil {
		return nil, e
	}
	errs, err := b.d.Classic.LeaveGroup(ctx, group, members)
	if err != nil {
		return nil, groupError("leave group", err)
	}
	b.waits.notify(group)
	out := make([]error, len(errs))
	for i, e := range errs {
		if e != nil {
			out[i] = groupError("leave group", e)
		}
	}
	return out, nil
}

// MemberCommit is a member's offset commit from the Kafka protocol: Generation is a
// classic member's generation, or a consumer-group member's epoch.
type MemberCommit struct {
	Group      string
	MemberID   string // "": a commit from outside the group
	InstanceID string
	Generation int32
	Offsets    []catalog.CommitOffset
}

// CommitMemberOffsets commits offsets by the rules of the group's type: a classic
// member's at its generation, a consumer member's at its epoch, all or none; without a
// member, while the group has no live members.
func (b *Broker) CommitMemberOffsets(ctx context.Context, who Principal, c MemberCommit) error {
	if c.MemberID == "" {
		return b.CommitOffsets(ctx, who, catalog.OffsetCommit{Group: c.Group, Offsets: c.Offsets})
	}
	if e := b.check(CapClassicGroups); e != nil {
		return e
	}
	if e := b.authorizeCommit(ctx, who, &catalog.OffsetCommit{Group: c.Group, Offsets: c.Offsets}); e != nil {
		return e
	}
	err := b.d.Classic.CommitClassicOffsets(ctx, catalog.ClassicCommit{Group: c.Group, MemberID: c.MemberID,
		InstanceID: c.InstanceID, Generation: c.Generation, Offsets: c.Offsets})
	if errors.Is(err, catalog.ErrNotClassicGroup) {
		// A KIP-848 member: Kafka's rule for a partition it gave back (Released).
		return b.CommitOffsets(ctx, who, catalog.OffsetCommit{Group: c.Group, MemberID: c.MemberID, MemberEpoch: c.Generation,
			Offsets: c.Offsets, Released: true})
	}
	if err != nil {
		return groupError("commit offsets", err)
	}
	return nil
}

// GroupInfo is a group as DescribeAnyGroup finds it: classic, consumer, or none.
type GroupInfo struct {
	Type     string                      // catalog.GroupTypeClassic or GroupTypeConsumer
	Classic  *catalog.ClassicDescription // a classic group
	Consumer *catalog.GroupDescription   // a consumer group
}

// DescribeAnyGroup describes a group of either type: CodeGroupNotFound when there is
// none.
func (b *Broker) DescribeAnyGroup(ctx context.Context, who Principal, group string) (GroupInfo, error) {
	if e := b.check(CapClassicGroups); e != nil {
		return GroupInfo{}, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return GroupInfo{}, e
	}
	g, err := b.d.Classic.DescribeClassicGroup(ctx, group)
	switch {
	case err == nil:
		return GroupInfo{Type: catalog.GroupTypeClassic, Classic: &g}, nil
	case errors.Is(err, catalog.ErrGroupNotFound):
		return GroupInfo{}, groupError("describe group", err)
	case !errors.Is(err, catalog.ErrNotClassicGroup):
		return GroupInfo{}, groupError("describe group", err)
	}
	d, err := b.d.Groups.DescribeGroup(ctx, group)
	if err != nil {
		return GroupInfo{}, groupError("describe group", err)
	}
	return GroupInfo{Type: catalog.GroupTypeConsumer, Consumer: &d}, nil
}

// CheckFetchMember checks the member an offset fetch names (Kafka's OffsetFetch v9):
// in a consumer group it must be live (CodeUnknownMember) at the epoch it gives
// (CodeStaleMemberEpoch). No member, a classic group, or a group that cannot be
// described passes: the fetch's own authorization and lookup answer those.
func (b *Broker) CheckFetchMember(ctx context.Context, who Principal, group, member string, epoch int32) error {
	if member == "" {
		return nil
	}
	info, err := b.DescribeAnyGroup(ctx, who, group)
	if err != nil || info.Consumer == nil {
		return nil
	}
	for _, m := range info.Consumer.Members {
		if m.ID == member {
			if m.Epoch != epoch {
				return newError(CodeStaleMemberEpoch, "member %q of %s is at epoch %d, not %d", member, group, m.Epoch, epoch)
			}
			return nil
		}
	}
	return newError(CodeUnknownMember, "%q is not a live member of %s", member, group)
}

// GroupKinds lists every group's type, and a classic group's state and protocol type.
func (b *Broker) GroupKinds(ctx context.Context, who Principal) ([]catalog.GroupKind, error) {
	if e := b.check(CapClassicGroups); e != nil {
		return nil, e
	}
	ks, err := b.d.Classic.GroupKinds(ctx)
	if err != nil {
		return nil, groupError("list groups", err)
	}
	// The groups the caller may describe, as ListGroups answers Kafka.
	return visible(b, who, ks, func(k catalog.GroupKind) acl.Resource { return acl.Group(k.Name) }), nil
}

// DeleteOffsets deletes a group's committed offsets of partitions its live members do
// not consume, answering each partition's refusal (nil: deleted).
func (b *Broker) DeleteOffsets(ctx context.Context, who Principal, group string, offsets []catalog.TopicPartitionName) ([]error, error) {
	if e := b.check(CapClassicGroups); e != nil {
		return nil, e
	}
	// Kafka's OffsetDelete: delete on the group, read on the topics.
	if e := b.authorize(ctx, who, acl.OpDelete, acl.Group(group)); e != nil {
		return nil, e
	}
	if e := b.authorizeEach(ctx, who, acl.OpRead, len(offsets), func(i int) string { return offsets[i].Topic }); e != nil {
		return nil, e
	}
	errs, err := b.d.Classic.DeleteOffsets(ctx, group, offsets)
	if err != nil {
		return nil, groupError("delete offsets", err)
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		if e != nil {
			out[i] = groupError("delete offsets", e)
		}
	}
	return out, nil
}
