package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// SQLSTATEs raised by strata_commit (functions/strata_commit.sql).
const (
	stateTooLate          = "SR001"
	stateFenced           = "SR002"
	stateAlreadyCommitted = "SR003"
)

// commitSQL is the whole commit: one statement, so one implicit transaction and one
// round trip. The last eight arguments (the group offsets to store) are empty: a flush
// that commits group offsets calls commitGroupsSQL.
const commitSQL = `SELECT o_batch, o_code, o_base, o_dup, o_expected, NULL::int, NULL::bigint FROM strata_commit(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}')`

// commitGroupsSQL is the commit of a flush that commits group offsets: one statement
// too, whose function checks the groups in SQL (functions/strata_commit_groups.sql).
const commitGroupsSQL = `SELECT o_batch, o_code, o_base, o_dup, o_expected, o_grow, o_gvalue FROM strata_commit_groups(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)`

// commitConnectSQL is the commit of a flush that commits connector source offsets (with
// or without group offsets): one statement, whose function checks the tasks' fences in
// SQL around the commit above (functions/strata_commit_connect.sql).
const commitConnectSQL = `SELECT o_batch, o_code, o_base, o_dup, o_expected, o_grow, o_gvalue FROM strata_commit_connect(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,
	$26, $27, $28, $29, $30, $31, $32, $33)`

// commitTxnSQL is the commit of a flush with transactional requests: one statement
// whose function checks them against their transactions around the commits above
// (functions/strata_commit_txn.sql).
const commitTxnSQL = `SELECT o_batch, o_code, o_base, o_dup, o_expected, o_grow, o_gvalue FROM strata_commit_txn(
	$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,
	$26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36)`

// codeRefused is strata_commit's code for a request the caller refused before the
// call (p_pre): the shape of its group offsets. Refusals of strata_commit_groups'
// checks are codeGroupPrefix and one of catalog's Refused* codes.
const (
	codeRefused       = "refused"
	codeGroupPrefix   = "group:"
	codeConnectPrefix = "connect:"
	codeTxnPrefix     = "txn:"
)

// batchRow is strata_commit's answer for one batch: the refusal it decided, and its
// base offset when its request committed or is a duplicate; for a request whose group
// offsets strata_commit_groups refused, what engine.GroupOffsetsRefusal needs.
type batchRow struct {
	code     *string
	base     *int64
	dup      bool
	expected *int32
	grow     *int32
	gvalue   *int64
}

// Commit commits one flush with strata_commit (strata_commit_groups when it commits
// group offsets). The rules are the shared ones of package catalog; the functions
// reproduce them in SQL so that checks, offset assignment, producer state, group
// offsets and every row land in one round trip.
func (c *Catalog) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := engine.PlanSegment(seg)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, err)
	}
	kt, err := engine.KeyTime(seg.Key)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, err)
	}
	if plan.DLQRequests() {
		return c.commitDLQ(ctx, plan, kt)
	}
	out, pre, err := c.callCommit(ctx, c.pool, plan, kt, nil)
	if err != nil {
		return c.commitError(ctx, plan, err)
	}
	return c.answer(plan, out, pre)
}

// commitDLQ commits a flush with dead-letter copies (catalog.ShareDLQCommit): in one
// transaction, the dead-letter checks under their rows' locks (engine.CheckShareDLQ;
// its refusals are refusals before the call), the commit function, and the archive of
// the copied records — three round trips, for the mover's flushes only.
func (c *Catalog) commitDLQ(ctx context.Context, plan *engine.Plan, kt time.Time) ([]catalog.Result, error) {
	var (
		results []catalog.Result
		hw      map[catalog.TopicPartition]int64
	)
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := pgShare{tx}
		dc, err := engine.CheckShareDLQ(ctx, q, plan, make([]error, len(plan.Segment.Requests)))
		if err != nil {
			return err
		}
		out, pre, err := c.callCommit(ctx, tx, plan, kt, dc.Errs)
		if err != nil {
			return err
		}
		if results, hw, err = c.results(plan, out, pre); err != nil {
			return err
		}
		return dc.Finish(ctx, q, results)
	})
	if err != nil {
		return c.commitError(ctx, plan, err)
	}
	if len(hw) > 0 {
		c.notify.add(hw)
	}
	return results, nil
}

