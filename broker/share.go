package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/reader"
)

// Share groups (KIP-932, docs/design.md "Share groups"): the rules a front end would
// otherwise repeat — who may read, which partitions a member is given, how long a
// fetch waits and what it answers — once, over the catalog's share-group calls.

// ShareStore keeps share groups (both catalog backends).
type ShareStore = catalog.ShareGroups

// ShareHeartbeatInterval is how often a share member is told to heartbeat.
const ShareHeartbeatInterval = 5 * time.Second

// ShareHeartbeatResult answers ShareHeartbeat: the member's epoch and its assignment,
// every partition of each subscribed topic that exists.
type ShareHeartbeatResult struct {
	MemberEpoch       int32
	Assignment        []catalog.TopicPartitions
	HeartbeatInterval time.Duration
}

func (b *Broker) checkShare() *Error { return b.check(CapShareGroups) }

// shareError maps the catalog's share-group errors.
func shareError(op string, err error, group string) *Error {
	switch {
	case errors.Is(err, catalog.ErrGroupTypeMismatch):
		return newError(CodeGroupTypeMismatch, "group %q is a consumer group, not a share group (or the reverse): use another group id", group).cause(err)
	case errors.Is(err, catalog.ErrShareAcquisitionStale):
		return newError(CodeAcquisitionNotHeld, "%s", say(err, catalog.ErrShareAcquisitionStale, "the acquisition no longer holds the records")).cause(err)
	case errors.Is(err, catalog.ErrShareRecordState):
		return newError(CodeInvalidRecordState, "%s", say(err, catalog.ErrShareRecordState, "a record acknowledged is not held by this member")).cause(err)
	case errors.Is(err, catalog.ErrShareAckOutOfRange):
		return newError(CodeAckOutOfRange, "%s", say(err, catalog.ErrShareAckOutOfRange, "acknowledged offsets were never acquired")).cause(err)
	case errors.Is(err, catalog.ErrInvalidShareAck):
		return newError(CodeInvalidRequest, "%s", say(err, catalog.ErrInvalidShareAck, "invalid acknowledgement")).cause(err)
	case errors.Is(err, catalog.ErrInvalidConfig):
		return newError(CodeInvalidConfig, "%s", err.Error()).cause(err)
	}
	return groupError(op, err, onGroup(group, ""))
}

// ShareHeartbeat joins, keeps or leaves a share-group member (read on the group,
// describe on each subscribed topic, as Kafka checks them).
func (b *Broker) ShareHeartbeat(ctx context.Context, who Principal, hb catalog.ShareHeartbeat) (ShareHeartbeatResult, error) {
	if e := b.checkShare(); e != nil {
		return ShareHeartbeatResult{}, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(hb.Group)); e != nil {
		return ShareHeartbeatResult{}, e
	}
	if e := validGroup(hb.Group); e != nil {
		return ShareHeartbeatResult{}, e
	}
	if e := b.authorizeTopics(ctx, who, acl.OpDescribe, hb.Topics); e != nil {
		return ShareHeartbeatResult{}, e
	}
	m, err := b.d.Share.ShareHeartbeat(ctx, hb)
	if err != nil {
		return ShareHeartbeatResult{}, shareError("share heartbeat", err, hb.Group)
	}
	res := ShareHeartbeatResult{MemberEpoch: m.Epoch, HeartbeatInterval: ShareHeartbeatInterval}
	if hb.MemberEpoch == catalog.LeaveEpoch {
		return res, nil
	}
	// Records, not partitions, are what share members divide: every member reads every
	// partition of its subscription, each record going to one of them.
	for _, t := range m.Topics {
		ti, e := b.lookupTopic(ctx, t)
		if e != nil {
			continue // not there (yet): assigned once it is
		}
		tp := catalog.TopicPartitions{Topic: t}
		for p := range ti.Partitions {
			tp.Partitions = append(tp.Partitions, p)
		}
		res.Assignment = append(res.Assignment, tp)
	}
	return res, nil
}

