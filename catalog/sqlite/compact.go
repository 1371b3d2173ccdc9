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

var _ catalog.Compaction = (*Catalog)(nil)

// The compactor's side of the catalog (catalog/compact.go). Every write runs in an
// immediate transaction on the one writer connection, so one compactor at a time
// writes; leases still make several compactors on one file divide the work.

// dropBatch bounds the rows one DropChunks call deletes, so one transaction stays short
// however much expired.
const dropBatch = 5000

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// writeTx runs fn in an immediate transaction with the database clock read inside it.
func (c *Catalog) writeTx(ctx context.Context, fn func(tx *sql.Tx, now time.Time) error) error {
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return err
	}
	if err := fn(tx, now); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// dueSQL lists the due partitions not leased now, most overdue first, on the
// partitions_compact_due index.
const dueSQL = `SELECT p.topic_id, p.partition, p.compact_due FROM partitions p
	WHERE p.compact_due <= ?1
	  AND NOT EXISTS (SELECT 1 FROM compactor_partitions c
	                  WHERE c.topic_id = p.topic_id AND c.partition = p.partition AND c.lease_until >= ?1)
	ORDER BY p.compact_due LIMIT ?2`

// AcquirePartitions leases up to max due partitions, most overdue first. The immediate
// transaction excludes every other writer, so what it reads stays true until it
// commits.
func (c *Catalog) AcquirePartitions(ctx context.Context, holder string, ttl time.Duration, max int) ([]catalog.PartitionLease, error) {
	var out []catalog.PartitionLease
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		until := now.Add(ttl)
		rows, err := tx.QueryContext(ctx, dueSQL, ms(now), max)
		if err != nil {
			return err
		}
		for rows.Next() {
			l := catalog.PartitionLease{Holder: holder, Until: until}
			var due int64
			if err := rows.Scan(&l.TopicID, &l.Partition, &due); err != nil {
				rows.Close()
				return err
			}
			l.Due = fromMS(due)
			out = append(out, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range out {
			if err := tx.QueryRowContext(ctx, `INSERT INTO compactor_partitions (topic_id, partition, holder, token, lease_until)
				VALUES (?1, ?2, ?3, 1, ?4)
				ON CONFLICT (topic_id, partition) DO UPDATE SET holder = excluded.holder,
					token = compactor_partitions.token + 1, lease_until = excluded.lease_until
				RETURNING token`, out[i].TopicID, out[i].Partition, holder, ms(until)).Scan(&out[i].Token); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: acquire partitions for %s: %w", holder, err)
	}
	return out, nil
}

// ReleasePartition records the checkpoint and the next due time, and frees the lease.
func (c *Catalog) ReleasePartition(ctx context.Context, l catalog.PartitionLease, r catalog.PartitionRelease) error {
	cp := r.Checkpoint
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		var reclaimedAt any
		if r.Reclaimed {
			reclaimedAt = ms(now)
		}
		var compacted int64
		if !cp.CompactedAt.IsZero() {
			compacted = ms(cp.CompactedAt)
		}
		res, err := tx.ExecContext(ctx, `UPDATE compactor_partitions
			SET holder = NULL, lease_until = 0, last_pass_at = ?1, clean_offset = ?2, tombstone_due = ?3,
			    compacted_at = ?4, reclaimed_at = coalesce(reclaimed_at, ?5)
			WHERE topic_id = ?6 AND partition = ?7 AND holder = ?8 AND token = ?9`,
			ms(now), cp.CleanOffset, cp.TombstoneDue, compacted, reclaimedAt, l.TopicID, l.Partition, l.Holder, l.Token)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("lease token %d lost: %w", l.Token, catalog.ErrCompactionConflict)
		}
		// What changed since the pass read the partition and its topic brings the due
		// time forward (engine.ReleaseDue).
		cur := catalog.CompactionState{Now: now, Partition: catalog.PartitionInfo{TopicID: l.TopicID, Partition: l.Partition}}
		var configs string
		if err := tx.QueryRowContext(ctx, `SELECT p.log_start_offset, p.high_watermark, t.configs, t.deleted_at IS NOT NULL
			FROM partitions p JOIN topics t ON t.id = p.topic_id WHERE p.topic_id = ? AND p.partition = ?`, l.TopicID, l.Partition).
			Scan(&cur.Partition.LogStartOffset, &cur.Partition.HighWatermark, &configs, &cur.Deleted); err != nil {
			return fmt.Errorf("read partition: %w", err)
		}
		if err := json.Unmarshal([]byte(configs), &cur.Topic.Configs); err != nil {
			return fmt.Errorf("topic %d: configs: %w", l.TopicID, err)
		}
		var due any
		if d := engine.ReleaseDue(r, cur, catalog.SettleAge(c.opts.CommitTimeout)); !d.IsZero() {
			due = ms(d)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE partitions SET compact_due = ? WHERE topic_id = ? AND partition = ?`,
			due, l.TopicID, l.Partition); err != nil {
			return fmt.Errorf("record due time: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: release topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	return nil
}

// backlogSQL counts the due partitions on the partitions_compact_due index.
const backlogSQL = `SELECT count(*), min(compact_due) FROM partitions WHERE compact_due <= ?`

// CompactionBacklog counts the partitions due now and finds the most overdue.
func (c *Catalog) CompactionBacklog(ctx context.Context) (catalog.CompactionBacklog, error) {
	var (
		b      catalog.CompactionBacklog
		oldest sql.NullInt64
		err    error
	)
	if b.Now, err = c.Now(ctx); err != nil {
		return b, err
	}
	if err := c.r.QueryRowContext(ctx, backlogSQL, ms(b.Now)).Scan(&b.Due, &oldest); err != nil {
		return b, fmt.Errorf("sqlite: compaction backlog: %w", err)
	}
	if oldest.Valid {
		b.Oldest = fromMS(oldest.Int64)
	}
	return b, nil
}

// compactNow makes every partition of a topic due for the compactor now (its configs
// changed, or it was deleted).
func compactNow(ctx context.Context, tx *sql.Tx, topicID int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE partitions SET compact_due = (`+nowSQL+`)
		WHERE topic_id = ? AND (compact_due IS NULL OR compact_due > (`+nowSQL+`))`, topicID)
	return err
}

// AcquireJob leases a named job that is free and last completed at least every ago.
func (c *Catalog) AcquireJob(ctx context.Context, name, holder string, ttl, every time.Duration) (catalog.JobLease, bool, error) {
	l := catalog.JobLease{Name: name, Holder: holder}
	ok := false
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO compactor_jobs (name) VALUES (?) ON CONFLICT DO NOTHING`, name); err != nil {
			return err
		}
		l.Until = now.Add(ttl)
		err := tx.QueryRowContext(ctx, `UPDATE compactor_jobs SET holder = ?1, token = token + 1, lease_until = ?2
			WHERE name = ?3 AND lease_until < ?4 AND done_at <= ?5 RETURNING token`,
			holder, ms(l.Until), name, ms(now), ms(now.Add(-every))).Scan(&l.Token)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	if err != nil {
		return catalog.JobLease{}, false, fmt.Errorf("sqlite: acquire job %s: %w", name, err)
	}
	return l, ok, nil
}

// ReleaseJob frees a job lease; done records the job completed now.
func (c *Catalog) ReleaseJob(ctx context.Context, l catalog.JobLease, done bool) error {
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		res, err := tx.ExecContext(ctx, `UPDATE compactor_jobs SET holder = NULL, lease_until = 0,
			done_at = CASE WHEN ?1 THEN ?2 ELSE done_at END
			WHERE name = ?3 AND holder = ?4 AND token = ?5`, done, ms(now), l.Name, l.Holder, l.Token)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("lease token %d lost: %w", l.Token, catalog.ErrCompactionConflict)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: release job %s: %w", l.Name, err)
	}
	return nil
}

// CompactionState reads a partition's state, its topic's (deleted or not) and the
// checkpoint, in one snapshot.
func (c *Catalog) CompactionState(ctx context.Context, l catalog.PartitionLease) (catalog.CompactionState, error) {
	st, err := c.compactionState(ctx, l)
	if err != nil {
		return st, fmt.Errorf("sqlite: compaction state of topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	return st, nil
}

func (c *Catalog) compactionState(ctx context.Context, l catalog.PartitionLease) (catalog.CompactionState, error) {
	var st catalog.CompactionState
	tx, err := c.r.BeginTx(ctx, nil)
	if err != nil {
		return st, err
	}
	defer tx.Rollback()
	if st.Now, err = scanNow(tx.QueryRowContext(ctx, nowSQL)); err != nil {
		return st, err
	}
	st.SettledBefore = st.Now.Add(-catalog.SettleAge(c.opts.CommitTimeout))
	var deleted sql.NullInt64
	row := tx.QueryRowContext(ctx, `SELECT `+topicColumns+`, deleted_at FROM topics WHERE id = ?`, l.TopicID)
	var (
		configs string
		created int64
		uuid    []byte
	)
	err = row.Scan(&st.Topic.ID, &uuid, &st.Topic.Name, &st.Topic.Partitions, &configs, &created, &deleted)
	if errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("topic id %d: %w", l.TopicID, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return st, err
	}
	copy(st.Topic.UUID[:], uuid)
	st.Topic.Configs = map[string]string{}
	if err := json.Unmarshal([]byte(configs), &st.Topic.Configs); err != nil {
		return st, fmt.Errorf("topic %d: configs: %w", st.Topic.ID, err)
	}
	st.Topic.CreatedAt = time.UnixMilli(created).UTC()
	st.Deleted = deleted.Valid
	st.Partition = catalog.PartitionInfo{TopicID: l.TopicID, Partition: l.Partition}
	err = tx.QueryRowContext(ctx, `SELECT log_start_offset, high_watermark, bytes, coalesce(`+openTxnSQL+`, high_watermark)
		FROM partitions p WHERE topic_id = ? AND partition = ?`,
		l.TopicID, l.Partition).Scan(&st.Partition.LogStartOffset, &st.Partition.HighWatermark, &st.Partition.Bytes, &st.Partition.LastStableOffset)
	if errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("topic id %d partition %d: %w", l.TopicID, l.Partition, catalog.ErrPartitionOutOfRange)
	}
	if err != nil {
		return st, err
	}
	var compacted int64
	err = tx.QueryRowContext(ctx, `SELECT clean_offset, tombstone_due, compacted_at FROM compactor_partitions WHERE topic_id = ? AND partition = ?`,
		l.TopicID, l.Partition).Scan(&st.Checkpoint.CleanOffset, &st.Checkpoint.TombstoneDue, &compacted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, err
	}
	st.Checkpoint.CompactedAt = fromMS(compacted)
	return st, nil
}

// A chunk row's append time; a row from before the column existed takes its segment's
// commit time (for a merged row the merge's: later, never early).
const appendTimeSQL = `coalesce(c.append_time, s.created_at)`

const compactionChunksSQL = `SELECT c.base_offset, c.last_offset, s.key, s.size, c.pos, c.len, c.max_timestamp,
	c.real_offsets, c.running_max_timestamp, s.created_at, ` + appendTimeSQL + `
	FROM chunks c JOIN segments s ON s.id = c.segment_id
	WHERE c.topic_id = ?1 AND c.partition = ?2 AND c.last_offset >= ?3
	ORDER BY c.last_offset LIMIT ?4`

// CompactionChunks returns up to limit rows from the one holding from.
func (c *Catalog) CompactionChunks(ctx context.Context, topicID int64, partition int32, from int64, limit int) ([]catalog.CompactionChunk, error) {
	rows, err := c.r.QueryContext(ctx, compactionChunksSQL, topicID, partition, from, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: compaction chunks of topic id %d partition %d from %d: %w", topicID, partition, from, err)
	}
	defer rows.Close()
	var out []catalog.CompactionChunk
	for rows.Next() {
		ch := catalog.CompactionChunk{Chunk: catalog.Chunk{TopicID: topicID, Partition: partition}}
		var created int64
		if err := rows.Scan(&ch.BaseOffset, &ch.LastOffset, &ch.SegmentKey, &ch.SegmentSize, &ch.Pos, &ch.Len,
			&ch.MaxTimestamp, &ch.RealOffsets, &ch.RunningMaxTimestamp, &created, &ch.AppendTime); err != nil {
			return nil, fmt.Errorf("sqlite: compaction chunks of topic id %d partition %d: %w", topicID, partition, err)
		}
		ch.SegmentCreated = time.UnixMilli(created).UTC()
		out = append(out, ch)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: compaction chunks of topic id %d partition %d: %w", topicID, partition, err)
	}
	return out, nil
}

// leaseHeld answers whether l still holds its partition.
func leaseHeld(ctx context.Context, tx *sql.Tx, l catalog.PartitionLease) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM compactor_partitions
		WHERE topic_id = ? AND partition = ? AND holder = ? AND token = ?`, l.TopicID, l.Partition, l.Holder, l.Token).Scan(&n)
	return n == 1, err
}

