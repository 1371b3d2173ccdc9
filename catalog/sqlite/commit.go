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

// The commit's statements. SQLite runs them in-process, so a statement per row costs
// microseconds; what a commit waits for is the WAL fsync.
const (
	selectSegment = `SELECT id, state, created_at FROM segments WHERE key = ?`
	selectTopic   = `SELECT partitions, coalesce(json_extract(configs, '$."message.timestamp.type"'), '') = 'LogAppendTime'
		FROM topics WHERE id = ? AND deleted_at IS NULL`
	selectPartition = `SELECT high_watermark, max_timestamp FROM partitions WHERE topic_id = ? AND partition = ?`
	insertSegment   = `INSERT INTO segments (key, size, state, created_at) VALUES (?, ?, 'live', ?)`
	insertChunk     = `INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len,
		max_timestamp, running_max_timestamp, append_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	advancePartition = `UPDATE partitions SET high_watermark = ?, max_timestamp = ?, bytes = bytes + ?
		WHERE topic_id = ? AND partition = ? AND high_watermark = ?`
	fenceSegment = `INSERT INTO segments (key, size, state, created_at, marked_at) VALUES (?1, ?2, 'aborted', ?3, ?3)
		ON CONFLICT (key) DO NOTHING`
	selectSegmentChunks = `SELECT topic_id, partition, base_offset, last_offset, pos, len, max_timestamp, running_max_timestamp
		FROM chunks WHERE segment_id = ?`
	selectProducer      = `SELECT epoch FROM producers WHERE id = ?`
	selectProducerState = `SELECT epoch, batches FROM producer_state WHERE topic_id = ? AND partition = ? AND producer_id = ?`
	upsertProducerState = `INSERT INTO producer_state (topic_id, partition, producer_id, epoch, batches, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (topic_id, partition, producer_id) DO UPDATE SET
			epoch = excluded.epoch, batches = excluded.batches, updated_at = excluded.updated_at`
	touchProducer = `UPDATE producers SET last_used_at = ?1 WHERE id = ?2 AND last_used_at < ?3`
	// compactDue: a partition written is due for the compactor by engine.CommitDue,
	// unless due sooner; written only when that moves it.
	compactDue = `UPDATE partitions SET compact_due = ?1 WHERE topic_id = ?2 AND partition = ?3
		AND (compact_due IS NULL OR compact_due > ?1)`
	selectConfigs = `SELECT configs FROM topics WHERE id = ?`
	bumpProducer  = `UPDATE producers SET epoch = ?1 WHERE id = ?2 AND epoch < ?1`
)

// stmts are the commit path's statements, parsed once: parsing costs more CPU than
// running them. Used inside a transaction through tx.StmtContext, which reuses the
// preparation on the one writer connection.
type stmts struct {
	now, segment, topic, partition, insertSegment, insertChunk, advance, fence, segmentChunks *sql.Stmt
	producer, producerState, upsertProducerState, touchProducer, bumpProducer                 *sql.Stmt
	compactDue, configs                                                                       *sql.Stmt
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
		{&st.producer, selectProducer},
		{&st.producerState, selectProducerState},
		{&st.upsertProducerState, upsertProducerState},
		{&st.touchProducer, touchProducer},
		{&st.compactDue, compactDue},
		{&st.configs, selectConfigs},
		{&st.bumpProducer, bumpProducer},
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
	for _, s := range []*sql.Stmt{st.now, st.segment, st.topic, st.partition, st.insertSegment, st.insertChunk, st.advance, st.fence, st.segmentChunks,
		st.producer, st.producerState, st.upsertProducerState, st.touchProducer, st.bumpProducer, st.compactDue, st.configs} {
		if s != nil {
			s.Close()
		}
	}
}

// Commit commits one flush in one immediate transaction (see catalog.Catalog).
func (c *Catalog) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := engine.PlanSegment(seg)
	if err != nil {
		return nil, err
	}
	keyTime, err := engine.KeyTime(seg.Key)
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
	if err := engine.CheckCommitTime(keyTime, now, c.opts.CommitTimeout); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	if res, done, err := c.committedBefore(ctx, stmt, plan, now); done || err != nil {
		return res, err
	}

	// The maps are the caller's, so that small ones stay on the stack.
	topics := make(map[int64]engine.TopicState, len(plan.Topics))
	if err := readTopicStates(ctx, stmt(c.st.topic), plan, topics); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	reqErrs := plan.CheckRequests(topics, now)

	var tc *engine.TxnCheck
	if ids := plan.TxnIDs(); len(ids) > 0 {
		if tc, err = checkTxns(ctx, tx, plan, reqErrs, ids); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: transactions: %w", seg.Key, err)
		}
		reqErrs = tc.Errs
	}
	sc, gc, reqErrs, err := c.checkOffsets(ctx, tx, plan, reqErrs, now)
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	var dc *engine.ShareDLQCheck
	if plan.DLQRequests() {
		if dc, err = engine.CheckShareDLQ(ctx, sqliteShare{tx, now}, plan, reqErrs); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: dead letters: %w", seg.Key, err)
		}
		reqErrs = dc.Errs
	}
	var pc *engine.ProducerCheck
	if plan.Idempotent() {
		if pc, err = c.checkProducers(ctx, stmt, plan, reqErrs); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: producer state: %w", seg.Key, err)
		}
		reqErrs = pc.Errs
	}

	parts := make(map[catalog.TopicPartition]engine.PartitionState, len(plan.Partitions))
	if err := readPartitionStates(ctx, stmt(c.st.partition), plan, reqErrs, parts); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	a, err := plan.Assign(reqErrs, parts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	var prodRows []engine.ProducerStateRow
	if pc != nil {
		if prodRows, err = pc.Finish(&a); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
		}
	}

	marks, err := c.writeFlush(ctx, stmt, seg, a, parts, now)
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	if err := c.commitDue(ctx, stmt, a, now); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	if pc != nil {
		if err := c.writeProducers(ctx, stmt, pc, prodRows, now); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: producer state: %w", seg.Key, err)
		}
	}
	if err := writeOffsets(ctx, tx, sc, gc, a.Results, now); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: %w", seg.Key, err)
	}
	if tc != nil {
		if err := writeTxnFlush(ctx, tx, tc, a.Results, now); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: transactions: %w", seg.Key, err)
		}
	}
	if dc != nil {
		if err := dc.Finish(ctx, sqliteShare{tx, now}, a.Results); err != nil {
			return nil, fmt.Errorf("sqlite: commit %s: dead letters: %w", seg.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: commit %s: commit: %w", seg.Key, err)
	}
	if len(marks) > 0 {
		c.hub.publish(marks)
	}
	return a.Results, nil
}

// checkOffsets checks the offsets the flush's requests commit besides their records —
// connector fences with source offsets, and group offsets — and returns the request
// errors with their refusals added. Lock order is moot here (one writer holds the whole
// file), but the checks run in the shared order: requests (already), then connector
// fences and group offsets (a request carries one or the other), then producers.
func (c *Catalog) checkOffsets(ctx context.Context, tx *sql.Tx, plan *engine.Plan, errs []error, now time.Time) (*engine.SourceCheck, *engine.GroupCheck, []error, error) {
	var sc *engine.SourceCheck
	if len(plan.Fences()) > 0 {
		var err error
		if sc, err = checkSources(ctx, tx, plan, errs); err != nil {
			return nil, nil, nil, fmt.Errorf("connector tasks: %w", err)
		}
		errs = sc.Errs
	}
	var gc *engine.GroupCheck
	if names := plan.GroupNames(); len(names) > 0 {
		var err error
		if gc, err = c.checkGroupOffsets(ctx, tx, plan, errs, now, names); err != nil {
			return nil, nil, nil, fmt.Errorf("group offsets: %w", err)
		}
		errs = gc.Errs
	}
	return sc, gc, errs, nil
}

// writeOffsets stores the offsets of the requests that committed.
func writeOffsets(ctx context.Context, tx *sql.Tx, sc *engine.SourceCheck, gc *engine.GroupCheck, results []catalog.Result, now time.Time) error {
	if gc != nil {
		if err := writeGroupOffsets(ctx, tx, gc.Rows(results), now); err != nil {
			return fmt.Errorf("group offsets: %w", err)
		}
	}
	if sc != nil {
		return writeSourceOffsets(ctx, tx, sc.Rows(results), now)
	}
	return nil
}

// committedBefore answers a commit of a key that has a segment row already (done):
// as Settle would, writing nothing, or ErrCommitAborted when Settle fenced the key.
func (c *Catalog) committedBefore(ctx context.Context, stmt func(*sql.Stmt) *sql.Stmt, plan *engine.Plan, now time.Time) (res []catalog.Result, done bool, err error) {
	key := plan.Segment.Key
	var (
		segID, created int64
		state          string
	)
	switch err := stmt(c.st.segment).QueryRowContext(ctx, key).Scan(&segID, &state, &created); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, true, fmt.Errorf("sqlite: commit %s: %w", key, err)
	case state == "aborted":
		return nil, true, fmt.Errorf("sqlite: commit %s: %w", key, catalog.ErrCommitAborted)
	}
	res, err = readBack(ctx, stmt(c.st.segmentChunks), plan, segID)
	if err == nil {
		err = engine.CheckSettled(res, time.UnixMilli(created), now, c.opts.CommitTimeout)
	}
	if err != nil {
		return nil, true, fmt.Errorf("sqlite: commit %s: already committed: %w", key, err)
	}
	return res, true, nil
}

// readTopicStates reads the live topics a flush names into topics; an unknown or
// deleted one is left out, and its requests fail with ErrTopicNotFound.
func readTopicStates(ctx context.Context, q *sql.Stmt, plan *engine.Plan, topics map[int64]engine.TopicState) error {
	for _, id := range plan.Topics {
		var ts engine.TopicState
		err := q.QueryRowContext(ctx, id).Scan(&ts.Partitions, &ts.LogAppendTime)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("topic %d: %w", id, err)
		}
		topics[id] = ts
	}
	return nil
}

// readPartitionStates reads into parts the state of every partition an accepted request
// writes.
func readPartitionStates(ctx context.Context, q *sql.Stmt, plan *engine.Plan, reqErrs []error, parts map[catalog.TopicPartition]engine.PartitionState) error {
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
		var ps engine.PartitionState
		if err := q.QueryRowContext(ctx, pb.TopicID, pb.Partition).Scan(&ps.HighWatermark, &ps.MaxTimestamp); err != nil {
			return fmt.Errorf("topic %d partition %d: %w", pb.TopicID, pb.Partition, err)
		}
		parts[pb.TopicPartition] = ps
	}
	return nil
}

// writeFlush writes the segment row, the chunk rows and the partitions' advances,
// guarded by the watermarks read (parts), and returns the new watermarks to publish.
func (c *Catalog) writeFlush(ctx context.Context, stmt func(*sql.Stmt) *sql.Stmt, seg catalog.Segment, a engine.Assignment, parts map[catalog.TopicPartition]engine.PartitionState, now time.Time) ([]catalog.Watermark, error) {
	res, err := stmt(c.st.insertSegment).ExecContext(ctx, seg.Key, seg.Size, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("insert segment: %w", err)
	}
	segID, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("insert segment: %w", err)
	}
	ins := stmt(c.st.insertChunk)
	for _, ch := range a.Chunks {
		if _, err := ins.ExecContext(ctx, ch.TopicID, ch.Partition, ch.BaseOffset, ch.LastOffset, segID,
			ch.Pos, ch.Len, ch.MaxTimestamp, ch.RunningMaxTimestamp, now.UnixMilli()); err != nil {
			return nil, fmt.Errorf("insert chunk of topic %d partition %d: %w", ch.TopicID, ch.Partition, err)
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
			return nil, fmt.Errorf("advance topic %d partition %d: %w", adv.TopicID, adv.Partition, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return nil, fmt.Errorf("advance topic %d partition %d: watermark moved under the write lock (%d rows, %v)",
				adv.TopicID, adv.Partition, n, err)
		}
		marks = append(marks, catalog.Watermark{TopicID: adv.TopicID, Partition: adv.Partition, HighWatermark: adv.HighWatermark})
	}
	return marks, nil
}

// commitDue makes the partitions a commit wrote due for the compactor
// (engine.CommitDue), judging each new chunk by its topic's retention.ms.
func (c *Catalog) commitDue(ctx context.Context, stmt func(*sql.Stmt) *sql.Stmt, a engine.Assignment, now time.Time) error {
	maxTS := map[catalog.TopicPartition]int64{}
	for _, ch := range a.Chunks {
		tp := catalog.TopicPartition{TopicID: ch.TopicID, Partition: ch.Partition}
		if ts, ok := maxTS[tp]; !ok || ch.MaxTimestamp > ts {
			maxTS[tp] = ch.MaxTimestamp
		}
	}
	retention := map[int64]int64{}
	settle := catalog.SettleAge(c.opts.CommitTimeout)
	due := stmt(c.st.compactDue)
	for _, adv := range a.Advances {
		ms, ok := retention[adv.TopicID]
		if !ok {
			var raw string
			if err := stmt(c.st.configs).QueryRowContext(ctx, adv.TopicID).Scan(&raw); err != nil {
				return fmt.Errorf("configs of topic %d: %w", adv.TopicID, err)
			}
			// Configs are validated when set; unreadable ones count as the defaults, as
			// the compactor takes them.
			cfg := catalog.DefaultConfig()
			var explicit map[string]string
			if json.Unmarshal([]byte(raw), &explicit) == nil {
				if parsed, err := catalog.ParseConfig(explicit); err == nil {
					cfg = parsed
				}
			}
			ms = engine.TimeRetentionMs(cfg)
			retention[adv.TopicID] = ms
		}
		at := engine.CommitDue(now, settle, maxTS[adv.TopicPartition], ms)
		if _, err := due.ExecContext(ctx, at.UnixMilli(), adv.TopicID, adv.Partition); err != nil {
			return fmt.Errorf("compaction due time of topic %d partition %d: %w", adv.TopicID, adv.Partition, err)
		}
	}
	return nil
}

// Settle settles a commit of unknown outcome with the fencing insert (see
// catalog.Catalog). The immediate transaction waits for any commit of the key in flight
// on this file, in this process (the one writer connection) or another (the write lock).
func (c *Catalog) Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := engine.PlanSegment(seg)
	if err != nil {
		return nil, err
	}
	if _, err := engine.KeyTime(seg.Key); err != nil {
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
		segID, created int64
		state          string
	)
	if err := stmt(c.st.segment).QueryRowContext(ctx, seg.Key).Scan(&segID, &state, &created); err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: %w", seg.Key, err)
	}
	if state == "aborted" {
		return nil, fmt.Errorf("sqlite: settle %s: fenced before: %w", seg.Key, catalog.ErrCommitAborted)
	}
	results, err := readBack(ctx, stmt(c.st.segmentChunks), plan, segID)
	if err == nil {
		err = engine.CheckSettled(results, time.UnixMilli(created), now, c.opts.CommitTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: settle %s: %w", seg.Key, err)
	}
	return results, nil
}

// readBack answers a committed flush from its chunk rows.
func readBack(ctx context.Context, q *sql.Stmt, plan *engine.Plan, segID int64) ([]catalog.Result, error) {
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

// checkProducers reads the registry rows and the state the flush's idempotent batches
// name and applies catalog's producer rules.
func (c *Catalog) checkProducers(ctx context.Context, stmt func(*sql.Stmt) *sql.Stmt, plan *engine.Plan, errs []error) (*engine.ProducerCheck, error) {
	keys, ids := plan.ProducerKeys()
	registry := make(map[int64]int16, len(ids))
	q := stmt(c.st.producer)
	for _, id := range ids {
		var epoch int16
		err := q.QueryRowContext(ctx, id).Scan(&epoch)
		if errors.Is(err, sql.ErrNoRows) {
			continue // unknown or expired
		}
		if err != nil {
			return nil, fmt.Errorf("producer %d: %w", id, err)
		}
		registry[id] = epoch
	}
	state := make(map[engine.ProducerPartition]engine.ProducerState, len(keys))
	q = stmt(c.st.producerState)
	for _, k := range keys {
		var (
			st      engine.ProducerState
			batches string
		)
		err := q.QueryRowContext(ctx, k.TopicID, k.Partition, k.ProducerID).Scan(&st.Epoch, &batches)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("producer %d topic %d partition %d: %w", k.ProducerID, k.TopicID, k.Partition, err)
		}
		if st.Batches, err = decodeBatches(batches); err != nil {
			return nil, fmt.Errorf("producer %d topic %d partition %d: %w", k.ProducerID, k.TopicID, k.Partition, err)
		}
		state[k] = st
	}
	return plan.CheckProducers(errs, registry, state), nil
}

// writeProducers stores the new states, moves the epochs the flush bumped, and
// refreshes the last-used time of producers whose row has grown stale.
func (c *Catalog) writeProducers(ctx context.Context, stmt func(*sql.Stmt) *sql.Stmt, pc *engine.ProducerCheck, rows []engine.ProducerStateRow, now time.Time) error {
	ms := now.UnixMilli()
	up := stmt(c.st.upsertProducerState)
	for _, r := range rows {
		if _, err := up.ExecContext(ctx, r.TopicID, r.Partition, r.ProducerID, r.Epoch, encodeBatches(r.Batches), ms); err != nil {
			return fmt.Errorf("producer %d topic %d partition %d: %w", r.ProducerID, r.TopicID, r.Partition, err)
		}
	}
	bump := stmt(c.st.bumpProducer)
	for _, b := range pc.Bumps {
		if _, err := bump.ExecContext(ctx, b.Epoch, b.ID); err != nil {
			return fmt.Errorf("producer %d: bump to epoch %d: %w", b.ID, b.Epoch, err)
		}
	}
	touch := stmt(c.st.touchProducer)
	stale := now.Add(-engine.ProducerTouchInterval(c.opts.ProducerExpiry)).UnixMilli()
	for _, id := range pc.Producers {
		if _, err := touch.ExecContext(ctx, ms, id, stale); err != nil {
			return fmt.Errorf("producer %d: refresh last use: %w", id, err)
		}
	}
	return nil
}

// checkGroupOffsets loads the groups the flush commits offsets for, and what
// engine.CheckOffsetCommit needs, and checks every request's offsets.
func (c *Catalog) checkGroupOffsets(ctx context.Context, tx *sql.Tx, plan *engine.Plan, errs []error, now time.Time, names []string) (*engine.GroupCheck, error) {
	groups := make(map[string]*engine.GroupState, len(names))
	for _, name := range names {
		st, found, err := loadGroup(ctx, tx, name)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		if found {
			groups[name] = st
		}
	}
	topics, err := loadTopics(ctx, tx, plan.OffsetTopics())
	if err != nil {
		return nil, err
	}
	hws, err := loadHighWatermarks(ctx, tx, topics)
	if err != nil {
		return nil, err
	}
	return plan.CheckGroupOffsets(errs, groups, now, topics, hws), nil
}

// writeGroupOffsets stores committed offsets, creating a group that a commit without a
// member names for the first time.
func writeGroupOffsets(ctx context.Context, tx *sql.Tx, rows []engine.GroupOffsetRow, now time.Time) error {
	ms := now.UnixMilli()
	created := map[string]bool{}
	for _, r := range rows {
		if r.MemberID == "" && !created[r.Group] {
			created[r.Group] = true
			if _, err := tx.ExecContext(ctx, `INSERT INTO groups (name, assignor, epoch, created_at) VALUES (?, ?, 0, ?)
				ON CONFLICT (name) DO NOTHING`, r.Group, catalog.DefaultAssignor, ms); err != nil {
				return fmt.Errorf("group %s: %w", r.Group, err)
			}
		}
		epoch := sql.NullInt32{Int32: r.MemberEpoch, Valid: r.MemberID != ""}
		if _, err := tx.ExecContext(ctx, `INSERT INTO group_offsets
			(group_name, topic_id, partition, committed_offset, metadata, member_id, member_epoch, committed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET
				committed_offset = excluded.committed_offset, metadata = excluded.metadata,
				member_id = excluded.member_id, member_epoch = excluded.member_epoch,
				committed_at = excluded.committed_at`,
			r.Group, r.TopicID, r.Partition, r.Offset, r.Metadata, nullString(r.MemberID), epoch, ms); err != nil {
			return fmt.Errorf("group %s topic %d partition %d: %w", r.Group, r.TopicID, r.Partition, err)
		}
	}
	return nil
}
