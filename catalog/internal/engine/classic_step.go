package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// A classic group's calls (catalog.ClassicGroups: JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, the offset commit, and the tick a held call's poll makes) each run one
// step in one transaction, written here once: the backend locks and reads what a
// ClassicLoad asks for (ClassicBackend.ClassicTx), the step below applies the due
// transitions and the call's rule, and the backend writes the ClassicWrites it answers.

// ClassicLoad is what a classic step locks and reads.
type ClassicLoad struct {
	Group string
	// Create: insert the group (type classic) first when it does not exist (a join).
	Create bool
	// Topics are resolved (live topics only), with their partitions' high watermarks,
	// for an offset commit's checks.
	Topics []string
}

// ClassicView is what the backend read, under the group's row lock.
type ClassicView struct {
	Now time.Time
	// Group is the group as read: an empty classic group when it has no classic row
	// yet (or does not exist).
	Group *ClassicGroup
	// Found: the groups row exists; ClassicFound: the classic_groups row does.
	Found, ClassicFound bool
	Topics              map[string]TopicMeta
	HighWatermarks      map[catalog.TopicPartition]int64
}

// ClassicOffsets are offsets a classic member commits: TPs[i] is Offsets[i]'s partition.
type ClassicOffsets struct {
	TPs        []catalog.TopicPartition
	Offsets    []catalog.CommitOffset
	MemberID   string
	Generation int32
}

// ClassicWrites is what a step writes: the offsets first (when any), then what changed
// between Before and After (DiffClassic's Changes); NewClassicRow when the group has no
// classic row yet and is classic now.
type ClassicWrites struct {
	Before, After *ClassicGroup
	Changes       ClassicChanges
	NewClassicRow bool
	Offsets       *ClassicOffsets
}

// ClassicBackend runs classic steps.
type ClassicBackend interface {
	// Name is the backend's name, for errors ("postgres", "sqlite").
	Name() string
	// ClassicTx runs one step in one transaction: it takes the group's row lock (after
	// inserting the group when load.Create), reads what load asks for, and calls decide.
	// When decide answers writes, it writes them, commits, and wakes the group's
	// listeners when w.Changes.Notify; when it answers none (or an error), nothing is
	// written, not even the inserted group.
	ClassicTx(ctx context.Context, load ClassicLoad, decide func(*ClassicView) (*ClassicWrites, error)) error
	// ReadClassic reads a classic group in one snapshot, without a lock
	// (ClassicReads.Read).
	ReadClassic(ctx context.Context, group string) (*ClassicGroup, time.Time, error)
}

