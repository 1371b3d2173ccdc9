package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/catalog"
)

// SQLSTATEs raised by strata_commit (migrations/0030_producers.sql).
const (
	stateTooLate          = "SR001"
	stateFenced           = "SR002"
	stateAlreadyCommitted = "SR003"
)

// commitSQL is the whole commit: one statement, so one implicit transaction and one
// round trip.
const commitSQL = `SELECT o_batch, o_code, o_base, o_dup, o_expected FROM strata_commit(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`

// codeRefused is strata_commit's code for a request the caller refused before the
// call (p_pre): its group offsets failed their check.
const codeRefused = "refused"

// batchRow is strata_commit's answer for one batch: the refusal it decided, and its
// base offset when its request committed or is a duplicate.
type batchRow struct {
	code     *string
	base     *int64
	dup      bool
	expected *int32
}

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Commit commits one flush with strata_commit. The rules are the shared ones of package
// catalog; the function reproduces them in SQL so that checks, offset assignment,
// producer state and every row land in one round trip. A flush that commits group
// offsets takes a few more (commitWithGroups).
func (c *Catalog) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := catalog.PlanSegment(seg)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, err)
	}
	kt, err := catalog.KeyTime(seg.Key)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, err)
	}
	if names, exclusive := plan.GroupNames(); len(names) > 0 {
		return c.commitWithGroups(ctx, plan, kt, names, exclusive)
	}
	out, err := c.callCommit(ctx, c.pool, plan, kt, nil)
	if err != nil {
		return c.commitError(ctx, plan, err)
	}
	return c.answer(plan, out, nil)
}

