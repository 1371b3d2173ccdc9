package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Share groups: the engine's scripts (engine/share.go) over these statements, each call
// one transaction. Rows are held FOR UPDATE in the lock order: the share group's row,
// then its share-partitions sorted by (topic id, partition).

var _ catalog.ShareGroups = (*Catalog)(nil)

// ShareTx runs a share-group call in one transaction (engine.ShareBackend).
func (e pgEngine) ShareTx(ctx context.Context, fn func(engine.ShareStmts) error) error {
	return pgx.BeginFunc(ctx, e.c.pool, func(tx pgx.Tx) error { return fn(pgShare{tx}) })
}

// pgShare is a share call's statements (engine.ShareStmts).
type pgShare struct{ tx pgx.Tx }

func (q pgShare) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := q.tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	return now, err
}

func (q pgShare) ShareGroupRow(ctx context.Context, group string) (int32, bool, error) {
	var epoch int32
	err := q.tx.QueryRow(ctx, `SELECT epoch FROM share_groups WHERE name = $1 FOR UPDATE`, group).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return epoch, err == nil, err
}

func (q pgShare) ConsumerGroupExists(ctx context.Context, group string) (bool, error) {
	var ok bool
	err := q.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM groups WHERE name = $1)`, group).Scan(&ok)
	return ok, err
}

func (q pgShare) InsertShareGroup(ctx context.Context, group string) (bool, error) {
	tag, err := q.tx.Exec(ctx, `INSERT INTO share_groups (name) VALUES ($1) ON CONFLICT DO NOTHING`, group)
	return tag.RowsAffected() == 1, err
}

func (q pgShare) SetShareGroupEpoch(ctx context.Context, group string, epoch int32) error {
	_, err := q.tx.Exec(ctx, `UPDATE share_groups SET epoch = $2 WHERE name = $1`, group, epoch)
	return err
}

func (q pgShare) DeleteShareGroup(ctx context.Context, group string) error {
	_, err := q.tx.Exec(ctx, `DELETE FROM share_groups WHERE name = $1`, group)
	return err
}

func (q pgShare) ListShareGroups(ctx context.Context) ([]string, error) {
	rows, err := q.tx.Query(ctx, `SELECT name FROM share_groups ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (q pgShare) ShareMembers(ctx context.Context, group string) ([]engine.ShareMemberRow, error) {
	rows, err := q.tx.Query(ctx, `SELECT member_id, epoch, topics, session_timeout_ms, expires_at
		FROM share_members WHERE group_name = $1 ORDER BY member_id`, group)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.ShareMemberRow, error) {
		var (
			m       engine.ShareMemberRow
			topics  string
			session int64
		)
		if err := r.Scan(&m.ID, &m.Epoch, &topics, &session, &m.ExpiresAt); err != nil {
			return m, err
		}
		m.Session = time.Duration(session) * time.Millisecond
		return m, json.Unmarshal([]byte(topics), &m.Topics)
	})
}

func (q pgShare) PutShareMember(ctx context.Context, group string, m engine.ShareMemberRow) error {
	topics, err := json.Marshal(m.Topics)
	if err != nil {
		return err
	}
	_, err = q.tx.Exec(ctx, `INSERT INTO share_members (group_name, member_id, epoch, topics, session_timeout_ms, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (group_name, member_id) DO UPDATE SET epoch = excluded.epoch,
		topics = excluded.topics, session_timeout_ms = excluded.session_timeout_ms, expires_at = excluded.expires_at`,
		group, m.ID, m.Epoch, string(topics), m.Session.Milliseconds(), m.ExpiresAt)
	return err
}

func (q pgShare) DeleteShareMember(ctx context.Context, group, id string) error {
	_, err := q.tx.Exec(ctx, `DELETE FROM share_members WHERE group_name = $1 AND member_id = $2`, group, id)
	return err
}

func scanTopicMeta(r pgx.CollectableRow) (engine.TopicMeta, error) {
	var t engine.TopicMeta
	err := r.Scan(&t.ID, &t.Name, &t.Partitions)
	return t, err
}

