package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Share groups (catalog.ShareGroups) as scripts for both backends over ShareStmts: each
// call one write transaction, its rules share_state.go's. Lock order: a share group's
// row, then its share-partitions sorted by (topic id, partition) — last in
// docs/design.md's list, after everything a flush commit locks.

// SharePartitionRow is a share_partitions row: the start offset and the in-flight
// ranges' stored form.
type SharePartitionRow struct {
	TopicID     int64
	Partition   int32
	StartOffset int64
	State       string
}

// ShareMemberRow is a share_members row; ExpiresAt is on the database clock.
type ShareMemberRow struct {
	ID        string
	Epoch     int32
	Topics    []string
	Session   time.Duration
	ExpiresAt time.Time
}

// PartitionKey names a partition by topic id.
type PartitionKey struct {
	TopicID   int64
	Partition int32
}

// PartitionBounds are a partition's log start offset, high watermark and last stable
// offset (the first offset of its earliest open transaction, else the high watermark).
type PartitionBounds struct{ LogStart, HighWatermark, LastStable int64 }

// ShareStmts are the statements of a share-group call, in one write transaction.
type ShareStmts interface {
	// Now is the database clock.
	Now(ctx context.Context) (time.Time, error)
	// ShareGroupRow reads a share group's epoch, holding its row (where the database
	// has row locks) until the transaction ends.
	ShareGroupRow(ctx context.Context, group string) (epoch int32, found bool, err error)
	// ConsumerGroupExists answers whether a consumer group (either protocol) has the id.
	ConsumerGroupExists(ctx context.Context, group string) (bool, error)
	// InsertShareGroup inserts the group unless it exists, answering whether it did.
	InsertShareGroup(ctx context.Context, group string) (bool, error)
	SetShareGroupEpoch(ctx context.Context, group string, epoch int32) error
	// DeleteShareGroup deletes the group with its members and share-partitions.
	DeleteShareGroup(ctx context.Context, group string) error
	ListShareGroups(ctx context.Context) ([]string, error)
	ShareMembers(ctx context.Context, group string) ([]ShareMemberRow, error)
	PutShareMember(ctx context.Context, group string, m ShareMemberRow) error
	DeleteShareMember(ctx context.Context, group, id string) error
	// Topics resolves live topics by name (unknown ones are left out); TopicsByID by id.
	Topics(ctx context.Context, names []string) (map[string]TopicMeta, error)
	TopicsByID(ctx context.Context, ids []int64) (map[int64]TopicMeta, error)
	// SharePartitions reads the group's share-partitions of keys (nil: all), sorted,
	// holding their rows when lock is set.
	SharePartitions(ctx context.Context, group string, keys []PartitionKey, lock bool) ([]SharePartitionRow, error)
	// Bounds reads the partitions' log start offsets, high watermarks and last stable
	// offsets.
	Bounds(ctx context.Context, keys []PartitionKey) (map[PartitionKey]PartitionBounds, error)
	// OffsetForTime is the partition's first offset whose records may be at or after
	// ts (unix ms), at chunk granularity, not below its log start; its high watermark
	// when none is (catalog.Catalog.OffsetForTime, in the transaction).
	OffsetForTime(ctx context.Context, k PartitionKey, ts int64) (int64, error)
	// InsertSharePartition inserts a row unless one exists, answering whether it did.
	InsertSharePartition(ctx context.Context, group string, row SharePartitionRow) (bool, error)
	UpdateSharePartition(ctx context.Context, group string, row SharePartitionRow) error
	// DeleteSharePartitions deletes the group's share-partitions of topics (by id).
	DeleteSharePartitions(ctx context.Context, group string, topicIDs []int64) error
	// GroupConfigs reads a group id's configs (JSON, "" when none); SetGroupConfigs
	// writes them ("" deletes).
	GroupConfigs(ctx context.Context, group string) (string, error)
	SetGroupConfigs(ctx context.Context, group, configs string) error
	ShareDLQStmts
}

// ShareBackend runs share-group calls.
type ShareBackend interface {
	Name() string
	// ShareTx runs fn in a write transaction and commits it when fn returns nil.
	ShareTx(ctx context.Context, fn func(ShareStmts) error) error
}

