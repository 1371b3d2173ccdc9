package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
)

// Share groups over HTTP (docs/design.md "Share groups"): a member acquires records
// in one call — joining when it names no member id, which keeps it in the group too —
// and acknowledges them in another, naming the acquisition each answer gave. An
// acquisition id carries the delivery counts its records were acquired at, and the
// catalog accepts an acknowledgement under it only while the records are still held
// at those counts: a late acknowledgement is refused even from the same member, once
// its records' locks passed or they were delivered again (Kafka's rule, "whatever the
// member holds now", would let it accept the redelivery).

// MaxShareRecords bounds the records one HTTP acquisition asks for.
const MaxShareRecords = 10000

// ShareRecordsRequest is an HTTP member's acquisition.
type ShareRecordsRequest struct {
	Group string
	// MemberID is the member's id; "" joins the group under a new one, which the
	// answer names.
	MemberID string
	// Topics is the member's subscription; each of their partitions is acquired from.
	Topics []string
	// MaxRecords bounds the records acquired (1 to MaxShareRecords; 0:
	// DefaultShareMaxRecords).
	MaxRecords int
	// Wait is how long to wait for records when none are available.
	Wait time.Duration
	// Memory is the hold the records read are reserved in (FetchRequest.Memory).
	Memory *membudget.Hold
}

// ShareRecordsResult answers a ShareRecords: the member's id and, per partition that
// acquired records, the records with the acquisition id to acknowledge them by.
type ShareRecordsResult struct {
	MemberID     string
	LockDuration time.Duration
	Partitions   []ShareRecordsPartition
}

// ShareRecordsPartition is one partition's acquisition.
type ShareRecordsPartition struct {
	catalog.ShareTP
	AcquisitionID string
	// Config is the topic's (its key and value formats show the records).
	Config catalog.Config
	// LockDeadline is when the records return to the group unless acknowledged or
	// renewed (the catalog's clock).
	LockDeadline time.Time
	Records      []ShareRecord
}

// ShareRecord is an acquired record and how many times it has been delivered.
type ShareRecord struct {
	segment.DecodedRecord
	DeliveryCount int16
}

// ShareAckRange acknowledges offsets First to Last of an acquisition with one type:
// "accept", "release", "reject" or "renew".
type ShareAckRange struct {
	First, Last int64
	Type        string
	// Rejection is a reject's answer (the push role's: a target's status and body
	// excerpt), kept for the dead-letter copies' headers.
	Rejection *catalog.ShareRejection
}

// shareAckTypes are the acknowledgement types by name.
var shareAckTypes = map[string]int8{
	"accept": catalog.AckAccept, "release": catalog.AckRelease, "reject": catalog.AckReject, "renew": catalog.AckRenew,
}

// ShareAcquisitionAck acknowledges records of one acquisition.
type ShareAcquisitionAck struct {
	AcquisitionID string
	Ranges        []ShareAckRange
}

// acquisition is what an acquisition id carries: whose, where, and the ranges acquired
// with their delivery counts ([first, last, count]).
type acquisition struct {
	Group     string     `json:"g"`
	Member    string     `json:"m"`
	Topic     string     `json:"t"`
	Partition int32      `json:"p"`
	Ranges    [][3]int64 `json:"r"`
}

func (a acquisition) id() string {
	b, _ := json.Marshal(a) // plain fields: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseAcquisition(id string) (acquisition, bool) {
	var a acquisition
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || json.Unmarshal(b, &a) != nil || a.Group == "" || a.Member == "" || len(a.Ranges) == 0 {
		return a, false
	}
	for _, r := range a.Ranges {
		if r[0] < 0 || r[0] > r[1] || r[2] < 1 || r[2] > 1<<15-1 {
			return a, false
		}
	}
	return a, true
}

// validShareMemberID checks a member id an HTTP member names.
func validShareMemberID(id string) *Error {
	if len(id) > 255 {
		return newError(CodeInvalidRequest, "member_id: at most 255 bytes").with("field", "member_id")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' {
			return newError(CodeInvalidRequest, "member_id: printable ASCII without spaces").with("field", "member_id")
		}
	}
	return nil
}