func (q pgShare) Topics(ctx context.Context, names []string) (map[string]engine.TopicMeta, error) {
	rows, err := q.tx.Query(ctx, `SELECT id, name, partitions FROM topics WHERE name = ANY($1) AND deleted_at IS NULL`, names)
	if err != nil {
		return nil, err
	}
	ts, err := pgx.CollectRows(rows, scanTopicMeta)
	out := map[string]engine.TopicMeta{}
	for _, t := range ts {
		out[t.Name] = t
	}
	return out, err
}

func (q pgShare) TopicsByID(ctx context.Context, ids []int64) (map[int64]engine.TopicMeta, error) {
	rows, err := q.tx.Query(ctx, `SELECT id, name, partitions FROM topics WHERE id = ANY($1) AND deleted_at IS NULL`, ids)
	if err != nil {
		return nil, err
	}
	ts, err := pgx.CollectRows(rows, scanTopicMeta)
	out := map[int64]engine.TopicMeta{}
	for _, t := range ts {
		out[t.ID] = t
	}
	return out, err
}

func keyArrays(keys []engine.PartitionKey) ([]int64, []int32) {
	ids, parts := make([]int64, len(keys)), make([]int32, len(keys))
	for i, k := range keys {
		ids[i], parts[i] = k.TopicID, k.Partition
	}
	return ids, parts
}

func (q pgShare) SharePartitions(ctx context.Context, group string, keys []engine.PartitionKey, lock bool) ([]engine.SharePartitionRow, error) {
	var (
		rows pgx.Rows
		err  error
	)
	lockSQL := ""
	if lock {
		lockSQL = ` FOR UPDATE`
	}
	if keys == nil {
		rows, err = q.tx.Query(ctx, `SELECT topic_id, partition, start_offset, state FROM share_partitions
			WHERE group_name = $1 ORDER BY topic_id, partition`+lockSQL, group)
	} else {
		ids, parts := keyArrays(keys)
		rows, err = q.tx.Query(ctx, `SELECT s.topic_id, s.partition, s.start_offset, s.state
			FROM share_partitions s JOIN unnest($2::bigint[], $3::int[]) k (topic_id, partition)
			  ON s.topic_id = k.topic_id AND s.partition = k.partition
			WHERE s.group_name = $1 ORDER BY s.topic_id, s.partition`+lockSQL, group, ids, parts)
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.SharePartitionRow, error) {
		var s engine.SharePartitionRow
		err := r.Scan(&s.TopicID, &s.Partition, &s.StartOffset, &s.State)
		return s, err
	})
}

func (q pgShare) OffsetForTime(ctx context.Context, k engine.PartitionKey, ts int64) (int64, error) {
	var logStart, hwm int64
	var base *int64
	if err := q.tx.QueryRow(ctx, offsetForTimeSQL, k.TopicID, k.Partition, ts).Scan(&logStart, &hwm, &base); err != nil {
		return 0, fmt.Errorf("offset for time %d: %w", ts, err)
	}
	if base == nil {
		return hwm, nil
	}
	return max(*base, logStart), nil
}

func (q pgShare) Bounds(ctx context.Context, keys []engine.PartitionKey) (map[engine.PartitionKey]engine.PartitionBounds, error) {
	ids, parts := keyArrays(keys)
	rows, err := q.tx.Query(ctx, `SELECT p.topic_id, p.partition, p.log_start_offset, p.high_watermark,
		  coalesce((SELECT min(t.first_offset) FROM txn_partitions t WHERE t.topic_id = p.topic_id AND t.partition = p.partition
		            AND t.first_offset IS NOT NULL), p.high_watermark)
		FROM partitions p JOIN unnest($1::bigint[], $2::int[]) k (topic_id, partition)
		  ON p.topic_id = k.topic_id AND p.partition = k.partition`, ids, parts)
	if err != nil {
		return nil, err
	}
	out := map[engine.PartitionKey]engine.PartitionBounds{}
	var (
		k engine.PartitionKey
		b engine.PartitionBounds
	)
	_, err = pgx.ForEachRow(rows, []any{&k.TopicID, &k.Partition, &b.LogStart, &b.HighWatermark, &b.LastStable}, func() error {
		out[k] = b
		return nil
	})
	return out, err
}