// errShareRace: a concurrent call created a share-partition row this one meant to
// create; the call starts again.
var errShareRace = errors.New("share-partition created concurrently")

func shareTx(ctx context.Context, db ShareBackend, what string, fn func(ShareStmts) error) error {
	for attempt := 0; ; attempt++ {
		err := db.ShareTx(ctx, fn)
		if errors.Is(err, errShareRace) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %s: %w", db.Name(), what, err)
		}
		return nil
	}
}

func liveMembers(ms []ShareMemberRow, now time.Time) (live, expired []ShareMemberRow) {
	for _, m := range ms {
		if m.ExpiresAt.After(now) {
			live = append(live, m)
		} else {
			expired = append(expired, m)
		}
	}
	return live, expired
}

// ShareHeartbeat implements catalog.ShareGroups (ShareHeartbeat).
func ShareHeartbeat(ctx context.Context, db ShareBackend, hb catalog.ShareHeartbeat) (catalog.ShareMember, error) {
	if err := catalog.ValidateGroupName(hb.Group); err != nil {
		return catalog.ShareMember{}, err
	}
	if hb.MemberID == "" {
		return catalog.ShareMember{}, fmt.Errorf("%w: a member id is required", catalog.ErrUnknownMember)
	}
	if hb.SessionTimeout <= 0 {
		hb.SessionTimeout = catalog.DefaultShareSession
	}
	var out catalog.ShareMember
	err := shareTx(ctx, db, "share heartbeat", func(q ShareStmts) error {
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		epoch, found, err := q.ShareGroupRow(ctx, hb.Group)
		if err != nil {
			return err
		}
		if !found {
			if hb.MemberEpoch != catalog.JoinEpoch {
				return fmt.Errorf("share group %q: %w", hb.Group, catalog.ErrGroupNotFound)
			}
			if ok, err := q.ConsumerGroupExists(ctx, hb.Group); err != nil {
				return err
			} else if ok {
				return fmt.Errorf("%w: %q is a consumer group", catalog.ErrGroupTypeMismatch, hb.Group)
			}
			if ok, err := q.InsertShareGroup(ctx, hb.Group); err != nil || !ok {
				return cmp.Or(err, errShareRace)
			}
		}
		ms, err := q.ShareMembers(ctx, hb.Group)
		if err != nil {
			return err
		}
		live, expired := liveMembers(ms, now)
		for _, m := range expired {
			if err := q.DeleteShareMember(ctx, hb.Group, m.ID); err != nil {
				return err
			}
		}
		var cur *ShareMemberRow
		for i := range live {
			if live[i].ID == hb.MemberID {
				cur = &live[i]
			}
		}
		bump := func() error {
			epoch++
			return q.SetShareGroupEpoch(ctx, hb.Group, epoch)
		}
		switch {
		case hb.MemberEpoch == catalog.LeaveEpoch:
			out = catalog.ShareMember{ID: hb.MemberID, Epoch: catalog.LeaveEpoch}
			if cur == nil {
				return nil
			}
			if err := q.DeleteShareMember(ctx, hb.Group, hb.MemberID); err != nil {
				return err
			}
			if err := releaseMember(ctx, q, hb.Group, hb.MemberID); err != nil {
				return err
			}
			return bump()
		case hb.MemberEpoch == catalog.JoinEpoch && cur != nil && (hb.Topics == nil || slices.Equal(sortedTopics(hb.Topics), cur.Topics)):
			// A live member joining again with the same subscription (an HTTP member's
			// every acquire, a Kafka client that lost a heartbeat's answer) keeps its
			// epoch: nothing about the group changed but its session.
			m := *cur
			m.Session, m.ExpiresAt = hb.SessionTimeout, now.Add(hb.SessionTimeout)
			out = catalog.ShareMember{ID: m.ID, Epoch: m.Epoch, Topics: m.Topics}
			return q.PutShareMember(ctx, hb.Group, m)
		case hb.MemberEpoch == catalog.JoinEpoch:
			if err := bump(); err != nil {
				return err
			}
			m := ShareMemberRow{ID: hb.MemberID, Epoch: epoch, Topics: sortedTopics(hb.Topics), Session: hb.SessionTimeout, ExpiresAt: now.Add(hb.SessionTimeout)}
			out = catalog.ShareMember{ID: m.ID, Epoch: m.Epoch, Topics: m.Topics}
			return q.PutShareMember(ctx, hb.Group, m)
		case cur == nil:
			return fmt.Errorf("share group %q member %q: %w", hb.Group, hb.MemberID, catalog.ErrUnknownMember)
		case hb.MemberEpoch != cur.Epoch:
			return fmt.Errorf("share group %q member %q at epoch %d, not %d: %w", hb.Group, hb.MemberID, cur.Epoch, hb.MemberEpoch, catalog.ErrStaleMemberEpoch)
		}
		m := *cur
		m.Session, m.ExpiresAt = hb.SessionTimeout, now.Add(hb.SessionTimeout)
		if hb.Topics != nil && !slices.Equal(sortedTopics(hb.Topics), m.Topics) {
			if err := bump(); err != nil {
				return err
			}
			m.Topics, m.Epoch = sortedTopics(hb.Topics), epoch
		}
		out = catalog.ShareMember{ID: m.ID, Epoch: m.Epoch, Topics: m.Topics}
		return q.PutShareMember(ctx, hb.Group, m)
	})
	return out, err
}

