package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Dead-lettering (catalog.ShareDLQ; docs/design.md "Share groups"): records rejected or
// over the delivery limit of a group that names a dead-letter topic are
// RangeDLQPending in their share-partition. A mover leases the group
// (share_dlq_leases, a token per new holder), reads the pending records and produces
// their copies in a flush whose request carries a catalog.ShareDLQCommit: the commit
// checks the lease and that every offset is still pending before it assigns offsets
// (CheckShareDLQ), and archives them after (ShareDLQCheck.Finish), in the flush's
// transaction. A copy is never made twice (a second commit finds the records archived)
// and never lost (they stay pending until a copy commits).
//
// Lock order: a flush with dead-letter requests takes the groups' lease rows and their
// share-partition rows before the partitions the flush commits to — the one exception
// to docs/design.md's order, safe because nothing that holds a share-partition row
// waits for a partition row (an acquire reads the bounds without locking them).

// DLQPendingRow is a share-partition with records pending dead-lettering.
type DLQPendingRow struct {
	Group string
	SharePartitionRow
}

// DLQLeaseRow is a group's dead-letter lease; ExpiresMs is on the database clock.
// Copied is the group's running total of records copied to its dead-letter topic,
// kept on the row whoever holds the lease.
type DLQLeaseRow struct {
	Holder    string
	Token     int64
	ExpiresMs int64
	Copied    int64
}

// ShareDLQStmts are the dead-letter statements of a share-group transaction.
type ShareDLQStmts interface {
	// DLQPendingPartitions lists share-partitions whose state holds a RangeDLQPending
	// range, by (group, topic id, partition), at most max (0: all).
	DLQPendingPartitions(ctx context.Context, max int) ([]DLQPendingRow, error)
	// DLQLease reads a group's lease, holding its row until the transaction ends.
	DLQLease(ctx context.Context, group string) (DLQLeaseRow, bool, error)
	// PutDLQLease writes (inserts or replaces) a group's lease.
	PutDLQLease(ctx context.Context, group string, l DLQLeaseRow) error
	// DLQCopied reads a group's DLQLeaseRow.Copied without holding its row (0 without
	// one).
	DLQCopied(ctx context.Context, group string) (int64, error)
}

func dlqReason(r int8) string {
	if r == ReasonRejected {
		return catalog.ShareDLQRejected
	}
	return catalog.ShareDLQDeliveryLimit
}

// ShareDLQPending implements catalog.ShareDLQ (ShareDLQPending).
func ShareDLQPending(ctx context.Context, db ShareBackend, max int) ([]catalog.ShareDLQWork, error) {
	var out []catalog.ShareDLQWork
	err := shareTx(ctx, db, "list dead-letter work", func(q ShareStmts) error {
		out = nil
		rows, err := q.DLQPendingPartitions(ctx, max)
		if err != nil || len(rows) == 0 {
			return err
		}
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.TopicID)
		}
		topics, err := q.TopicsByID(ctx, ids)
		if err != nil {
			return err
		}
		dlq := map[string]string{}
		for _, r := range rows {
			t, ok := topics[r.TopicID]
			if !ok {
				continue // the topic was deleted: nothing left to copy
			}
			name, seen := dlq[r.Group]
			if !seen {
				set, err := shareSettings(ctx, q, r.Group, 0, 0)
				if err != nil {
					return err
				}
				name, dlq[r.Group] = set.DLQTopic, set.DLQTopic
			}
			p, err := DecodeSharePart(r.StartOffset, r.State)
			if err != nil {
				return err
			}
			w := catalog.ShareDLQWork{Group: r.Group, DLQTopic: name, TopicID: r.TopicID,
				ShareTP: catalog.ShareTP{Topic: t.Name, Partition: r.Partition}}
			for _, sr := range p.Ranges {
				if sr.State == RangeDLQPending {
					w.Ranges = append(w.Ranges, catalog.ShareDLQRange{First: sr.First, Last: sr.Last, Count: sr.Count, Reason: dlqReason(sr.Reason),
						Rejection: catalog.ShareRejection{Status: int(sr.Status), Body: sr.Body}})
				}
			}
			if len(w.Ranges) > 0 {
				out = append(out, w)
			}
		}
		return nil
	})
	return out, err
}

