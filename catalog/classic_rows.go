package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// What the backends do with a classic group besides running its state machine
// (classic_engine.go): the rows to write after a step, the mirror rows that make its
// members live members for every other rule, and the polls and describe they share.

// Mirror is the group_members row of each member (not pending ids): epoch and previous
// epoch are its generation, and the lease the time until which the classic rules keep
// it — its session, or for a member waiting in a rebalance the rebalance's deadline
// plus a session (its session restarts when the rebalance completes).
func (g *ClassicGroup) Mirror() map[string]*GroupMember {
	out := make(map[string]*GroupMember, len(g.Members))
	for id, m := range g.Members {
		if m.Pending {
			continue
		}
		until := m.SessionDeadline
		if (m.Joining || m.Syncing) && !g.Deadline.IsZero() {
			until = maxTime(until, g.Deadline.Add(m.SessionTimeout))
		}
		topics := m.Topics
		if topics == nil {
			topics = []string{}
		}
		out[id] = &GroupMember{ID: id, Epoch: m.Generation, PrevEpoch: m.Generation, Topics: topics,
			SessionTimeout: m.SessionTimeout, ExpiresAt: until, JoinedAt: m.JoinedAt}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ClassicChanges is what a backend writes after a classic step: DiffClassic(before,
// after).
type ClassicChanges struct {
	GroupChanged  bool // the classic_groups row (state, generation, protocol, leader, deadline)
	TypeChanged   bool // the groups row's type
	UpsertMembers []*ClassicMember
	DeleteMembers []string
	// The mirror rows in group_members.
	UpsertMirror []*GroupMember
	DeleteMirror []string
	// Notify: a change a waiting JoinGroup or SyncGroup may be waiting for (state,
	// generation, membership), not just a renewed session.
	Notify bool
}

// DiffClassic says which rows changed between before and after.
func DiffClassic(before, after *ClassicGroup) ClassicChanges {
	var ch ClassicChanges
	ch.TypeChanged = before.Type != after.Type
	ch.GroupChanged = before.State != after.State || before.Generation != after.Generation ||
		before.ProtocolType != after.ProtocolType || before.Protocol != after.Protocol ||
		before.Leader != after.Leader || before.SyncedGeneration != after.SyncedGeneration ||
		!before.Deadline.Equal(after.Deadline)
	ch.Notify = ch.GroupChanged || ch.TypeChanged
	for _, id := range slices.Sorted(mapKeys(after.Members)) {
		m := after.Members[id]
		b := before.Members[id]
		if b == nil || !sameClassicMember(b, m) {
			ch.UpsertMembers = append(ch.UpsertMembers, m)
			if b == nil || b.Pending != m.Pending || b.Joining != m.Joining || b.Syncing != m.Syncing || b.Generation != m.Generation {
				ch.Notify = true
			}
		}
	}
	for _, id := range slices.Sorted(mapKeys(before.Members)) {
		if after.Members[id] == nil {
			ch.DeleteMembers = append(ch.DeleteMembers, id)
			ch.Notify = true
		}
	}
	bm, am := before.Mirror(), after.Mirror()
	for _, id := range slices.Sorted(mapKeys(am)) {
		if b := bm[id]; b == nil || !sameMember(b, am[id]) {
			ch.UpsertMirror = append(ch.UpsertMirror, am[id])
		}
	}
	for _, id := range slices.Sorted(mapKeys(bm)) {
		if am[id] == nil {
			ch.DeleteMirror = append(ch.DeleteMirror, id)
		}
	}
	return ch
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func sameClassicMember(a, b *ClassicMember) bool {
	return a.InstanceID == b.InstanceID && a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		a.SessionTimeout == b.SessionTimeout && a.RebalanceTimeout == b.RebalanceTimeout &&
		sameProtocols(a.Protocols, b.Protocols) && slices.Equal(a.Topics, b.Topics) &&
		bytes.Equal(a.Assignment, b.Assignment) && a.Generation == b.Generation &&
		a.Joining == b.Joining && a.Syncing == b.Syncing && a.Pending == b.Pending &&
		a.SessionDeadline.Equal(b.SessionDeadline) && a.JoinedAt.Equal(b.JoinedAt)
}

// Describe renders g for DescribeClassicGroup.
func (g *ClassicGroup) Describe() ClassicDescription {
	d := ClassicDescription{Name: g.Name, State: g.State, Generation: g.Generation, ProtocolType: g.ProtocolType, Protocol: g.Protocol, Leader: g.Leader}
	for _, id := range slices.Sorted(mapKeys(g.Members)) {
		m := g.Members[id]
		if m.Pending {
			continue
		}
		md := ClassicMemberDescription{ID: id, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Generation: m.Generation, Assignment: m.Assignment}
		for _, p := range m.Protocols {
			if p.Name == g.Protocol {
				md.Metadata = p.Metadata
			}
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// ClassicReads is what a backend gives the calls it shares with the other: Read reads
// a classic group without a lock (ErrNotClassicGroup for a consumer group or none), Tick
// applies its due transitions under the lock.
type ClassicReads struct {
	Read, Tick func(ctx context.Context, group string) (*ClassicGroup, time.Time, error)
}

// PollJoin is ClassicGroups.PollJoin.
func (r ClassicReads) PollJoin(ctx context.Context, group, member, instance string, wait int32) (ClassicJoinAnswer, ClassicPoll, error) {
	var a ClassicJoinAnswer
	p, err := r.poll(ctx, group, func(g *ClassicGroup) (done bool, err error) {
		a, done, err = g.JoinAnswerFor(member, instance, wait)
		return done, err
	})
	return a, p, err
}

// PollSync is ClassicGroups.PollSync.
func (r ClassicReads) PollSync(ctx context.Context, group, member, instance string, generation int32) (ClassicSyncResult, ClassicPoll, error) {
	var s ClassicSyncResult
	p, err := r.poll(ctx, group, func(g *ClassicGroup) (done bool, err error) {
		s, done, err = g.SyncAnswerFor(member, instance, generation)
		return done, err
	})
	return s, p, err
}

// Describe is ClassicGroups.DescribeClassicGroup.
func (r ClassicReads) Describe(ctx context.Context, group string) (ClassicDescription, error) {
	g, _, err := r.Read(ctx, group)
	if err != nil {
		return ClassicDescription{}, err
	}
	return g.Describe(), nil
}

// poll reads the group, applies a due transition first, and answers from it. A group
// deleted or of the other type meanwhile means the member is gone.
func (r ClassicReads) poll(ctx context.Context, group string, eval func(*ClassicGroup) (bool, error)) (ClassicPoll, error) {
	g, now, err := r.Read(ctx, group)
	if err == nil && g.Due(now) {
		g, now, err = r.Tick(ctx, group)
	}
	if errors.Is(err, ErrNotClassicGroup) {
		return ClassicPoll{Done: true}, fmt.Errorf("%w: the group was deleted or changed type", ErrUnknownMember)
	}
	if err != nil {
		return ClassicPoll{}, err
	}
	done, err := eval(g)
	p := ClassicPoll{Done: done || err != nil}
	if next := g.NextDeadline(); !next.IsZero() {
		p.Wait = max(next.Sub(now), 0)
	}
	return p, err
}