// checkLease fails with ErrCompactionConflict unless l still holds its partition.
func checkLease(ctx context.Context, tx *sql.Tx, l catalog.PartitionLease) error {
	held, err := leaseHeld(ctx, tx, l)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("lease token %d of %s lost: %w", l.Token, l.Holder, catalog.ErrCompactionConflict)
	}
	return nil
}

// markDeleting turns the given segments 'deleting' when no chunk row refers to them any
// more.
func markDeleting(ctx context.Context, tx *sql.Tx, now time.Time, ids []int64) error {
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE segments SET state = 'deleting', marked_at = ?1
			WHERE id = ?2 AND state = 'live' AND NOT EXISTS (SELECT 1 FROM chunks WHERE segment_id = ?2)`, ms(now), id); err != nil {
			return fmt.Errorf("mark segment %d deleting: %w", id, err)
		}
	}
	return nil
}

// SwapTx runs a swap's statements in one immediate transaction (engine.SwapBackend).
func (e sqliteEngine) SwapTx(ctx context.Context, fn func(engine.SwapStmts) error) error {
	return e.c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error { return fn(sqliteSwap{tx, now}) })
}

// sqliteSwap is the swap's statements (engine.SwapStmts). The one writer holds the
// whole file, so reads need no locks; now is the clock writeTx read.
type sqliteSwap struct {
	tx  *sql.Tx
	now time.Time
}

func (q sqliteSwap) LockPartition(ctx context.Context, tp catalog.TopicPartition) (time.Time, int64, error) {
	var logStart int64
	err := q.tx.QueryRowContext(ctx, `SELECT log_start_offset FROM partitions WHERE topic_id = ? AND partition = ?`,
		tp.TopicID, tp.Partition).Scan(&logStart)
	return q.now, logStart, err
}

func (q sqliteSwap) LeaseHeld(ctx context.Context, l catalog.PartitionLease) (bool, error) {
	return leaseHeld(ctx, q.tx, l)
}

func (q sqliteSwap) RangeRows(ctx context.Context, tp catalog.TopicPartition, first, last int64, settle time.Duration) ([]engine.SwapOldRow, error) {
	rows, err := q.tx.QueryContext(ctx, `SELECT c.segment_id, c.base_offset, c.last_offset, s.key, s.size, c.pos, c.len,
			c.real_offsets, s.created_at, `+appendTimeSQL+`
		FROM chunks c JOIN segments s ON s.id = c.segment_id
		WHERE c.topic_id = ?1 AND c.partition = ?2 AND c.last_offset >= ?3 AND c.base_offset <= ?4
		ORDER BY c.last_offset`, tp.TopicID, tp.Partition, first, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	settled := ms(q.now.Add(-settle))
	var out []engine.SwapOldRow
	for rows.Next() {
		r := engine.SwapOldRow{Chunk: catalog.Chunk{TopicID: tp.TopicID, Partition: tp.Partition}}
		var created int64
		if err := rows.Scan(&r.SegmentID, &r.BaseOffset, &r.LastOffset, &r.SegmentKey, &r.SegmentSize, &r.Pos, &r.Len,
			&r.RealOffsets, &created, &r.AppendTime); err != nil {
			return nil, err
		}
		r.Settled = created < settled
		out = append(out, r)
	}
	return out, rows.Err()
}

func (q sqliteSwap) PrevRunningMax(ctx context.Context, tp catalog.TopicPartition, first int64) (int64, error) {
	prev := catalog.NoTimestamp
	err := q.tx.QueryRowContext(ctx, `SELECT running_max_timestamp FROM chunks WHERE topic_id = ? AND partition = ? AND last_offset < ?
		ORDER BY last_offset DESC LIMIT 1`, tp.TopicID, tp.Partition, first).Scan(&prev)
	if errors.Is(err, sql.ErrNoRows) {
		return catalog.NoTimestamp, nil
	}
	return prev, err
}

func (q sqliteSwap) DeleteRange(ctx context.Context, tp catalog.TopicPartition, first, last int64) error {
	_, err := q.tx.ExecContext(ctx, `DELETE FROM chunks WHERE topic_id = ? AND partition = ? AND last_offset >= ? AND base_offset <= ?`,
		tp.TopicID, tp.Partition, first, last)
	return err
}

func (q sqliteSwap) InsertSegment(ctx context.Context, key string, size int64, now time.Time) (int64, bool, error) {
	res, err := q.tx.ExecContext(ctx, `INSERT INTO segments (key, size, state, created_at) VALUES (?, ?, 'live', ?)
		ON CONFLICT (key) DO NOTHING`, key, size, ms(now))
	if err != nil {
		return 0, false, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return 0, false, nil
	}
	id, err := res.LastInsertId()
	return id, err == nil, err
}

func (q sqliteSwap) InsertChunks(ctx context.Context, segID int64, rows []catalog.ChunkRow, appendTimes []int64) error {
	for i, ch := range rows {
		if _, err := q.tx.ExecContext(ctx, `INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len,
			max_timestamp, running_max_timestamp, real_offsets, append_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)`,
			ch.TopicID, ch.Partition, ch.BaseOffset, ch.LastOffset, segID, ch.Pos, ch.Len, ch.MaxTimestamp, ch.RunningMaxTimestamp,
			appendTimes[i]); err != nil {
			return fmt.Errorf("row [%d, %d]: %w", ch.BaseOffset, ch.LastOffset, err)
		}
	}
	return nil
}

func (q sqliteSwap) AddBytes(ctx context.Context, tp catalog.TopicPartition, delta int64) error {
	_, err := q.tx.ExecContext(ctx, `UPDATE partitions SET bytes = bytes + ? WHERE topic_id = ? AND partition = ?`,
		delta, tp.TopicID, tp.Partition)
	return err
}

func (q sqliteSwap) MarkDeleting(ctx context.Context, ids []int64, now time.Time) error {
	return markDeleting(ctx, q.tx, now, ids)
}

// DeleteRecords advances a partition's log start offset (never backwards).
func (c *Catalog) DeleteRecords(ctx context.Context, topicID int64, partition int32, offset int64) (catalog.PartitionInfo, error) {
	var info catalog.PartitionInfo
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		var err error
		if info, err = partitionState(ctx, tx, topicID, partition); err != nil {
			return err
		}
		start, err := catalog.NewLogStart(info, offset)
		if err != nil || start == info.LogStartOffset {
			return err
		}
		var gone int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(len), 0) FROM chunks
			WHERE topic_id = ? AND partition = ? AND last_offset >= ? AND last_offset < ?`,
			topicID, partition, info.LogStartOffset, start).Scan(&gone); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE partitions SET log_start_offset = ?1, bytes = bytes - ?2, compact_due = min(coalesce(compact_due, ?3), ?3)
			WHERE topic_id = ?4 AND partition = ?5`, start, gone, ms(now), topicID, partition); err != nil {
			return err
		}
		info.LogStartOffset = start
		info.Bytes -= gone
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("sqlite: delete records of topic id %d partition %d before %d: %w", topicID, partition, offset, err)
	}
	return info, nil
}

// DropChunks deletes the partition's settled rows below its log start (all of them for
// a deleted topic).
func (c *Catalog) DropChunks(ctx context.Context, l catalog.PartitionLease) (dropped, pending int, err error) {
	err = c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		var deleted bool
		var logStart int64
		if err := tx.QueryRowContext(ctx, `SELECT t.deleted_at IS NOT NULL, p.log_start_offset
			FROM partitions p JOIN topics t ON t.id = p.topic_id WHERE p.topic_id = ? AND p.partition = ?`,
			l.TopicID, l.Partition).Scan(&deleted, &logStart); err != nil {
			return err
		}
		below := logStart
		if deleted {
			below = 1<<63 - 1
		}
		settled := ms(now.Add(-catalog.SettleAge(c.opts.CommitTimeout)))
		rows, err := tx.QueryContext(ctx, `DELETE FROM chunks WHERE id IN (
				SELECT c.id FROM chunks c JOIN segments s ON s.id = c.segment_id
				WHERE c.topic_id = ?1 AND c.partition = ?2 AND c.last_offset < ?3 AND s.created_at < ?4
				ORDER BY c.last_offset LIMIT ?5)
			RETURNING segment_id`, l.TopicID, l.Partition, below, settled, dropBatch)
		if err != nil {
			return err
		}
		var (
			segIDs []int64
			seen   = map[int64]bool{}
		)
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			if !seen[id] {
				seen[id] = true
				segIDs = append(segIDs, id)
			}
			dropped++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if deleted {
			if _, err := tx.ExecContext(ctx, `UPDATE partitions SET bytes = 0 WHERE topic_id = ? AND partition = ?`, l.TopicID, l.Partition); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM chunks WHERE topic_id = ? AND partition = ? AND last_offset < ?`,
			l.TopicID, l.Partition, below).Scan(&pending); err != nil {
			return err
		}
		// Markers are catalog rows only (no object holds them): nothing to settle.
		if _, err := tx.ExecContext(ctx, `DELETE FROM txn_markers WHERE topic_id = ? AND partition = ? AND marker_offset < ?`,
			l.TopicID, l.Partition, below); err != nil {
			return fmt.Errorf("drop markers: %w", err)
		}
		return markDeleting(ctx, tx, now, segIDs)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: drop chunks of topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	return dropped, pending, nil
}

