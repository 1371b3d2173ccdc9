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

// Kafka transactions: the coordinator's calls run the engine's script (engine/txn.go)
// over TxnTx, and the flush commit checks transactional requests (txnCheck). One writer
// connection serialises every write, so "locks" are only the order of reads.

var _ catalog.Transactions = (*Catalog)(nil)

// AbortExpiredTxns aborts transactions past their timeout (see catalog.Transactions).
func (c *Catalog) AbortExpiredTxns(ctx context.Context, limit int) ([]catalog.TxnDescription, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT t.transactional_id, p.id, p.epoch FROM transactions t
		JOIN producers p ON p.id = t.producer_id
		WHERE t.state = 'ongoing' AND t.started_at + t.timeout_ms <= `+nowExpr+`
		ORDER BY t.started_at LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: expired transactions: %w", err)
	}
	type due struct {
		tid string
		p   catalog.Producer
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.tid, &d.p.ID, &d.p.Epoch); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: expired transactions: %w", err)
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: expired transactions: %w", err)
	}
	var out []catalog.TxnDescription
	for _, d := range dues {
		desc, ok, err := engine.AbortExpiredTxn(ctx, c.engine(), d.tid, d.p)
		if err != nil {
			return out, fmt.Errorf("sqlite: abort expired transaction %q: %w", d.tid, err)
		}
		if ok {
			out = append(out, desc)
		}
	}
	return out, nil
}

// nowExpr is the database clock in unix ms, for use inside a statement.
const nowExpr = `CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`

// TxnTx runs one coordinator transaction (engine.TxnBackend).
func (e sqliteEngine) TxnTx(ctx context.Context, load engine.TxnLoad, decide func(*engine.TxnView) (*engine.TxnWrites, error)) error {
	c := e.c
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	v, err := loadTxn(ctx, tx, load)
	if err != nil {
		return err
	}
	w, err := decide(v)
	if err != nil || w == nil {
		return err
	}
	marks, err := writeTxn(ctx, tx, v, w, c.opts.CommitTimeout)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if len(marks) > 0 {
		c.hub.publish(marks)
	}
	return nil
}

// loadTxn reads what load asks for. The partitions to lock are only read here: the
// one writer holds the whole file.
func loadTxn(ctx context.Context, tx *sql.Tx, load engine.TxnLoad) (*engine.TxnView, error) {
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return nil, err
	}
	tid := load.TransactionalID
	v := &engine.TxnView{Now: now, Producer: catalog.Producer{ID: -1, Epoch: -1},
		Partitions: map[catalog.TopicPartition]int64{}, Locked: map[catalog.TopicPartition]int64{},
		Topics: map[string]engine.TopicMeta{}, TopicsByID: map[int64]engine.TopicMeta{}}
	err = tx.QueryRowContext(ctx, `SELECT id, epoch FROM producers WHERE transactional_id = ?`, tid).Scan(&v.Producer.ID, &v.Producer.Epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("producer: %w", err)
	}
	var (
		t         engine.TxnRow
		timeoutMs int64
		started   sql.NullInt64
	)
	err = tx.QueryRowContext(ctx, `SELECT producer_id, state, timeout_ms, started_at, prev_producer_id, prev_epoch,
		last_producer_id, last_epoch FROM transactions WHERE transactional_id = ?`, tid).Scan(&t.ProducerID, &t.State,
		&timeoutMs, &started, &t.Prev.ID, &t.Prev.Epoch, &t.Last.ID, &t.Last.Epoch)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("transaction: %w", err)
	default:
		t.Timeout = time.Duration(timeoutMs) * time.Millisecond
		if started.Valid {
			t.StartedAt = time.UnixMilli(started.Int64).UTC()
		}
		v.Txn = &t
	}
	if v.Txn != nil {
		if err := loadTxnChildren(ctx, tx, tid, v); err != nil {
			return nil, err
		}
	}
	locks := slices.Clone(load.Partitions)
	if load.LockTxnPartitions {
		for tp := range v.Partitions {
			locks = append(locks, tp)
		}
	}
	for _, tp := range locks {
		var hw int64
		err := tx.QueryRowContext(ctx, `SELECT high_watermark FROM partitions WHERE topic_id = ? AND partition = ?`, tp.TopicID, tp.Partition).Scan(&hw)
		if errors.Is(err, sql.ErrNoRows) {
			continue // the topic's rows are gone: no marker can go there
		}
		if err != nil {
			return nil, fmt.Errorf("partition %d/%d: %w", tp.TopicID, tp.Partition, err)
		}
		v.Locked[tp] = hw
	}
	if load.LockTxnPartitions {
		// A partition whose topic is gone takes no marker: drop it from the set.
		for tp := range v.Partitions {
			if _, ok := v.Locked[tp]; !ok {
				delete(v.Partitions, tp)
			}
		}
	}
	topics, err := loadTopics(ctx, tx, load.TopicNames)
	if err != nil {
		return nil, fmt.Errorf("topics: %w", err)
	}
	v.Topics = topics
	for _, id := range load.TopicIDs {
		var tm engine.TopicMeta
		err := tx.QueryRowContext(ctx, `SELECT id, name, partitions FROM topics WHERE id = ? AND deleted_at IS NULL`, id).Scan(&tm.ID, &tm.Name, &tm.Partitions)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("topic %d: %w", id, err)
		}
		v.TopicsByID[id] = tm
	}
	return v, nil
}

