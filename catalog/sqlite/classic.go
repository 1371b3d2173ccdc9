package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Classic groups (catalog.ClassicGroups). Every step runs in one immediate transaction
// on the writer connection, this backend's group lock; the rules are catalog's. Held
// JoinGroup and SyncGroup requests are woken in-process (groupHub): every change to this
// file's groups that this process's waiters care about went through this Catalog.

var _ catalog.ClassicGroups = (*Catalog)(nil)

// groupHub broadcasts the names of classic groups that changed.
type groupHub struct {
	mu   sync.Mutex
	subs map[chan string]struct{}
}

func (h *groupHub) publish(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- name:
		default: // a slow listener misses it and polls
		}
	}
}

// ListenGroups calls fn with the name of each classic group this Catalog changes, until
// ctx ends (nil) or the Catalog is closed (an error).
func (c *Catalog) ListenGroups(ctx context.Context, fn func(group string)) error {
	ch := make(chan string, listenBuffer)
	c.groupHub.mu.Lock()
	if c.groupHub.subs == nil {
		c.groupHub.subs = map[chan string]struct{}{}
	}
	c.groupHub.subs[ch] = struct{}{}
	c.groupHub.mu.Unlock()
	defer func() {
		c.groupHub.mu.Lock()
		delete(c.groupHub.subs, ch)
		c.groupHub.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.hub.closed:
			return errClosed
		case name := <-ch:
			fn(name)
		}
	}
}

// loadClassic reads a group's classic rows at now; found is false when the group does
// not exist (g is then an empty classic group of no type).
func loadClassic(ctx context.Context, q rowQueryer, name string, now time.Time) (g *engine.ClassicGroup, found, classicFound bool, err error) {
	var (
		typ      string
		created  int64
		deadline sql.NullInt64
	)
	err = q.QueryRowContext(ctx, `SELECT type, created_at FROM groups WHERE name = ?`, name).Scan(&typ, &created)
	if errors.Is(err, sql.ErrNoRows) {
		g = engine.NewClassicGroup(name, now)
		g.Type = ""
		return g, false, false, nil
	}
	if err != nil {
		return nil, false, false, err
	}
	g = engine.NewClassicGroup(name, time.UnixMilli(created).UTC())
	g.Type = typ
	err = q.QueryRowContext(ctx, `SELECT state, generation, synced_generation, protocol_type, protocol, leader, deadline
		FROM classic_groups WHERE name = ?`, name).
		Scan(&g.State, &g.Generation, &g.SyncedGeneration, &g.ProtocolType, &g.Protocol, &g.Leader, &deadline)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, false, false, err
	default:
		classicFound = true
		if deadline.Valid {
			g.Deadline = time.UnixMilli(deadline.Int64).UTC()
		}
	}
	if err := loadClassicMembers(ctx, q, g); err != nil {
		return nil, false, false, err
	}
	if g.Type != catalog.GroupTypeClassic {
		if err := q.QueryRowContext(ctx, `SELECT count(*) FROM group_members WHERE group_name = ? AND expires_at > ?`,
			name, now.UnixMilli()).Scan(&g.OtherLive); err != nil {
			return nil, false, false, err
		}
	}
	return g, true, classicFound, nil
}

func loadClassicMembers(ctx context.Context, q rowQueryer, g *engine.ClassicGroup) error {
	rows, err := q.QueryContext(ctx, `SELECT member_id, coalesce(instance_id, ''), client_id, client_host, session_timeout_ms,
		rebalance_timeout_ms, protocols, topics, assignment, generation, joining, syncing, pending, session_deadline, joined_at
		FROM classic_members WHERE group_name = ?`, g.Name)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			m                                      engine.ClassicMember
			session, rebalance, deadline, joinedAt int64
			protocols                              []byte
			topics                                 sql.NullString
		)
		if err := rows.Scan(&m.ID, &m.InstanceID, &m.ClientID, &m.ClientHost, &session, &rebalance, &protocols, &topics,
			&m.Assignment, &m.Generation, &m.Joining, &m.Syncing, &m.Pending, &deadline, &joinedAt); err != nil {
			return err
		}
		if m.Protocols, err = engine.DecodeClassicProtocols(protocols); err != nil {
			return fmt.Errorf("member %s: %w", m.ID, err)
		}
		if topics.Valid {
			if err := json.Unmarshal([]byte(topics.String), &m.Topics); err != nil {
				return fmt.Errorf("member %s: topics: %w", m.ID, err)
			}
		}
		m.SessionTimeout, m.RebalanceTimeout = time.Duration(session)*time.Millisecond, time.Duration(rebalance)*time.Millisecond
		m.SessionDeadline, m.JoinedAt = time.UnixMilli(deadline).UTC(), time.UnixMilli(joinedAt).UTC()
		g.Members[m.ID] = &m
	}
	return rows.Err()
}

