package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

var _ catalog.Compaction = (*Catalog)(nil)

// The compactor's side of the catalog (catalog/compact.go). None of this is on the
// produce path, so it favours plain statements in explicit transactions over the
// commit's one-round-trip function. Lock order, as everywhere: partition rows, then
// compactor_partitions rows, then segment rows (by id).

// dropBatch bounds the rows one DropChunks call deletes.
const dropBatch = 5000

// settleMS is SettleAge in milliseconds, for SQL intervals.
func (c *Catalog) settleMS() int64 { return catalog.SettleAge(c.commitTimeout).Milliseconds() }

// acquireSQL leases up to %d partitions that are due, most overdue first. The due
// ones come from the partitions_compact_due index, in order, skipping those leased now
// (their number is bounded by the compactors' batches); statement_timestamp() and not
// clock_timestamp(), which is volatile and so could not bound an index scan. A
// partition the compactor never leased gets its lease row here; the others are
// claimed with FOR UPDATE SKIP LOCKED, so compactors never queue behind each other:
// one skips what another is claiming, and a row claimed since it was read is seen
// as leased when it is locked.
//
// The limit is written into the statement, not bound: a generic plan guesses a bound
// LIMIT at a tenth of the table, and then joins the lease rows by scanning them all.
// For the same reason the lease of each due partition is looked up by a scalar
// subquery, one primary-key probe per partition read, where NOT EXISTS would become an
// anti join over every lease row ever written.
const acquireSQL = `WITH due AS MATERIALIZED (
		SELECT p.topic_id, p.partition, p.compact_due FROM partitions p
		WHERE p.compact_due <= statement_timestamp()
		  AND coalesce((SELECT c.lease_until FROM compactor_partitions c
		                 WHERE c.topic_id = p.topic_id AND c.partition = p.partition), '-infinity') < statement_timestamp()
		ORDER BY p.compact_due
		LIMIT %d
	), fresh AS (
		INSERT INTO compactor_partitions (topic_id, partition, holder, token, lease_until)
		SELECT d.topic_id, d.partition, $1, 1, clock_timestamp() + $2::bigint * interval '1 millisecond' FROM due d
		WHERE NOT EXISTS (SELECT 1 FROM compactor_partitions c WHERE c.topic_id = d.topic_id AND c.partition = d.partition)
		ORDER BY d.topic_id, d.partition
		ON CONFLICT DO NOTHING
		RETURNING topic_id, partition, token, lease_until
	), renewed AS (
		UPDATE compactor_partitions c
		SET holder = $1, token = c.token + 1, lease_until = clock_timestamp() + $2::bigint * interval '1 millisecond'
		FROM (SELECT c2.topic_id, c2.partition FROM compactor_partitions c2
		      JOIN due d ON d.topic_id = c2.topic_id AND d.partition = c2.partition
		      WHERE c2.lease_until < statement_timestamp()
		      ORDER BY c2.topic_id, c2.partition
		      FOR UPDATE OF c2 SKIP LOCKED) x
		WHERE c.topic_id = x.topic_id AND c.partition = x.partition
		RETURNING c.topic_id, c.partition, c.token, c.lease_until
	)
	SELECT l.topic_id, l.partition, l.token, l.lease_until, d.compact_due
	FROM (SELECT * FROM fresh UNION ALL SELECT * FROM renewed) l
	JOIN due d ON d.topic_id = l.topic_id AND d.partition = l.partition
	ORDER BY d.compact_due`