// DefaultShareMaxRecords is how many records a share fetch acquires when it names no
// maximum (ShareFetchRequest.MaxRecords ≤ 0), whichever front end asked.
const DefaultShareMaxRecords = 500

// ShareFetchRequest asks for records of a share group: acknowledgements first, then an
// acquisition of up to MaxRecords (DefaultShareMaxRecords when ≤ 0) over Partitions,
// waiting up to Wait for some.
type ShareFetchRequest struct {
	Group      string
	MemberID   string
	Partitions []catalog.ShareTP
	Acks       []catalog.ShareAckPartition
	MaxRecords int
	MaxBytes   int64
	Wait       time.Duration
	// Memory is the hold the batches are reserved in (FetchRequest.Memory).
	Memory *membudget.Hold
}

// ShareFetchResult answers a ShareFetch: the acknowledgements' answers (AckErrs[i]
// answers Acks[i]), and per partition asked for, its acquired ranges and the stored
// batches that hold them, or its error.
type ShareFetchResult struct {
	AckErrs      []error
	Partitions   []SharePartitionFetch
	LockDuration time.Duration
}

// SharePartitionFetch is one partition's answer.
type SharePartitionFetch struct {
	catalog.ShareTP
	Ranges []catalog.AcquiredRange
	BatchesFetch
	Err error
}

// ShareAcknowledge applies a member's acknowledgements (read on the group and on each
// topic), answering each partition's result.
func (b *Broker) ShareAcknowledge(ctx context.Context, who Principal, group, member string, acks []catalog.ShareAckPartition) ([]error, error) {
	if e := b.checkShare(); e != nil {
		return nil, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(group)); e != nil {
		return nil, e
	}
	out := make([]error, len(acks))
	var ask []catalog.ShareAckPartition
	var at []int
	for i, a := range acks {
		if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(a.Topic)); e != nil {
			out[i] = e
			continue
		}
		if _, e := b.lookupPartition(ctx, a.Topic, a.Partition); e != nil {
			out[i] = e
			continue
		}
		ask = append(ask, a)
		at = append(at, i)
	}
	if len(ask) == 0 {
		return out, nil
	}
	res, err := b.d.Share.ShareAcknowledge(ctx, catalog.ShareAck{Group: group, MemberID: member, Partitions: ask})
	if err != nil {
		return nil, shareError("share acknowledge", err, group)
	}
	for j, err := range res {
		if err != nil {
			out[at[j]] = shareError("share acknowledge", err, group)
		}
	}
	return out, nil
}

