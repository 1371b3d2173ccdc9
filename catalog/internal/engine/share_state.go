package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// A share-partition's state (docs/design.md "Share groups"): a start offset, below which
// every record is done, and the in-flight records from there as contiguous offset
// ranges, each in one state. The rules here are pure: a script loads the state, runs
// them on it at the database's clock and writes back what changed.

// Range states.
const (
	RangeAvailable int8 = 0
	RangeAcquired  int8 = 1
	RangeAcked     int8 = 2
	RangeArchived  int8 = 3
	// RangeDLQPending: archived for consumers, but not yet copied to the group's
	// dead-letter topic (share_dlq.go). Not done: the start offset stays below it
	// until the copy's flush archives it.
	RangeDLQPending int8 = 4
)

// Why a pending range is dead-lettered (ShareRange.Reason).
const (
	ReasonRejected      int8 = 1
	ReasonDeliveryLimit int8 = 2
)

// ShareRange is a run of in-flight offsets in one state: acquired ranges name their
// member and lock deadline (unix ms, database clock); Count is the delivery count.
type ShareRange struct {
	First    int64  `json:"f"`
	Last     int64  `json:"l"`
	State    int8   `json:"s"`
	Count    int16  `json:"c,omitempty"`
	Deadline int64  `json:"d,omitempty"`
	Member   string `json:"m,omitempty"`
	Reason   int8   `json:"r,omitempty"` // RangeDLQPending only
	// The rejecting answer of RangeDLQPending records rejected by a push target
	// (catalog.ShareRejection, bounded).
	Status int16  `json:"hs,omitempty"`
	Body   string `json:"hb,omitempty"`
}

// SharePart is a share-partition's state: Ranges cover [Start, End()) without gaps.
type SharePart struct {
	Start  int64
	Ranges []ShareRange
	// DLQ: the group names a dead-letter topic, so records rejected or over the
	// delivery limit become RangeDLQPending rather than RangeArchived (not stored).
	DLQ bool
}

// DecodeSharePart reads a stored state ("" or "[]": nothing in flight).
func DecodeSharePart(start int64, state string) (SharePart, error) {
	p := SharePart{Start: start}
	if state == "" {
		return p, nil
	}
	if err := json.Unmarshal([]byte(state), &p.Ranges); err != nil {
		return p, fmt.Errorf("decode share-partition state: %w", err)
	}
	return p, nil
}

// Encode answers the stored form of the in-flight ranges.
func (p *SharePart) Encode() string {
	if len(p.Ranges) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(p.Ranges) // plain fields: cannot fail
	return string(b)
}

// End is the first offset past the in-flight ranges: the next never-acquired offset.
func (p *SharePart) End() int64 {
	if len(p.Ranges) == 0 {
		return p.Start
	}
	return p.Ranges[len(p.Ranges)-1].Last + 1
}

// split makes a range boundary at offset at (a range starts there), when at falls
// inside a range.
func (p *SharePart) split(at int64) {
	for i, r := range p.Ranges {
		if r.First < at && at <= r.Last {
			left, right := r, r
			left.Last, right.First = at-1, at
			p.Ranges = append(p.Ranges[:i+1], p.Ranges[i:]...)
			p.Ranges[i], p.Ranges[i+1] = left, right
			return
		}
	}
}

func done(s int8) bool { return s == RangeAcked || s == RangeArchived }

// normalize merges neighbours in the same state and moves the start offset over the
// done prefix, dropping it.
func (p *SharePart) normalize() {
	out := p.Ranges[:0]
	for _, r := range p.Ranges {
		if done(r.State) {
			r.Count, r.Deadline, r.Member, r.Reason, r.Status, r.Body = 0, 0, "", 0, 0, ""
		}
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if prev.State == r.State && prev.Count == r.Count && prev.Deadline == r.Deadline && prev.Member == r.Member && prev.Reason == r.Reason && prev.Status == r.Status && prev.Body == r.Body && prev.Last+1 == r.First {
				prev.Last = r.Last
				continue
			}
		}
		out = append(out, r)
	}
	i := 0
	for i < len(out) && done(out[i].State) {
		p.Start = out[i].Last + 1
		i++
	}
	p.Ranges = append([]ShareRange(nil), out[i:]...)
}