// writeClassic stores what changed between before and after.
func writeClassic(ctx context.Context, tx *sql.Tx, before, after *engine.ClassicGroup, ch engine.ClassicChanges, newRow bool) error {
	name := after.Name
	exec := func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	if ch.TypeChanged {
		// The other type's members are all gone (CheckGroupType): their rows go too.
		if err := errors.Join(
			exec(`UPDATE groups SET type = ? WHERE name = ?`, after.Type, name),
			exec(`DELETE FROM group_assignments WHERE group_name = ?`, name),
			exec(`DELETE FROM group_members WHERE group_name = ?`, name),
		); err != nil {
			return err
		}
		if after.Type != catalog.GroupTypeClassic {
			if err := exec(`DELETE FROM classic_members WHERE group_name = ?`, name); err != nil {
				return err
			}
		}
	}
	if ch.GroupChanged || newRow {
		deadline := sql.NullInt64{Int64: after.Deadline.UnixMilli(), Valid: !after.Deadline.IsZero()}
		if err := exec(`INSERT INTO classic_groups (name, state, generation, synced_generation, protocol_type, protocol, leader, deadline)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET state = excluded.state, generation = excluded.generation,
				synced_generation = excluded.synced_generation, protocol_type = excluded.protocol_type,
				protocol = excluded.protocol, leader = excluded.leader, deadline = excluded.deadline`,
			name, after.State, after.Generation, after.SyncedGeneration, after.ProtocolType, after.Protocol, after.Leader, deadline); err != nil {
			return err
		}
	}
	for _, id := range ch.DeleteMembers {
		if err := exec(`DELETE FROM classic_members WHERE group_name = ? AND member_id = ?`, name, id); err != nil {
			return err
		}
	}
	for _, m := range ch.UpsertMembers {
		var topics sql.NullString
		if m.Topics != nil {
			b, err := json.Marshal(m.Topics)
			if err != nil {
				return err
			}
			topics = sql.NullString{String: string(b), Valid: true}
		}
		if err := exec(`INSERT INTO classic_members (group_name, member_id, instance_id, client_id, client_host,
				session_timeout_ms, rebalance_timeout_ms, protocols, topics, assignment, generation, joining,
				syncing, pending, session_deadline, joined_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_name, member_id) DO UPDATE SET instance_id = excluded.instance_id,
				client_id = excluded.client_id, client_host = excluded.client_host,
				session_timeout_ms = excluded.session_timeout_ms, rebalance_timeout_ms = excluded.rebalance_timeout_ms,
				protocols = excluded.protocols, topics = excluded.topics, assignment = excluded.assignment,
				generation = excluded.generation, joining = excluded.joining, syncing = excluded.syncing,
				pending = excluded.pending, session_deadline = excluded.session_deadline, joined_at = excluded.joined_at`,
			name, m.ID, nullString(m.InstanceID), m.ClientID, m.ClientHost, m.SessionTimeout.Milliseconds(),
			m.RebalanceTimeout.Milliseconds(), engine.EncodeClassicProtocols(m.Protocols), topics, m.Assignment,
			m.Generation, m.Joining, m.Syncing, m.Pending, m.SessionDeadline.UnixMilli(), m.JoinedAt.UnixMilli()); err != nil {
			return err
		}
	}
	for _, id := range ch.DeleteMirror {
		if err := exec(`DELETE FROM group_members WHERE group_name = ? AND member_id = ?`, name, id); err != nil {
			return err
		}
	}
	for _, m := range ch.UpsertMirror {
		topics, err := json.Marshal(m.Topics)
		if err != nil {
			return err
		}
		if err := exec(`INSERT INTO group_members
			(group_name, member_id, epoch, prev_epoch, topics, session_timeout_ms, expires_at, joined_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_name, member_id) DO UPDATE SET
				epoch = excluded.epoch, prev_epoch = excluded.prev_epoch, topics = excluded.topics,
				session_timeout_ms = excluded.session_timeout_ms, expires_at = excluded.expires_at,
				joined_at = excluded.joined_at`,
			name, m.ID, m.Epoch, m.PrevEpoch, string(topics), m.SessionTimeout.Milliseconds(),
			m.ExpiresAt.UnixMilli(), m.JoinedAt.UnixMilli()); err != nil {
			return err
		}
	}
	return nil
}