// AcquireShareDLQLease implements catalog.ShareDLQ (AcquireShareDLQLease).
func AcquireShareDLQLease(ctx context.Context, db ShareBackend, group, holder string, ttl time.Duration) (catalog.ShareDLQLease, bool, error) {
	l := catalog.ShareDLQLease{Group: group, Holder: holder}
	if group == "" || holder == "" || ttl <= 0 {
		return l, false, fmt.Errorf("%s: acquire dead-letter lease: %w: a lease needs a group, a holder and a positive ttl", db.Name(), catalog.ErrInvalidShareAck)
	}
	ok := false
	err := shareTx(ctx, db, "acquire dead-letter lease of "+group, func(q ShareStmts) error {
		ok = false
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		cur, found, err := q.DLQLease(ctx, group)
		if err != nil {
			return err
		}
		nowMs := now.UnixMilli()
		next := DLQLeaseRow{Holder: holder, ExpiresMs: nowMs + ttl.Milliseconds(), Copied: cur.Copied}
		switch {
		case !found:
			next.Token = 1
		case cur.Holder == holder && cur.ExpiresMs > nowMs:
			next.Token = cur.Token
		case cur.Holder == "" || cur.ExpiresMs <= nowMs:
			next.Token = cur.Token + 1
		default:
			return nil // held by another
		}
		if err := q.PutDLQLease(ctx, group, next); err != nil {
			return err
		}
		l.Token, ok = next.Token, true
		return nil
	})
	return l, ok, err
}

// ReleaseShareDLQLease implements catalog.ShareDLQ (ReleaseShareDLQLease).
func ReleaseShareDLQLease(ctx context.Context, db ShareBackend, l catalog.ShareDLQLease) error {
	return shareTx(ctx, db, "release dead-letter lease of "+l.Group, func(q ShareStmts) error {
		cur, found, err := q.DLQLease(ctx, l.Group)
		if err != nil || !found || cur.Holder != l.Holder || cur.Token != l.Token {
			return err
		}
		return q.PutDLQLease(ctx, l.Group, DLQLeaseRow{Token: cur.Token, Copied: cur.Copied})
	})
}

// ArchiveShareDLQ implements catalog.ShareDLQ (ArchiveShareDLQ): the checks and the
// archive of a copy's commit, without the copy.
func ArchiveShareDLQ(ctx context.Context, db ShareBackend, c catalog.ShareDLQCommit) error {
	plan := &Plan{Segment: catalog.Segment{Requests: []catalog.Request{{ShareDLQ: &c}}}}
	return shareTx(ctx, db, "archive dead-letter records of "+c.Lease.Group, func(q ShareStmts) error {
		dc, err := CheckShareDLQ(ctx, q, plan, make([]error, 1))
		if err != nil {
			return err
		}
		if dc.Errs[0] != nil {
			return dc.Errs[0]
		}
		return dc.Finish(ctx, q, make([]catalog.Result, 1))
	})
}

// ShareDLQCheck is the outcome of CheckShareDLQ.
type ShareDLQCheck struct {
	// Errs is the errors passed in with the dead-letter refusals added.
	Errs   []error
	plan   *Plan
	parts  map[int]*dlqPart       // by request
	leases map[string]DLQLeaseRow // by group, read under their rows' locks
}

type dlqPart struct {
	group string
	row   SharePartitionRow
	p     SharePart
}

// DLQRequests answers whether a flush has dead-letter requests.
func (p *Plan) DLQRequests() bool {
	return slices.ContainsFunc(p.Segment.Requests, func(r catalog.Request) bool { return r.ShareDLQ != nil })
}

// CheckShareDLQ checks every dead-letter request not already refused in errs: its shape,
// its lease (the group's current holder and token), and that every offset it names is
// pending in its share-partition, read under the rows' locks. A refusal refuses its
// whole request. Two requests of one flush for one share-partition: the later is
// refused.
func CheckShareDLQ(ctx context.Context, q ShareStmts, plan *Plan, errs []error) (*ShareDLQCheck, error) {
	c := &ShareDLQCheck{Errs: slices.Clone(errs), plan: plan, parts: map[int]*dlqPart{}}
	var reqs []int
	for ri, r := range plan.Segment.Requests {
		if r.ShareDLQ != nil && c.Errs[ri] == nil {
			reqs = append(reqs, ri)
		}
	}
	key := func(ri int) (string, int64, int32) {
		d := plan.Segment.Requests[ri].ShareDLQ
		return d.Lease.Group, d.TopicID, d.Partition
	}
	slices.SortStableFunc(reqs, func(a, b int) int {
		ga, ta, pa := key(a)
		gb, tb, pb := key(b)
		return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(ta, tb), cmp.Compare(pa, pb))
	})
	leases := map[string]DLQLeaseRow{}
	c.leases = leases
	seen := map[DLQPendingRow]bool{}
	for _, ri := range reqs {
		d := plan.Segment.Requests[ri].ShareDLQ
		if err := validateDLQCommit(plan.Segment.Requests[ri]); err != nil {
			c.Errs[ri] = err
			continue
		}
		l, ok := leases[d.Lease.Group]
		if !ok {
			var found bool
			var err error
			if l, found, err = q.DLQLease(ctx, d.Lease.Group); err != nil {
				return nil, fmt.Errorf("read dead-letter lease of %q: %w", d.Lease.Group, err)
			}
			if !found {
				l = DLQLeaseRow{}
			}
			leases[d.Lease.Group] = l
		}
		if l.Holder != d.Lease.Holder || l.Token != d.Lease.Token {
			c.Errs[ri] = fmt.Errorf("%w: group %q is dead-lettered under token %d, not %s's %d", catalog.ErrShareDLQFenced, d.Lease.Group, l.Token, d.Lease.Holder, d.Lease.Token)
			continue
		}
		k := DLQPendingRow{Group: d.Lease.Group, SharePartitionRow: SharePartitionRow{TopicID: d.TopicID, Partition: d.Partition}}
		if seen[k] {
			c.Errs[ri] = fmt.Errorf("%w: a request before it in the flush copies topic %d partition %d of group %q", catalog.ErrShareDLQNotPending, d.TopicID, d.Partition, d.Lease.Group)
			continue
		}
		seen[k] = true
		rows, err := q.SharePartitions(ctx, d.Lease.Group, []PartitionKey{{d.TopicID, d.Partition}}, true)
		if err != nil {
			return nil, fmt.Errorf("read share-partition of %q: %w", d.Lease.Group, err)
		}
		if len(rows) == 0 {
			c.Errs[ri] = fmt.Errorf("%w: group %q has no state for topic %d partition %d", catalog.ErrShareDLQNotPending, d.Lease.Group, d.TopicID, d.Partition)
			continue
		}
		p, err := DecodeSharePart(rows[0].StartOffset, rows[0].State)
		if err != nil {
			return nil, err
		}
		if err := p.checkPending(d.Ranges); err != nil {
			c.Errs[ri] = fmt.Errorf("group %q topic %d partition %d: %w", d.Lease.Group, d.TopicID, d.Partition, err)
			continue
		}
		c.parts[ri] = &dlqPart{group: d.Lease.Group, row: rows[0], p: p}
	}
	return c, nil
}