// clampLogStart drops what retention removed: the start moves up to the log start.
func (p *SharePart) clampLogStart(logStart int64) bool {
	if p.Start >= logStart {
		return false
	}
	if p.End() <= logStart {
		p.Start, p.Ranges = logStart, nil
		return true
	}
	p.split(logStart)
	i := 0
	for i < len(p.Ranges) && p.Ranges[i].Last < logStart {
		i++
	}
	p.Start, p.Ranges = logStart, append([]ShareRange(nil), p.Ranges[i:]...)
	return true
}

// release returns a range to available, or archives it when its deliveries reached the
// limit (dead-letter pending when dlq).
func release(r *ShareRange, limit int, dlq bool) {
	r.Member, r.Deadline = "", 0
	if int(r.Count) >= limit {
		archive(r, dlq, ReasonDeliveryLimit, nil)
	} else {
		r.State = RangeAvailable
	}
}

// archive archives a range, or marks it dead-letter pending for reason (with the
// rejecting answer, when one came) when dlq.
func archive(r *ShareRange, dlq bool, reason int8, rej *catalog.ShareRejection) {
	r.Member, r.Deadline = "", 0
	if dlq {
		r.State, r.Reason = RangeDLQPending, reason
		if rej != nil {
			b := rej.Bounded()
			r.Status, r.Body = int16(b.Status), b.Body
		}
		return
	}
	r.State = RangeArchived
}

// expire releases the acquired ranges whose lock deadline has passed (nowMs, the
// database clock).
func (p *SharePart) expire(nowMs int64, limit int) bool {
	changed := false
	for i := range p.Ranges {
		r := &p.Ranges[i]
		if r.State == RangeAcquired && r.Deadline <= nowMs {
			release(r, limit, p.DLQ)
			changed = true
		}
	}
	return changed
}

// releaseMember releases every range member holds (it left the group).
func (p *SharePart) releaseMember(member string, limit int) bool {
	changed := false
	for i := range p.Ranges {
		r := &p.Ranges[i]
		if r.State == RangeAcquired && r.Member == member {
			release(r, limit, p.DLQ)
			changed = true
		}
	}
	return changed
}

// acquire takes up to max records for member: available ones first (redeliveries), then
// never-acquired ones below limitEnd (the high watermark, bounded by the in-flight
// window). It answers the ranges acquired, merged by delivery count.
func (p *SharePart) acquire(member string, deadlineMs int64, max int64, limitEnd int64) []ShareRange {
	var got []ShareRange
	take := func(r ShareRange) {
		if n := len(got); n > 0 && got[n-1].Last+1 == r.First && got[n-1].Count == r.Count {
			got[n-1].Last = r.Last
			return
		}
		got = append(got, r)
	}
	for i := 0; i < len(p.Ranges) && max > 0; i++ {
		r := p.Ranges[i]
		if r.State != RangeAvailable {
			continue
		}
		if n := r.Last - r.First + 1; n > max {
			p.split(r.First + max)
			r = p.Ranges[i]
		}
		r.State, r.Member, r.Deadline, r.Count = RangeAcquired, member, deadlineMs, r.Count+1
		p.Ranges[i] = r
		max -= r.Last - r.First + 1
		take(r)
	}
	if end := p.End(); max > 0 && end < limitEnd {
		last := min(limitEnd, end+max) - 1
		r := ShareRange{First: end, Last: last, State: RangeAcquired, Count: 1, Deadline: deadlineMs, Member: member}
		p.Ranges = append(p.Ranges, r)
		take(r)
	}
	return got
}