// querier runs the commit function: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// callCommit runs the commit function and collects its rows, with the refusals decided
// in Go before the call (the shape of group offsets), per request.
func (c *Catalog) callCommit(ctx context.Context, db querier, plan *engine.Plan, keyTime time.Time, refused []error) ([]batchRow, []error, error) {
	n := 0
	for _, r := range plan.Segment.Requests {
		n += len(r.Batches)
	}
	out := make([]batchRow, n)
	sql, args, pre := c.commitArgs(plan.Segment, keyTime, refused)
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, err
	}
	var i int32
	var br batchRow
	tag, err := pgx.ForEachRow(rows, []any{&i, &br.code, &br.base, &br.dup, &br.expected, &br.grow, &br.gvalue}, func() error {
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
		return nil, nil, err
	}
	return out, pre, nil
}

// commitError maps a failed strata_commit call: the whole-flush refusals it raises are
// definite; anything else leaves the outcome unknown.
func (c *Catalog) commitError(ctx context.Context, plan *engine.Plan, err error) ([]catalog.Result, error) {
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
	if errors.As(err, &ce) {
		// No connection could be made: nothing was sent, no need to settle.
		return nil, fmt.Errorf("postgres: commit %s: %w: %w", key, catalog.ErrCommitFailed, err)
	}
	// Not pgconn.SafeToRetry: pgx answers "conn closed", which it marks safe to retry,
	// also when the connection was closed while it waited for the answer of a
	// statement it had sent (the status check of its receive path) — so the commit
	// may have landed. The reliability harness's pg-cut class found commit_failed
	// answers ("nothing was written") whose records were visible, and an idempotent
	// producer that reused their sequence numbers answered with another record's
	// offset. Such an outcome is settled like any other unknown one.
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

// answer maps the commit function's rows to per-request results and queues the commit
// notification. pre holds the errors of requests refused before the call.
func (c *Catalog) answer(plan *engine.Plan, out []batchRow, pre []error) ([]catalog.Result, error) {
	results, hw, err := c.results(plan, out, pre)
	if err != nil {
		return nil, err
	}
	if len(hw) > 0 {
		c.notify.add(hw)
	}
	return results, nil
}

// results maps the commit function's rows to per-request results and the high
// watermarks they moved.
func (c *Catalog) results(plan *engine.Plan, out []batchRow, pre []error) ([]catalog.Result, map[catalog.TopicPartition]int64, error) {
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
				return nil, nil, fmt.Errorf("postgres: commit %s: request %d answered for only some of its batches", seg.Key, ri)
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
	return results, hw, nil
}

// commitArgs are the commit's statement and arguments: strata_commit's, the batches
// flattened in request order, so element i of every per-batch array is batch i, then
// one element per request; with group offsets, strata_commit_groups', the offsets
// after them (one element per offset); with source offsets, strata_commit_connect's,
// the fences and offsets after those (connectArgs). pre holds, per request, the refusal
// of its group or source offsets' shape, decided here (catalog.ValidateOffsetCommit and
// ValidateSourceCommit, as Plan.CheckGroupOffsets and CheckSources do first); nil when
// the flush has neither.
func (c *Catalog) commitArgs(seg catalog.Segment, keyTime time.Time, refusedBefore []error) (sql string, args []any, pre []error) {
	n := 0
	for _, r := range seg.Requests {
		n += len(r.Batches)
	}
	var (
		req      = make([]int32, 0, n)
		topic    = make([]int64, 0, n)
		part     = make([]int32, 0, n)
		pos      = make([]int64, 0, n)
		lens     = make([]int64, 0, n)
		records  = make([]int32, 0, n)
		maxTS    = make([]int64, 0, n)
		pid      = make([]*int64, 0, n)
		epoch    = make([]*int16, 0, n)
		seq      = make([]int32, 0, n)
		refusals = make([]*string, len(seg.Requests))
		groups   bool
		cx       connectArgs
		gcReq    []int32
		gcGroup  []string
		gcMember []*string
		gcMEpoch []*int32
		gcTopic  []string
		gcPart   []int32
		gcOff    []int64
		gcMeta   []string
		txReq    []int32
		txTID    []string
		txImpl   []bool
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
		if r.Txn != nil {
			txReq = append(txReq, int32(ri))
			txTID = append(txTID, r.Txn.TransactionalID)
			txImpl = append(txImpl, r.Txn.ImplicitAdd)
		}
		if r.Source != nil || r.GroupOffsets != nil || refusedBefore != nil {
			if pre == nil {
				pre = make([]error, len(seg.Requests))
			}
		}
		if refusedBefore != nil && refusedBefore[ri] != nil {
			refusals[ri], pre[ri] = &refused, refusedBefore[ri]
			continue
		}
		if sr := r.Source; sr != nil {
			if err := catalog.ValidateSourceCommit(*sr); err != nil {
				refusals[ri], pre[ri] = &refused, fmt.Errorf("source offsets: %w", err)
				continue
			}
			cx.add(int32(ri), *sr)
		}
		oc := r.GroupOffsets
		if oc == nil {
			continue
		}
		groups = true
		if err := catalog.ValidateOffsetCommit(*oc); err != nil {
			refusals[ri], pre[ri] = &refused, fmt.Errorf("group offsets: %w", err)
			continue
		}
		var member *string
		var mepoch *int32
		if oc.MemberID != "" {
			member, mepoch = &oc.MemberID, &oc.MemberEpoch
		}
		for _, o := range oc.Offsets {
			gcReq = append(gcReq, int32(ri))
			gcGroup = append(gcGroup, oc.Group)
			gcMember = append(gcMember, member)
			gcMEpoch = append(gcMEpoch, mepoch)
			gcTopic = append(gcTopic, o.Topic)
			gcPart = append(gcPart, o.Partition)
			gcOff = append(gcOff, o.Offset)
			gcMeta = append(gcMeta, o.Metadata)
		}
	}
	touch := engine.ProducerTouchInterval(c.producerExpiry).Milliseconds()
	args = []any{seg.Key, seg.Size, keyTime, c.commitTimeout.Milliseconds(), req, topic, part, pos, lens, records, maxTS,
		pid, epoch, seq, refusals, touch}
	txn := len(txReq) > 0
	if !groups && pre == nil && !txn {
		return commitSQL, args, nil
	}
	args = append(args, catalog.DefaultAssignor, orEmpty(gcReq), orEmpty(gcGroup), orEmpty(gcMember), orEmpty(gcMEpoch),
		orEmpty(gcTopic), orEmpty(gcPart), orEmpty(gcOff), orEmpty(gcMeta))
	if !cx.any && !txn {
		return commitGroupsSQL, args, pre
	}
	args = append(args, orEmpty(cx.req), orEmpty(cx.conn), orEmpty(cx.task), orEmpty(cx.gen),
		orEmpty(cx.soReq), orEmpty(cx.soConn), orEmpty(cx.soPart), orEmpty(cx.soOff))
	if !txn {
		return commitConnectSQL, args, pre
	}
	return commitTxnSQL, append(args, txReq, txTID, txImpl), pre
}

// connectArgs are strata_commit_connect's arrays: one element per request that commits
// source offsets (its fence), then one per offset.
type connectArgs struct {
	any                   bool
	req                   []int32
	conn                  []string
	task                  []int32
	gen                   []int64
	soReq                 []int32
	soConn, soPart, soOff []string
}

func (cx *connectArgs) add(ri int32, sr catalog.SourceCommit) {
	cx.any = true
	cx.req = append(cx.req, ri)
	cx.conn = append(cx.conn, sr.Fence.Connector)
	cx.task = append(cx.task, sr.Fence.Task)
	cx.gen = append(cx.gen, sr.Fence.Generation)
	for _, o := range sr.Offsets {
		cx.soReq = append(cx.soReq, ri)
		cx.soConn = append(cx.soConn, sr.Fence.Connector)
		cx.soPart = append(cx.soPart, o.Partition)
		cx.soOff = append(cx.soOff, o.Offset)
	}
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
		if code, ok := strings.CutPrefix(*br.code, codeConnectPrefix); ok {
			if r.Source == nil {
				return fmt.Errorf("postgres: commit: connector fence refused (%s) on a request without one", code)
			}
			var gen int64
			if br.gvalue != nil {
				gen = *br.gvalue
			}
			return engine.FenceRefusal(r.Source.Fence, code, gen)
		}
		if strings.HasPrefix(*br.code, codeTxnPrefix) {
			if r.Txn == nil {
				return fmt.Errorf("postgres: commit: transaction refused (%s) on a request that is not transactional", *br.code)
			}
			var row int
			var value int64
			if br.grow != nil {
				row = int(*br.grow)
			}
			if br.gvalue != nil {
				value = *br.gvalue
			}
			return engine.TxnRefusal(r, *br.code, row, value)
		}
		if code, ok := strings.CutPrefix(*br.code, codeGroupPrefix); ok {
			if r.GroupOffsets == nil || br.grow == nil {
				return fmt.Errorf("postgres: commit: group offsets refused (%s) without their detail", code)
			}
			var value int64
			if br.gvalue != nil {
				value = *br.gvalue
			}
			return engine.GroupOffsetsRefusal(*r.GroupOffsets, code, int(*br.grow), value)
		}
		switch *br.code {
		case codeRefused:
			if pre != nil {
				return pre
			}
			return errors.New("postgres: commit: request refused before the call, without its error")
		case engine.CodeTopicNotFound:
			detail = fmt.Sprintf("topic id %d", b.TopicID)
		case engine.CodePartitionOutOfRange:
			detail = fmt.Sprintf("topic id %d partition %d", b.TopicID, b.Partition)
		case engine.CodeTimestampOutOfRange:
			detail = fmt.Sprintf("batch %d of topic id %d partition %d stamped more than %d ms ahead of the database clock (LogAppendTime)",
				bi, b.TopicID, b.Partition, engine.LogAppendTimeSkew.Milliseconds())
		case engine.CodeOutOfOrderSequence:
			if br.expected == nil || r.Producer == nil {
				return errors.New("postgres: commit: out of order sequence answered without the sequence expected")
			}
			return fmt.Errorf("producer id %d epoch %d: %w", r.Producer.ID, r.Producer.Epoch,
				&catalog.SequenceError{TopicID: b.TopicID, Partition: b.Partition, Expected: *br.expected, Got: b.BaseSequence})
		case engine.CodeProducerFenced:
			detail = fmt.Sprintf("producer id %d epoch %d: a newer instance has initialised", r.Producer.ID, r.Producer.Epoch)
		case engine.CodeUnknownProducer:
			detail = fmt.Sprintf("producer id %d epoch %d was never handed out or has expired: initialise the producer again", r.Producer.ID, r.Producer.Epoch)
		}
		return engine.RequestError(*br.code, detail)
	}
	return errors.New("postgres: commit: request refused without a reason")
}

// Settle settles a commit whose outcome is unknown: the fencing insert of an 'aborted'
// row for the key waits for any in-flight commit of the key; if it inserts, the commit
// can never land. If the key already has a row, its chunk rows say what committed.
func (c *Catalog) Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := engine.PlanSegment(seg)
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
func (c *Catalog) readBack(ctx context.Context, plan *engine.Plan) ([]catalog.Result, error) {
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
		err = engine.CheckSettled(results, committed, now, c.commitTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: %w", key, err)
	}
	return results, nil
}