// ShareFetch acknowledges, then acquires records for a member and reads the batches
// that hold them. With nothing to acquire it waits up to Wait (capped as a fetch's),
// woken by commits on the partitions and looking again at the reader's poll interval
// (records released or whose locks expire wake nobody).
func (b *Broker) ShareFetch(ctx context.Context, who Principal, req ShareFetchRequest) (ShareFetchResult, error) {
	var out ShareFetchResult
	if e := b.checkShare(); e != nil {
		return out, e
	}
	if e := b.check(CapFetchBatches); e != nil {
		return out, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(req.Group)); e != nil {
		return out, e
	}
	if req.MaxRecords <= 0 {
		req.MaxRecords = DefaultShareMaxRecords
	}
	if len(req.Acks) > 0 {
		errs, err := b.ShareAcknowledge(ctx, who, req.Group, req.MemberID, req.Acks)
		if err != nil {
			return out, err
		}
		out.AckErrs = errs
	}
	acquired, refused, lock, committed, err := b.shareAcquire(ctx, who, req)
	if err != nil {
		return out, err
	}
	out.LockDuration = lock
	unanswered := map[catalog.ShareTP]catalog.ShareAcquired{}
	for _, tp := range req.Partitions {
		p := SharePartitionFetch{ShareTP: tp, Err: refused[tp]}
		if a, ok := acquired[tp]; ok && p.Err == nil {
			p.Ranges = a.Ranges
			if committed {
				// ShareFetch has no aborted-transactions list: a Kafka client would
				// hand aborted records to the application. The offsets acquired are
				// cut to the committed records; the rest are acknowledged as gaps.
				p.Ranges, p.Err = b.committedRanges(ctx, who, req.Group, req.MemberID, a, req.Memory)
			}
			if p.Err == nil && len(p.Ranges) > 0 {
				p.BatchesFetch, p.Err = b.shareBatches(ctx, who, tp, p.Ranges, req.MaxBytes, req.Memory)
			}
			if p.Err != nil {
				unanswered[tp], p.Ranges, p.BatchesFetch = a, nil, BatchesFetch{}
			}
		}
		out.Partitions = append(out.Partitions, p)
	}
	// What was acquired and could not be read (a failed read, or a member that went
	// away mid-fetch, cancelling it) goes back at once with its delivery given back,
	// as ShareRecords does: the member never saw it. Left held, it returned only at
	// its lock deadline, one delivery closer to the limit — members killed or closed
	// mid-fetch pushed records to the limit and had them archived unread.
	if len(unanswered) > 0 {
		if err := b.giveBack(ctx, req.Group, req.MemberID, unanswered); err != nil {
			for i := range out.Partitions {
				if _, ok := unanswered[out.Partitions[i].ShareTP]; ok {
					out.Partitions[i].Err = errors.Join(out.Partitions[i].Err, err)
				}
			}
		}
	}
	return out, nil
}

// committedRanges answers the runs of a's offsets that hold committed records (read
// as read_committed), acknowledging the others — aborted records, transaction
// markers — as gaps, as shareRecords does.
func (b *Broker) committedRanges(ctx context.Context, who Principal, group, member string, a catalog.ShareAcquired, mem *membudget.Hold) ([]catalog.AcquiredRange, error) {
	p, err := b.shareRecords(ctx, who, group, member, a, true, mem)
	if err != nil {
		return nil, err
	}
	var out []catalog.AcquiredRange
	ri := 0
	for _, rec := range p.Records {
		for a.Ranges[ri].Last < rec.Offset {
			ri++
		}
		r := a.Ranges[ri]
		if n := len(out); n > 0 && out[n-1].Last+1 == rec.Offset && out[n-1].DeliveryCount == r.DeliveryCount && out[n-1].Deadline.Equal(r.Deadline) {
			out[n-1].Last = rec.Offset
			continue
		}
		out = append(out, catalog.AcquiredRange{First: rec.Offset, Last: rec.Offset, DeliveryCount: r.DeliveryCount, Deadline: r.Deadline})
	}
	return out, nil
}