// AcquirePartitions leases up to max due partitions, most overdue first.
func (c *Catalog) AcquirePartitions(ctx context.Context, holder string, ttl time.Duration, max int) ([]catalog.PartitionLease, error) {
	if max <= 0 {
		return nil, nil
	}
	rows, err := c.pool.Query(ctx, fmt.Sprintf(acquireSQL, max), holder, ttl.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("postgres: acquire partitions for %s: %w", holder, err)
	}
	var out []catalog.PartitionLease
	l := catalog.PartitionLease{Holder: holder}
	_, err = pgx.ForEachRow(rows, []any{&l.TopicID, &l.Partition, &l.Token, &l.Until, &l.Due}, func() error {
		l.Until, l.Due = l.Until.UTC(), l.Due.UTC()
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: acquire partitions for %s: %w", holder, err)
	}
	return out, nil
}

// ReleasePartition records the checkpoint and the next due time, and frees the lease.
func (c *Catalog) ReleasePartition(ctx context.Context, l catalog.PartitionLease, r catalog.PartitionRelease) error {
	cp := r.Checkpoint
	var compactedArg any = cp.CompactedAt
	if cp.CompactedAt.IsZero() {
		compactedArg = nil
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		// The partition row first (lock order), with its topic: what changed since the
		// pass read them brings the due time forward (engine.ReleaseDue).
		cur := catalog.CompactionState{Partition: catalog.PartitionInfo{TopicID: l.TopicID, Partition: l.Partition}}
		err := tx.QueryRow(ctx, `SELECT clock_timestamp(), p.log_start_offset, p.high_watermark, t.configs, t.deleted_at IS NOT NULL
			FROM partitions p JOIN topics t ON t.id = p.topic_id
			WHERE p.topic_id = $1 AND p.partition = $2 FOR NO KEY UPDATE OF p`, l.TopicID, l.Partition).
			Scan(&cur.Now, &cur.Partition.LogStartOffset, &cur.Partition.HighWatermark, &cur.Topic.Configs, &cur.Deleted)
		if err != nil {
			return fmt.Errorf("read partition: %w", err)
		}
		var due any
		if d := engine.ReleaseDue(r, cur, catalog.SettleAge(c.commitTimeout)); !d.IsZero() {
			due = d
		}
		if _, err := tx.Exec(ctx, `UPDATE partitions SET compact_due = $3 WHERE topic_id = $1 AND partition = $2`,
			l.TopicID, l.Partition, due); err != nil {
			return fmt.Errorf("record due time: %w", err)
		}
		tag, err := tx.Exec(ctx, `UPDATE compactor_partitions
			SET holder = NULL, lease_until = '-infinity', last_pass_at = clock_timestamp(),
			    clean_offset = $1, tombstone_due = $2, compacted_at = coalesce($3::timestamptz, '-infinity'),
			    reclaimed_at = CASE WHEN $4 THEN coalesce(reclaimed_at, clock_timestamp()) ELSE reclaimed_at END
			WHERE topic_id = $5 AND partition = $6 AND holder = $7 AND token = $8`,
			cp.CleanOffset, cp.TombstoneDue, compactedArg, r.Reclaimed, l.TopicID, l.Partition, l.Holder, l.Token)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("lease token %d lost: %w", l.Token, catalog.ErrCompactionConflict)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: release topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	return nil
}

// backlogSQL counts the due partitions on the partitions_compact_due index.
const backlogSQL = `SELECT statement_timestamp(), count(*), min(compact_due) FROM partitions
	WHERE compact_due <= statement_timestamp()`

// CompactionBacklog counts the partitions due now and finds the most overdue.
func (c *Catalog) CompactionBacklog(ctx context.Context) (catalog.CompactionBacklog, error) {
	var (
		b      catalog.CompactionBacklog
		oldest *time.Time
	)
	if err := c.pool.QueryRow(ctx, backlogSQL).Scan(&b.Now, &b.Due, &oldest); err != nil {
		return b, fmt.Errorf("postgres: compaction backlog: %w", err)
	}
	b.Now = b.Now.UTC()
	if oldest != nil {
		b.Oldest = oldest.UTC()
	}
	return b, nil
}

// AcquireJob leases a named job that is free and last completed at least every ago.
func (c *Catalog) AcquireJob(ctx context.Context, name, holder string, ttl, every time.Duration) (catalog.JobLease, bool, error) {
	l := catalog.JobLease{Name: name, Holder: holder}
	ok := false
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO compactor_jobs (name) VALUES ($1) ON CONFLICT DO NOTHING`, name); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `UPDATE compactor_jobs j
			SET holder = $1, token = j.token + 1, lease_until = clock_timestamp() + $2::bigint * interval '1 millisecond'
			FROM (SELECT name FROM compactor_jobs
			      WHERE name = $3 AND lease_until < clock_timestamp()
			        AND done_at <= clock_timestamp() - $4::bigint * interval '1 millisecond'
			      FOR UPDATE SKIP LOCKED) x
			WHERE j.name = x.name
			RETURNING j.token, j.lease_until`, holder, ttl.Milliseconds(), name, every.Milliseconds()).Scan(&l.Token, &l.Until)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		ok = err == nil
		l.Until = l.Until.UTC()
		return err
	})
	if err != nil {
		return catalog.JobLease{}, false, fmt.Errorf("postgres: acquire job %s: %w", name, err)
	}
	return l, ok, nil
}

// ReleaseJob frees a job lease; done records the job completed now.
func (c *Catalog) ReleaseJob(ctx context.Context, l catalog.JobLease, done bool) error {
	tag, err := c.pool.Exec(ctx, `UPDATE compactor_jobs SET holder = NULL, lease_until = '-infinity',
		done_at = CASE WHEN $1 THEN clock_timestamp() ELSE done_at END
		WHERE name = $2 AND holder = $3 AND token = $4`, done, l.Name, l.Holder, l.Token)
	if err != nil {
		return fmt.Errorf("postgres: release job %s: %w", l.Name, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: release job %s: lease token %d lost: %w", l.Name, l.Token, catalog.ErrCompactionConflict)
	}
	return nil
}

// CompactionState reads a partition's state, its topic's (deleted or not) and the
// checkpoint, in one statement.
func (c *Catalog) CompactionState(ctx context.Context, l catalog.PartitionLease) (catalog.CompactionState, error) {
	var (
		st        catalog.CompactionState
		deletedAt *time.Time
		partFound bool
		clean     *int64
		due       *int64
		compAt    *time.Time
		logStart  *int64
		hwm       *int64
		nbytes    *int64
		lso       *int64
	)
	err := c.pool.QueryRow(ctx, `
		SELECT clock_timestamp(), t.id, t.uuid, t.name, t.partitions, t.configs, t.created_at, t.deleted_at,
		       p.log_start_offset, p.high_watermark, p.bytes, coalesce(`+openTxnSQL+`, p.high_watermark),
		       cp.clean_offset, cp.tombstone_due, nullif(cp.compacted_at, '-infinity')
		FROM topics t
		LEFT JOIN partitions p ON p.topic_id = t.id AND p.partition = $2
		LEFT JOIN compactor_partitions cp ON cp.topic_id = t.id AND cp.partition = $2
		WHERE t.id = $1`, l.TopicID, l.Partition).Scan(&st.Now, &st.Topic.ID, &st.Topic.UUID, &st.Topic.Name, &st.Topic.Partitions,
		&st.Topic.Configs, &st.Topic.CreatedAt, &deletedAt, &logStart, &hwm, &nbytes, &lso, &clean, &due, &compAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("postgres: compaction state of topic id %d: %w", l.TopicID, catalog.ErrTopicNotFound)
	}
	if err != nil {
		return st, fmt.Errorf("postgres: compaction state of topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	partFound = logStart != nil
	if !partFound {
		return st, fmt.Errorf("postgres: compaction state of topic id %d partition %d: %w", l.TopicID, l.Partition, catalog.ErrPartitionOutOfRange)
	}
	st.Now = st.Now.UTC()
	st.SettledBefore = st.Now.Add(-catalog.SettleAge(c.commitTimeout))
	st.Topic.CreatedAt = st.Topic.CreatedAt.UTC()
	if st.Topic.Configs == nil {
		st.Topic.Configs = map[string]string{}
	}
	st.Deleted = deletedAt != nil
	st.Partition = catalog.PartitionInfo{TopicID: l.TopicID, Partition: l.Partition,
		LogStartOffset: *logStart, HighWatermark: *hwm, Bytes: *nbytes, LastStableOffset: *lso}
	if clean != nil {
		st.Checkpoint.CleanOffset = *clean
		st.Checkpoint.TombstoneDue = *due
		if compAt != nil {
			st.Checkpoint.CompactedAt = compAt.UTC()
		}
	}
	return st, nil
}

// appendTimeSQL is a chunk row c's append time; a row from before the column existed
// takes its segment s's commit time (for a merged row the merge's: later, never early).
const appendTimeSQL = `coalesce(c.append_time, floor(extract(epoch FROM s.created_at) * 1000)::bigint)`

// CompactionChunks returns up to limit rows from the one holding from.
func (c *Catalog) CompactionChunks(ctx context.Context, topicID int64, partition int32, from int64, limit int) ([]catalog.CompactionChunk, error) {
	rows, err := c.pool.Query(ctx, `SELECT c.base_offset, c.last_offset, s.key, s.size, c.pos, c.len, c.max_timestamp,
		c.real_offsets, c.running_max_timestamp, s.created_at, `+appendTimeSQL+`
		FROM chunks c JOIN segments s ON s.id = c.segment_id
		WHERE c.topic_id = $1 AND c.partition = $2 AND c.last_offset >= $3
		ORDER BY c.last_offset LIMIT $4`, topicID, partition, from, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: compaction chunks of topic id %d partition %d from %d: %w", topicID, partition, from, err)
	}
	var out []catalog.CompactionChunk
	ch := catalog.CompactionChunk{Chunk: catalog.Chunk{TopicID: topicID, Partition: partition}}
	_, err = pgx.ForEachRow(rows, []any{&ch.BaseOffset, &ch.LastOffset, &ch.SegmentKey, &ch.SegmentSize, &ch.Pos, &ch.Len,
		&ch.MaxTimestamp, &ch.RealOffsets, &ch.RunningMaxTimestamp, &ch.SegmentCreated, &ch.AppendTime}, func() error {
		ch.SegmentCreated = ch.SegmentCreated.UTC()
		out = append(out, ch)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: compaction chunks of topic id %d partition %d from %d: %w", topicID, partition, from, err)
	}
	return out, nil
}

// leaseHeld answers whether l still holds its partition; the row is share-locked until
// the transaction ends, so the lease cannot be taken over while a write made under it
// commits.
func leaseHeld(ctx context.Context, tx pgx.Tx, l catalog.PartitionLease) (bool, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM compactor_partitions
		WHERE topic_id = $1 AND partition = $2 AND holder = $3 AND token = $4 FOR SHARE) x`,
		l.TopicID, l.Partition, l.Holder, l.Token).Scan(&n)
	return n == 1, err
}

// checkLease fails with ErrCompactionConflict unless l still holds its partition
// (leaseHeld).
func checkLease(ctx context.Context, tx pgx.Tx, l catalog.PartitionLease) error {
	held, err := leaseHeld(ctx, tx, l)
	if err != nil {
		return fmt.Errorf("check lease: %w", err)
	}
	if !held {
		return fmt.Errorf("lease token %d of %s lost: %w", l.Token, l.Holder, catalog.ErrCompactionConflict)
	}
	return nil
}

// markDeleting turns segments 'deleting' once no chunk row refers to them. The rows
// are locked first, in id order, and checked in a later statement: under READ
// COMMITTED that statement sees every transaction that dropped rows of the same segment
// and committed before the lock was granted, so two partitions dropping a segment's
// last rows at once cannot both miss that it is empty.
func markDeleting(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT id FROM segments WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
		return fmt.Errorf("lock segments: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE segments s SET state = 'deleting', marked_at = clock_timestamp()
		WHERE s.id = ANY($1) AND s.state = 'live' AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.segment_id = s.id)`, ids); err != nil {
		return fmt.Errorf("mark segments deleting: %w", err)
	}
	return nil
}

// SwapTx runs a swap's statements in one transaction (engine.SwapBackend).
func (e pgEngine) SwapTx(ctx context.Context, fn func(engine.SwapStmts) error) error {
	return pgx.BeginFunc(ctx, e.c.pool, func(tx pgx.Tx) error { return fn(pgSwap{tx}) })
}

// pgSwap is the swap's statements (engine.SwapStmts) in a transaction.
type pgSwap struct{ tx pgx.Tx }

func (q pgSwap) LockPartition(ctx context.Context, tp catalog.TopicPartition) (now time.Time, logStart int64, err error) {
	err = q.tx.QueryRow(ctx, `SELECT clock_timestamp(), log_start_offset FROM partitions
		WHERE topic_id = $1 AND partition = $2 FOR UPDATE`, tp.TopicID, tp.Partition).Scan(&now, &logStart)
	return now, logStart, err
}

func (q pgSwap) LeaseHeld(ctx context.Context, l catalog.PartitionLease) (bool, error) {
	return leaseHeld(ctx, q.tx, l)
}

func (q pgSwap) RangeRows(ctx context.Context, tp catalog.TopicPartition, first, last int64, settle time.Duration) ([]engine.SwapOldRow, error) {
	rows, err := q.tx.Query(ctx, `SELECT c.segment_id, c.base_offset, c.last_offset, s.key, s.size, c.pos, c.len, c.real_offsets,
			s.created_at < clock_timestamp() - $5::bigint * interval '1 millisecond', `+appendTimeSQL+`
		FROM chunks c JOIN segments s ON s.id = c.segment_id
		WHERE c.topic_id = $1 AND c.partition = $2 AND c.last_offset >= $3 AND c.base_offset <= $4
		ORDER BY c.last_offset`, tp.TopicID, tp.Partition, first, last, settle.Milliseconds())
	if err != nil {
		return nil, err
	}
	var (
		out []engine.SwapOldRow
		r   = engine.SwapOldRow{Chunk: catalog.Chunk{TopicID: tp.TopicID, Partition: tp.Partition}}
	)
	_, err = pgx.ForEachRow(rows, []any{&r.SegmentID, &r.BaseOffset, &r.LastOffset, &r.SegmentKey, &r.SegmentSize,
		&r.Pos, &r.Len, &r.RealOffsets, &r.Settled, &r.AppendTime}, func() error {
		out = append(out, r)
		return nil
	})
	return out, err
}

func (q pgSwap) PrevRunningMax(ctx context.Context, tp catalog.TopicPartition, first int64) (int64, error) {
	prev := catalog.NoTimestamp
	err := q.tx.QueryRow(ctx, `SELECT running_max_timestamp FROM chunks
		WHERE topic_id = $1 AND partition = $2 AND last_offset < $3
		ORDER BY last_offset DESC LIMIT 1`, tp.TopicID, tp.Partition, first).Scan(&prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.NoTimestamp, nil
	}
	return prev, err
}

func (q pgSwap) DeleteRange(ctx context.Context, tp catalog.TopicPartition, first, last int64) error {
	_, err := q.tx.Exec(ctx, `DELETE FROM chunks WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND base_offset <= $4`,
		tp.TopicID, tp.Partition, first, last)
	return err
}

// InsertSegment inserts the row; created_at is the column's default (the database
// clock), not now.
func (q pgSwap) InsertSegment(ctx context.Context, key string, size int64, _ time.Time) (int64, bool, error) {
	var id int64
	err := q.tx.QueryRow(ctx, `INSERT INTO segments (key, size, state) VALUES ($1, $2, 'live')
		ON CONFLICT (key) DO NOTHING RETURNING id`, key, size).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

func (q pgSwap) InsertChunks(ctx context.Context, segID int64, rows []catalog.ChunkRow, appendTimes []int64) error {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	base, last, pos, ln, mts, run := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, r := range rows {
		base[i], last[i], pos[i], ln[i], mts[i], run[i] = r.BaseOffset, r.LastOffset, r.Pos, r.Len, r.MaxTimestamp, r.RunningMaxTimestamp
	}
	_, err := q.tx.Exec(ctx, `INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len,
			max_timestamp, running_max_timestamp, real_offsets, append_time)
		SELECT $1, $2, u.b, u.l, $3, u.p, u.n, u.m, u.r, true, u.a
		FROM unnest($4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[]) AS u(b, l, p, n, m, r, a)`,
		rows[0].TopicID, rows[0].Partition, segID, base, last, pos, ln, mts, run, appendTimes)
	return err
}

func (q pgSwap) AddBytes(ctx context.Context, tp catalog.TopicPartition, delta int64) error {
	_, err := q.tx.Exec(ctx, `UPDATE partitions SET bytes = bytes + $1 WHERE topic_id = $2 AND partition = $3`,
		delta, tp.TopicID, tp.Partition)
	return err
}

func (q pgSwap) MarkDeleting(ctx context.Context, ids []int64, _ time.Time) error {
	return markDeleting(ctx, q.tx, ids)
}

// DeleteRecords advances a partition's log start offset (never backwards).
func (c *Catalog) DeleteRecords(ctx context.Context, topicID int64, partition int32, offset int64) (catalog.PartitionInfo, error) {
	info := catalog.PartitionInfo{TopicID: topicID, Partition: partition}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT p.log_start_offset, p.high_watermark, p.bytes, coalesce(`+openTxnSQL+`, p.high_watermark)
			FROM partitions p JOIN topics t ON t.id = p.topic_id AND t.deleted_at IS NULL
			WHERE p.topic_id = $1 AND p.partition = $2 FOR UPDATE OF p`, topicID, partition).
			Scan(&info.LogStartOffset, &info.HighWatermark, &info.Bytes, &info.LastStableOffset)
		if errors.Is(err, pgx.ErrNoRows) {
			return c.partitionMissing(ctx, topicID, partition)
		}
		if err != nil {
			return err
		}
		start, err := catalog.NewLogStart(info, offset)
		if err != nil || start == info.LogStartOffset {
			return err
		}
		var gone int64
		if err := tx.QueryRow(ctx, `WITH g AS (
				SELECT coalesce(sum(len), 0)::bigint AS n FROM chunks
				WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND last_offset < $4)
			UPDATE partitions SET log_start_offset = $4, bytes = bytes - g.n, compact_due = least(compact_due, clock_timestamp()) FROM g
			WHERE topic_id = $1 AND partition = $2 RETURNING g.n`, topicID, partition, info.LogStartOffset, start).Scan(&gone); err != nil {
			return err
		}
		info.LogStartOffset = start
		info.Bytes -= gone
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("postgres: delete records of topic id %d partition %d before %d: %w", topicID, partition, offset, err)
	}
	return info, nil
}

