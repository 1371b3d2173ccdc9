package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Consumer groups. Every write runs in one immediate transaction on the writer
// connection, which excludes every other writer: that is the group lock (and, since it
// is one lock for the whole file, the lock order cannot be broken). The rules are
// catalog's: this file only loads and stores rows.

var _ catalog.Groups = (*Catalog)(nil)

// rowQueryer is a transaction or a pool.
type rowQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// loadGroup reads a group's rows; found is false when it does not exist.
func loadGroup(ctx context.Context, q rowQueryer, name string) (st *engine.GroupState, found bool, err error) {
	var (
		assignor, typ string
		epoch         int32
		created       int64
	)
	err = q.QueryRowContext(ctx, `SELECT assignor, epoch, created_at, type FROM groups WHERE name = ?`, name).Scan(&assignor, &epoch, &created, &typ)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	st = engine.NewGroupState(name, assignor, time.UnixMilli(created).UTC())
	st.Epoch, st.Type = epoch, typ

	rows, err := q.QueryContext(ctx, `SELECT member_id, epoch, prev_epoch, topics, session_timeout_ms, expires_at, joined_at,
		task_lags, standby_replicas FROM group_members WHERE group_name = ?`, name)
	if err != nil {
		return nil, false, err
	}
	for rows.Next() {
		var (
			m                        engine.GroupMember
			topics, lags             string
			session, expires, joined int64
		)
		if err := rows.Scan(&m.ID, &m.Epoch, &m.PrevEpoch, &topics, &session, &expires, &joined, &lags, &m.StandbyReplicas); err != nil {
			rows.Close()
			return nil, false, err
		}
		if err := json.Unmarshal([]byte(lags), &m.Lags); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("member %s: task_lags: %w", m.ID, err)
		}
		if err := json.Unmarshal([]byte(topics), &m.Topics); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("member %s: topics: %w", m.ID, err)
		}
		m.SessionTimeout = time.Duration(session) * time.Millisecond
		m.ExpiresAt = time.UnixMilli(expires).UTC()
		m.JoinedAt = time.UnixMilli(joined).UTC()
		st.Members[m.ID] = &m
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}

	rows, err = q.QueryContext(ctx, `SELECT topic_id, partition, coalesce(owner, ''), coalesce(target, ''), owner_epoch,
		coalesce(released_by, '') FROM group_assignments WHERE group_name = ?`, name)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			tp catalog.TopicPartition
			o  engine.Ownership
		)
		if err := rows.Scan(&tp.TopicID, &tp.Partition, &o.Owner, &o.Target, &o.Epoch, &o.ReleasedBy); err != nil {
			return nil, false, err
		}
		st.Owners[tp] = &o
	}
	return st, true, rows.Err()
}

// loadTopics reads the live topics among names.
func loadTopics(ctx context.Context, q rowQueryer, names []string) (map[string]engine.TopicMeta, error) {
	out := map[string]engine.TopicMeta{}
	if len(names) == 0 {
		return out, nil
	}
	list, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT id, name, partitions FROM topics
		WHERE deleted_at IS NULL AND name IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var t engine.TopicMeta
		if err := rows.Scan(&t.ID, &t.Name, &t.Partitions); err != nil {
			return nil, err
		}
		out[t.Name] = t
	}
	return out, rows.Err()
}

// loadHighWatermarks reads the high watermarks of every partition of topics.
func loadHighWatermarks(ctx context.Context, q rowQueryer, topics map[string]engine.TopicMeta) (map[catalog.TopicPartition]int64, error) {
	out := map[catalog.TopicPartition]int64{}
	ids := make([]int64, 0, len(topics))
	for _, t := range topics {
		ids = append(ids, t.ID)
	}
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT topic_id, partition, high_watermark FROM partitions
		WHERE topic_id IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			tp catalog.TopicPartition
			hw int64
		)
		if err := rows.Scan(&tp.TopicID, &tp.Partition, &hw); err != nil {
			return nil, err
		}
		out[tp] = hw
	}
	return out, rows.Err()
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// writeGroup stores what changed between before and after.
func writeGroup(ctx context.Context, tx *sql.Tx, before, after *engine.GroupState) error {
	ch := engine.DiffGroup(before, after)
	name := after.Name
	if ch.GroupChanged {
		if _, err := tx.ExecContext(ctx, `UPDATE groups SET epoch = ?, assignor = ? WHERE name = ?`, after.Epoch, after.Assignor, name); err != nil {
			return err
		}
	}
	if before.Type != after.Type { // an empty classic group became a consumer group
		if _, err := tx.ExecContext(ctx, `UPDATE groups SET type = ? WHERE name = ?`, after.Type, name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM classic_members WHERE group_name = ?`, name); err != nil {
			return err
		}
	}
	for _, id := range ch.DeleteMembers {
		if _, err := tx.ExecContext(ctx, `DELETE FROM group_members WHERE group_name = ? AND member_id = ?`, name, id); err != nil {
			return err
		}
	}
	for _, m := range ch.UpsertMembers {
		topics, err := json.Marshal(m.Topics)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO group_members
			(group_name, member_id, epoch, prev_epoch, topics, session_timeout_ms, expires_at, joined_at,
			 task_lags, standby_replicas)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_name, member_id) DO UPDATE SET
				epoch = excluded.epoch, prev_epoch = excluded.prev_epoch, topics = excluded.topics,
				session_timeout_ms = excluded.session_timeout_ms, expires_at = excluded.expires_at,
				joined_at = excluded.joined_at, task_lags = excluded.task_lags,
				standby_replicas = excluded.standby_replicas`,
			name, m.ID, m.Epoch, m.PrevEpoch, string(topics), m.SessionTimeout.Milliseconds(),
			m.ExpiresAt.UnixMilli(), m.JoinedAt.UnixMilli(), engine.EncodeTaskLags(m.Lags), m.StandbyReplicas); err != nil {
			return err
		}
	}
	for _, tp := range ch.DeleteOwners {
		if _, err := tx.ExecContext(ctx, `DELETE FROM group_assignments WHERE group_name = ? AND topic_id = ? AND partition = ?`,
			name, tp.TopicID, tp.Partition); err != nil {
			return err
		}
	}
	for tp, o := range ch.UpsertOwners {
		if _, err := tx.ExecContext(ctx, `INSERT INTO group_assignments (group_name, topic_id, partition, owner, target, owner_epoch, released_by)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET
				owner = excluded.owner, target = excluded.target, owner_epoch = excluded.owner_epoch,
				released_by = excluded.released_by`,
			name, tp.TopicID, tp.Partition, nullString(o.Owner), nullString(o.Target), o.Epoch, nullString(o.ReleasedBy)); err != nil {
			return err
		}
	}
	return nil
}