func validateDLQCommit(r catalog.Request) error {
	d := r.ShareDLQ
	if r.Producer != nil || r.GroupOffsets != nil || r.Source != nil || r.Txn != nil {
		return fmt.Errorf("%w: a dead-letter request carries no producer, offsets or transaction", catalog.ErrShareDLQNotPending)
	}
	if d.Lease.Group == "" || d.Lease.Holder == "" || len(d.Ranges) == 0 {
		return fmt.Errorf("%w: a dead-letter request names its lease and at least one range", catalog.ErrShareDLQNotPending)
	}
	return nil
}

// checkPending answers nil when every offset of ranges is RangeDLQPending.
func (p *SharePart) checkPending(ranges []catalog.ShareDLQRange) error {
	for _, want := range ranges {
		if want.First > want.Last {
			return fmt.Errorf("%w: range %d-%d", catalog.ErrShareDLQNotPending, want.First, want.Last)
		}
		next := want.First
		for _, r := range p.Ranges {
			if r.Last < next || r.First > want.Last {
				continue
			}
			if r.First > next || r.State != RangeDLQPending {
				return fmt.Errorf("%w: offset %d", catalog.ErrShareDLQNotPending, max(next, r.First))
			}
			next = r.Last + 1
			if next > want.Last {
				break
			}
		}
		if next <= want.Last {
			return fmt.Errorf("%w: offset %d", catalog.ErrShareDLQNotPending, next)
		}
	}
	return nil
}

// Finish archives the ranges of the dead-letter requests that committed now (not
// refused, not duplicates), in the flush's transaction, and adds their records (the
// copies) to their groups' running totals.
func (c *ShareDLQCheck) Finish(ctx context.Context, q ShareStmts, results []catalog.Result) error {
	copied := map[string]int64{}
	for ri, dp := range c.parts {
		if c.Errs[ri] != nil || results[ri].Err != nil || results[ri].Duplicate {
			continue
		}
		for _, b := range c.plan.Segment.Requests[ri].Batches {
			copied[dp.group] += int64(b.Records)
		}
		for _, want := range c.plan.Segment.Requests[ri].ShareDLQ.Ranges {
			dp.p.split(want.First)
			dp.p.split(want.Last + 1)
			for i := range dp.p.Ranges {
				r := &dp.p.Ranges[i]
				if r.First >= want.First && r.Last <= want.Last && r.State == RangeDLQPending {
					r.State, r.Reason, r.Status, r.Body = RangeArchived, 0, 0, ""
				}
			}
		}
		dp.p.normalize()
		dp.row.StartOffset, dp.row.State = dp.p.Start, dp.p.Encode()
		if err := q.UpdateSharePartition(ctx, dp.group, dp.row); err != nil {
			return fmt.Errorf("archive dead-lettered records of %q: %w", dp.group, err)
		}
	}
	for group, n := range copied {
		if n == 0 {
			continue
		}
		l := c.leases[group]
		l.Copied += n
		if err := q.PutDLQLease(ctx, group, l); err != nil {
			return fmt.Errorf("count dead-lettered records of %q: %w", group, err)
		}
	}
	return nil
}