// DropChunks deletes the partition's settled rows below its log start (all of them for
// a deleted topic).
func (c *Catalog) DropChunks(ctx context.Context, l catalog.PartitionLease) (dropped, pending int, err error) {
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var (
			deleted  bool
			logStart int64
		)
		if err := tx.QueryRow(ctx, `SELECT t.deleted_at IS NOT NULL, p.log_start_offset
			FROM partitions p JOIN topics t ON t.id = p.topic_id WHERE p.topic_id = $1 AND p.partition = $2`,
			l.TopicID, l.Partition).Scan(&deleted, &logStart); err != nil {
			return err
		}
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		below := logStart
		if deleted {
			below = math.MaxInt64
		}
		rows, err := tx.Query(ctx, `DELETE FROM chunks c USING (
				SELECT c2.topic_id, c2.partition, c2.last_offset FROM chunks c2 JOIN segments s ON s.id = c2.segment_id
				WHERE c2.topic_id = $1 AND c2.partition = $2 AND c2.last_offset < $3
				  AND s.created_at < clock_timestamp() - $4::bigint * interval '1 millisecond'
				ORDER BY c2.last_offset LIMIT $5) x
			WHERE c.topic_id = x.topic_id AND c.partition = x.partition AND c.last_offset = x.last_offset
			RETURNING c.segment_id`, l.TopicID, l.Partition, below, c.settleMS(), dropBatch)
		if err != nil {
			return err
		}
		seen := map[int64]bool{}
		var ids []int64
		var id int64
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			dropped++
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
			return nil
		}); err != nil {
			return err
		}
		if deleted {
			if _, err := tx.Exec(ctx, `UPDATE partitions SET bytes = 0 WHERE topic_id = $1 AND partition = $2 AND bytes <> 0`,
				l.TopicID, l.Partition); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM chunks WHERE topic_id = $1 AND partition = $2 AND last_offset < $3`,
			l.TopicID, l.Partition, below).Scan(&pending); err != nil {
			return err
		}
		// Markers are catalog rows only (no object holds them): nothing to settle.
		if _, err := tx.Exec(ctx, `DELETE FROM txn_markers WHERE topic_id = $1 AND partition = $2 AND marker_offset < $3`,
			l.TopicID, l.Partition, below); err != nil {
			return fmt.Errorf("drop markers: %w", err)
		}
		return markDeleting(ctx, tx, ids)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: drop chunks of topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	return dropped, pending, nil
}

// AbortedTxns returns the aborted transactions whose records may lie in [from, to] (see
// catalog.Compaction).
func (c *Catalog) AbortedTxns(ctx context.Context, topicID int64, partition int32, from, to int64) ([]catalog.AbortedTxn, error) {
	rows, err := c.pool.Query(ctx, `SELECT producer_id, first_offset, marker_offset FROM txn_markers
		WHERE topic_id = $1 AND partition = $2 AND marker_offset >= $3 AND NOT is_commit
		  AND first_offset IS NOT NULL AND first_offset <= $4 ORDER BY marker_offset`, topicID, partition, from, to)
	if err != nil {
		return nil, fmt.Errorf("postgres: aborted transactions of topic id %d partition %d: %w", topicID, partition, err)
	}
	var out []catalog.AbortedTxn
	var a catalog.AbortedTxn
	if _, err := pgx.ForEachRow(rows, []any{&a.ProducerID, &a.FirstOffset, &a.LastOffset}, func() error {
		out = append(out, a)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: aborted transactions of topic id %d partition %d: %w", topicID, partition, err)
	}
	return out, nil
}

// DropMarkers deletes the leased partition's markers below an offset decided before a
// time (see catalog.Compaction).
func (c *Catalog) DropMarkers(ctx context.Context, l catalog.PartitionLease, below int64, before time.Time) (dropped int, next int64, err error) {
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := checkLease(ctx, tx, l); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM txn_markers WHERE topic_id = $1 AND partition = $2 AND marker_offset < $3 AND timestamp_ms < $4`,
			l.TopicID, l.Partition, below, before.UnixMilli())
		if err != nil {
			return err
		}
		dropped = int(tag.RowsAffected())
		return tx.QueryRow(ctx, `SELECT coalesce(min(timestamp_ms), 0) FROM txn_markers WHERE topic_id = $1 AND partition = $2 AND marker_offset < $3`,
			l.TopicID, l.Partition, below).Scan(&next)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: drop markers of topic id %d partition %d below %d: %w", l.TopicID, l.Partition, below, err)
	}
	return dropped, next, nil
}