func loadTxnChildren(ctx context.Context, tx *sql.Tx, tid string, v *engine.TxnView) error {
	rows, err := tx.QueryContext(ctx, `SELECT topic_id, partition, coalesce(first_offset, -1) FROM txn_partitions WHERE transactional_id = ?`, tid)
	if err != nil {
		return fmt.Errorf("transaction partitions: %w", err)
	}
	for rows.Next() {
		var (
			tp    catalog.TopicPartition
			first int64
		)
		if err := rows.Scan(&tp.TopicID, &tp.Partition, &first); err != nil {
			rows.Close()
			return err
		}
		v.Partitions[tp] = first
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = tx.QueryContext(ctx, `SELECT group_name FROM txn_groups WHERE transactional_id = ? ORDER BY group_name`, tid)
	if err != nil {
		return fmt.Errorf("transaction groups: %w", err)
	}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return err
		}
		v.Groups = append(v.Groups, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = tx.QueryContext(ctx, `SELECT group_name, topic_id, partition, committed_offset, metadata, coalesce(member_id, ''),
		coalesce(member_epoch, -1) FROM txn_offsets WHERE transactional_id = ? ORDER BY group_name, topic_id, partition`, tid)
	if err != nil {
		return fmt.Errorf("transaction offsets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o engine.TxnOffsetRow
		if err := rows.Scan(&o.Group, &o.TopicID, &o.Partition, &o.Offset, &o.Metadata, &o.MemberID, &o.MemberEpoch); err != nil {
			return err
		}
		v.Offsets = append(v.Offsets, o)
	}
	return rows.Err()
}

// writeTxn writes w, in the engine's order, and answers the watermarks its markers
// moved.
func writeTxn(ctx context.Context, tx *sql.Tx, v *engine.TxnView, w *engine.TxnWrites, commitTimeout time.Duration) ([]catalog.Watermark, error) {
	if err := writeAudit(ctx, tx); err != nil {
		return nil, err
	}
	nowMs := v.Now.UnixMilli()
	tid := w.TransactionalID
	if w.RetireProducer > 0 {
		// An exhausted id: its row (and state) goes before the new row takes the
		// transactional id.
		if err := deleteProducers(ctx, tx, []int64{w.RetireProducer}); err != nil {
			return nil, fmt.Errorf("retire producer %d: %w", w.RetireProducer, err)
		}
	}
	if w.NewProducer {
		err := tx.QueryRowContext(ctx, `INSERT INTO producers (transactional_id, epoch, created_at, last_used_at, principal)
			VALUES (?, 0, ?, ?, ?) RETURNING id`, tid, nowMs, nowMs, w.Owner).Scan(&w.NewProducerID)
		if err != nil {
			return nil, fmt.Errorf("new producer: %w", err)
		}
	}
	if w.Epoch >= 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE producers SET epoch = ?, last_used_at = ? WHERE transactional_id = ?`, w.Epoch, nowMs, tid); err != nil {
			return nil, fmt.Errorf("producer epoch: %w", err)
		}
	}
	if t := w.Txn; t != nil {
		pid := t.ProducerID
		if w.NewProducer {
			pid = w.NewProducerID
		}
		var started sql.NullInt64
		if !t.StartedAt.IsZero() {
			started = sql.NullInt64{Int64: t.StartedAt.UnixMilli(), Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO transactions (transactional_id, producer_id, state, timeout_ms, started_at,
				prev_producer_id, prev_epoch, last_producer_id, last_epoch, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (transactional_id) DO UPDATE SET producer_id = excluded.producer_id, state = excluded.state,
				timeout_ms = excluded.timeout_ms, started_at = excluded.started_at, prev_producer_id = excluded.prev_producer_id,
				prev_epoch = excluded.prev_epoch, last_producer_id = excluded.last_producer_id, last_epoch = excluded.last_epoch,
				updated_at = excluded.updated_at`,
			tid, pid, t.State, t.Timeout.Milliseconds(), started, t.Prev.ID, t.Prev.Epoch, t.Last.ID, t.Last.Epoch, nowMs); err != nil {
			return nil, fmt.Errorf("transaction: %w", err)
		}
	}
	if w.ClearChildren {
		for _, q := range []string{`DELETE FROM txn_partitions WHERE transactional_id = ?`,
			`DELETE FROM txn_groups WHERE transactional_id = ?`, `DELETE FROM txn_offsets WHERE transactional_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, tid); err != nil {
				return nil, fmt.Errorf("clear transaction: %w", err)
			}
		}
	}
	for _, tp := range w.AddPartitions {
		if _, err := tx.ExecContext(ctx, `INSERT INTO txn_partitions (transactional_id, topic_id, partition) VALUES (?, ?, ?)
			ON CONFLICT DO NOTHING`, tid, tp.TopicID, tp.Partition); err != nil {
			return nil, fmt.Errorf("transaction partition: %w", err)
		}
	}
	for _, g := range w.AddGroups {
		if _, err := tx.ExecContext(ctx, `INSERT INTO txn_groups (transactional_id, group_name) VALUES (?, ?) ON CONFLICT DO NOTHING`, tid, g); err != nil {
			return nil, fmt.Errorf("transaction group: %w", err)
		}
	}
	for _, o := range w.UpsertOffsets {
		if _, err := tx.ExecContext(ctx, `INSERT INTO txn_offsets (transactional_id, group_name, topic_id, partition, committed_offset,
				metadata, member_id, member_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (transactional_id, group_name, topic_id, partition) DO UPDATE SET committed_offset = excluded.committed_offset,
				metadata = excluded.metadata, member_id = excluded.member_id, member_epoch = excluded.member_epoch`,
			tid, o.Group, o.TopicID, o.Partition, o.Offset, o.Metadata, nullString(o.MemberID), o.MemberEpoch); err != nil {
			return nil, fmt.Errorf("transaction offset: %w", err)
		}
	}
	marks, err := writeMarkers(ctx, tx, w.Markers, v.Now, commitTimeout)
	if err != nil {
		return nil, err
	}
	if len(w.GroupOffsets) > 0 {
		// A committed transaction's offsets reach their groups whatever happened to them
		// meanwhile: a group deleted since is made again.
		for i, o := range w.GroupOffsets {
			if i > 0 && w.GroupOffsets[i-1].Group == o.Group {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO groups (name, assignor, epoch, created_at) VALUES (?, ?, 0, ?)
				ON CONFLICT (name) DO NOTHING`, o.Group, catalog.DefaultAssignor, nowMs); err != nil {
				return nil, fmt.Errorf("group %s: %w", o.Group, err)
			}
		}
		if err := writeGroupOffsets(ctx, tx, w.GroupOffsets, v.Now); err != nil {
			return nil, fmt.Errorf("group offsets: %w", err)
		}
	}
	return marks, nil
}