// ShareRecords joins (or keeps) an HTTP member and acquires records for it: read on
// the group and on each topic. Bad input is refused before anything is written.
func (b *Broker) ShareRecords(ctx context.Context, who Principal, req ShareRecordsRequest) (ShareRecordsResult, error) {
	var out ShareRecordsResult
	if e := b.checkShare(); e != nil {
		return out, e
	}
	if e := b.check(CapFetch); e != nil {
		return out, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(req.Group)); e != nil {
		return out, e
	}
	if e := validGroup(req.Group); e != nil {
		return out, e
	}
	switch {
	case len(req.Topics) == 0:
		return out, newError(CodeInvalidRequest, "topics: name at least one").with("field", "topics")
	case req.MaxRecords < 0 || req.MaxRecords > MaxShareRecords:
		return out, newError(CodeInvalidParameter, "max_records %d: want 1 to %d", req.MaxRecords, MaxShareRecords).with("parameter", "max_records")
	case req.Wait < 0:
		return out, newError(CodeInvalidParameter, "wait_ms must not be negative").with("parameter", "wait_ms")
	}
	if e := validShareMemberID(req.MemberID); e != nil {
		return out, e
	}
	configs := map[string]catalog.Config{}
	for _, t := range req.Topics {
		if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(t)); e != nil {
			return out, e
		}
		ti, e := b.lookupTopic(ctx, t)
		if e != nil {
			return out, e
		}
		configs[t] = ti.Config
	}
	if req.MaxRecords == 0 {
		req.MaxRecords = DefaultShareMaxRecords
	}
	out.MemberID = req.MemberID
	if out.MemberID == "" {
		out.MemberID = newMemberID("http")
	}
	// Every acquisition is a join, which for a member already in the group keeps it
	// (its session restarts): an HTTP member does not track an epoch, and one whose
	// session lapsed comes back under the same id (what it held was released then).
	hb, err := b.ShareHeartbeat(ctx, who, catalog.ShareHeartbeat{Group: req.Group, MemberID: out.MemberID,
		MemberEpoch: catalog.JoinEpoch, Topics: req.Topics})
	if err != nil {
		return out, err
	}
	var tps []catalog.ShareTP
	for _, a := range hb.Assignment {
		for _, p := range a.Partitions {
			tps = append(tps, catalog.ShareTP{Topic: a.Topic, Partition: p})
		}
	}
	acquired, refused, lock, committed, err := b.shareAcquire(ctx, who, ShareFetchRequest{Group: req.Group, MemberID: out.MemberID,
		Partitions: tps, MaxRecords: req.MaxRecords, Wait: req.Wait})
	if err != nil {
		return out, err
	}
	out.LockDuration = lock
	for _, tp := range tps {
		if e := refused[tp]; e != nil {
			return ShareRecordsResult{}, errors.Join(e, b.giveBack(ctx, req.Group, out.MemberID, acquired))
		}
		a, ok := acquired[tp]
		if !ok {
			continue
		}
		p, err := b.shareRecords(ctx, who, req.Group, out.MemberID, a, committed, req.Memory)
		if err != nil {
			return ShareRecordsResult{}, errors.Join(err, b.giveBack(ctx, req.Group, out.MemberID, acquired))
		}
		p.Config = configs[tp.Topic]
		out.Partitions = append(out.Partitions, p)
	}
	return out, nil
}