// MarkUnreferenced marks settled live segments without chunk rows 'deleting'.
func (c *Catalog) MarkUnreferenced(ctx context.Context, limit int) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT s.id FROM segments s
			WHERE s.state = 'live' AND s.created_at < clock_timestamp() - $1::bigint * interval '1 millisecond'
			  AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.segment_id = s.id)
			ORDER BY s.id LIMIT $2`, c.settleMS(), limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		if err := markDeleting(ctx, tx, ids); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM segments WHERE id = ANY($1) AND state = 'deleting'`, ids).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: mark unreferenced segments: %w", err)
	}
	return int(n), nil
}

// DeletableSegments lists 'deleting' segments marked more than grace ago.
func (c *Catalog) DeletableSegments(ctx context.Context, grace time.Duration, limit int) ([]string, error) {
	rows, err := c.pool.Query(ctx, `SELECT key FROM segments
		WHERE state = 'deleting' AND marked_at < clock_timestamp() - $1::bigint * interval '1 millisecond'
		ORDER BY marked_at LIMIT $2`, grace.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: deletable segments: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: deletable segments: %w", err)
	}
	return keys, nil
}

// ForgetSegments drops the rows of 'deleting' or 'aborted' segments without chunk rows.
func (c *Catalog) ForgetSegments(ctx context.Context, keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	tag, err := c.pool.Exec(ctx, `DELETE FROM segments s
		WHERE s.key = ANY($1) AND s.state IN ('deleting', 'aborted')
		  AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.segment_id = s.id)`, keys)
	if err != nil {
		return 0, fmt.Errorf("postgres: forget %d segments: %w", len(keys), err)
	}
	return int(tag.RowsAffected()), nil
}