func sortedTopics(ts []string) []string {
	out := slices.Clone(ts)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// releaseMember releases what member holds on every share-partition of group.
func releaseMember(ctx context.Context, q ShareStmts, group, member string) error {
	rows, err := q.SharePartitions(ctx, group, nil, true)
	if err != nil {
		return err
	}
	for _, row := range rows {
		p, err := DecodeSharePart(row.StartOffset, row.State)
		if err != nil {
			return err
		}
		// The limit does not apply to a release by leaving: the records were not
		// delivered to anyone's handler more than their count says.
		if p.releaseMember(member, int(^uint(0)>>1)) {
			p.normalize()
			row.StartOffset, row.State = p.Start, p.Encode()
			if err := q.UpdateSharePartition(ctx, group, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// shareKeys resolves partitions named by topic to keys, sorted (the lock order);
// unknown topics and partitions out of range are left out.
func shareKeys(ctx context.Context, q ShareStmts, tps []catalog.ShareTP) ([]PartitionKey, map[PartitionKey]catalog.ShareTP, error) {
	var names []string
	for _, tp := range tps {
		names = append(names, tp.Topic)
	}
	topics, err := q.Topics(ctx, names)
	if err != nil {
		return nil, nil, err
	}
	by := map[PartitionKey]catalog.ShareTP{}
	var keys []PartitionKey
	for _, tp := range tps {
		t, ok := topics[tp.Topic]
		if !ok || tp.Partition < 0 || tp.Partition >= t.Partitions {
			continue
		}
		k := PartitionKey{t.ID, tp.Partition}
		if _, dup := by[k]; !dup {
			by[k] = tp
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, comparePartitionKey)
	return keys, by, nil
}

func comparePartitionKey(a, b PartitionKey) int {
	if a.TopicID != b.TopicID {
		return int(a.TopicID - b.TopicID)
	}
	return int(a.Partition - b.Partition)
}

// ShareAcquire implements catalog.ShareGroups (ShareAcquire).
func ShareAcquire(ctx context.Context, db ShareBackend, req catalog.ShareAcquire) (catalog.ShareAcquireResult, error) {
	if req.MaxRecords <= 0 {
		req.MaxRecords = 500
	}
	if req.MaxLocks <= 0 {
		req.MaxLocks = catalog.DefaultShareMaxLocks
	}
	var out []catalog.ShareAcquired
	var lock time.Duration
	var committed bool
	err := shareTx(ctx, db, "share acquire", func(q ShareStmts) error {
		out = nil
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		set, err := shareSettings(ctx, q, req.Group, req.LockDuration, req.DeliveryLimit)
		if err != nil {
			return err
		}
		lock, committed = set.LockDuration, set.ReadCommitted
		req.ResetEarliest = req.ResetEarliest || set.ResetEarliest
		ms, err := q.ShareMembers(ctx, req.Group)
		if err != nil {
			return err
		}
		live, _ := liveMembers(ms, now)
		if !slices.ContainsFunc(live, func(m ShareMemberRow) bool { return m.ID == req.MemberID }) {
			return fmt.Errorf("share group %q member %q: %w", req.Group, req.MemberID, catalog.ErrUnknownMember)
		}
		keys, by, err := shareKeys(ctx, q, req.Partitions)
		if err != nil || len(keys) == 0 {
			return err
		}
		rows, err := q.SharePartitions(ctx, req.Group, keys, true)
		if err != nil {
			return err
		}
		have := map[PartitionKey]SharePartitionRow{}
		for _, r := range rows {
			have[PartitionKey{r.TopicID, r.Partition}] = r
		}
		bounds, err := q.Bounds(ctx, keys)
		if err != nil {
			return err
		}
		nowMs, left := now.UnixMilli(), int64(req.MaxRecords)
		deadline := nowMs + set.LockDuration.Milliseconds()
		for _, k := range keys {
			b := bounds[k]
			row, found := have[k]
			var p SharePart
			changed := !found
			if found {
				if p, err = DecodeSharePart(row.StartOffset, row.State); err != nil {
					return err
				}
			} else {
				row = SharePartitionRow{TopicID: k.TopicID, Partition: k.Partition}
				p.Start = b.HighWatermark
				switch {
				case req.ResetEarliest:
					p.Start = b.LogStart
				case set.ResetBefore > 0:
					if p.Start, err = q.OffsetForTime(ctx, k, nowMs-set.ResetBefore.Milliseconds()); err != nil {
						return err
					}
				}
			}
			p.DLQ = set.DLQTopic != ""
			if p.clampLogStart(b.LogStart) {
				changed = true
			}
			if p.expire(nowMs, set.DeliveryLimit) {
				changed = true
			}
			// share.isolation.level=read_committed stops at the last stable offset.
			end := b.HighWatermark
			if set.ReadCommitted {
				end = min(end, b.LastStable)
			}
			var got []ShareRange
			if left > 0 {
				got = p.acquire(req.MemberID, deadline, left, min(end, p.Start+int64(req.MaxLocks)))
			}
			a := catalog.ShareAcquired{ShareTP: by[k], Next: p.End()}
			if !changed && len(got) == 0 {
				out = append(out, a)
				continue // found nothing: write nothing
			}
			p.normalize()
			row.StartOffset, row.State = p.Start, p.Encode()
			if !found {
				ok, err := q.InsertSharePartition(ctx, req.Group, row)
				if err != nil {
					return err
				}
				if !ok {
					return errShareRace
				}
			} else if err := q.UpdateSharePartition(ctx, req.Group, row); err != nil {
				return err
			}
			a.Next = p.End()
			for _, r := range got {
				a.Ranges = append(a.Ranges, catalog.AcquiredRange{First: r.First, Last: r.Last, DeliveryCount: r.Count, Deadline: time.UnixMilli(deadline)})
				left -= r.Last - r.First + 1
			}
			out = append(out, a)
		}
		return nil
	})
	return catalog.ShareAcquireResult{Partitions: out, LockDuration: lock, ReadCommitted: committed}, err
}

// shareSettings reads the group's configs, with the caller's overrides (0: none).
func shareSettings(ctx context.Context, q ShareStmts, group string, lock time.Duration, limit int) (catalog.ShareSettings, error) {
	raw, err := q.GroupConfigs(ctx, group)
	if err != nil {
		return catalog.ShareSettings{}, err
	}
	configs := map[string]string{}
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &configs); err != nil {
			return catalog.ShareSettings{}, fmt.Errorf("decode group configs: %w", err)
		}
	}
	s := catalog.ParseShareSettings(configs)
	if lock > 0 {
		s.LockDuration = lock
	}
	if limit > 0 {
		s.DeliveryLimit = limit
	}
	return s, nil
}

// ShareAcknowledge implements catalog.ShareGroups (ShareAcknowledge).
func ShareAcknowledge(ctx context.Context, db ShareBackend, req catalog.ShareAck) ([]error, error) {
	results := make([]error, len(req.Partitions))
	err := shareTx(ctx, db, "share acknowledge", func(q ShareStmts) error {
		clear(results)
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		set, err := shareSettings(ctx, q, req.Group, req.LockDuration, req.DeliveryLimit)
		if err != nil {
			return err
		}
		tps := make([]catalog.ShareTP, len(req.Partitions))
		for i, p := range req.Partitions {
			tps[i] = p.ShareTP
		}
		keys, by, err := shareKeys(ctx, q, tps)
		if err != nil {
			return err
		}
		rows, err := q.SharePartitions(ctx, req.Group, keys, true)
		if err != nil {
			return err
		}
		have := map[catalog.ShareTP]SharePartitionRow{}
		for _, r := range rows {
			have[by[PartitionKey{r.TopicID, r.Partition}]] = r
		}
		parts := map[catalog.ShareTP]*SharePart{}
		for i, ap := range req.Partitions {
			row, ok := have[ap.ShareTP]
			if !ok {
				if err := validateAcks(ap.Batches); err != nil {
					results[i] = err
				} else {
					results[i] = fmt.Errorf("%w: %s/%d has nothing in flight", catalog.ErrShareAckOutOfRange, ap.Topic, ap.Partition)
				}
				continue
			}
			p := parts[ap.ShareTP]
			if p == nil {
				sp, err := DecodeSharePart(row.StartOffset, row.State)
				if err != nil {
					return err
				}
				sp.DLQ = set.DLQTopic != ""
				p = &sp
				parts[ap.ShareTP] = p
			}
			if err := p.ackRequeue(req.MemberID, now.UnixMilli(), ap.Batches, set.LockDuration, set.DeliveryLimit, req.Requeue); err != nil {
				results[i] = err
				continue
			}
			row.StartOffset, row.State = p.Start, p.Encode()
			have[ap.ShareTP] = row
			if err := q.UpdateSharePartition(ctx, req.Group, row); err != nil {
				return err
			}
		}
		if req.AllOrNothing && slices.ContainsFunc(results, func(e error) bool { return e != nil }) {
			return errShareAckRefused // roll back what was applied
		}
		return nil
	})
	if errors.Is(err, errShareAckRefused) {
		return results, nil
	}
	return results, err
}

// errShareAckRefused rolls back an all-or-nothing acknowledgement with a refusal.
var errShareAckRefused = errors.New("an acknowledgement was refused")

// DescribeShareGroup implements catalog.ShareGroups (DescribeShareGroup).
func DescribeShareGroup(ctx context.Context, db ShareBackend, group string) (catalog.ShareGroupDescription, error) {
	d := catalog.ShareGroupDescription{Name: group}
	err := shareTx(ctx, db, "describe share group", func(q ShareStmts) error {
		now, err := q.Now(ctx)
		if err != nil {
			return err
		}
		epoch, found, err := q.ShareGroupRow(ctx, group)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("share group %q: %w", group, catalog.ErrGroupNotFound)
		}
		d.Epoch = epoch
		ms, err := q.ShareMembers(ctx, group)
		if err != nil {
			return err
		}
		live, _ := liveMembers(ms, now)
		d.Members = nil
		for _, m := range live {
			d.Members = append(d.Members, catalog.ShareMember{ID: m.ID, Epoch: m.Epoch, Topics: m.Topics})
		}
		rows, err := q.SharePartitions(ctx, group, nil, false)
		if err != nil {
			return err
		}
		if d.Partitions, err = sharePartitionStates(ctx, q, rows); err != nil {
			return err
		}
		d.DeadLettered, err = q.DLQCopied(ctx, group)
		return err
	})
	return d, err
}

func sharePartitionStates(ctx context.Context, q ShareStmts, rows []SharePartitionRow) ([]catalog.SharePartitionState, error) {
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.TopicID)
	}
	topics, err := q.TopicsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []catalog.SharePartitionState
	for _, r := range rows {
		t, ok := topics[r.TopicID]
		if !ok {
			continue
		}
		p, err := DecodeSharePart(r.StartOffset, r.State)
		if err != nil {
			return nil, err
		}
		s := catalog.SharePartitionState{ShareTP: catalog.ShareTP{Topic: t.Name, Partition: r.Partition}, StartOffset: p.Start}
		s.Available, s.Acquired, s.Acknowledged, s.Archived, s.DeadLetterPending = p.counts()
		out = append(out, s)
	}
	return out, nil
}

// ListShareGroups implements catalog.ShareGroups (ListShareGroups).
func ListShareGroups(ctx context.Context, db ShareBackend) ([]string, error) {
	var out []string
	err := shareTx(ctx, db, "list share groups", func(q ShareStmts) (err error) {
		out, err = q.ListShareGroups(ctx)
		return err
	})
	return out, err
}

// IsShareGroup implements catalog.ShareGroups (IsShareGroup).
func IsShareGroup(ctx context.Context, db ShareBackend, group string) (bool, error) {
	var found bool
	err := shareTx(ctx, db, "find share group", func(q ShareStmts) (err error) {
		_, found, err = q.ShareGroupRow(ctx, group)
		return err
	})
	return found, err
}

// emptyShareGroup holds group's row and refuses while it has live members; found is
// false when there is no such share group.
func emptyShareGroup(ctx context.Context, q ShareStmts, group string) (found bool, err error) {
	now, err := q.Now(ctx)
	if err != nil {
		return false, err
	}
	_, found, err = q.ShareGroupRow(ctx, group)
	if err != nil || !found {
		return found, err
	}
	ms, err := q.ShareMembers(ctx, group)
	if err != nil {
		return true, err
	}
	if live, _ := liveMembers(ms, now); len(live) > 0 {
		return true, fmt.Errorf("share group %q has %d live members: %w", group, len(live), catalog.ErrGroupNotEmpty)
	}
	return true, nil
}

// DeleteShareGroup implements catalog.ShareGroups (DeleteShareGroup).
func DeleteShareGroup(ctx context.Context, db ShareBackend, group string) error {
	return shareTx(ctx, db, "delete share group", func(q ShareStmts) error {
		found, err := emptyShareGroup(ctx, q, group)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("share group %q: %w", group, catalog.ErrGroupNotFound)
		}
		return q.DeleteShareGroup(ctx, group)
	})
}