// AbortedTxns returns the aborted transactions whose records may lie in [from, to] (see
// catalog.Compaction).
func (c *Catalog) AbortedTxns(ctx context.Context, topicID int64, partition int32, from, to int64) ([]catalog.AbortedTxn, error) {
	rows, err := c.r.QueryContext(ctx, abortsFrom, topicID, partition, from, to)
	if err != nil {
		return nil, fmt.Errorf("sqlite: aborted transactions of topic id %d partition %d: %w", topicID, partition, err)
	}
	defer rows.Close()
	var out []catalog.AbortedTxn
	for rows.Next() {
		var a catalog.AbortedTxn
		if err := rows.Scan(&a.ProducerID, &a.FirstOffset, &a.LastOffset); err != nil {
			return nil, fmt.Errorf("sqlite: aborted transactions of topic id %d partition %d: %w", topicID, partition, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: aborted transactions of topic id %d partition %d: %w", topicID, partition, err)
	}
	return out, nil
}

// DropMarkers deletes the leased partition's markers below an offset decided before a
// time (see catalog.Compaction).
func (c *Catalog) DropMarkers(ctx context.Context, l catalog.PartitionLease, below int64, before time.Time) (dropped int, next int64, err error) {
	err = c.writeTx(ctx, func(tx *sql.Tx, _ time.Time) error {
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM txn_markers WHERE topic_id = ? AND partition = ? AND marker_offset < ? AND timestamp_ms < ?`,
			l.TopicID, l.Partition, below, ms(before))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		dropped = int(n)
		return tx.QueryRowContext(ctx, `SELECT coalesce(min(timestamp_ms), 0) FROM txn_markers WHERE topic_id = ? AND partition = ? AND marker_offset < ?`,
			l.TopicID, l.Partition, below).Scan(&next)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: drop markers of topic id %d partition %d below %d: %w", l.TopicID, l.Partition, below, err)
	}
	return dropped, next, nil
}

// MarkUnreferenced marks settled live segments without chunk rows 'deleting'.
func (c *Catalog) MarkUnreferenced(ctx context.Context, limit int) (int, error) {
	var n int64
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		res, err := tx.ExecContext(ctx, `UPDATE segments SET state = 'deleting', marked_at = ?1
			WHERE id IN (SELECT s.id FROM segments s
				WHERE s.state = 'live' AND s.created_at < ?2
				  AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.segment_id = s.id)
				LIMIT ?3)`, ms(now), ms(now.Add(-catalog.SettleAge(c.opts.CommitTimeout))), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: mark unreferenced segments: %w", err)
	}
	return int(n), nil
}

// DeletableSegments lists 'deleting' segments marked more than grace ago.
func (c *Catalog) DeletableSegments(ctx context.Context, grace time.Duration, limit int) ([]string, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT key FROM segments WHERE state = 'deleting' AND marked_at < (`+nowSQL+`) - ?
		ORDER BY marked_at LIMIT ?`, grace.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: deletable segments: %w", err)
	}
	keys, err := scanKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: deletable segments: %w", err)
	}
	return keys, nil
}

func scanKeys(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

func jsonKeys(keys []string) string {
	b, _ := json.Marshal(keys) // strings always encode
	return string(b)
}

// ForgetSegments drops the rows of 'deleting' or 'aborted' segments without chunk rows.
func (c *Catalog) ForgetSegments(ctx context.Context, keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	var n int64
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM segments
			WHERE key IN (SELECT value FROM json_each(?)) AND state IN ('deleting', 'aborted')
			  AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.segment_id = segments.id)`, jsonKeys(keys))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: forget %d segments: %w", len(keys), err)
	}
	return int(n), nil
}

// OrphanHorizon is the database clock minus SettleAge.
func (c *Catalog) OrphanHorizon(ctx context.Context) (time.Time, error) {
	now, err := c.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-catalog.SettleAge(c.opts.CommitTimeout)), nil
}

// SegmentStates returns the state of each key that has a row.
func (c *Catalog) SegmentStates(ctx context.Context, keys []string) (map[string]catalog.SegmentState, error) {
	out := make(map[string]catalog.SegmentState, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := c.r.QueryContext(ctx, `SELECT key, state FROM segments WHERE key IN (SELECT value FROM json_each(?))`, jsonKeys(keys))
	if err != nil {
		return nil, fmt.Errorf("sqlite: segment states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, s string
		if err := rows.Scan(&k, &s); err != nil {
			return nil, fmt.Errorf("sqlite: segment states: %w", err)
		}
		out[k] = catalog.SegmentState(s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: segment states: %w", err)
	}
	return out, nil
}

// FenceOrphans claims old keys without a row with the fencing insert.
func (c *Catalog) FenceOrphans(ctx context.Context, keys []string) ([]string, error) {
	var out []string
	err := c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		horizon := now.Add(-catalog.SettleAge(c.opts.CommitTimeout))
		for _, k := range keys {
			kt, err := engine.KeyTime(k)
			if err != nil || !kt.Before(horizon) {
				continue // not a segment key, or too young to be an orphan
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO segments (key, size, state, created_at, marked_at)
				VALUES (?1, 0, 'aborted', ?2, ?2) ON CONFLICT (key) DO NOTHING`, k, ms(now)); err != nil {
				return fmt.Errorf("fence %s: %w", k, err)
			}
			var state string
			if err := tx.QueryRowContext(ctx, `SELECT state FROM segments WHERE key = ?`, k).Scan(&state); err != nil {
				return fmt.Errorf("fence %s: %w", k, err)
			}
			if state == string(catalog.SegmentAborted) {
				out = append(out, k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: fence %d orphans: %w", len(keys), err)
	}
	return out, nil
}

// AbortedSegments lists 'aborted' keys older than the orphan horizon.
func (c *Catalog) AbortedSegments(ctx context.Context, limit int) ([]string, error) {
	horizon, err := c.OrphanHorizon(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.r.QueryContext(ctx, `SELECT key FROM segments WHERE state = 'aborted' AND created_at < ? ORDER BY created_at LIMIT ?`,
		ms(horizon), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: aborted segments: %w", err)
	}
	keys, err := scanKeys(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: aborted segments: %w", err)
	}
	out := keys[:0]
	for _, k := range keys {
		if kt, err := engine.KeyTime(k); err == nil && kt.Before(horizon) {
			out = append(out, k)
		}
	}
	return out, nil
}