// GroupTx runs one group call (engine.GroupBackend) in one immediate transaction; the
// one writer holds the whole file, so the lock load asks for is implied.
func (e sqliteEngine) GroupTx(ctx context.Context, load engine.GroupLoad, decide func(*engine.GroupView) (*engine.GroupWrites, error)) error {
	return e.c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		// The audit record of an administrative call (a reset) commits with it
		// (security.go); other calls carry none.
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		if load.Create {
			assignor := load.Assignor
			if assignor == "" {
				assignor = catalog.DefaultAssignor
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO groups (name, assignor, epoch, created_at) VALUES (?, ?, 0, ?)
				ON CONFLICT (name) DO NOTHING`, load.Group, assignor, now.UnixMilli()); err != nil {
				return err
			}
		}
		st, found, err := loadGroup(ctx, tx, load.Group)
		if err != nil {
			return err
		}
		v := &engine.GroupView{Now: now}
		if found {
			v.State = st
		}
		if load.SubscribedTopics {
			names := load.ExtraTopics
			if v.State != nil {
				names = v.State.SubscribedTopics(load.ExtraTopics)
			}
			if v.Topics, err = loadTopics(ctx, tx, names); err != nil {
				return err
			}
		}
		if len(load.CommitTopics) > 0 {
			if v.Topics, err = loadTopics(ctx, tx, load.CommitTopics); err != nil {
				return err
			}
			if v.HighWatermarks, err = loadHighWatermarks(ctx, tx, v.Topics); err != nil {
				return err
			}
		}
		w, err := decide(v)
		if err != nil {
			return err
		}
		if w.Before != nil {
			if err := writeGroup(ctx, tx, w.Before, w.After); err != nil {
				return err
			}
		}
		return writeGroupOffsets(ctx, tx, w.Offsets, now)
	})
}

// GroupOffsets lists a group's committed offsets of live topics.
func (c *Catalog) GroupOffsets(ctx context.Context, group string) ([]catalog.GroupOffset, error) {
	offs, err := c.groupOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("sqlite: offsets of group %s: %w", group, err)
	}
	return offs, nil
}

func (c *Catalog) groupOffsets(ctx context.Context, group string) ([]catalog.GroupOffset, error) {
	if err := catalog.ValidateGroupName(group); err != nil {
		return nil, fmt.Errorf("%w: %w", catalog.ErrGroupNotFound, err)
	}
	tx, err := c.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM groups WHERE name = ?`, group).Scan(&n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s", catalog.ErrGroupNotFound, group)
	}
	rows, err := tx.QueryContext(ctx, `SELECT t.name, o.topic_id, o.partition, o.committed_offset, o.metadata, o.committed_at
		FROM group_offsets o JOIN topics t ON t.id = o.topic_id AND t.deleted_at IS NULL
		WHERE o.group_name = ? ORDER BY t.name, o.partition`, group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []catalog.GroupOffset
	for rows.Next() {
		var (
			o  catalog.GroupOffset
			at int64
		)
		if err := rows.Scan(&o.Topic, &o.TopicID, &o.Partition, &o.Offset, &o.Metadata, &at); err != nil {
			return nil, err
		}
		o.CommittedAt = time.UnixMilli(at).UTC()
		out = append(out, o)
	}
	return out, rows.Err()
}

// GroupLag answers lag per partition (engine.GroupLagOf).
func (c *Catalog) GroupLag(ctx context.Context, group string) ([]catalog.PartitionLag, error) {
	l, err := engine.GroupLagOf(ctx, c, group)
	if err != nil {
		return nil, fmt.Errorf("sqlite: lag of group %s: %w", group, err)
	}
	return l, nil
}

// DescribeGroup reads a group in one snapshot.
func (c *Catalog) DescribeGroup(ctx context.Context, group string) (catalog.GroupDescription, error) {
	d, err := c.describeGroup(ctx, group)
	if err != nil {
		return catalog.GroupDescription{}, fmt.Errorf("sqlite: describe group %s: %w", group, err)
	}
	return d, nil
}

func (c *Catalog) describeGroup(ctx context.Context, group string) (catalog.GroupDescription, error) {
	if err := catalog.ValidateGroupName(group); err != nil {
		return catalog.GroupDescription{}, fmt.Errorf("%w: %w", catalog.ErrGroupNotFound, err)
	}
	tx, err := c.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return catalog.GroupDescription{}, err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return catalog.GroupDescription{}, err
	}
	st, found, err := loadGroup(ctx, tx, group)
	if err != nil {
		return catalog.GroupDescription{}, err
	}
	if !found {
		return catalog.GroupDescription{}, fmt.Errorf("%w: %s", catalog.ErrGroupNotFound, group)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, name FROM topics WHERE deleted_at IS NULL AND id IN
		(SELECT topic_id FROM group_assignments WHERE group_name = ?)`, group)
	if err != nil {
		return catalog.GroupDescription{}, err
	}
	defer rows.Close()
	names := map[int64]string{}
	for rows.Next() {
		var (
			id   int64
			name string
		)
		if err := rows.Scan(&id, &name); err != nil {
			return catalog.GroupDescription{}, err
		}
		names[id] = name
	}
	if err := rows.Err(); err != nil {
		return catalog.GroupDescription{}, err
	}
	return st.Describe(now, names), nil
}

// ListGroups lists every group with its state at the database clock.
func (c *Catalog) ListGroups(ctx context.Context) ([]catalog.GroupSummary, error) {
	out, err := c.listGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list groups: %w", err)
	}
	return out, nil
}

func (c *Catalog) listGroups(ctx context.Context) ([]catalog.GroupSummary, error) {
	tx, err := c.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return nil, err
	}
	// A revocation pending from an expired member is not reconciling: the next
	// heartbeat frees it.
	rows, err := tx.QueryContext(ctx, `SELECT g.name, g.assignor,
		(SELECT count(*) FROM group_members m WHERE m.group_name = g.name AND m.expires_at > ?1),
		EXISTS (SELECT 1 FROM group_assignments a WHERE a.group_name = g.name AND a.owner IS NOT a.target
			AND (a.owner IS NULL OR a.owner IN (SELECT member_id FROM group_members m
				WHERE m.group_name = g.name AND m.expires_at > ?1)))
		FROM groups g ORDER BY g.name`, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []catalog.GroupSummary
	for rows.Next() {
		var (
			s           catalog.GroupSummary
			reconciling bool
		)
		if err := rows.Scan(&s.Name, &s.Assignor, &s.Members, &reconciling); err != nil {
			return nil, err
		}
		switch {
		case s.Members == 0:
			s.State = catalog.GroupEmpty
		case reconciling:
			s.State = catalog.GroupReconciling
		default:
			s.State = catalog.GroupStable
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// DeleteGroup deletes a group without live members, with its offsets.
func (c *Catalog) DeleteGroup(ctx context.Context, group string) error {
	if err := c.deleteGroup(ctx, group); err != nil {
		return fmt.Errorf("sqlite: delete group %s: %w", group, err)
	}
	return nil
}

func (c *Catalog) deleteGroup(ctx context.Context, group string) error {
	if err := catalog.ValidateGroupName(group); err != nil {
		return fmt.Errorf("%w: %w", catalog.ErrGroupNotFound, err)
	}
	return c.groupTx(ctx, group, func(tx *sql.Tx, now time.Time, st *engine.GroupState, found bool) error {
		if !found {
			return fmt.Errorf("%w: %s", catalog.ErrGroupNotFound, group)
		}
		if n := st.LiveMembers(now); n > 0 {
			ids := make([]string, 0, n)
			for id, m := range st.Members {
				if m.ExpiresAt.After(now) {
					ids = append(ids, id)
				}
			}
			slices.Sort(ids)
			return fmt.Errorf("%w: %d live members (%s)", catalog.ErrGroupNotEmpty, n, ids[0])
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM groups WHERE name = ?`, group)
		return err
	})
}

// groupTx runs fn in one immediate transaction (writeTx) with the group loaded under it
// (found false: there is none), and commits when fn succeeds.
func (c *Catalog) groupTx(ctx context.Context, group string, fn func(tx *sql.Tx, now time.Time, st *engine.GroupState, found bool) error) error {
	return c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		// The audit record of an administrative call (a reset, a delete) commits with it
		// (security.go); other calls carry none.
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		st, found, err := loadGroup(ctx, tx, group)
		if err != nil {
			return err
		}
		return fn(tx, now, st, found)
	})
}
