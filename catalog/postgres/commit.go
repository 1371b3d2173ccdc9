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

// SQLSTATEs raised by strata_commit (migrations/0002_commit.sql).
const (
	stateTooLate          = "SR001"
	stateFenced           = "SR002"
	stateAlreadyCommitted = "SR003"
)

// commitSQL is the whole commit: one statement, so one implicit transaction and one
// round trip.
const commitSQL = `SELECT o_batch, o_code, o_base FROM strata_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// batchRow is strata_commit's answer for one batch: its own check failure, and its
// base offset when its request was accepted.
type batchRow struct {
	code *string
	base *int64
}

// Commit commits one flush with strata_commit. The rules are the shared ones of package
// catalog; the function reproduces them in SQL so that checks, offset assignment and
// every row land in one round trip.
func (c *Catalog) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	plan, err := catalog.PlanSegment(seg)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, err)
	}
	kt, err := catalog.KeyTime(seg.Key)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, err)
	}

	n := 0
	for _, r := range seg.Requests {
		n += len(r.Batches)
	}
	out := make([]batchRow, n)
	rows, err := c.pool.Query(ctx, commitSQL, commitArgs(seg, kt, c.commitTimeout)...)
	if err == nil {
		var i int32
		var br batchRow
		var tag pgconn.CommandTag
		tag, err = pgx.ForEachRow(rows, []any{&i, &br.code, &br.base}, func() error {
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
	}
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			switch pe.Code {
			case stateTooLate:
				return nil, fmt.Errorf("postgres: commit %s: %w: %s", seg.Key, catalog.ErrCommitTooLate, pe.Message)
			case stateFenced:
				return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, catalog.ErrCommitAborted)
			case stateAlreadyCommitted:
				return c.readBack(ctx, plan)
			}
		}
		return nil, fmt.Errorf("postgres: commit %s: %w", seg.Key, err)
	}

	results := make([]catalog.Result, len(seg.Requests))
	hw := map[catalog.TopicPartition]int64{}
	i := 0
	for ri, r := range seg.Requests {
		batches := out[i : i+len(r.Batches)]
		i += len(r.Batches)
		if batches[0].base == nil {
			results[ri].Err = requestError(r, batches)
			continue
		}
		results[ri].BaseOffsets = make([]int64, len(r.Batches))
		for bi, br := range batches {
			if br.base == nil {
				// The transaction committed, but its answer contradicts itself.
				return nil, fmt.Errorf("postgres: commit %s: request %d answered for only some of its batches", seg.Key, ri)
			}
			results[ri].BaseOffsets[bi] = *br.base
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
// element i of every array is batch i.
func commitArgs(seg catalog.Segment, keyTime time.Time, timeout time.Duration) []any {
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
	)
	for ri, r := range seg.Requests {
		for _, b := range r.Batches {
			req = append(req, int32(ri))
			topic = append(topic, b.TopicID)
			part = append(part, b.Partition)
			pos = append(pos, b.Pos)
			lens = append(lens, b.Len)
			records = append(records, b.Records)
			maxTS = append(maxTS, b.MaxTimestamp)
		}
	}
	return []any{seg.Key, seg.Size, keyTime, timeout.Milliseconds(), req, topic, part, pos, lens, records, maxTS}
}

// requestError is a refused request's error: its first failing batch's, as
// catalog.Plan.CheckRequests words it.
func requestError(r catalog.Request, batches []batchRow) error {
	for bi, br := range batches {
		if br.code == nil {
			continue
		}
		b := r.Batches[bi]
		var detail string
		switch *br.code {
		case catalog.CodeTopicNotFound:
			detail = fmt.Sprintf("topic id %d", b.TopicID)
		case catalog.CodePartitionOutOfRange:
			detail = fmt.Sprintf("topic id %d partition %d", b.TopicID, b.Partition)
		case catalog.CodeTimestampOutOfRange:
			detail = fmt.Sprintf("batch %d of topic id %d partition %d stamped more than %d ms ahead of the database clock (LogAppendTime)",
				bi, b.TopicID, b.Partition, catalog.LogAppendTimeSkew.Milliseconds())
		}
		return catalog.RequestError(*br.code, detail)
	}
	return errors.New("postgres: commit: request refused without a reason")
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
		SELECT s.state, c.topic_id, c.partition, c.base_offset, c.last_offset, c.pos, c.len,
		       c.max_timestamp, c.running_max_timestamp
		FROM segments s LEFT JOIN chunks c ON c.segment_id = s.id
		WHERE s.key = $1`, key)
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: read chunk rows: %w", key, err)
	}
	var (
		state  string
		found  bool
		chunks []catalog.ChunkRow
	)
	var (
		tid                              *int64
		p                                *int32
		base, last, pos, ln, mts, runMax *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &tid, &p, &base, &last, &pos, &ln, &mts, &runMax}, func() error {
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
	if err != nil {
		return nil, fmt.Errorf("postgres: settle %s: %w", key, err)
	}
	return results, nil
}
