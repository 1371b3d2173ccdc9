package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Offset commits (docs/design.md "Groups"): the rules a commit of a group's offsets is
// checked against, alone (Groups.CommitOffsets and ResetOffsets: CheckOffsetCommit) or inside
// a flush (Request.GroupOffsets: Plan.CheckGroupOffsets), and the refusals by code that a
// backend checking them in SQL answers with (Postgres's strata_commit_groups), so that the
// Go rules and the SQL can be compared. The shape of a commit is catalog's
// (catalog.ValidateOffsetCommit): a front end checks it before calling.

// CheckOffsetCommit checks a member's commit against st (loaded under the group's lock)
// at now: the member is live, its epoch is not ahead of the member's, and it owns every
// partition since that epoch or an earlier one (KIP-1251: a commit at the epoch a
// partition was granted at stays the owner's after the member's epoch moves on) — or,
// for a Kafka client's commit alone at its current epoch (c.Released), was the last to
// give it back. A commit
// without a member needs a group without live members. topics resolves the commit's
// topic names, highWatermarks the partitions' high watermarks (a partition missing is
// out of range). It returns the offsets by partition, ready to store.
//
// alone says the commit carries no records (Groups.CommitOffsets, not a flush's group
// offsets): only then may c.Released name a partition the member gave back, at its
// current epoch. A commit that carries records (exactly-once output) must be the
// owner's, so that a member that stopped owning a partition cannot add output for it.
func CheckOffsetCommit(st *GroupState, now time.Time, c catalog.OffsetCommit, alone bool, topics map[string]TopicMeta, highWatermarks map[catalog.TopicPartition]int64) ([]catalog.TopicPartition, error) {
	if err := catalog.ValidateOffsetCommit(c); err != nil {
		return nil, err
	}
	if c.MemberID == "" {
		if st.LiveMembers(now) > 0 {
			return nil, OffsetCommitRefusal(c, RefusedGroupNotEmpty, 0, 0)
		}
	} else {
		m := st.Members[c.MemberID]
		if m == nil || !m.ExpiresAt.After(now) {
			return nil, OffsetCommitRefusal(c, RefusedUnknownMember, 0, 0)
		}
		if c.MemberEpoch > m.Epoch {
			return nil, OffsetCommitRefusal(c, RefusedStaleMemberEpoch, 0, int64(m.Epoch))
		}
	}
	tps := make([]catalog.TopicPartition, len(c.Offsets))
	for i, o := range c.Offsets {
		t, ok := topics[o.Topic]
		if !ok {
			return nil, OffsetCommitRefusal(c, RefusedTopicNotFound, i, 0)
		}
		tp := catalog.TopicPartition{TopicID: t.ID, Partition: o.Partition}
		hw, ok := highWatermarks[tp]
		if !ok || o.Partition >= t.Partitions {
			return nil, OffsetCommitRefusal(c, RefusedPartitionOutOfRange, i, int64(t.Partitions))
		}
		if o.Offset > hw {
			return nil, OffsetCommitRefusal(c, RefusedInvalidOffset, i, hw)
		}
		if c.MemberID != "" {
			own := st.Owners[tp]
			switch {
			case own != nil && own.Owner == c.MemberID:
				if c.MemberEpoch < own.Epoch {
					return nil, OffsetCommitRefusal(c, RefusedStaleAssignmentEpoch, i, int64(own.Epoch))
				}
			case alone && c.Released && own != nil && own.ReleasedBy == c.MemberID && c.MemberEpoch == st.Members[c.MemberID].Epoch:
				// Given back at this epoch: what the member processed before is still its
				// to commit (Kafka checks no partition at the current epoch).
			default:
				return nil, OffsetCommitRefusal(c, RefusedNotOwner, i, 0)
			}
		}
		tps[i] = tp
	}
	return tps, nil
}

// The refusals of CheckOffsetCommit (and of Plan.CheckGroupOffsets, which adds
// RefusedGroupNotFound), by code: a backend that checks an offset commit inside the
// database — Postgres's flush commit, in one round trip — answers one of these, and
// OffsetCommitRefusal turns it into the error the Go check answers, so the twins'
// answers can be compared (catalogtest guards that they agree).
const (
	RefusedGroupNotFound       = "group_not_found"        // a member's commit to a group that does not exist
	RefusedGroupNotEmpty       = "group_not_empty"        // a commit without a member to a group with live members
	RefusedUnknownMember       = "unknown_member"         // no such member, or its lease ended
	RefusedStaleMemberEpoch    = "stale_member_epoch"     // value: the member's epoch
	RefusedTopicNotFound       = "topic_not_found"        // of offset row
	RefusedPartitionOutOfRange = "partition_out_of_range" // of offset row; value: the topic's partition count
	RefusedInvalidOffset       = "invalid_offset"         // of offset row; value: the high watermark
	RefusedNotOwner            = "not_owner"              // of offset row
	// of offset row; value: the epoch the member was granted the partition at
	RefusedStaleAssignmentEpoch = "stale_assignment_epoch"
)