// ClassicTx runs one classic step (engine.ClassicBackend) in one immediate transaction.
func (e sqliteEngine) ClassicTx(ctx context.Context, load engine.ClassicLoad, decide func(*engine.ClassicView) (*engine.ClassicWrites, error)) error {
	tx, err := e.c.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return err
	}
	if load.Create {
		if _, err := tx.ExecContext(ctx, `INSERT INTO groups (name, assignor, epoch, created_at, type) VALUES (?, ?, 0, ?, 'classic')
			ON CONFLICT (name) DO NOTHING`, load.Group, catalog.DefaultAssignor, now.UnixMilli()); err != nil {
			return err
		}
	}
	v := &engine.ClassicView{Now: now}
	if v.Group, v.Found, v.ClassicFound, err = loadClassic(ctx, tx, load.Group, now); err != nil {
		return err
	}
	if len(load.Topics) > 0 {
		if v.Topics, err = loadTopics(ctx, tx, load.Topics); err != nil {
			return err
		}
		if v.HighWatermarks, err = loadHighWatermarks(ctx, tx, v.Topics); err != nil {
			return err
		}
	}
	w, err := decide(v)
	if err != nil || w == nil {
		return err // rolled back: nothing to write
	}
	if o := w.Offsets; o != nil {
		for i, off := range o.Offsets {
			if _, err := tx.ExecContext(ctx, `INSERT INTO group_offsets
				(group_name, topic_id, partition, committed_offset, metadata, member_id, member_epoch, committed_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET
					committed_offset = excluded.committed_offset, metadata = excluded.metadata,
					member_id = excluded.member_id, member_epoch = excluded.member_epoch,
					committed_at = excluded.committed_at`,
				load.Group, o.TPs[i].TopicID, o.TPs[i].Partition, off.Offset, off.Metadata, o.MemberID, o.Generation, now.UnixMilli()); err != nil {
				return err
			}
		}
	}
	if err := writeClassic(ctx, tx, w.Before, w.After, w.Changes, w.NewClassicRow); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if w.Changes.Notify {
		e.c.groupHub.publish(load.Group)
	}
	return nil
}

// ReadClassic reads a classic group in one snapshot, without a lock
// (engine.ClassicBackend).
func (e sqliteEngine) ReadClassic(ctx context.Context, group string) (*engine.ClassicGroup, time.Time, error) {
	c := e.c
	g, now, err := c.readClassicTx(ctx, group)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sqlite: read classic group %s: %w", group, err)
	}
	return g, now, nil
}

func (c *Catalog) readClassicTx(ctx context.Context, group string) (*engine.ClassicGroup, time.Time, error) {
	tx, err := c.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, time.Time{}, err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return nil, time.Time{}, err
	}
	g, found, _, err := loadClassic(ctx, tx, group, now)
	switch {
	case err != nil:
		return nil, time.Time{}, err
	case !found:
		return nil, time.Time{}, fmt.Errorf("%w: %w: %s", catalog.ErrNotClassicGroup, catalog.ErrGroupNotFound, group)
	case g.Type != catalog.GroupTypeClassic:
		return nil, time.Time{}, fmt.Errorf("%w: %s is a %s group", catalog.ErrNotClassicGroup, group, g.Type)
	}
	return g, now, nil
}

// GroupKinds lists every group's type (and a classic group's state).
func (c *Catalog) GroupKinds(ctx context.Context) ([]catalog.GroupKind, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT g.name, g.type, coalesce(c.state, ''), coalesce(c.protocol_type, '')
		FROM groups g LEFT JOIN classic_groups c ON c.name = g.name ORDER BY g.name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: group kinds: %w", err)
	}
	defer rows.Close()
	var out []catalog.GroupKind
	for rows.Next() {
		var k catalog.GroupKind
		if err := rows.Scan(&k.Name, &k.Type, &k.ClassicState, &k.ProtocolType); err != nil {
			return nil, fmt.Errorf("sqlite: group kinds: %w", err)
		}
		if k.Type != catalog.GroupTypeClassic {
			k.ClassicState, k.ProtocolType = "", ""
		} else if k.ClassicState == "" {
			k.ClassicState = catalog.ClassicEmpty
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: group kinds: %w", err)
	}
	return out, nil
}

// DeleteOffsets deletes a group's committed offsets of partitions no live member's
// subscription covers.
func (c *Catalog) DeleteOffsets(ctx context.Context, group string, offsets []catalog.TopicPartitionName) ([]error, error) {
	errs, err := c.deleteOffsets(ctx, group, offsets)
	if err != nil {
		return nil, fmt.Errorf("sqlite: delete offsets of group %s: %w", group, err)
	}
	return errs, nil
}

func (c *Catalog) deleteOffsets(ctx context.Context, group string, offsets []catalog.TopicPartitionName) ([]error, error) {
	if err := catalog.ValidateGroupName(group); err != nil {
		return nil, fmt.Errorf("%w: %w", catalog.ErrGroupNotFound, err)
	}
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return nil, err
	}
	st, found, err := loadGroup(ctx, tx, group)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, catalog.ErrGroupNotFound
	}
	var subscribed []string
	for _, m := range st.Members {
		if m.ExpiresAt.After(now) {
			subscribed = append(subscribed, m.Topics...)
		}
	}
	names := make([]string, len(offsets))
	for i, o := range offsets {
		names[i] = o.Topic
	}
	topics, err := loadTopics(ctx, tx, slices.Compact(slices.Sorted(slices.Values(names))))
	if err != nil {
		return nil, err
	}
	var delErr error
	errs := engine.CheckDeleteOffsets(offsets, subscribed, topics, func(tp catalog.TopicPartition) {
		_, err := tx.ExecContext(ctx, `DELETE FROM group_offsets WHERE group_name = ? AND topic_id = ? AND partition = ?`, group, tp.TopicID, tp.Partition)
		delErr = errors.Join(delErr, err)
	})
	if delErr != nil {
		return nil, delErr
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return errs, nil
}