func (q pgShare) InsertSharePartition(ctx context.Context, group string, r engine.SharePartitionRow) (bool, error) {
	tag, err := q.tx.Exec(ctx, `INSERT INTO share_partitions (group_name, topic_id, partition, start_offset, state)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, group, r.TopicID, r.Partition, r.StartOffset, r.State)
	return tag.RowsAffected() == 1, err
}

func (q pgShare) UpdateSharePartition(ctx context.Context, group string, r engine.SharePartitionRow) error {
	_, err := q.tx.Exec(ctx, `UPDATE share_partitions SET start_offset = $4, state = $5
		WHERE group_name = $1 AND topic_id = $2 AND partition = $3`, group, r.TopicID, r.Partition, r.StartOffset, r.State)
	return err
}

func (q pgShare) DeleteSharePartitions(ctx context.Context, group string, topicIDs []int64) error {
	_, err := q.tx.Exec(ctx, `DELETE FROM share_partitions WHERE group_name = $1 AND topic_id = ANY($2)`, group, topicIDs)
	return err
}

func (q pgShare) GroupConfigs(ctx context.Context, group string) (string, error) {
	var s string
	err := q.tx.QueryRow(ctx, `SELECT configs FROM group_configs WHERE group_name = $1`, group).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return s, err
}

func (q pgShare) SetGroupConfigs(ctx context.Context, group, configs string) error {
	if configs == "" {
		_, err := q.tx.Exec(ctx, `DELETE FROM group_configs WHERE group_name = $1`, group)
		return err
	}
	_, err := q.tx.Exec(ctx, `INSERT INTO group_configs (group_name, configs) VALUES ($1, $2)
		ON CONFLICT (group_name) DO UPDATE SET configs = excluded.configs`, group, configs)
	return err
}

// dlqPendingSQL finds share-partitions with a RangeDLQPending range ("s":4) in their
// stored state.
const dlqPendingSQL = `SELECT group_name, topic_id, partition, start_offset, state FROM share_partitions
	WHERE state LIKE '%"s":4%' ORDER BY group_name, topic_id, partition`

func (q pgShare) DLQPendingPartitions(ctx context.Context, max int) ([]engine.DLQPendingRow, error) {
	sql := dlqPendingSQL
	if max > 0 {
		sql += fmt.Sprintf(" LIMIT %d", max)
	}
	rows, err := q.tx.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.DLQPendingRow, error) {
		var s engine.DLQPendingRow
		err := r.Scan(&s.Group, &s.TopicID, &s.Partition, &s.StartOffset, &s.State)
		return s, err
	})
}

func (q pgShare) DLQLease(ctx context.Context, group string) (engine.DLQLeaseRow, bool, error) {
	var l engine.DLQLeaseRow
	err := q.tx.QueryRow(ctx, `SELECT holder, token, expires_ms, copied FROM share_dlq_leases WHERE group_name = $1 FOR UPDATE`, group).
		Scan(&l.Holder, &l.Token, &l.ExpiresMs, &l.Copied)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, false, nil
	}
	return l, err == nil, err
}

func (q pgShare) PutDLQLease(ctx context.Context, group string, l engine.DLQLeaseRow) error {
	_, err := q.tx.Exec(ctx, `INSERT INTO share_dlq_leases (group_name, holder, token, expires_ms, copied) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (group_name) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires_ms = excluded.expires_ms, copied = excluded.copied`,
		group, l.Holder, l.Token, l.ExpiresMs, l.Copied)
	return err
}

func (q pgShare) DLQCopied(ctx context.Context, group string) (int64, error) {
	var n int64
	err := q.tx.QueryRow(ctx, `SELECT copied FROM share_dlq_leases WHERE group_name = $1`, group).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}