// shareAcquire acquires records for a member over req.Partitions, long-polling up to
// req.Wait when none are available: the acquisitions by partition, and the partitions
// refused (not readable by who, or not there) with their errors.
func (b *Broker) shareAcquire(ctx context.Context, who Principal, req ShareFetchRequest) (acquired map[catalog.ShareTP]catalog.ShareAcquired, refused map[catalog.ShareTP]error, lock time.Duration, committed bool, err error) {
	// Partitions the member may not read, or that do not exist, answer their error
	// and are not acquired.
	var ask []catalog.ShareTP
	refused = map[catalog.ShareTP]error{}
	topicIDs := map[string]int64{}
	for _, tp := range req.Partitions {
		if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(tp.Topic)); e != nil {
			refused[tp] = e
			continue
		}
		ti, e := b.lookupPartition(ctx, tp.Topic, tp.Partition)
		if e != nil {
			refused[tp] = e
			continue
		}
		topicIDs[tp.Topic] = ti.ID
		ask = append(ask, tp)
	}
	acquired = map[catalog.ShareTP]catalog.ShareAcquired{}
	if len(ask) > 0 {
		deadline := time.Now().Add(min(max(req.Wait, 0), b.maxWait))
		var w *reader.Watch
		for {
			res, err := b.d.Share.ShareAcquire(ctx, catalog.ShareAcquire{Group: req.Group, MemberID: req.MemberID,
				Partitions: ask, MaxRecords: req.MaxRecords})
			if err != nil {
				return nil, nil, 0, false, shareError("share fetch", err, req.Group)
			}
			lock, committed = res.LockDuration, res.ReadCommitted
			got := false
			for _, a := range res.Partitions {
				if len(a.Ranges) > 0 {
					acquired[a.ShareTP], got = a, true
				}
			}
			if got || !time.Now().Before(deadline) {
				break
			}
			if w == nil && b.d.Watcher != nil {
				var ws []reader.WatchPartition
				for _, a := range res.Partitions {
					ws = append(ws, reader.WatchPartition{TopicID: topicIDs[a.Topic], Partition: a.Partition, Offset: a.Next})
				}
				w = b.d.Watcher.Watch(ws)
				defer w.Stop()
				continue // look once more: a commit may have landed before the watch
			}
			if w != nil {
				if _, err := w.Wait(ctx, deadline); err != nil {
					return nil, nil, 0, false, newError(CodeShuttingDown, "share fetch: the request was cancelled")
				}
			} else if err := ctxwait.Sleep(ctx, min(watchlessPoll, time.Until(deadline))); err != nil {
				return nil, nil, 0, false, newError(CodeShuttingDown, "share fetch: the request was cancelled")
			}
		}
	}
	return acquired, refused, lock, committed, nil
}

// shareBatches reads the stored batches covering ranges (from the first acquired
// offset through the last): an acquired record must reach its member, whatever the
// byte limits, or it would stay locked for nothing.
func (b *Broker) shareBatches(ctx context.Context, who Principal, tp catalog.ShareTP, ranges []catalog.AcquiredRange, maxBytes int64, mem *membudget.Hold) (BatchesFetch, error) {
	first, last := ranges[0].First, ranges[len(ranges)-1].Last
	pmax := maxBytes
	if pmax <= 0 {
		pmax = 1 << 20
	}
	var out BatchesFetch
	for off := first; off <= last; {
		got, err := b.FetchPartitions(ctx, who, PartitionsFetch{MaxBytes: maxBytes, Partitions: []FetchRequest{{
			Topic: tp.Topic, Partition: tp.Partition, Offset: off, MaxBytes: pmax, Memory: mem, Markers: true}}})
		if err != nil {
			return out, err
		}
		g := got[0]
		if g.Err != nil {
			return out, g.Err
		}
		if len(g.Batches) == 0 || g.NextOffset <= off {
			break // nothing more to read (retention took it): the client acknowledges gaps
		}
		if out.Batches == nil {
			out = g.BatchesFetch
		} else {
			out.Batches = append(slices.Clip(out.Batches), g.Batches...)
			out.BaseOffsets = append(slices.Clip(out.BaseOffsets), g.BaseOffsets...)
			out.NextOffset, out.HighWatermark = g.NextOffset, g.HighWatermark
		}
		off = g.NextOffset
	}
	return out, nil
}

// DescribeShareGroup describes a share group (describe on the group).
func (b *Broker) DescribeShareGroup(ctx context.Context, who Principal, group string) (catalog.ShareGroupDescription, error) {
	if e := b.checkShare(); e != nil {
		return catalog.ShareGroupDescription{}, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return catalog.ShareGroupDescription{}, e
	}
	d, err := b.d.Share.DescribeShareGroup(ctx, group)
	if err != nil {
		return d, shareError("describe share group", err, group)
	}
	return d, nil
}

// ListShareGroups lists the share groups the caller may describe.
func (b *Broker) ListShareGroups(ctx context.Context, who Principal) ([]string, error) {
	if e := b.checkShare(); e != nil {
		return nil, e
	}
	gs, err := b.d.Share.ListShareGroups(ctx)
	if err != nil {
		return nil, shareError("list share groups", err, "")
	}
	return visible(b, who, gs, acl.Group), nil
}