// ErrCheckedOnly is what a backend's offset commit answers inside its transaction once
// a CheckOnly commit has passed its checks: it rolls back, and the call answers nil.
var ErrCheckedOnly = errors.New("offset commit checked only")

// OffsetCommitRefusal is the error for refusing c with code; row indexes c.Offsets for
// the codes about one offset, and value is what the code's comment says.
func OffsetCommitRefusal(c catalog.OffsetCommit, code string, row int, value int64) error {
	var o catalog.CommitOffset
	if row >= 0 && row < len(c.Offsets) {
		o = c.Offsets[row]
	}
	switch code {
	case RefusedGroupNotFound:
		return fmt.Errorf("%w: %s", catalog.ErrGroupNotFound, c.Group)
	case RefusedGroupNotEmpty:
		return fmt.Errorf("%w: group %s has live members; commit as a member (member_id and member_epoch)", catalog.ErrGroupNotEmpty, c.Group)
	case RefusedUnknownMember:
		return fmt.Errorf("%w: %s is not a live member of group %s (its lease may have expired)", catalog.ErrUnknownMember, c.MemberID, c.Group)
	case RefusedStaleMemberEpoch:
		return fmt.Errorf("%w: commit at epoch %d, member %s is at epoch %d", catalog.ErrStaleMemberEpoch, c.MemberEpoch, c.MemberID, value)
	case RefusedTopicNotFound:
		return fmt.Errorf("%w: %q", catalog.ErrTopicNotFound, o.Topic)
	case RefusedPartitionOutOfRange:
		return fmt.Errorf("%w: topic %s has %d partitions, not %d", catalog.ErrPartitionOutOfRange, o.Topic, value, o.Partition)
	case RefusedInvalidOffset:
		return fmt.Errorf("%w: %s/%d: offset %d is beyond the high watermark %d", catalog.ErrInvalidOffset, o.Topic, o.Partition, o.Offset, value)
	case RefusedNotOwner:
		return fmt.Errorf("%w: %s/%d is not owned by member %s of group %s", catalog.ErrNotOwner, o.Topic, o.Partition, c.MemberID, c.Group)
	case RefusedStaleAssignmentEpoch:
		return fmt.Errorf("%w: commit at epoch %d, member %s of group %s was granted %s/%d at epoch %d", catalog.ErrStaleMemberEpoch, c.MemberEpoch, c.MemberID, c.Group, o.Topic, o.Partition, value)
	}
	return fmt.Errorf("catalog: unknown offset commit refusal %q for group %s", code, c.Group)
}