// callCommit runs strata_commit and collects its rows; gc carries the group checks.
func (c *Catalog) callCommit(ctx context.Context, q queryer, plan *catalog.Plan, keyTime time.Time, gc *catalog.GroupCheck) ([]batchRow, error) {
	n := 0
	for _, r := range plan.Segment.Requests {
		n += len(r.Batches)
	}
	out := make([]batchRow, n)
	rows, err := q.Query(ctx, commitSQL, c.commitArgs(plan.Segment, keyTime, gc)...)
	if err != nil {
		return nil, err
	}
	var i int32
	var br batchRow
	tag, err := pgx.ForEachRow(rows, []any{&i, &br.code, &br.base, &br.dup, &br.expected}, func() error {
		if i < 0 || int(i) >= n {
			return fmt.Errorf("strata_commit answered for batch %d of %d", i, n)
		}
		out[i] = br
		return nil
	})
	if err == nil && tag.RowsAffected() != int64(n) {
		// Committed, but the answer is incomplete: an error, so the caller settles.
		err = fmt.Errorf("strata_commit answered %d rows for %d batches", tag.RowsAffected(), n)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// commitError maps a failed strata_commit call: the whole-flush refusals it raises are
// definite; anything else leaves the outcome unknown.
func (c *Catalog) commitError(ctx context.Context, plan *catalog.Plan, err error) ([]catalog.Result, error) {
	key := plan.Segment.Key
	var pe *pgconn.PgError
	if errors.As(err, &pe) && !sessionEnded(pe) {
		switch pe.Code {
		case stateTooLate:
			return nil, fmt.Errorf("postgres: commit %s: %w: %s", key, catalog.ErrCommitTooLate, pe.Message)
		case stateFenced:
			return nil, fmt.Errorf("postgres: commit %s: %w", key, catalog.ErrCommitAborted)
		case stateAlreadyCommitted:
			return c.readBack(ctx, plan)
		}
		// The server answered with an error: the statement's transaction rolled back.
		return nil, fmt.Errorf("postgres: commit %s: %w: %w", key, catalog.ErrCommitFailed, err)
	}
	var ce *pgconn.ConnectError
	if pgconn.SafeToRetry(err) || errors.As(err, &ce) {
		// pgx knows nothing was sent (no connection could be made, or the request
		// never left): no need to settle.
		return nil, fmt.Errorf("postgres: commit %s: %w: %w", key, catalog.ErrCommitFailed, err)
	}
	return nil, fmt.Errorf("postgres: commit %s: %w", key, err)
}

// sessionEnded reports whether pe ended the session (severity FATAL or PANIC: an
// administrator or crash shutdown, a terminated backend) rather than the statement. Such
// an error can arrive after the transaction committed — a server stopped with -m
// immediate after its commit record reached the WAL but before its answer left — so it
// says nothing about the outcome. (Only a statement's ERROR rolls its transaction back.)
// The reliability harness's pg-restart class found a commit_failed whose records were
// visible.
func sessionEnded(pe *pgconn.PgError) bool {
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return sev == "FATAL" || sev == "PANIC"
}

// answer maps strata_commit's rows to per-request results and queues the commit
// notification. pre holds the errors of requests refused before the call.
func (c *Catalog) answer(plan *catalog.Plan, out []batchRow, pre []error) ([]catalog.Result, error) {
	seg := plan.Segment
	results := make([]catalog.Result, len(seg.Requests))
	hw := map[catalog.TopicPartition]int64{}
	i := 0
	for ri, r := range seg.Requests {
		batches := out[i : i+len(r.Batches)]
		i += len(r.Batches)
		if batches[0].base == nil {
			var preErr error
			if pre != nil {
				preErr = pre[ri]
			}
			results[ri].Err = requestError(r, batches, preErr)
			continue
		}
		results[ri].BaseOffsets = make([]int64, len(r.Batches))
		results[ri].Duplicate = batches[0].dup
		for bi, br := range batches {
			if br.base == nil || br.dup != batches[0].dup {
				// The transaction committed, but its answer contradicts itself.
				return nil, fmt.Errorf("postgres: commit %s: request %d answered for only some of its batches", seg.Key, ri)
			}
			results[ri].BaseOffsets[bi] = *br.base
			if br.dup {
				continue // nothing new: no watermark moved
			}
			b := r.Batches[bi]
			tp := catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
			hw[tp] = max(hw[tp], *br.base+int64(b.Records))
		}
	}
	if len(hw) > 0 {
		c.notify.add(hw)
	}
	return results, nil
}

// commitArgs are strata_commit's arguments: the batches flattened in request order, so
// element i of every per-batch array is batch i; then one element per request; then
// the group offsets the checks in gc passed.
func (c *Catalog) commitArgs(seg catalog.Segment, keyTime time.Time, gc *catalog.GroupCheck) []any {
	n := 0
	for _, r := range seg.Requests {
		n += len(r.Batches)
	}
	var (
		req     = make([]int32, 0, n)
		topic   = make([]int64, 0, n)
		part    = make([]int32, 0, n)
		pos     = make([]int64, 0, n)
		lens    = make([]int64, 0, n)
		records = make([]int32, 0, n)
		maxTS   = make([]int64, 0, n)
		pid     = make([]*int64, 0, n)
		epoch   = make([]*int16, 0, n)
		seq     = make([]int32, 0, n)
		pre     = make([]*string, len(seg.Requests))
		goReq   []int32
		goGroup []string
		goTopic []int64
		goPart  []int32
		goOff   []int64
		goMeta  []string
		goMem   []*string
		goMEp   []*int32
	)
	refused := codeRefused
	for ri, r := range seg.Requests {
		var id *int64
		var ep *int16
		if r.Producer != nil {
			id, ep = &r.Producer.ID, &r.Producer.Epoch
		}
		for _, b := range r.Batches {
			req = append(req, int32(ri))
			topic = append(topic, b.TopicID)
			part = append(part, b.Partition)
			pos = append(pos, b.Pos)
			lens = append(lens, b.Len)
			records = append(records, b.Records)
			maxTS = append(maxTS, b.MaxTimestamp)
			pid = append(pid, id)
			epoch = append(epoch, ep)
			seq = append(seq, b.BaseSequence)
		}
		if gc == nil || r.GroupOffsets == nil {
			continue
		}
		if gc.Errs[ri] != nil {
			pre[ri] = &refused
			continue
		}
		for _, row := range gc.RequestRows(ri) {
			goReq = append(goReq, int32(ri))
			goGroup = append(goGroup, row.Group)
			goTopic = append(goTopic, row.TopicID)
			goPart = append(goPart, row.Partition)
			goOff = append(goOff, row.Offset)
			goMeta = append(goMeta, row.Metadata)
			if row.MemberID == "" {
				goMem, goMEp = append(goMem, nil), append(goMEp, nil)
			} else {
				m, e := row.MemberID, row.MemberEpoch
				goMem, goMEp = append(goMem, &m), append(goMEp, &e)
			}
		}
	}
	touch := catalog.ProducerTouchInterval(c.producerExpiry).Milliseconds()
	return []any{seg.Key, seg.Size, keyTime, c.commitTimeout.Milliseconds(), req, topic, part, pos, lens, records, maxTS,
		pid, epoch, seq, pre, touch,
		orEmpty(goReq), orEmpty(goGroup), orEmpty(goTopic), orEmpty(goPart), orEmpty(goOff), orEmpty(goMeta), orEmpty(goMem), orEmpty(goMEp)}
}

// orEmpty sends a nil slice as an empty array rather than NULL.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// requestError is a refused request's error: the one its batches' codes name (the
// first batch with a code), or pre, the caller's own refusal.
func requestError(r catalog.Request, batches []batchRow, pre error) error {
	for bi, br := range batches {
		if br.code == nil {
			continue
		}
		b := r.Batches[bi]
		var detail string
		switch *br.code {
		case codeRefused:
			if pre != nil {
				return pre
			}
			return errors.New("postgres: commit: request refused before the call, without its error")
		case catalog.CodeTopicNotFound:
			detail = fmt.Sprintf("topic id %d", b.TopicID)
		case catalog.CodePartitionOutOfRange:
			detail = fmt.Sprintf("topic id %d partition %d", b.TopicID, b.Partition)
		case catalog.CodeTimestampOutOfRange:
			detail = fmt.Sprintf("batch %d of topic id %d partition %d stamped more than %d ms ahead of the database clock (LogAppendTime)",
				bi, b.TopicID, b.Partition, catalog.LogAppendTimeSkew.Milliseconds())
		case catalog.CodeOutOfOrderSequence:
			if br.expected == nil || r.Producer == nil {
				return errors.New("postgres: commit: out of order sequence answered without the sequence expected")
			}
			return fmt.Errorf("producer id %d epoch %d: %w", r.Producer.ID, r.Producer.Epoch,
				&catalog.SequenceError{TopicID: b.TopicID, Partition: b.Partition, Expected: *br.expected, Got: b.BaseSequence})
		case catalog.CodeProducerFenced:
			detail = fmt.Sprintf("producer id %d epoch %d: a newer instance has initialised", r.Producer.ID, r.Producer.Epoch)
		case catalog.CodeUnknownProducer:
			detail = fmt.Sprintf("producer id %d epoch %d was never handed out or has expired: initialise the producer again", r.Producer.ID, r.Producer.Epoch)
		}
		return catalog.RequestError(*br.code, detail)
	}
	return errors.New("postgres: commit: request refused without a reason")
}

// commitWithGroups commits a flush some of whose requests commit group offsets. The
// group rules are catalog.CheckOffsetCommit's, run in Go, so the flush takes an
// explicit transaction: lock the partition rows (sorted) and the producer registry
// rows (exclusively), then the groups (sorted by name: FOR SHARE, or FOR UPDATE for a commit without
// a member), read what the checks need, check, and call strata_commit with the
// refusals and the offsets to store. Lock order: partitions, producer state, groups.
func (c *Catalog) commitWithGroups(ctx context.Context, plan *catalog.Plan, keyTime time.Time, names []string, exclusive map[string]bool) ([]catalog.Result, error) {
	key := plan.Segment.Key
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: begin: %w", key, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tx.Rollback(rctx)
	}()

	tids := make([]int64, len(plan.Partitions))
	parts := make([]int32, len(plan.Partitions))
	for i, pb := range plan.Partitions {
		tids[i], parts[i] = pb.TopicID, pb.Partition
	}
	_, ids := plan.ProducerKeys()
	b := &pgx.Batch{}
	b.Queue(`SELECT 1 FROM partitions WHERE (topic_id, partition) IN (SELECT * FROM unnest($1::bigint[], $2::int[]))
		ORDER BY topic_id, partition FOR UPDATE`, tids, parts)
	// FOR NO KEY UPDATE, not strata_commit's usual FOR SHARE: a request may bump its
	// producer's epoch, which strata_commit then writes (0070), and a shared lock taken
	// here would have to be upgraded there — a deadlock with another flush doing the
	// same. Flushes with group offsets (exactly-once pipelines) are serial per producer
	// anyway.
	b.Queue(`SELECT 1 FROM producers WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE`, orEmpty(ids))
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("postgres: commit %s: lock partitions and producers: %w", key, err)
	}

	groups := make(map[string]*catalog.GroupState, len(names))
	var now time.Time
	for _, name := range names {
		lock := "FOR SHARE"
		if exclusive[name] {
			lock = "FOR UPDATE"
		}
		// A commit without a member creates its group, as CommitOffsets does.
		r, err := readGroup(ctx, tx, name, lock, exclusive[name], "", false, nil)
		if err != nil {
			return nil, fmt.Errorf("postgres: commit %s: group %s: %w", key, name, err)
		}
		now = r.now
		if r.found {
			groups[name] = r.st
		}
	}
	topics := map[string]catalog.TopicMeta{}
	hws := map[catalog.TopicPartition]int64{}
	rows, err := tx.Query(ctx, `SELECT t.id, t.name, t.partitions, p.partition, p.high_watermark
		FROM topics t JOIN partitions p ON p.topic_id = t.id
		WHERE t.deleted_at IS NULL AND t.name = ANY($1::text[])`, plan.OffsetTopics())
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: offset topics: %w", key, err)
	}
	var (
		t  catalog.TopicMeta
		p  int32
		hw int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&t.ID, &t.Name, &t.Partitions, &p, &hw}, func() error {
		topics[t.Name] = t
		hws[catalog.TopicPartition{TopicID: t.ID, Partition: p}] = hw
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: commit %s: offset topics: %w", key, err)
	}
	gc := plan.CheckGroupOffsets(make([]error, len(plan.Segment.Requests)), groups, now, topics, hws)

	out, err := c.callCommit(ctx, tx, plan, keyTime, gc)
	if err != nil {
		return c.commitError(ctx, plan, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: commit %s: commit: %w", key, err)
	}
	return c.answer(plan, out, gc.Errs)
}