// ShareGroupSummary is a share group as ListGroups shows it: Empty or Stable (live
// members).
type ShareGroupSummary struct {
	Name, State string
	Members     int
}

// ShareGroupSummaries lists the share groups the caller may describe, with their state.
func (b *Broker) ShareGroupSummaries(ctx context.Context, who Principal) ([]ShareGroupSummary, error) {
	names, err := b.ListShareGroups(ctx, who)
	if err != nil {
		return nil, err
	}
	var out []ShareGroupSummary
	for _, n := range names {
		d, err := b.d.Share.DescribeShareGroup(ctx, n)
		if errors.Is(err, catalog.ErrGroupNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, shareError("list share groups", err, n)
		}
		st := "Empty"
		if len(d.Members) > 0 {
			st = "Stable"
		}
		out = append(out, ShareGroupSummary{Name: n, State: st, Members: len(d.Members)})
	}
	return out, nil
}

// IsShareGroup answers whether group is a share group (false where the node serves
// none).
func (b *Broker) IsShareGroup(ctx context.Context, group string) (bool, error) {
	if b.d.Share == nil {
		return false, nil
	}
	ok, err := b.d.Share.IsShareGroup(ctx, group)
	if err != nil {
		return false, shareError("find share group", err, group)
	}
	return ok, nil
}

// DeleteShareGroup deletes a share group without live members (delete on the group).
func (b *Broker) DeleteShareGroup(ctx context.Context, who Principal, group string) error {
	if e := b.checkShare(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpDelete, acl.Group(group)); e != nil {
		return e
	}
	if err := b.d.Share.DeleteShareGroup(ctx, group); err != nil {
		return shareError("delete share group", err, group)
	}
	return nil
}

// ShareOffsets lists a share group's start offsets (describe on the group; partitions
// of topics the caller may not describe are left out).
func (b *Broker) ShareOffsets(ctx context.Context, who Principal, group string) ([]catalog.ShareOffset, error) {
	if e := b.checkShare(); e != nil {
		return nil, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Group(group)); e != nil {
		return nil, e
	}
	offs, err := b.d.Share.ShareOffsets(ctx, group)
	if err != nil {
		return nil, shareError("share offsets", err, group)
	}
	return visible(b, who, offs, func(o catalog.ShareOffset) acl.Resource { return acl.Topic(o.Topic) }), nil
}

// AlterShareOffsets sets start offsets of a share group without live members (read on
// the group and on the topics, as Kafka checks them).
func (b *Broker) AlterShareOffsets(ctx context.Context, who Principal, group string, offsets []catalog.ShareOffset) error {
	if e := b.checkShare(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(group)); e != nil {
		return e
	}
	if e := validGroup(group); e != nil {
		return e
	}
	for _, o := range offsets {
		if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(o.Topic)); e != nil {
			return e
		}
		if _, e := b.lookupPartition(ctx, o.Topic, o.Partition); e != nil {
			return e
		}
		if o.StartOffset < 0 {
			return newError(CodeInvalidOffset, "start offset %d of %s/%d: want 0 or more", o.StartOffset, o.Topic, o.Partition)
		}
	}
	if err := b.d.Share.AlterShareOffsets(ctx, group, offsets); err != nil {
		return shareError("alter share offsets", err, group)
	}
	return nil
}

// DeleteShareOffsets drops a share group's state of topics (delete on the group, read
// on the topics).
func (b *Broker) DeleteShareOffsets(ctx context.Context, who Principal, group string, topics []string) error {
	if e := b.checkShare(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpDelete, acl.Group(group)); e != nil {
		return e
	}
	var ids []int64
	for _, t := range topics {
		if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(t)); e != nil {
			return e
		}
		ti, e := b.lookupTopic(ctx, t)
		if e != nil {
			return e
		}
		ids = append(ids, ti.ID)
	}
	if err := b.d.Share.DeleteShareOffsets(ctx, group, ids); err != nil {
		return shareError("delete share offsets", err, group)
	}
	return nil
}