// ShareOffsets implements catalog.ShareGroups (ShareOffsets).
func ShareOffsets(ctx context.Context, db ShareBackend, group string) ([]catalog.ShareOffset, error) {
	var out []catalog.ShareOffset
	err := shareTx(ctx, db, "share offsets", func(q ShareStmts) error {
		out = nil
		_, found, err := q.ShareGroupRow(ctx, group)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("share group %q: %w", group, catalog.ErrGroupNotFound)
		}
		rows, err := q.SharePartitions(ctx, group, nil, false)
		if err != nil {
			return err
		}
		states, err := sharePartitionStates(ctx, q, rows)
		if err != nil {
			return err
		}
		keys := make([]PartitionKey, len(rows))
		for i, r := range rows {
			keys[i] = PartitionKey{r.TopicID, r.Partition}
		}
		bounds, err := q.Bounds(ctx, keys)
		if err != nil {
			return err
		}
		byName := map[catalog.ShareTP]int{}
		for i, s := range states {
			byName[s.ShareTP] = i
		}
		topics, err := q.TopicsByID(ctx, func() []int64 {
			var ids []int64
			for _, r := range rows {
				ids = append(ids, r.TopicID)
			}
			return ids
		}())
		if err != nil {
			return err
		}
		for _, r := range rows {
			t, ok := topics[r.TopicID]
			if !ok {
				continue
			}
			tp := catalog.ShareTP{Topic: t.Name, Partition: r.Partition}
			s := states[byName[tp]]
			lag := bounds[PartitionKey{r.TopicID, r.Partition}].HighWatermark - s.StartOffset - s.Acknowledged - s.Archived
			out = append(out, catalog.ShareOffset{ShareTP: tp, TopicID: r.TopicID, StartOffset: s.StartOffset, Lag: max(lag, 0)})
		}
		return nil
	})
	return out, err
}

