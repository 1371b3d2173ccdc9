package catalog

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Offset commits (DESIGN.md "Groups"): the rules a commit of a group's offsets is
// checked against, alone (Groups.CommitOffsets) or inside a flush (Request.GroupOffsets,
// with Plan.CheckGroupOffsets), and the refusals by code that a backend checking them
// in SQL answers with.

// ValidateOffsetCommit checks an offset commit's shape, before any SQL.
func ValidateOffsetCommit(c OffsetCommit) error {
	if err := ValidateGroupName(c.Group); err != nil {
		return err
	}
	if c.MemberID != "" {
		if err := ValidateMemberID(c.MemberID); err != nil {
			return err
		}
		if c.MemberEpoch <= 0 {
			return fmt.Errorf("%w: member_epoch %d: commit at the epoch the last heartbeat answered", ErrStaleMemberEpoch, c.MemberEpoch)
		}
	}
	return validateOffsets(c.Offsets)
}

func validateOffsets(offs []CommitOffset) error {
	if len(offs) == 0 {
		return fmt.Errorf("%w: offsets: none given", ErrInvalidGroupRequest)
	}
	seen := make(map[string]map[int32]bool)
	for _, o := range offs {
		if err := ValidateTopicName(o.Topic); err != nil {
			return fmt.Errorf("%w: %w", ErrTopicNotFound, err)
		}
		if o.Partition < 0 {
			return fmt.Errorf("%w: topic %s partition %d", ErrPartitionOutOfRange, o.Topic, o.Partition)
		}
		if o.Offset < 0 {
			return fmt.Errorf("%w: %s/%d: offset %d is negative", ErrInvalidOffset, o.Topic, o.Partition, o.Offset)
		}
		if len(o.Metadata) > MaxOffsetMetadata || !utf8.ValidString(o.Metadata) {
			return fmt.Errorf("%w: %s/%d: metadata must be UTF-8 of at most %d bytes", ErrInvalidGroupRequest, o.Topic, o.Partition, MaxOffsetMetadata)
		}
		if seen[o.Topic] == nil {
			seen[o.Topic] = map[int32]bool{}
		}
		if seen[o.Topic][o.Partition] {
			return fmt.Errorf("%w: offsets: %s/%d appears twice", ErrInvalidGroupRequest, o.Topic, o.Partition)
		}
		seen[o.Topic][o.Partition] = true
	}
	return nil
}

// CheckOffsetCommit checks a member's commit against st (loaded under the group's lock)
// at now: the member is live, at its current epoch, and owns every partition. A commit
// without a member needs a group without live members. topics resolves the commit's
// topic names, highWatermarks the partitions' high watermarks (a partition missing is
// out of range). It returns the offsets by partition, ready to store.
func CheckOffsetCommit(st *GroupState, now time.Time, c OffsetCommit, topics map[string]TopicMeta, highWatermarks map[TopicPartition]int64) ([]TopicPartition, error) {
	if err := ValidateOffsetCommit(c); err != nil {
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
		if c.MemberEpoch != m.Epoch {
			return nil, OffsetCommitRefusal(c, RefusedStaleMemberEpoch, 0, int64(m.Epoch))
		}
	}
	tps := make([]TopicPartition, len(c.Offsets))
	for i, o := range c.Offsets {
		t, ok := topics[o.Topic]
		if !ok {
			return nil, OffsetCommitRefusal(c, RefusedTopicNotFound, i, 0)
		}
		tp := TopicPartition{t.ID, o.Partition}
		hw, ok := highWatermarks[tp]
		if !ok || o.Partition >= t.Partitions {
			return nil, OffsetCommitRefusal(c, RefusedPartitionOutOfRange, i, int64(t.Partitions))
		}
		if o.Offset > hw {
			return nil, OffsetCommitRefusal(c, RefusedInvalidOffset, i, hw)
		}
		if c.MemberID != "" {
			if own := st.Owners[tp]; own == nil || own.Owner != c.MemberID {
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
)

// OffsetCommitRefusal is the error for refusing c with code; row indexes c.Offsets for
// the codes about one offset, and value is what the code's comment says.
func OffsetCommitRefusal(c OffsetCommit, code string, row int, value int64) error {
	var o CommitOffset
	if row >= 0 && row < len(c.Offsets) {
		o = c.Offsets[row]
	}
	switch code {
	case RefusedGroupNotFound:
		return fmt.Errorf("%w: %s", ErrGroupNotFound, c.Group)
	case RefusedGroupNotEmpty:
		return fmt.Errorf("%w: group %s has live members; commit as a member (member_id and member_epoch)", ErrGroupNotEmpty, c.Group)
	case RefusedUnknownMember:
		return fmt.Errorf("%w: %s is not a live member of group %s (its lease may have expired)", ErrUnknownMember, c.MemberID, c.Group)
	case RefusedStaleMemberEpoch:
		return fmt.Errorf("%w: commit at epoch %d, member %s is at epoch %d", ErrStaleMemberEpoch, c.MemberEpoch, c.MemberID, value)
	case RefusedTopicNotFound:
		return fmt.Errorf("%w: %q", ErrTopicNotFound, o.Topic)
	case RefusedPartitionOutOfRange:
		return fmt.Errorf("%w: topic %s has %d partitions, not %d", ErrPartitionOutOfRange, o.Topic, value, o.Partition)
	case RefusedInvalidOffset:
		return fmt.Errorf("%w: %s/%d: offset %d is beyond the high watermark %d", ErrInvalidOffset, o.Topic, o.Partition, o.Offset, value)
	case RefusedNotOwner:
		return fmt.Errorf("%w: %s/%d is not owned by member %s of group %s", ErrNotOwner, o.Topic, o.Partition, c.MemberID, c.Group)
	}
	return fmt.Errorf("catalog: unknown offset commit refusal %q for group %s", code, c.Group)
}

// CheckReset checks offsets for ResetOffsets the way CheckOffsetCommit checks a commit
// without a member.
func CheckReset(st *GroupState, now time.Time, group string, offsets []CommitOffset, topics map[string]TopicMeta, highWatermarks map[TopicPartition]int64) ([]TopicPartition, error) {
	return CheckOffsetCommit(st, now, OffsetCommit{Group: group, Offsets: offsets}, topics, highWatermarks)
}