// GroupNames lists the distinct groups whose offsets the flush's requests commit,
// ascending: the order in which a backend locks them (after partitions and producer
// state).
func (p *Plan) GroupNames() []string {
	var names []string
	for _, r := range p.Segment.Requests {
		if g := r.GroupOffsets; g != nil {
			names = append(names, g.Group)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// OffsetTopics lists the distinct topic names the flush's group offsets name, sorted.
func (p *Plan) OffsetTopics() []string {
	var out []string
	for _, r := range p.Segment.Requests {
		if r.GroupOffsets == nil {
			continue
		}
		for _, o := range r.GroupOffsets.Offsets {
			out = append(out, o.Topic)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// GroupCheck is the outcome of Plan.CheckGroupOffsets.
type GroupCheck struct {
	// Errs is the errors passed in with the group refusals added.
	Errs []error
	plan *Plan
	rows [][]GroupOffsetRow // per request with group offsets accepted: its rows (CheckCommit)
}

// GroupOffsetRow is one committed offset a commit stores.
type GroupOffsetRow struct {
	Group string
	catalog.TopicPartition
	Offset      int64
	Metadata    string
	MemberID    string // "" for a commit from outside the group
	MemberEpoch int32
}

// CheckGroupOffsets checks, with CheckOffsetCommit, the group offsets of every request
// not already refused in errs. groups holds the groups named (loaded under their lock;
// a missing one does not exist: refused with ErrGroupNotFound unless the commit has no
// member, which creates it — the backend inserts its row), topics and highWatermarks
// what CheckOffsetCommit needs for OffsetTopics. A refused offset commit refuses its
// whole request, with the group error.
func (p *Plan) CheckGroupOffsets(errs []error, groups map[string]*GroupState, now time.Time, topics map[string]TopicMeta, highWatermarks map[catalog.TopicPartition]int64) *GroupCheck {
	gc := &GroupCheck{Errs: append([]error(nil), errs...), plan: p, rows: make([][]GroupOffsetRow, len(errs))}
	for ri, r := range p.Segment.Requests {
		oc := r.GroupOffsets
		if oc == nil || gc.Errs[ri] != nil {
			continue
		}
		// The shape first, before anything loaded is looked at: as a backend that checks
		// the rest in SQL does.
		if err := catalog.ValidateOffsetCommit(*oc); err != nil {
			gc.Errs[ri] = fmt.Errorf("group offsets: %w", err)
			continue
		}
		rows, err := CheckCommit(groups[oc.Group], now, *oc, false, topics, highWatermarks)
		switch {
		case errors.Is(err, catalog.ErrGroupNotFound):
			gc.Errs[ri] = err // as GroupOffsetsRefusal answers it
		case err != nil:
			gc.Errs[ri] = fmt.Errorf("group offsets: %w", err)
		default:
			gc.rows[ri] = rows
		}
	}
	return gc
}

// GroupOffsetsRefusal is the error CheckGroupOffsets refuses a request with when its
// offsets are refused with code (see OffsetCommitRefusal).
func GroupOffsetsRefusal(oc catalog.OffsetCommit, code string, row int, value int64) error {
	err := OffsetCommitRefusal(oc, code, row, value)
	if code == RefusedGroupNotFound {
		return err
	}
	return fmt.Errorf("group offsets: %w", err)
}

// Rows lists the offsets to store once results are final (after Assign and
// ProducerCheck.Finish): those of requests that committed now — not refused, not
// duplicates, whose offsets were stored the first time. When two requests of a flush
// commit one group partition, the later one wins, as if they had committed one after
// the other. Sorted by (group, topic, partition).
func (gc *GroupCheck) Rows(results []catalog.Result) []GroupOffsetRow {
	type key struct {
		group string
		tp    catalog.TopicPartition
	}
	at := map[key]int{}
	var rows []GroupOffsetRow
	for ri, r := range gc.plan.Segment.Requests {
		oc := r.GroupOffsets
		if oc == nil || gc.rows[ri] == nil || results[ri].Err != nil || results[ri].Duplicate {
			continue
		}
		for _, row := range gc.rows[ri] {
			k := key{oc.Group, row.TopicPartition}
			if j, ok := at[k]; ok {
				rows[j] = row
				continue
			}
			at[k] = len(rows)
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b GroupOffsetRow) int {
		if c := cmp.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return comparePartitions(a.TopicPartition, b.TopicPartition)
	})
	return rows
}

// CommitTopics checks an offset commit's shape (catalog.ValidateOffsetCommit), before
// any SQL, and lists the topic names it commits: what a backend loads, with their
// partitions' high watermarks, for CheckCommit.
func CommitTopics(oc catalog.OffsetCommit) ([]string, error) {
	if err := catalog.ValidateOffsetCommit(oc); err != nil {
		return nil, err
	}
	names := make([]string, len(oc.Offsets))
	for i, o := range oc.Offsets {
		names[i] = o.Topic
	}
	return names, nil
}

// CheckCommit is Groups.CommitOffsets' rule, and ResetOffsets' (a commit without a
// member), as Plan.CheckGroupOffsets applies it inside a flush: st is the group loaded
// under its lock, nil when there is none — a member's commit is then refused with
// ErrGroupNotFound, while one from outside the group creates it (the rows' empty
// MemberID tells the backend to insert the group's row) — and CheckOffsetCommit decides
// the rest. It answers the offsets to store sorted by partition, the order in which two
// commits lock their rows.
func CheckCommit(st *GroupState, now time.Time, oc catalog.OffsetCommit, alone bool, topics map[string]TopicMeta, highWatermarks map[catalog.TopicPartition]int64) ([]GroupOffsetRow, error) {
	if st == nil {
		if oc.MemberID != "" {
			return nil, OffsetCommitRefusal(oc, RefusedGroupNotFound, 0, 0)
		}
		st = NewGroupState(oc.Group, "", now)
	}
	tps, err := CheckOffsetCommit(st, now, oc, alone, topics, highWatermarks)
	if err != nil {
		return nil, err
	}
	rows := make([]GroupOffsetRow, len(tps))
	for i, o := range oc.Offsets {
		rows[i] = GroupOffsetRow{Group: oc.Group, TopicPartition: tps[i], Offset: o.Offset,
			Metadata: o.Metadata, MemberID: oc.MemberID, MemberEpoch: oc.MemberEpoch}
	}
	slices.SortFunc(rows, func(a, b GroupOffsetRow) int { return comparePartitions(a.TopicPartition, b.TopicPartition) })
	return rows, nil
}
