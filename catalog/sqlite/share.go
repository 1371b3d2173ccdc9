package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Share groups: the engine's scripts (engine/share.go) over these statements, each call
// one immediate transaction on the writer connection, which serialises it with every
// commit; so the share-partition rows need no locks of their own.

var _ catalog.ShareGroups = (*Catalog)(nil)

// ShareTx runs a share-group call in one immediate transaction (engine.ShareBackend).
func (e sqliteEngine) ShareTx(ctx context.Context, fn func(engine.ShareStmts) error) error {
	return e.c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error { return fn(sqliteShare{tx, now}) })
}

// sqliteShare is a share call's statements (engine.ShareStmts); now is the clock
// writeTx read.
type sqliteShare struct {
	tx  *sql.Tx
	now time.Time
}

func (q sqliteShare) Now(context.Context) (time.Time, error) { return q.now, nil }

func (q sqliteShare) ShareGroupRow(ctx context.Context, group string) (int32, bool, error) {
	var epoch int32
	err := q.tx.QueryRowContext(ctx, `SELECT epoch FROM share_groups WHERE name = ?`, group).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return epoch, err == nil, err
}

func (q sqliteShare) ConsumerGroupExists(ctx context.Context, group string) (bool, error) {
	var n int
	err := q.tx.QueryRowContext(ctx, `SELECT count(*) FROM groups WHERE name = ?`, group).Scan(&n)
	return n > 0, err
}