// ClassicStep runs one classic step: the due transitions (Advance), then step. When
// step fails, only the transitions are written (nothing at all when there were none),
// and step's error is returned with the group as it stands.
func ClassicStep(ctx context.Context, db ClassicBackend, load ClassicLoad,
	step func(v *ClassicView, g *ClassicGroup) (*ClassicOffsets, error)) (*ClassicGroup, time.Time, error) {
	var (
		after   *ClassicGroup
		now     time.Time
		stepErr error
	)
	err := db.ClassicTx(ctx, load, func(v *ClassicView) (*ClassicWrites, error) {
		g := v.Group
		before := g.Clone()
		g.Advance(v.Now)
		advanced := g.Clone()
		offs, err := step(v, g)
		if err != nil {
			g, offs = advanced, nil
		}
		after, now, stepErr = g, v.Now, err
		if !v.Found {
			return nil, nil // nothing to write to a group that does not exist
		}
		ch := DiffClassic(before, g)
		if err != nil && !ch.GroupChanged && len(ch.UpsertMembers)+len(ch.DeleteMembers) == 0 {
			return nil, nil
		}
		return &ClassicWrites{Before: before, After: g, Changes: ch, Offsets: offs,
			NewClassicRow: !v.ClassicFound && g.Type == catalog.GroupTypeClassic}, nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return after, now, stepErr
}

// JoinGroup runs one JoinGroup (see catalog.ClassicGroups).
func JoinGroup(ctx context.Context, db ClassicBackend, j catalog.ClassicJoin) (catalog.ClassicJoinResult, error) {
	if err := catalog.ValidateClassicJoin(j); err != nil {
		return catalog.ClassicJoinResult{}, fmt.Errorf("%s: join group %s: %w", db.Name(), j.Group, err)
	}
	var res catalog.ClassicJoinResult
	_, _, err := ClassicStep(ctx, db, ClassicLoad{Group: j.Group, Create: true}, func(v *ClassicView, g *ClassicGroup) (*ClassicOffsets, error) {
		if g.Type != catalog.GroupTypeClassic {
			t, err := catalog.CheckGroupType(g.Name, g.Type, g.OtherLive, catalog.GroupTypeClassic)
			if err != nil {
				return nil, err
			}
			g.Type = t
		}
		var err error
		res, err = g.Join(v.Now, j)
		return nil, err
	})
	if err != nil {
		return catalog.ClassicJoinResult{}, fmt.Errorf("%s: join group %s: %w", db.Name(), j.Group, err)
	}
	return res, nil
}

// SyncGroup runs one SyncGroup.
func SyncGroup(ctx context.Context, db ClassicBackend, s catalog.ClassicSync) (catalog.ClassicSyncResult, error) {
	if err := catalog.ValidateClassicSync(s); err != nil {
		return catalog.ClassicSyncResult{}, fmt.Errorf("%s: sync group %s: %w", db.Name(), s.Group, err)
	}
	var res catalog.ClassicSyncResult
	_, _, err := ClassicStep(ctx, db, ClassicLoad{Group: s.Group}, func(v *ClassicView, g *ClassicGroup) (*ClassicOffsets, error) {
		var err error
		res, err = g.Sync(v.Now, s)
		return nil, err
	})
	if err != nil {
		return catalog.ClassicSyncResult{}, fmt.Errorf("%s: sync group %s: %w", db.Name(), s.Group, err)
	}
	return res, nil
}

// ClassicHeartbeat runs one Heartbeat.
func ClassicHeartbeat(ctx context.Context, db ClassicBackend, h catalog.ClassicHeartbeat) (bool, error) {
	var rebalancing bool
	_, _, err := ClassicStep(ctx, db, ClassicLoad{Group: h.Group}, func(v *ClassicView, g *ClassicGroup) (*ClassicOffsets, error) {
		var err error
		rebalancing, err = g.Heartbeat(v.Now, h)
		return nil, err
	})
	if err != nil {
		return false, fmt.Errorf("%s: heartbeat %s/%s: %w", db.Name(), h.Group, h.MemberID, err)
	}
	return rebalancing, nil
}

// LeaveGroup runs one LeaveGroup.
func LeaveGroup(ctx context.Context, db ClassicBackend, group string, members []catalog.ClassicLeaver) ([]error, error) {
	var errs []error
	_, _, err := ClassicStep(ctx, db, ClassicLoad{Group: group}, func(v *ClassicView, g *ClassicGroup) (*ClassicOffsets, error) {
		errs = g.Leave(v.Now, members)
		return nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: leave group %s: %w", db.Name(), group, err)
	}
	return errs, nil
}

// CommitClassicOffsets commits a classic member's offsets at its generation.
func CommitClassicOffsets(ctx context.Context, db ClassicBackend, cc catalog.ClassicCommit) error {
	oc := catalog.OffsetCommit{Group: cc.Group, Offsets: cc.Offsets}
	if err := catalog.ValidateOffsetCommit(oc); err != nil {
		return fmt.Errorf("%s: commit offsets of group %s: %w", db.Name(), cc.Group, err)
	}
	names := make([]string, len(cc.Offsets))
	for i, o := range cc.Offsets {
		names[i] = o.Topic
	}
	_, _, err := ClassicStep(ctx, db, ClassicLoad{Group: cc.Group, Topics: names}, func(v *ClassicView, g *ClassicGroup) (*ClassicOffsets, error) {
		if g.Type != catalog.GroupTypeClassic {
			return nil, catalog.ErrNotClassicGroup
		}
		if err := g.CheckCommit(v.Now, cc); err != nil {
			return nil, err
		}
		tps, err := CheckOffsetCommit(NewGroupState(cc.Group, "", v.Now), v.Now, oc, true, v.Topics, v.HighWatermarks)
		if err != nil {
			return nil, err
		}
		if cc.CheckOnly {
			return nil, ErrCheckedOnly
		}
		return &ClassicOffsets{TPs: tps, Offsets: cc.Offsets, MemberID: cc.MemberID, Generation: cc.Generation}, nil
	})
	if err != nil && !errors.Is(err, ErrCheckedOnly) {
		return fmt.Errorf("%s: commit offsets of group %s: %w", db.Name(), cc.Group, err)
	}
	return nil
}

// TickClassic applies the due transitions of a classic group (ClassicReads.Tick).
func TickClassic(ctx context.Context, db ClassicBackend, group string) (*ClassicGroup, time.Time, error) {
	g, now, err := ClassicStep(ctx, db, ClassicLoad{Group: group}, func(_ *ClassicView, g *ClassicGroup) (*ClassicOffsets, error) {
		if g.Type != catalog.GroupTypeClassic {
			return nil, catalog.ErrNotClassicGroup
		}
		return nil, nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%s: tick classic group %s: %w", db.Name(), group, err)
	}
	return g, now, nil
}