// validateAcks checks a partition's acknowledgement batches' shape: in order, not
// overlapping, one type or one per offset, known types.
func validateAcks(batches []catalog.AckBatch) error {
	prev := int64(-1)
	for _, b := range batches {
		switch {
		case b.First < 0 || b.First > b.Last:
			return fmt.Errorf("%w: range %d-%d", catalog.ErrInvalidShareAck, b.First, b.Last)
		case b.First <= prev:
			return fmt.Errorf("%w: range %d-%d overlaps or precedes the one before", catalog.ErrInvalidShareAck, b.First, b.Last)
		case len(b.Types) == 0 || len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1:
			return fmt.Errorf("%w: range %d-%d: give one type or one per offset", catalog.ErrInvalidShareAck, b.First, b.Last)
		}
		for _, t := range b.Types {
			if t < catalog.AckGap || t > catalog.AckRenew {
				return fmt.Errorf("%w: type %d: want 0 (gap) to 4 (renew)", catalog.ErrInvalidShareAck, t)
			}
		}
		prev = b.Last
	}
	return nil
}

// ack applies a member's acknowledgements, all or nothing: every offset named must be
// held by member now (acquired by it, its lock not expired at nowMs). On an error p is
// unchanged.
func (p *SharePart) ack(member string, nowMs int64, batches []catalog.AckBatch, lock time.Duration, limit int) error {
	return p.ackRequeue(member, nowMs, batches, lock, limit, false)
}

// ackRequeue is ack; with requeue a release gives back the delivery it counted
// (catalog.ShareAck.Requeue).
func (p *SharePart) ackRequeue(member string, nowMs int64, batches []catalog.AckBatch, lock time.Duration, limit int, requeue bool) error {
	if err := validateAcks(batches); err != nil {
		return err
	}
	q := SharePart{Start: p.Start, Ranges: append([]ShareRange(nil), p.Ranges...), DLQ: p.DLQ}
	end := q.End()
	for _, b := range batches {
		if b.Last >= end {
			return fmt.Errorf("%w: offsets %d-%d (in flight: %d-%d)", catalog.ErrShareAckOutOfRange, b.First, b.Last, q.Start, end-1)
		}
		if b.First < q.Start {
			if b.DeliveryCount != 0 {
				return fmt.Errorf("%w: offset %d is already done (start offset %d)", catalog.ErrShareAcquisitionStale, b.First, q.Start)
			}
			return fmt.Errorf("%w: offset %d is already done (start offset %d)", catalog.ErrShareRecordState, b.First, q.Start)
		}
		for off := b.First; off <= b.Last; off++ {
			typ := b.Types[0]
			if len(b.Types) > 1 {
				typ = b.Types[off-b.First]
			} else if off > b.First {
				break // one type: the whole range at once
			}
			last := off
			if len(b.Types) == 1 {
				last = b.Last
			}
			q.split(off)
			q.split(last + 1)
			for i := range q.Ranges {
				r := &q.Ranges[i]
				if r.Last < off || r.First > last {
					continue
				}
				if b.DeliveryCount != 0 && (r.State != RangeAcquired || r.Member != member || r.Deadline <= nowMs || r.Count != b.DeliveryCount) {
					return fmt.Errorf("%w: offset %d (delivery %d)", catalog.ErrShareAcquisitionStale, max(r.First, off), b.DeliveryCount)
				}
				if r.State != RangeAcquired || r.Member != member || r.Deadline <= nowMs {
					return fmt.Errorf("%w: offset %d", catalog.ErrShareRecordState, max(r.First, off))
				}
				switch typ {
				case catalog.AckGap, catalog.AckAccept:
					r.State, r.Member, r.Deadline = RangeAcked, "", 0
				case catalog.AckRelease:
					if requeue {
						r.State, r.Member, r.Deadline, r.Count = RangeAvailable, "", 0, max(r.Count-1, 0)
					} else {
						release(r, limit, q.DLQ)
					}
				case catalog.AckReject:
					archive(r, q.DLQ, ReasonRejected, b.Rejection)
				case catalog.AckRenew:
					r.Deadline = nowMs + lock.Milliseconds()
				}
			}
		}
	}
	q.normalize()
	*p = q
	return nil
}

// counts counts the in-flight records by state.
func (p *SharePart) counts() (avail, acquired, acked, archived, pending int64) {
	for _, r := range p.Ranges {
		n := r.Last - r.First + 1
		switch r.State {
		case RangeAvailable:
			avail += n
		case RangeAcquired:
			acquired += n
		case RangeAcked:
			acked += n
		case RangeArchived:
			archived += n
		case RangeDLQPending:
			pending += n
		}
	}
	return
}