func (q sqliteShare) InsertShareGroup(ctx context.Context, group string) (bool, error) {
	res, err := q.tx.ExecContext(ctx, `INSERT INTO share_groups (name, epoch, created_at) VALUES (?, 0, ?) ON CONFLICT DO NOTHING`, group, q.now.UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (q sqliteShare) SetShareGroupEpoch(ctx context.Context, group string, epoch int32) error {
	_, err := q.tx.ExecContext(ctx, `UPDATE share_groups SET epoch = ? WHERE name = ?`, epoch, group)
	return err
}

func (q sqliteShare) DeleteShareGroup(ctx context.Context, group string) error {
	_, err := q.tx.ExecContext(ctx, `DELETE FROM share_groups WHERE name = ?`, group)
	return err
}

func (q sqliteShare) ListShareGroups(ctx context.Context) ([]string, error) {
	rows, err := q.tx.QueryContext(ctx, `SELECT name FROM share_groups ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

func (q sqliteShare) ShareMembers(ctx context.Context, group string) ([]engine.ShareMemberRow, error) {
	rows, err := q.tx.QueryContext(ctx, `SELECT member_id, epoch, topics, session_timeout_ms, expires_at
		FROM share_members WHERE group_name = ? ORDER BY member_id`, group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.ShareMemberRow
	for rows.Next() {
		var (
			m             engine.ShareMemberRow
			topics        string
			session, expi int64
		)
		if err := rows.Scan(&m.ID, &m.Epoch, &topics, &session, &expi); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(topics), &m.Topics); err != nil {
			return nil, err
		}
		m.Session, m.ExpiresAt = time.Duration(session)*time.Millisecond, time.UnixMilli(expi)
		out = append(out, m)
	}
	return out, rows.Err()
}

func (q sqliteShare) PutShareMember(ctx context.Context, group string, m engine.ShareMemberRow) error {
	topics, err := json.Marshal(m.Topics)
	if err != nil {
		return err
	}
	_, err = q.tx.ExecContext(ctx, `INSERT INTO share_members (group_name, member_id, epoch, topics, session_timeout_ms, expires_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (group_name, member_id) DO UPDATE SET epoch = excluded.epoch,
		topics = excluded.topics, session_timeout_ms = excluded.session_timeout_ms, expires_at = excluded.expires_at`,
		group, m.ID, m.Epoch, string(topics), m.Session.Milliseconds(), m.ExpiresAt.UnixMilli())
	return err
}

func (q sqliteShare) DeleteShareMember(ctx context.Context, group, id string) error {
	_, err := q.tx.ExecContext(ctx, `DELETE FROM share_members WHERE group_name = ? AND member_id = ?`, group, id)
	return err
}

func (q sqliteShare) Topics(ctx context.Context, names []string) (map[string]engine.TopicMeta, error) {
	return topicsBy(ctx, q, "name", names)
}

func (q sqliteShare) TopicsByID(ctx context.Context, ids []int64) (map[int64]engine.TopicMeta, error) {
	return topicsBy(ctx, q, "id", ids)
}

// topicsBy reads the live topics whose column (name or id) is one of keys; missing ones
// are left out.
func topicsBy[K comparable](ctx context.Context, q sqliteShare, column string, keys []K) (map[K]engine.TopicMeta, error) {
	out := map[K]engine.TopicMeta{}
	for _, k := range keys {
		if _, ok := out[k]; ok {
			continue
		}
		var t engine.TopicMeta
		err := q.tx.QueryRowContext(ctx, `SELECT id, name, partitions FROM topics WHERE `+column+` = ? AND deleted_at IS NULL`, k).Scan(&t.ID, &t.Name, &t.Partitions)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = t
	}
	return out, nil
}

func (q sqliteShare) SharePartitions(ctx context.Context, group string, keys []engine.PartitionKey, _ bool) ([]engine.SharePartitionRow, error) {
	scan := func(rows *sql.Rows, out []engine.SharePartitionRow) ([]engine.SharePartitionRow, error) {
		defer rows.Close()
		for rows.Next() {
			var r engine.SharePartitionRow
			if err := rows.Scan(&r.TopicID, &r.Partition, &r.StartOffset, &r.State); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rows.Err()
	}
	const cols = `SELECT topic_id, partition, start_offset, state FROM share_partitions WHERE group_name = ?`
	if keys == nil {
		rows, err := q.tx.QueryContext(ctx, cols+` ORDER BY topic_id, partition`, group)
		if err != nil {
			return nil, err
		}
		return scan(rows, nil)
	}
	var out []engine.SharePartitionRow
	for _, k := range keys {
		rows, err := q.tx.QueryContext(ctx, cols+` AND topic_id = ? AND partition = ?`, group, k.TopicID, k.Partition)
		if err != nil {
			return nil, err
		}
		if out, err = scan(rows, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (q sqliteShare) OffsetForTime(ctx context.Context, k engine.PartitionKey, ts int64) (int64, error) {
	info, err := partitionState(ctx, q.tx, k.TopicID, k.Partition)
	if err != nil {
		return 0, fmt.Errorf("offset for time %d: %w", ts, err)
	}
	var base int64
	err = q.tx.QueryRowContext(ctx, chunkByTime, k.TopicID, k.Partition, ts).Scan(&base)
	if errors.Is(err, sql.ErrNoRows) {
		return info.HighWatermark, nil
	}
	if err != nil {
		return 0, fmt.Errorf("offset for time %d: %w", ts, err)
	}
	return max(base, info.LogStartOffset), nil
}

func (q sqliteShare) Bounds(ctx context.Context, keys []engine.PartitionKey) (map[engine.PartitionKey]engine.PartitionBounds, error) {
	out := map[engine.PartitionKey]engine.PartitionBounds{}
	for _, k := range keys {
		var b engine.PartitionBounds
		err := q.tx.QueryRowContext(ctx, `SELECT p.log_start_offset, p.high_watermark,
			coalesce((SELECT min(t.first_offset) FROM txn_partitions t WHERE t.topic_id = p.topic_id AND t.partition = p.partition
			          AND t.first_offset IS NOT NULL), p.high_watermark)
			FROM partitions p WHERE p.topic_id = ? AND p.partition = ?`,
			k.TopicID, k.Partition).Scan(&b.LogStart, &b.HighWatermark, &b.LastStable)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, nil
}

func (q sqliteShare) InsertSharePartition(ctx context.Context, group string, r engine.SharePartitionRow) (bool, error) {
	res, err := q.tx.ExecContext(ctx, `INSERT INTO share_partitions (group_name, topic_id, partition, start_offset, state)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, group, r.TopicID, r.Partition, r.StartOffset, r.State)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (q sqliteShare) UpdateSharePartition(ctx context.Context, group string, r engine.SharePartitionRow) error {
	_, err := q.tx.ExecContext(ctx, `UPDATE share_partitions SET start_offset = ?, state = ?
		WHERE group_name = ? AND topic_id = ? AND partition = ?`, r.StartOffset, r.State, group, r.TopicID, r.Partition)
	return err
}

func (q sqliteShare) DeleteSharePartitions(ctx context.Context, group string, topicIDs []int64) error {
	for _, id := range topicIDs {
		if _, err := q.tx.ExecContext(ctx, `DELETE FROM share_partitions WHERE group_name = ? AND topic_id = ?`, group, id); err != nil {
			return err
		}
	}
	return nil
}

func (q sqliteShare) GroupConfigs(ctx context.Context, group string) (string, error) {
	var s string
	err := q.tx.QueryRowContext(ctx, `SELECT configs FROM group_configs WHERE group_name = ?`, group).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return s, err
}

func (q sqliteShare) SetGroupConfigs(ctx context.Context, group, configs string) error {
	if configs == "" {
		_, err := q.tx.ExecContext(ctx, `DELETE FROM group_configs WHERE group_name = ?`, group)
		return err
	}
	_, err := q.tx.ExecContext(ctx, `INSERT INTO group_configs (group_name, configs) VALUES (?, ?)
		ON CONFLICT (group_name) DO UPDATE SET configs = excluded.configs`, group, configs)
	return err
}

func (q sqliteShare) DLQPendingPartitions(ctx context.Context, max int) ([]engine.DLQPendingRow, error) {
	if max <= 0 {
		max = -1 // SQLite: no limit
	}
	rows, err := q.tx.QueryContext(ctx, `SELECT group_name, topic_id, partition, start_offset, state FROM share_partitions
		WHERE state LIKE '%"s":4%' ORDER BY group_name, topic_id, partition LIMIT ?`, max)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.DLQPendingRow
	for rows.Next() {
		var s engine.DLQPendingRow
		if err := rows.Scan(&s.Group, &s.TopicID, &s.Partition, &s.StartOffset, &s.State); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func (q sqliteShare) DLQLease(ctx context.Context, group string) (engine.DLQLeaseRow, bool, error) {
	var l engine.DLQLeaseRow
	err := q.tx.QueryRowContext(ctx, `SELECT holder, token, expires_ms, copied FROM share_dlq_leases WHERE group_name = ?`, group).
		Scan(&l.Holder, &l.Token, &l.ExpiresMs, &l.Copied)
	if errors.Is(err, sql.ErrNoRows) {
		return l, false, nil
	}
	return l, err == nil, err
}

func (q sqliteShare) PutDLQLease(ctx context.Context, group string, l engine.DLQLeaseRow) error {
	_, err := q.tx.ExecContext(ctx, `INSERT INTO share_dlq_leases (group_name, holder, token, expires_ms, copied) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (group_name) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires_ms = excluded.expires_ms, copied = excluded.copied`,
		group, l.Holder, l.Token, l.ExpiresMs, l.Copied)
	return err
}

func (q sqliteShare) DLQCopied(ctx context.Context, group string) (int64, error) {
	var n int64
	err := q.tx.QueryRowContext(ctx, `SELECT copied FROM share_dlq_leases WHERE group_name = ?`, group).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}