// giveBack releases acquisitions an acquire will not answer (reading their records
// failed, or the caller went away meanwhile), giving back the delivery each counted:
// the member never saw them, so they must neither wait for their lock to pass nor
// come back one delivery closer to the limit. It runs on a context of its own; what
// it cannot release returns at its lock deadline, as a dead member's does, and its
// error joins the acquire's.
func (b *Broker) giveBack(ctx context.Context, group, member string, acquired map[catalog.ShareTP]catalog.ShareAcquired) error {
	var parts []catalog.ShareAckPartition
	for tp, a := range acquired {
		p := catalog.ShareAckPartition{ShareTP: tp}
		for _, r := range a.Ranges {
			p.Batches = append(p.Batches, catalog.AckBatch{First: r.First, Last: r.Last, Types: []int8{catalog.AckRelease}, DeliveryCount: r.DeliveryCount})
		}
		if len(p.Batches) > 0 {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := b.d.Share.ShareAcknowledge(gctx, catalog.ShareAck{Group: group, MemberID: member, Partitions: parts, Requeue: true}); err != nil {
		return fmt.Errorf("give back the records acquired (they return at their lock deadline): %w", err)
	}
	return nil
}

// shareRecords reads the records of an acquisition. Offsets acquired that hold no
// record (transaction markers, records compacted away) are acknowledged as gaps at
// once, as a Kafka client does, so they do not come back.
func (b *Broker) shareRecords(ctx context.Context, who Principal, group, member string, a catalog.ShareAcquired, committed bool, mem *membudget.Hold) (ShareRecordsPartition, error) {
	acq := acquisition{Group: group, Member: member, Topic: a.Topic, Partition: a.Partition}
	p := ShareRecordsPartition{ShareTP: a.ShareTP}
	for _, r := range a.Ranges {
		acq.Ranges = append(acq.Ranges, [3]int64{r.First, r.Last, int64(r.DeliveryCount)})
		if p.LockDeadline.IsZero() || r.Deadline.Before(p.LockDeadline) {
			p.LockDeadline = r.Deadline
		}
	}
	p.AcquisitionID = acq.id()
	first, last := a.Ranges[0].First, a.Ranges[len(a.Ranges)-1].Last
	ri := 0
	var gaps []catalog.AckBatch
	next := first             // the first offset not yet seen
	gap := func(upTo int64) { // offsets next..upTo-1 held no record
		for _, r := range a.Ranges {
			lo, hi := max(r.First, next), min(r.Last, upTo-1)
			if lo <= hi {
				gaps = append(gaps, catalog.AckBatch{First: lo, Last: hi, Types: []int8{catalog.AckGap}, DeliveryCount: r.DeliveryCount})
			}
		}
	}
	for off := first; off <= last; {
		iso := reader.ReadUncommitted
		if committed {
			iso = reader.ReadCommitted // aborted records are gaps
		}
		res, err := b.Fetch(ctx, who, FetchRequest{Topic: a.Topic, Partition: a.Partition, Offset: off,
			MaxRecords: int(last - off + 1), MaxBytes: 64 << 20, Memory: mem, Isolation: iso})
		if err != nil {
			return p, err
		}
		for _, rec := range res.Records {
			if rec.Offset < off || rec.Offset > last {
				continue
			}
			for ri < len(a.Ranges) && a.Ranges[ri].Last < rec.Offset {
				ri++
			}
			if ri == len(a.Ranges) || rec.Offset < a.Ranges[ri].First {
				continue // between acquired ranges: another member's
			}
			gap(rec.Offset)
			next = rec.Offset + 1
			p.Records = append(p.Records, ShareRecord{DecodedRecord: rec, DeliveryCount: a.Ranges[ri].DeliveryCount})
		}
		if res.NextOffset <= off {
			break // nothing more to read (retention took it)
		}
		off = res.NextOffset
	}
	gap(last + 1)
	if len(gaps) > 0 {
		// Best effort: a gap left acquired only returns at its lock deadline and is
		// archived at the delivery limit, delivering nothing.
		_, _ = b.d.Share.ShareAcknowledge(ctx, catalog.ShareAck{Group: group, MemberID: member,
			Partitions: []catalog.ShareAckPartition{{ShareTP: a.ShareTP, Batches: gaps}}})
	}
	return p, nil
}

// ShareAckAcquisitions applies an HTTP member's acknowledgements, all or nothing: read
// on the group and on each topic; every range must lie in its acquisition, and the
// acquisition must still hold its records (CodeAcquisitionNotHeld otherwise).
func (b *Broker) ShareAckAcquisitions(ctx context.Context, who Principal, group, member string, acks []ShareAcquisitionAck) error {
	return b.shareAckAcquisitions(ctx, who, group, member, acks, false)
}

func (b *Broker) shareAckAcquisitions(ctx context.Context, who Principal, group, member string, acks []ShareAcquisitionAck, requeue bool) error {
	if e := b.checkShare(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(group)); e != nil {
		return e
	}
	if e := validGroup(group); e != nil {
		return e
	}
	if member == "" {
		return newError(CodeInvalidRequest, "member_id is required: the one the records' acquisition answered").with("field", "member_id")
	}
	if len(acks) == 0 {
		return newError(CodeInvalidRequest, "acks: give at least one").with("field", "acks")
	}
	parts := make([]catalog.ShareAckPartition, len(acks))
	for i, ak := range acks {
		acq, ok := parseAcquisition(ak.AcquisitionID)
		if !ok {
			return newError(CodeInvalidRequest, "acks[%d].acquisition_id is not one an acquisition answered", i).with("field", fmt.Sprintf("acks[%d].acquisition_id", i))
		}
		if acq.Group != group || acq.Member != member {
			return newError(CodeAcquisitionNotHeld, "acks[%d]: the acquisition was answered to another member or group", i).with("ack", i)
		}
		if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(acq.Topic)); e != nil {
			return e
		}
		if _, e := b.lookupPartition(ctx, acq.Topic, acq.Partition); e != nil {
			return e
		}
		batches, e := acquisitionBatches(i, acq, ak.Ranges)
		if e != nil {
			return e
		}
		parts[i] = catalog.ShareAckPartition{ShareTP: catalog.ShareTP{Topic: acq.Topic, Partition: acq.Partition}, Batches: batches}
	}
	res, err := b.d.Share.ShareAcknowledge(ctx, catalog.ShareAck{Group: group, MemberID: member, Partitions: parts, AllOrNothing: true, Requeue: requeue})
	if err != nil {
		return shareError("share acknowledge", err, group)
	}
	for i, err := range res {
		if err != nil {
			e := shareError("share acknowledge", err, group)
			e.Message = fmt.Sprintf("acks[%d]: %s; nothing was acknowledged", i, e.Message)
			return e.with("ack", i)
		}
	}
	return nil
}

// acquisitionBatches splits acknowledged ranges by the acquisition's ranges, each batch
// carrying the delivery count it was acquired at: ranges in order, not overlapping,
// inside the acquisition, of a known type.
func acquisitionBatches(i int, acq acquisition, ranges []ShareAckRange) ([]catalog.AckBatch, *Error) {
	if len(ranges) == 0 {
		return nil, newError(CodeInvalidRequest, "acks[%d].ranges: give at least one", i).with("field", fmt.Sprintf("acks[%d].ranges", i))
	}
	var out []catalog.AckBatch
	prev := int64(-1)
	for j, r := range ranges {
		field := fmt.Sprintf("acks[%d].ranges[%d]", i, j)
		switch {
		case r.First < 0 || r.First > r.Last:
			return nil, newError(CodeInvalidRequest, "%s: offsets %d-%d: first must be 0 or more and not past last", field, r.First, r.Last).with("field", field)
		case r.First <= prev:
			return nil, newError(CodeInvalidRequest, "%s: offsets %d-%d overlap or precede the range before", field, r.First, r.Last).with("field", field)
		}
		typ, ok := shareAckTypes[r.Type]
		if !ok {
			return nil, newError(CodeInvalidRequest, "%s.type %q: want accept, release, reject or renew", field, r.Type).with("field", field+".type")
		}
		prev = r.Last
		covered := r.First
		for _, a := range acq.Ranges {
			lo, hi := max(a[0], r.First), min(a[1], r.Last)
			if lo > hi {
				continue
			}
			if lo != covered {
				break
			}
			out = append(out, catalog.AckBatch{First: lo, Last: hi, Types: []int8{typ}, DeliveryCount: int16(a[2]), Rejection: r.Rejection})
			covered = hi + 1
		}
		if covered <= r.Last {
			return nil, newError(CodeAckOutOfRange, "%s: offset %d of %s/%d was not acquired by this acquisition", field, covered, acq.Topic, acq.Partition).
				with("field", field)
		}
	}
	return out, nil
}

// ResetShareOffsets resolves a reset of a share group's start offsets on one topic
// (earliest, latest, a time or an offset, as a consumer group's) and stores them while
// the group has no live members, dropping what was in flight there (AlterShareOffsets'
// rules and ACLs). Without Create a group that does not exist is CodeGroupNotFound.
func (b *Broker) ResetShareOffsets(ctx context.Context, who Principal, group string, req ResetRequest) ([]catalog.ShareOffset, error) {
	const op = "reset share offsets"
	if e := b.checkShare(); e != nil {
		return nil, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(group)); e != nil {
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
	if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(req.Topic)); e != nil {
		return nil, e
	}
	t, err := b.topic(ctx, op, req.Topic)
	if err != nil {
		return nil, err
	}
	if !req.Create {
		ok, err := b.IsShareGroup(ctx, group)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, newError(CodeGroupNotFound, "share group %q does not exist", group).
				hint(`to position a new share group before its first member, reset with "create": true`)
		}
	}
	targets, err := b.resetTargets(ctx, op, t, req)
	if err != nil {
		return nil, err
	}
	offs := make([]catalog.ShareOffset, 0, len(targets))
	for _, o := range targets {
		offs = append(offs, catalog.ShareOffset{ShareTP: catalog.ShareTP{Topic: t.Name, Partition: o.partition}, TopicID: t.ID, StartOffset: o.offset})
	}
	if err := b.AlterShareOffsets(ctx, who, group, offs); err != nil {
		return nil, err
	}
	return offs, nil
}

// LeaveShareGroup takes an HTTP member out of a share group, releasing what it holds
// (read on the group). A member that is not there is no error: it left already.
func (b *Broker) LeaveShareGroup(ctx context.Context, who Principal, group, member string) error {
	if e := b.checkShare(); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(group)); e != nil {
		return e
	}
	if e := validGroup(group); e != nil {
		return e
	}
	if e := validShareMemberID(member); e != nil {
		return e
	}
	if _, err := b.d.Share.ShareHeartbeat(ctx, catalog.ShareHeartbeat{Group: group, MemberID: member, MemberEpoch: catalog.LeaveEpoch}); err != nil {
		return shareError("leave share group", err, group)
	}
	return nil
}