// GroupConfigs answers the configs of a group id with the share-group defaults
// (describe configs on the group); explicit lists which were set.
func (b *Broker) GroupConfigs(ctx context.Context, who Principal, group string) (configs map[string]string, explicit map[string]bool, err error) {
	if e := b.checkShare(); e != nil {
		return nil, nil, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribeConfigs, acl.Group(group)); e != nil {
		return nil, nil, e
	}
	if e := validGroup(group); e != nil {
		return nil, nil, e
	}
	set, err := b.d.Share.GroupConfigs(ctx, group)
	if err != nil {
		return nil, nil, shareError("group configs", err, group)
	}
	configs, explicit = map[string]string{}, map[string]bool{}
	for k, v := range catalog.ShareGroupConfigNames {
		configs[k] = v
	}
	for k, v := range set {
		configs[k], explicit[k] = v, true
	}
	return configs, explicit, nil
}

// VisibleGroupConfigs answers a group's configs (with their defaults) to a principal
// who may describe them (describe-configs on the group), and nil to others: a share
// group's description shows them only to those.
func (b *Broker) VisibleGroupConfigs(ctx context.Context, who Principal, group string) (map[string]string, error) {
	configs, _, err := b.GroupConfigs(ctx, who, group)
	var e *Error
	if errors.As(err, &e) && e.Code == CodeForbidden {
		return nil, nil
	}
	return configs, err
}

// AlterGroupConfigs changes configs of a group id, whether or not the group exists yet
// (clients configure a group before its first member joins): alter configs on the
// group. Set and delete only (no group config is a list); with Replace the changes
// are the group's configs from now on.
func (b *Broker) AlterGroupConfigs(ctx context.Context, who Principal, group string, req AlterConfigsRequest) error {
	if e := b.checkShare(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpAlterConfigs, acl.Group(group)); e != nil {
		return e
	}
	if e := validGroup(group); e != nil {
		return e
	}
	cur, err := b.d.Share.GroupConfigs(ctx, group)
	if err != nil {
		return shareError("group configs", err, group)
	}
	before := maps.Clone(cur)
	if req.Replace {
		cur = map[string]string{}
	}
	for _, c := range req.Changes {
		switch c.Op {
		case ConfigSet:
			cur[c.Name] = c.Value
		case ConfigDelete:
			delete(cur, c.Name)
		default:
			return newError(CodeInvalidConfig, "group config %s: only set and delete apply (no group config is a list)", c.Name).with("config", c.Name)
		}
	}
	if err := catalog.ValidateShareGroupConfigs(cur); err != nil {
		return shareError("alter group configs", err, group)
	}
	if e := b.authorizeDLQChange(ctx, who, group, before, cur); e != nil {
		return e
	}
	if e := b.checkPushLock(ctx, group, cur); e != nil {
		return e
	}
	if req.ValidateOnly {
		return nil
	}
	ctx = withAudit(ctx, who, "group.configs", acl.Group(group), nil)
	if err := b.d.Share.SetGroupConfigs(ctx, group, cur); err != nil {
		return shareError("alter group configs", err, group)
	}
	return nil
}

// checkNotShareGroup refuses a consumer group's join on a share group's id.
func (b *Broker) checkNotShareGroup(ctx context.Context, group string) *Error {
	ok, err := b.IsShareGroup(ctx, group)
	if err != nil {
		var e *Error
		errors.As(err, &e)
		return e
	}
	if ok {
		return newError(CodeGroupTypeMismatch, "group %q is a share group, not a consumer group: use another group id", group).
			cause(fmt.Errorf("%w", catalog.ErrGroupTypeMismatch))
	}
	return nil
}
