package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// A consumer group's heartbeat and its offset commits (catalog.Groups: Heartbeat,
// CommitOffsets, ResetOffsets) each run one transaction, written here once: the backend
// locks and reads what a GroupLoad asks for (GroupBackend.GroupTx), the rules below
// decide on it, and the backend writes the GroupWrites they answer.

// GroupLoad is what a group call locks and reads.
type GroupLoad struct {
	Group string
	// Exclusive takes the group's row for update (a heartbeat; a commit from outside the
	// group, so no member joins between its check and its write); otherwise for share
	// (members' commits run side by side, never beside a heartbeat).
	Exclusive bool
	// Create inserts the group (a consumer group, with Assignor, DefaultAssignor when
	// empty) first when it does not exist.
	Create   bool
	Assignor string
	// SubscribedTopics resolves the live topics of every member's subscription and of
	// ExtraTopics (a heartbeat's).
	SubscribedTopics bool
	ExtraTopics      []string
	// CommitTopics resolves these live topics with their partitions' high watermarks
	// (an offset commit's checks).
	CommitTopics []string
}

// GroupView is what the backend read, under the group's row lock.
type GroupView struct {
	Now time.Time
	// State is the group, nil when it does not exist.
	State          *GroupState
	Topics         map[string]TopicMeta
	HighWatermarks map[catalog.TopicPartition]int64
}

// GroupWrites is what a group call writes: the changes between Before and After (none
// when Before is nil), then the offsets (their empty MemberID: a commit from outside the
// group).
type GroupWrites struct {
	Before, After *GroupState
	Offsets       []GroupOffsetRow
}

// GroupBackend runs group calls.
type GroupBackend interface {
	// Name is the backend's name, for errors ("postgres", "sqlite").
	Name() string
	// GroupTx runs one call in one transaction: it inserts the group when load.Create,
	// takes its row lock, reads what load asks for and calls decide; it writes the
	// audit record ctx carries (catalog.WithAudit) and what decide answers (never nil),
	// and commits. When decide answers an error, nothing is written.
	GroupTx(ctx context.Context, load GroupLoad, decide func(*GroupView) (*GroupWrites, error)) error
}

// Heartbeat runs one member's heartbeat (see catalog.Groups).
func Heartbeat(ctx context.Context, db GroupBackend, hb catalog.Heartbeat) (catalog.HeartbeatResult, error) {
	if err := catalog.ValidateHeartbeat(hb); err != nil {
		return catalog.HeartbeatResult{}, fmt.Errorf("%s: heartbeat %s/%s: %w", db.Name(), hb.Group, hb.MemberID, err)
	}
	var res catalog.HeartbeatResult
	load := GroupLoad{Group: hb.Group, Exclusive: true, Create: hb.MemberEpoch == catalog.JoinEpoch, Assignor: hb.Assignor,
		SubscribedTopics: true, ExtraTopics: hb.Topics}
	err := db.GroupTx(ctx, load, func(v *GroupView) (*GroupWrites, error) {
		if v.State == nil {
			return nil, fmt.Errorf("%w: %s", catalog.ErrGroupNotFound, hb.Group)
		}
		before := v.State.Clone()
		var err error
		if res, err = ApplyHeartbeat(v.State, v.Now, hb, v.Topics); err != nil {
			return nil, err
		}
		return &GroupWrites{Before: before, After: v.State}, nil
	})
	if err != nil {
		return catalog.HeartbeatResult{}, fmt.Errorf("%s: heartbeat %s/%s: %w", db.Name(), hb.Group, hb.MemberID, err)
	}
	return res, nil
}

// CommitOffsets checks and stores oc (CheckCommit): what (commit, reset) names the call
// in its error. ResetOffsets is a commit without a member.
func CommitOffsets(ctx context.Context, db GroupBackend, what string, oc catalog.OffsetCommit) error {
	names, err := CommitTopics(oc)
	if err != nil {
		return fmt.Errorf("%s: %s offsets of group %s: %w", db.Name(), what, oc.Group, err)
	}
	outside := oc.MemberID == ""
	err = db.GroupTx(ctx, GroupLoad{Group: oc.Group, Exclusive: outside, Create: outside, CommitTopics: names},
		func(v *GroupView) (*GroupWrites, error) {
			rows, err := CheckCommit(v.State, v.Now, oc, true, v.Topics, v.HighWatermarks)
			if err != nil {
				return nil, err
			}
			if oc.CheckOnly {
				return nil, ErrCheckedOnly
			}
			return &GroupWrites{Offsets: rows}, nil
		})
	if err != nil && !errors.Is(err, ErrCheckedOnly) {
		return fmt.Errorf("%s: %s offsets of group %s: %w", db.Name(), what, oc.Group, err)
	}
	return nil
}