// OrphanHorizon is the database clock minus SettleAge.
func (c *Catalog) OrphanHorizon(ctx context.Context) (time.Time, error) {
	now, err := c.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-catalog.SettleAge(c.commitTimeout)), nil
}

// SegmentStates returns the state of each key that has a row.
func (c *Catalog) SegmentStates(ctx context.Context, keys []string) (map[string]catalog.SegmentState, error) {
	out := make(map[string]catalog.SegmentState, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := c.pool.Query(ctx, `SELECT key, state FROM segments WHERE key = ANY($1)`, keys)
	if err != nil {
		return nil, fmt.Errorf("postgres: segment states: %w", err)
	}
	var k, s string
	if _, err := pgx.ForEachRow(rows, []any{&k, &s}, func() error {
		out[k] = catalog.SegmentState(s)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: segment states: %w", err)
	}
	return out, nil
}

// FenceOrphans claims old keys without a row with the fencing insert: the insert waits
// for any commit of the same key in flight, so exactly one of them wins.
func (c *Catalog) FenceOrphans(ctx context.Context, keys []string) ([]string, error) {
	horizon, err := c.OrphanHorizon(ctx)
	if err != nil {
		return nil, err
	}
	var old []string
	for _, k := range keys {
		if kt, err := engine.KeyTime(k); err == nil && kt.Before(horizon) {
			old = append(old, k)
		}
	}
	if len(old) == 0 {
		return nil, nil
	}
	var out []string
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO segments (key, size, state, marked_at)
			SELECT k, 0, 'aborted', clock_timestamp() FROM unnest($1::text[]) AS k
			ON CONFLICT (key) DO NOTHING`, old); err != nil {
			return fmt.Errorf("fencing insert: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT key FROM segments WHERE key = ANY($1) AND state = 'aborted'`, old)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: fence %d orphans: %w", len(old), err)
	}
	return out, nil
}

// AbortedSegments lists 'aborted' keys older than the orphan horizon.
func (c *Catalog) AbortedSegments(ctx context.Context, limit int) ([]string, error) {
	horizon, err := c.OrphanHorizon(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, `SELECT key FROM segments WHERE state = 'aborted' AND created_at < $1
		ORDER BY created_at LIMIT $2`, horizon, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: aborted segments: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: aborted segments: %w", err)
	}
	out := keys[:0]
	for _, k := range keys {
		if kt, err := engine.KeyTime(k); err == nil && kt.Before(horizon) {
			out = append(out, k)
		}
	}
	return out, nil
}