// Settle settles a commit whose outcome is unknown: the fencing insert of an 'aborted'
// row for the key waits for any in-flight commit of the key; if it inserts, the commit
// can never land. If the key already has a row, its chunk rows say what committed.
func (c *Catalog) Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := catalog.PlanSegment(seg)
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: %w", seg.Key, err)
	}
	tag, err := c.pool.Exec(ctx,
		`INSERT INTO segments (key, size, state) VALUES ($1, $2, 'aborted') ON CONFLICT (key) DO NOTHING`,
		seg.Key, seg.Size)
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: fencing insert: %w", seg.Key, err)
	}
	if tag.RowsAffected() == 1 {
		return nil, fmt.Errorf("postgres: settle %s: %w", seg.Key, catalog.ErrCommitAborted)
	}
	return c.readBack(ctx, plan)
}

// readBack answers for a key that has a segment row: fenced, or the committed offsets
// read back from its chunk rows.
func (c *Catalog) readBack(ctx context.Context, plan *catalog.Plan) ([]catalog.Result, error) {
	key := plan.Segment.Key
	rows, err := c.pool.Query(ctx, `
		SELECT s.state, s.created_at, clock_timestamp(), c.topic_id, c.partition, c.base_offset, c.last_offset,
		       c.pos, c.len, c.max_timestamp, c.running_max_timestamp
		FROM segments s LEFT JOIN chunks c ON c.segment_id = s.id
		WHERE s.key = $1`, key)
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: read chunk rows: %w", key, err)
	}
	var (
		state          string
		committed, now time.Time
		found          bool
		chunks         []catalog.ChunkRow
	)
	var (
		tid                              *int64
		p                                *int32
		base, last, pos, ln, mts, runMax *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &committed, &now, &tid, &p, &base, &last, &pos, &ln, &mts, &runMax}, func() error {
		found = true
		if tid != nil {
			chunks = append(chunks, catalog.ChunkRow{
				TopicID: *tid, Partition: *p, BaseOffset: *base, LastOffset: *last,
				Pos: *pos, Len: *ln, MaxTimestamp: *mts, RunningMaxTimestamp: *runMax,
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: read chunk rows: %w", key, err)
	}
	switch {
	case !found:
		return nil, fmt.Errorf("postgres: settle %s: the segment row has gone (swept?)", key)
	case state == "aborted":
		return nil, fmt.Errorf("postgres: settle %s: %w", key, catalog.ErrCommitAborted)
	}
	results, err := plan.ResultsFromChunks(chunks)
	if err == nil {
		err = catalog.CheckSettled(results, committed, now, c.commitTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: %w", key, err)
	}
	return results, nil
}