// writeMarkers inserts the markers and moves each partition's high watermark past its
// marker (engine.CommitDue's rule makes the partition due as a flush would).
func writeMarkers(ctx context.Context, tx *sql.Tx, ms []engine.MarkerRow, now time.Time, commitTimeout time.Duration) ([]catalog.Watermark, error) {
	var marks []catalog.Watermark
	for _, m := range ms {
		var first sql.NullInt64
		if m.FirstOffset >= 0 {
			first = sql.NullInt64{Int64: m.FirstOffset, Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO txn_markers (topic_id, partition, marker_offset, producer_id, producer_epoch,
				is_commit, timestamp_ms, first_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			m.TopicID, m.Partition, m.Offset, m.ProducerID, m.ProducerEpoch, m.Commit, m.Timestamp, first); err != nil {
			return nil, fmt.Errorf("marker on %d/%d at %d: %w", m.TopicID, m.Partition, m.Offset, err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE partitions SET high_watermark = ?1 + 1,
				compact_due = CASE WHEN compact_due IS NULL OR compact_due > ?2 THEN ?2 ELSE compact_due END
			WHERE topic_id = ?3 AND partition = ?4 AND high_watermark = ?1`,
			m.Offset, now.Add(2*commitTimeout).UnixMilli(), m.TopicID, m.Partition)
		if err != nil {
			return nil, fmt.Errorf("marker on %d/%d: high watermark: %w", m.TopicID, m.Partition, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil, fmt.Errorf("marker on %d/%d at %d: the high watermark moved", m.TopicID, m.Partition, m.Offset)
		}
		marks = append(marks, catalog.Watermark{TopicID: m.TopicID, Partition: m.Partition, HighWatermark: m.Offset + 1})
	}
	return marks, nil
}

// DescribeTxns describes transactional ids (see catalog.Transactions).
func (c *Catalog) DescribeTxns(ctx context.Context, ids []string) ([]catalog.TxnDescription, error) {
	out := make([]catalog.TxnDescription, 0, len(ids))
	for _, id := range ids {
		d, err := c.describeTxn(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("sqlite: describe transaction %q: %w", id, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func (c *Catalog) describeTxn(ctx context.Context, id string) (catalog.TxnDescription, error) {
	d := catalog.TxnDescription{TransactionalID: id, ProducerID: -1, Epoch: -1}
	var (
		timeoutMs int64
		started   sql.NullInt64
	)
	err := c.r.QueryRowContext(ctx, `SELECT t.producer_id, p.epoch, t.state, t.timeout_ms, t.started_at
		FROM transactions t JOIN producers p ON p.id = t.producer_id WHERE t.transactional_id = ?`, id).
		Scan(&d.ProducerID, &d.Epoch, &d.State, &timeoutMs, &started)
	if errors.Is(err, sql.ErrNoRows) {
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.Timeout = time.Duration(timeoutMs) * time.Millisecond
	if started.Valid {
		d.StartedAt = time.UnixMilli(started.Int64).UTC()
	}
	rows, err := c.r.QueryContext(ctx, `SELECT t.name, x.partition FROM txn_partitions x JOIN topics t ON t.id = x.topic_id
		WHERE x.transactional_id = ? ORDER BY t.name, x.partition`, id)
	if err != nil {
		return d, err
	}
	for rows.Next() {
		var (
			name string
			p    int32
		)
		if err := rows.Scan(&name, &p); err != nil {
			rows.Close()
			return d, err
		}
		if n := len(d.Partitions); n > 0 && d.Partitions[n-1].Topic == name {
			d.Partitions[n-1].Partitions = append(d.Partitions[n-1].Partitions, p)
		} else {
			d.Partitions = append(d.Partitions, catalog.TopicPartitions{Topic: name, Partitions: []int32{p}})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return d, err
	}
	rows, err = c.r.QueryContext(ctx, `SELECT group_name FROM txn_groups WHERE transactional_id = ? ORDER BY group_name`, id)
	if err != nil {
		return d, err
	}
	defer rows.Close()
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return d, err
		}
		d.Groups = append(d.Groups, g)
	}
	return d, rows.Err()
}

// ListTxns lists transactional ids (see catalog.Transactions).
func (c *Catalog) ListTxns(ctx context.Context, f catalog.TxnFilter) ([]catalog.TxnDescription, error) {
	states, _ := json.Marshal(f.States)
	pids, _ := json.Marshal(f.ProducerIDs)
	rows, err := c.r.QueryContext(ctx, `SELECT t.transactional_id, t.producer_id, p.epoch, t.state, t.timeout_ms, t.started_at
		FROM transactions t JOIN producers p ON p.id = t.producer_id
		WHERE (json_array_length(?1) = 0 OR t.state IN (SELECT value FROM json_each(?1)))
		  AND (json_array_length(?2) = 0 OR t.producer_id IN (SELECT value FROM json_each(?2)))
		  AND (?3 <= 0 OR (t.state = 'ongoing' AND t.started_at <= `+nowExpr+` - ?3))
		ORDER BY t.transactional_id`, string(nullJSON(states)), string(nullJSON(pids)), f.OngoingFor.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("sqlite: list transactions: %w", err)
	}
	defer rows.Close()
	var out []catalog.TxnDescription
	for rows.Next() {
		var (
			d         catalog.TxnDescription
			timeoutMs int64
			started   sql.NullInt64
		)
		if err := rows.Scan(&d.TransactionalID, &d.ProducerID, &d.Epoch, &d.State, &timeoutMs, &started); err != nil {
			return nil, fmt.Errorf("sqlite: list transactions: %w", err)
		}
		d.Timeout = time.Duration(timeoutMs) * time.Millisecond
		if started.Valid {
			d.StartedAt = time.UnixMilli(started.Int64).UTC()
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// nullJSON turns a JSON null (a nil slice) into an empty array.
func nullJSON(b []byte) []byte {
	if string(b) == "null" {
		return []byte("[]")
	}
	return b
}

// PendingTxnOffsets lists a group's partitions with offsets in an ongoing transaction.
func (c *Catalog) PendingTxnOffsets(ctx context.Context, group string) ([]catalog.TopicPartitions, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT DISTINCT tp.name, o.partition FROM txn_offsets o
		JOIN transactions t ON t.transactional_id = o.transactional_id AND t.state = 'ongoing'
		JOIN topics tp ON tp.id = o.topic_id AND tp.deleted_at IS NULL
		WHERE o.group_name = ? ORDER BY tp.name, o.partition`, group)
	if err != nil {
		return nil, fmt.Errorf("sqlite: pending transactional offsets of group %s: %w", group, err)
	}
	defer rows.Close()
	var out []catalog.TopicPartitions
	for rows.Next() {
		var (
			name string
			p    int32
		)
		if err := rows.Scan(&name, &p); err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].Topic == name {
			out[n-1].Partitions = append(out[n-1].Partitions, p)
		} else {
			out = append(out, catalog.TopicPartitions{Topic: name, Partitions: []int32{p}})
		}
	}
	return out, rows.Err()
}

// TxnStats counts the ongoing transactions (see catalog.Transactions).
func (c *Catalog) TxnStats(ctx context.Context) (catalog.TxnStats, error) {
	var (
		s      catalog.TxnStats
		oldest sql.NullInt64
		now    int64
	)
	err := c.r.QueryRowContext(ctx, `SELECT count(*), min(started_at), `+nowExpr+` FROM transactions WHERE state = 'ongoing'`).Scan(&s.Open, &oldest, &now)
	if err != nil {
		return s, fmt.Errorf("sqlite: transaction stats: %w", err)
	}
	if oldest.Valid {
		s.OldestOpen = time.UnixMilli(oldest.Int64).UTC()
	}
	s.DatabaseTime = time.UnixMilli(now).UTC()
	return s, nil
}

// checkTxns loads what engine.Plan.CheckTxns needs of the flush's transactional ids —
// each one's producer and state, and which of the flush's partitions it holds — with
// the registry epochs of the producers the transactional requests name, and checks them.
func checkTxns(ctx context.Context, tx *sql.Tx, plan *engine.Plan, errs []error, ids []string) (*engine.TxnCheck, error) {
	txns := make(map[string]*engine.TxnFlushState, len(ids))
	for _, tid := range ids {
		st := &engine.TxnFlushState{Partitions: map[catalog.TopicPartition]bool{}}
		err := tx.QueryRowContext(ctx, `SELECT producer_id, state FROM transactions WHERE transactional_id = ?`, tid).Scan(&st.ProducerID, &st.State)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("transaction %q: %w", tid, err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT topic_id, partition, first_offset IS NOT NULL FROM txn_partitions WHERE transactional_id = ?`, tid)
		if err != nil {
			return nil, fmt.Errorf("transaction %q: %w", tid, err)
		}
		for rows.Next() {
			var (
				tp  catalog.TopicPartition
				has bool
			)
			if err := rows.Scan(&tp.TopicID, &tp.Partition, &has); err != nil {
				rows.Close()
				return nil, err
			}
			st.Partitions[tp] = has
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		txns[tid] = st
	}
	registry := map[int64]int16{}
	for _, r := range plan.Segment.Requests {
		if r.Txn == nil {
			continue
		}
		var epoch int16
		err := tx.QueryRowContext(ctx, `SELECT epoch FROM producers WHERE id = ?`, r.Producer.ID).Scan(&epoch)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("producer %d: %w", r.Producer.ID, err)
		}
		registry[r.Producer.ID] = epoch
	}
	return plan.CheckTxns(errs, registry, txns), nil
}

// writeTxnFlush writes what the flush's committed transactional requests change: the
// transactions they begin, and their first offsets.
func writeTxnFlush(ctx context.Context, tx *sql.Tx, tc *engine.TxnCheck, results []catalog.Result, now time.Time) error {
	begins, firsts := tc.Writes(results)
	ms := now.UnixMilli()
	for _, tid := range begins {
		for _, q := range []string{`DELETE FROM txn_partitions WHERE transactional_id = ?`,
			`DELETE FROM txn_groups WHERE transactional_id = ?`, `DELETE FROM txn_offsets WHERE transactional_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, tid); err != nil {
				return fmt.Errorf("begin %q: %w", tid, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE transactions SET state = 'ongoing', started_at = ?1, updated_at = ?1
			WHERE transactional_id = ?2`, ms, tid); err != nil {
			return fmt.Errorf("begin %q: %w", tid, err)
		}
	}
	for _, f := range firsts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO txn_partitions (transactional_id, topic_id, partition, first_offset)
			VALUES (?, ?, ?, ?) ON CONFLICT (transactional_id, topic_id, partition)
			DO UPDATE SET first_offset = coalesce(txn_partitions.first_offset, excluded.first_offset)`,
			f.TransactionalID, f.TopicID, f.Partition, f.Offset); err != nil {
			return fmt.Errorf("first offset of %q on %d/%d: %w", f.TransactionalID, f.TopicID, f.Partition, err)
		}
	}
	return nil
}
