package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/strata-io/strata/catalog"
)

// The commit's statements. SQLite runs them in-process, so a statement per row costs
// microseconds; what a commit waits for is the WAL fsync.
const (
	selectSegment = `SELECT id, state FROM segments WHERE key = ?`
	selectTopic   = `SELECT partitions, coalesce(json_extract(configs, '$."message.timestamp.type"'), '') = 'LogAppendTime'
		FROM topics WHERE id = ? AND deleted_at IS NULL`
	selectPartition = `SELECT high_watermark, max_timestamp FROM partitions WHERE topic_id = ? AND partition = ?`
	insertSegment   = `INSERT INTO segments (key, size, state, created_at) VALUES (?, ?, 'live', ?)`
	insertChunk     = `INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len,
		max_timestamp, running_max_timestamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	advancePartition = `UPDATE partitions SET high_watermark = ?, max_timestamp = ?, bytes = bytes + ?
		WHERE topic_id = ? AND partition = ? AND high_watermark = ?`
	fenceSegment = `INSERT INTO segments (key, size, state, created_at, marked_at) VALUES (?1, ?2, 'aborted', ?3, ?3)
		ON CONFLICT (key) DO NOTHING`
	selectSegmentChunks = `SELECT topic_id, partition, base_offset, last_offset, pos, len, max_timestamp, running_max_timestamp
		FROM chunks WHERE segment_id = ?`
)

// stmts are the commit path's statements, parsed once: parsing costs more CPU than
// running them. Used inside a transaction through tx.StmtContext, which reuses the
// preparation on the one writer connection.
type stmts struct {
	now, segment, topic, partition, insertSegment, insertChunk, advance, fence, segmentChunks *sql.Stmt
}

func prepare(ctx context.Context, db *sql.DB) (stmts, error) {
	var st stmts
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&st.now, nowSQL},
		{&st.segment, selectSegment},
		{&st.topic, selectTopic},
		{&st.partition, selectPartition},
		{&st.insertSegment, insertSegment},
		{&st.insertChunk, insertChunk},
		{&st.advance, advancePartition},
		{&st.fence, fenceSegment},
		{&st.segmentChunks, selectSegmentChunks},
	} {
		s, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return stmts{}, fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.dst = s
	}
	return st, nil
}

func (st stmts) close() {
	for _, s := range []*sql.Stmt{st.now, st.segment, st.topic, st.partition, st.insertSegment, st.insertChunk, st.advance, st.fence, st.segmentChunks} {
		if s != nil {
			s.Close()
		}
	}
}

// Commit commits one flush in one immediate transaction (see catalog.Catalog).
func (c *Catalog) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := catalog.PlanSegment(seg)
	if err != nil {
		return nil, err
	}
	keyTime, err := catalog.KeyTime(seg.Key)
	if err != nil {
		return nil, err
	}
	tx, err := c.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock, for the whole commit
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: begin: %w", seg.Key, err)
	}
	defer tx.Rollback()

	stmt := func(s *sql.Stmt) *sql.Stmt { return tx.StmtContext(ctx, s) }
	now, err := scanNow(stmt(c.st.now).QueryRowContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	if err := catalog.CheckCommitTime(keyTime, now, c.opts.CommitTimeout); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}

	var (
		segID int64
		state string
	)
	switch err := stmt(c.st.segment).QueryRowContext(ctx, seg.Key).Scan(&segID, &state); {
	case err == nil:
		if state == "aborted" {
			return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, catalog.ErrCommitAborted)
		}
		// Committed before: answer as Settle would, writing nothing.
		res, err := readBack(ctx, stmt(c.st.segmentChunks), plan, segID)
		if err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: already committed: %w", seg.Key, err)
		}
		return res, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}

	topicStmt := stmt(c.st.topic)
	topics := make(map[int64]catalog.TopicState, len(plan.Topics))
	for _, id := range plan.Topics {
		var ts catalog.TopicState
		err := topicStmt.QueryRowContext(ctx, id).Scan(&ts.Partitions, &ts.LogAppendTime)
		if errors.Is(err, sql.ErrNoRows) {
			continue // unknown or deleted: its requests fail with ErrTopicNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: topic %d: %w", seg.Key, id, err)
		}
		topics[id] = ts
	}
	reqErrs := plan.CheckRequests(topics, now)

	partStmt := stmt(c.st.partition)
	parts := make(map[catalog.TopicPartition]catalog.PartitionState, len(plan.Partitions))
	for _, pb := range plan.Partitions {
		accepted := false
		for _, b := range pb.Batches {
			if reqErrs[b.Request] == nil {
				accepted = true
				break
			}
		}
		if !accepted {
			continue
		}
		var ps catalog.PartitionState
		if err := partStmt.QueryRowContext(ctx, pb.TopicID, pb.Partition).Scan(&ps.HighWatermark, &ps.MaxTimestamp); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: topic %d partition %d: %w", seg.Key, pb.TopicID, pb.Partition, err)
		}
		parts[pb.TopicPartition] = ps
	}
	a, err := plan.Assign(reqErrs, parts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}

	res, err := stmt(c.st.insertSegment).ExecContext(ctx, seg.Key, seg.Size, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: insert segment: %w", seg.Key, err)
	}
	if segID, err = res.LastInsertId(); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: insert segment: %w", seg.Key, err)
	}
	ins := stmt(c.st.insertChunk)
	for _, ch := range a.Chunks {
		if _, err := ins.ExecContext(ctx, ch.TopicID, ch.Partition, ch.BaseOffset, ch.LastOffset, segID,
			ch.Pos, ch.Len, ch.MaxTimestamp, ch.RunningMaxTimestamp); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: insert chunk of topic %d partition %d: %w", seg.Key, ch.TopicID, ch.Partition, err)
		}
	}
	advance := stmt(c.st.advance)
	marks := make([]catalog.Watermark, 0, len(a.Advances))
	for _, adv := range a.Advances {
		// The watermark read above is the guard: the write lock makes it hold, and a
		// mismatch would mean offsets assigned twice.
		res, err := advance.ExecContext(ctx, adv.HighWatermark, adv.MaxTimestamp, adv.AddBytes,
			adv.TopicID, adv.Partition, parts[adv.TopicPartition].HighWatermark)
		if err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: advance topic %d partition %d: %w", seg.Key, adv.TopicID, adv.Partition, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return nil, fmt.Errorf("sqlite: commit %s: advance topic %d partition %d: watermark moved under the write lock (%d rows, %v)",
				seg.Key, adv.TopicID, adv.Partition, n, err)
		}
		marks = append(marks, catalog.Watermark{TopicID: adv.TopicID, Partition: adv.Partition, HighWatermark: adv.HighWatermark})
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: commit: %w", seg.Key, err)
	}
	if len(marks) > 0 {
		c.hub.publish(marks)
	}
	return a.Results, nil
}

// Settle settles a commit of unknown outcome with the fencing insert (see
// catalog.Catalog). The immediate transaction waits for any commit of the key in flight
// on this file, in this process (the one writer connection) or another (the write lock).
func (c *Catalog) Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := catalog.PlanSegment(seg)
	if err != nil {
		return nil, err
	}
	if _, err := catalog.KeyTime(seg.Key); err != nil {
		return nil, err
	}
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: begin: %w", seg.Key, err)
	}
	defer tx.Rollback()
	stmt := func(s *sql.Stmt) *sql.Stmt { return tx.StmtContext(ctx, s) }
	now, err := scanNow(stmt(c.st.now).QueryRowContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: %w", seg.Key, err)
	}
	res, err := stmt(c.st.fence).ExecContext(ctx, seg.Key, seg.Size, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: fence: %w", seg.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: fence: %w", seg.Key, err)
	}
	if n == 1 {
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("sqlite: settle %s: fence: commit: %w", seg.Key, err)
		}
		return nil, fmt.Errorf("sqlite: settle %s: fenced: %w", seg.Key, catalog.ErrCommitAborted)
	}
	var (
		segID int64
		state string
	)
	if err := stmt(c.st.segment).QueryRowContext(ctx, seg.Key).Scan(&segID, &state); err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: %w", seg.Key, err)
	}
	if state == "aborted" {
		return nil, fmt.Errorf("sqlite: settle %s: fenced before: %w", seg.Key, catalog.ErrCommitAborted)
	}
	results, err := readBack(ctx, stmt(c.st.segmentChunks), plan, segID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: %w", seg.Key, err)
	}
	return results, nil
}

// readBack answers a committed flush from its chunk rows.
func readBack(ctx context.Context, q *sql.Stmt, plan *catalog.Plan, segID int64) ([]catalog.Result, error) {
	rows, err := q.QueryContext(ctx, segID)
	if err != nil {
		return nil, fmt.Errorf("read chunk rows: %w", err)
	}
	defer rows.Close()
	var chunks []catalog.ChunkRow
	for rows.Next() {
		var ch catalog.ChunkRow
		if err := rows.Scan(&ch.TopicID, &ch.Partition, &ch.BaseOffset, &ch.LastOffset, &ch.Pos, &ch.Len,
			&ch.MaxTimestamp, &ch.RunningMaxTimestamp); err != nil {
			return nil, fmt.Errorf("read chunk rows: %w", err)
		}
		chunks = append(chunks, ch)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read chunk rows: %w", err)
	}
	return plan.ResultsFromChunks(chunks)
}