// AlterShareOffsets implements catalog.ShareGroups (AlterShareOffsets).
func AlterShareOffsets(ctx context.Context, db ShareBackend, group string, offsets []catalog.ShareOffset) error {
	if err := catalog.ValidateGroupName(group); err != nil {
		return err
	}
	return shareTx(ctx, db, "alter share offsets", func(q ShareStmts) error {
		found, err := emptyShareGroup(ctx, q, group)
		if err != nil {
			return err
		}
		if !found {
			if ok, err := q.ConsumerGroupExists(ctx, group); err != nil {
				return err
			} else if ok {
				return fmt.Errorf("%w: %q is a consumer group", catalog.ErrGroupTypeMismatch, group)
			}
			if ok, err := q.InsertShareGroup(ctx, group); err != nil || !ok {
				return cmp.Or(err, errShareRace)
			}
		}
		tps := make([]catalog.ShareTP, len(offsets))
		for i, o := range offsets {
			if o.StartOffset < 0 {
				return fmt.Errorf("%w: start offset %d of %s/%d", catalog.ErrOffsetOutOfRange, o.StartOffset, o.Topic, o.Partition)
			}
			tps[i] = o.ShareTP
		}
		keys, by, err := shareKeys(ctx, q, tps)
		if err != nil {
			return err
		}
		if len(keys) != len(offsets) {
			return fmt.Errorf("alter share offsets of %q: %w", group, catalog.ErrTopicNotFound)
		}
		want := map[catalog.ShareTP]int64{}
		for _, o := range offsets {
			want[o.ShareTP] = o.StartOffset
		}
		rows, err := q.SharePartitions(ctx, group, keys, true)
		if err != nil {
			return err
		}
		have := map[PartitionKey]bool{}
		for _, r := range rows {
			have[PartitionKey{r.TopicID, r.Partition}] = true
		}
		for _, k := range keys {
			row := SharePartitionRow{TopicID: k.TopicID, Partition: k.Partition, StartOffset: want[by[k]], State: "[]"}
			if have[k] {
				err = q.UpdateSharePartition(ctx, group, row)
			} else if ok, ierr := q.InsertSharePartition(ctx, group, row); ierr != nil {
				err = ierr
			} else if !ok {
				err = errShareRace
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteShareOffsets implements catalog.ShareGroups (DeleteShareOffsets).
func DeleteShareOffsets(ctx context.Context, db ShareBackend, group string, topicIDs []int64) error {
	return shareTx(ctx, db, "delete share offsets", func(q ShareStmts) error {
		found, err := emptyShareGroup(ctx, q, group)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("share group %q: %w", group, catalog.ErrGroupNotFound)
		}
		if len(topicIDs) == 0 {
			return nil
		}
		return q.DeleteSharePartitions(ctx, group, topicIDs)
	})
}

// GroupConfigs implements catalog.ShareGroups (GroupConfigs).
func GroupConfigs(ctx context.Context, db ShareBackend, group string) (map[string]string, error) {
	out := map[string]string{}
	err := shareTx(ctx, db, "group configs", func(q ShareStmts) error {
		s, err := q.GroupConfigs(ctx, group)
		if err != nil || s == "" {
			return err
		}
		return json.Unmarshal([]byte(s), &out)
	})
	return out, err
}

// SetGroupConfigs implements catalog.ShareGroups (SetGroupConfigs).
func SetGroupConfigs(ctx context.Context, db ShareBackend, group string, configs map[string]string) error {
	if err := catalog.ValidateGroupName(group); err != nil {
		return err
	}
	if err := catalog.ValidateShareGroupConfigs(configs); err != nil {
		return err
	}
	s := ""
	if len(configs) > 0 {
		b, err := json.Marshal(configs)
		if err != nil {
			return err
		}
		s = string(b)
	}
	return shareTx(ctx, db, "set group configs", func(q ShareStmts) error {
		return q.SetGroupConfigs(ctx, group, s)
	})
}
