package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Kafka transactions: each coordinator call is the engine's script (engine/txn.go) over
// TxnTx, one transaction in two round trips (twoTrips): the locks, in the lock order, and
// every read pipelined after BEGIN; then the writes pipelined with the COMMIT. The flush
// commit's check is strata_commit_txn (functions/strata_commit_txn.sql).

var _ catalog.Transactions = (*Catalog)(nil)

// AbortExpiredTxns aborts transactions past their timeout (see catalog.Transactions).
func (c *Catalog) AbortExpiredTxns(ctx context.Context, limit int) ([]catalog.TxnDescription, error) {
	rows, err := c.pool.Query(ctx, `SELECT t.transactional_id, p.id, p.epoch FROM transactions t
		JOIN producers p ON p.id = t.producer_id
		WHERE t.state = 'ongoing' AND t.started_at + t.timeout_ms * interval '1 millisecond' <= clock_timestamp()
		ORDER BY t.started_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: expired transactions: %w", err)
	}
	type due struct {
		tid string
		p   catalog.Producer
	}
	var (
		dues []due
		d    due
	)
	if _, err := pgx.ForEachRow(rows, []any{&d.tid, &d.p.ID, &d.p.Epoch}, func() error {
		dues = append(dues, d)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: expired transactions: %w", err)
	}
	var out []catalog.TxnDescription
	for _, d := range dues {
		desc, ok, err := engine.AbortExpiredTxn(ctx, c.engine(), d.tid, d.p)
		if err != nil {
			return out, fmt.Errorf("postgres: abort expired transaction %q: %w", d.tid, err)
		}
		if ok {
			out = append(out, desc)
		}
	}
	return out, nil
}

// TxnTx runs one coordinator transaction in two round trips (engine.TxnBackend).
func (e pgEngine) TxnTx(ctx context.Context, load engine.TxnLoad, decide func(*engine.TxnView) (*engine.TxnWrites, error)) error {
	c := e.c
	var r *txnRead
	var marks map[catalog.TopicPartition]int64
	err := c.twoTrips(ctx, func(b *pgx.Batch) {
		r = queueTxnRead(b, load)
	}, func(b *pgx.Batch) error {
		v := r.view()
		w, err := decide(v)
		if err != nil || w == nil {
			return err
		}
		marks = queueTxnWrites(ctx, b, v, w, c.commitTimeout)
		return nil
	})
	if err != nil {
		return err
	}
	if len(marks) > 0 {
		c.notify.add(marks)
	}
	return nil
}

// txnRead is what queueTxnRead's statements read, filled in as the batch is answered.
type txnRead struct {
	v engine.TxnView
	t engine.TxnRow
}

// queueTxnRead queues, after BEGIN, the locks in the lock order — the partitions
// (sorted: those load names, with the transaction's own when asked), the producers row,
// the transactions row — then the reads.
func queueTxnRead(b *pgx.Batch, load engine.TxnLoad) *txnRead {
	r := &txnRead{v: engine.TxnView{Producer: catalog.Producer{ID: -1, Epoch: -1},
		Partitions: map[catalog.TopicPartition]int64{}, Locked: map[catalog.TopicPartition]int64{},
		Topics: map[string]engine.TopicMeta{}, TopicsByID: map[int64]engine.TopicMeta{}}}
	r.t.ProducerID = -1
	tid := load.TransactionalID
	ids := make([]int64, len(load.Partitions))
	parts := make([]int32, len(load.Partitions))
	for i, tp := range load.Partitions {
		ids[i], parts[i] = tp.TopicID, tp.Partition
	}
	b.Queue(`SELECT p.topic_id, p.partition, p.high_watermark FROM partitions p
		WHERE (p.topic_id, p.partition) IN (
			SELECT u.t, u.p FROM unnest($1::bigint[], $2::int[]) AS u(t, p)
			UNION SELECT x.topic_id, x.partition FROM txn_partitions x WHERE $4 AND x.transactional_id = $3)
		ORDER BY p.topic_id, p.partition FOR UPDATE`, ids, parts, tid, load.LockTxnPartitions).Query(func(rows pgx.Rows) error {
		var (
			tp catalog.TopicPartition
			hw int64
		)
		_, err := pgx.ForEachRow(rows, []any{&tp.TopicID, &tp.Partition, &hw}, func() error {
			r.v.Locked[tp] = hw
			return nil
		})
		return err
	})
	b.Queue(`SELECT id, epoch FROM producers WHERE transactional_id = $1 FOR NO KEY UPDATE`, tid).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&r.v.Producer.ID, &r.v.Producer.Epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	b.Queue(`SELECT producer_id, state, timeout_ms, started_at, prev_producer_id, prev_epoch, last_producer_id, last_epoch
		FROM transactions WHERE transactional_id = $1 FOR UPDATE`, tid).QueryRow(func(row pgx.Row) error {
		var (
			timeoutMs int64
			started   *time.Time
		)
		err := row.Scan(&r.t.ProducerID, &r.t.State, &timeoutMs, &started, &r.t.Prev.ID, &r.t.Prev.Epoch, &r.t.Last.ID, &r.t.Last.Epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		r.t.Timeout = time.Duration(timeoutMs) * time.Millisecond
		if started != nil {
			r.t.StartedAt = started.UTC()
		}
		r.v.Txn = &r.t
		return nil
	})
	b.Queue(`SELECT x.topic_id, x.partition, coalesce(x.first_offset, -1) FROM txn_partitions x
		JOIN partitions p ON p.topic_id = x.topic_id AND p.partition = x.partition
		WHERE x.transactional_id = $1`, tid).Query(func(rows pgx.Rows) error {
		var (
			tp    catalog.TopicPartition
			first int64
		)
		_, err := pgx.ForEachRow(rows, []any{&tp.TopicID, &tp.Partition, &first}, func() error {
			r.v.Partitions[tp] = first
			return nil
		})
		return err
	})
	b.Queue(`SELECT group_name FROM txn_groups WHERE transactional_id = $1 ORDER BY group_name`, tid).Query(func(rows pgx.Rows) error {
		var g string
		_, err := pgx.ForEachRow(rows, []any{&g}, func() error {
			r.v.Groups = append(r.v.Groups, g)
			return nil
		})
		return err
	})
	b.Queue(`SELECT group_name, topic_id, partition, committed_offset, metadata, coalesce(member_id, ''), coalesce(member_epoch, -1)
		FROM txn_offsets WHERE transactional_id = $1 ORDER BY group_name, topic_id, partition`, tid).Query(func(rows pgx.Rows) error {
		var o engine.TxnOffsetRow
		_, err := pgx.ForEachRow(rows, []any{&o.Group, &o.TopicID, &o.Partition, &o.Offset, &o.Metadata, &o.MemberID, &o.MemberEpoch}, func() error {
			r.v.Offsets = append(r.v.Offsets, o)
			return nil
		})
		return err
	})
	names, tids := load.TopicNames, load.TopicIDs
	if names == nil {
		names = []string{}
	}
	if tids == nil {
		tids = []int64{}
	}
	b.Queue(`SELECT id, name, partitions FROM topics WHERE deleted_at IS NULL AND (name = ANY($1) OR id = ANY($2))`, names, tids).Query(func(rows pgx.Rows) error {
		var tm engine.TopicMeta
		_, err := pgx.ForEachRow(rows, []any{&tm.ID, &tm.Name, &tm.Partitions}, func() error {
			r.v.Topics[tm.Name] = tm
			r.v.TopicsByID[tm.ID] = tm
			return nil
		})
		return err
	})
	b.Queue(`SELECT clock_timestamp()`).QueryRow(func(row pgx.Row) error { return row.Scan(&r.v.Now) })
	return r
}

// view is the read as the engine takes it.
func (r *txnRead) view() *engine.TxnView {
	r.v.Now = r.v.Now.UTC()
	return &r.v
}

// queueTxnWrites queues w in the engine's order and answers the high watermarks its
// markers move to, for the commit notification.
func queueTxnWrites(ctx context.Context, b *pgx.Batch, v *engine.TxnView, w *engine.TxnWrites, commitTimeout time.Duration) map[catalog.TopicPartition]int64 {
	queueAudit(ctx, b)
	tid := w.TransactionalID
	if w.RetireProducer > 0 {
		// An exhausted id: its row and state go before the new row takes the
		// transactional id.
		b.Queue(`DELETE FROM producer_state WHERE producer_id = $1`, w.RetireProducer)
		b.Queue(`DELETE FROM producers WHERE id = $1`, w.RetireProducer)
	}
	if w.NewProducer {
		b.Queue(`INSERT INTO producers (transactional_id, epoch, principal) VALUES ($1, 0, $2)
			ON CONFLICT (transactional_id) DO NOTHING RETURNING id`, tid, w.Owner).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&w.NewProducerID)
			if errors.Is(err, pgx.ErrNoRows) {
				return engine.ErrTxnRaced // another node made it meanwhile: run again
			}
			return err
		})
	}
	if w.Epoch >= 0 {
		b.Queue(`UPDATE producers SET epoch = $2, last_used_at = clock_timestamp() WHERE transactional_id = $1`, tid, w.Epoch)
	}
	if t := w.Txn; t != nil {
		var started *time.Time
		if !t.StartedAt.IsZero() {
			started = &t.StartedAt
		}
		b.Queue(`INSERT INTO transactions (transactional_id, producer_id, state, timeout_ms, started_at,
				prev_producer_id, prev_epoch, last_producer_id, last_epoch, updated_at)
			SELECT $1, p.id, $2, $3, $4, $5, $6, $7, $8, clock_timestamp() FROM producers p WHERE p.transactional_id = $1
			ON CONFLICT (transactional_id) DO UPDATE SET producer_id = excluded.producer_id, state = excluded.state,
				timeout_ms = excluded.timeout_ms, started_at = excluded.started_at, prev_producer_id = excluded.prev_producer_id,
				prev_epoch = excluded.prev_epoch, last_producer_id = excluded.last_producer_id, last_epoch = excluded.last_epoch,
				updated_at = excluded.updated_at`,
			tid, t.State, t.Timeout.Milliseconds(), started, t.Prev.ID, t.Prev.Epoch, t.Last.ID, t.Last.Epoch)
	}
	if w.ClearChildren {
		b.Queue(`DELETE FROM txn_partitions WHERE transactional_id = $1`, tid)
		b.Queue(`DELETE FROM txn_groups WHERE transactional_id = $1`, tid)
		b.Queue(`DELETE FROM txn_offsets WHERE transactional_id = $1`, tid)
	}
	if len(w.AddPartitions) > 0 {
		ids := make([]int64, len(w.AddPartitions))
		parts := make([]int32, len(w.AddPartitions))
		for i, tp := range w.AddPartitions {
			ids[i], parts[i] = tp.TopicID, tp.Partition
		}
		b.Queue(`INSERT INTO txn_partitions (transactional_id, topic_id, partition)
			SELECT $1, u.t, u.p FROM unnest($2::bigint[], $3::int[]) AS u(t, p) ON CONFLICT DO NOTHING`, tid, ids, parts)
	}
	if len(w.AddGroups) > 0 {
		b.Queue(`INSERT INTO txn_groups (transactional_id, group_name) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, tid, w.AddGroups)
	}
	if n := len(w.UpsertOffsets); n > 0 {
		var (
			groups, metas, members = make([]string, n), make([]string, n), make([]*string, n)
			ids, offs              = make([]int64, n), make([]int64, n)
			parts, epochs          = make([]int32, n), make([]int32, n)
		)
		for i, o := range w.UpsertOffsets {
			groups[i], ids[i], parts[i], offs[i], metas[i], epochs[i] = o.Group, o.TopicID, o.Partition, o.Offset, o.Metadata, o.MemberEpoch
			if o.MemberID != "" {
				members[i] = &w.UpsertOffsets[i].MemberID
			}
		}
		b.Queue(`INSERT INTO txn_offsets (transactional_id, group_name, topic_id, partition, committed_offset, metadata, member_id, member_epoch)
			SELECT $1, u.g, u.t, u.p, u.o, u.m, u.mem, u.e
			FROM unnest($2::text[], $3::bigint[], $4::int[], $5::bigint[], $6::text[], $7::text[], $8::int[]) AS u(g, t, p, o, m, mem, e)
			ON CONFLICT (transactional_id, group_name, topic_id, partition) DO UPDATE SET committed_offset = excluded.committed_offset,
				metadata = excluded.metadata, member_id = excluded.member_id, member_epoch = excluded.member_epoch`,
			tid, groups, ids, parts, offs, metas, members, epochs)
	}
	var marks map[catalog.TopicPartition]int64
	if n := len(w.Markers); n > 0 {
		marks = make(map[catalog.TopicPartition]int64, n)
		var (
			ids, offs, pids, tss, firsts = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]*int64, n)
			parts                        = make([]int32, n)
			epochs                       = make([]int16, n)
			commits                      = make([]bool, n)
		)
		for i, m := range w.Markers {
			ids[i], parts[i], offs[i], pids[i], epochs[i], commits[i], tss[i] = m.TopicID, m.Partition, m.Offset, m.ProducerID, m.ProducerEpoch, m.Commit, m.Timestamp
			if m.FirstOffset >= 0 {
				firsts[i] = &w.Markers[i].FirstOffset
			}
			marks[m.TopicPartition] = m.Offset + 1
		}
		b.Queue(`INSERT INTO txn_markers (topic_id, partition, marker_offset, producer_id, producer_epoch, is_commit, timestamp_ms, first_offset)
			SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::bigint[], $5::smallint[], $6::boolean[], $7::bigint[], $8::bigint[])`,
			ids, parts, offs, pids, epochs, commits, tss, firsts)
		// Each marker takes its partition's high watermark (locked since the read) and
		// makes the partition due for the compactor as a flush would (engine.CommitDue).
		b.Queue(`UPDATE partitions p SET high_watermark = u.o + 1,
				compact_due = least(p.compact_due, clock_timestamp() + 2 * $4::bigint * interval '1 millisecond')
			FROM unnest($1::bigint[], $2::int[], $3::bigint[]) AS u(t, pt, o)
			WHERE p.topic_id = u.t AND p.partition = u.pt AND p.high_watermark = u.o`,
			ids, parts, offs, commitTimeout.Milliseconds()).Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != int64(n) {
				return fmt.Errorf("markers: %d of %d partitions were at the offsets read", tag.RowsAffected(), n)
			}
			return nil
		})
	}
	if n := len(w.GroupOffsets); n > 0 {
		var (
			groups, metas, members = make([]string, n), make([]string, n), make([]*string, n)
			ids, offs              = make([]int64, n), make([]int64, n)
			parts                  = make([]int32, n)
			epochs                 = make([]*int32, n)
		)
		for i, o := range w.GroupOffsets {
			groups[i], ids[i], parts[i], offs[i], metas[i] = o.Group, o.TopicID, o.Partition, o.Offset, o.Metadata
			if o.MemberID != "" {
				members[i], epochs[i] = &w.GroupOffsets[i].MemberID, &w.GroupOffsets[i].MemberEpoch
			}
		}
		// Groups after transactions in the lock order, for share as offset commits take
		// them, in name order; a group deleted since is made again (a committed
		// transaction's offsets reach it whatever happened meanwhile).
		b.Queue(`INSERT INTO groups (name, assignor) SELECT DISTINCT g, $2 FROM unnest($1::text[]) AS u(g) ORDER BY 1
			ON CONFLICT (name) DO NOTHING`, groups, catalog.DefaultAssignor)
		b.Queue(`SELECT 1 FROM groups WHERE name = ANY($1) ORDER BY name COLLATE "C" FOR SHARE`, groups)
		b.Queue(`INSERT INTO group_offsets AS go (group_name, topic_id, partition, committed_offset, metadata, member_id, member_epoch, committed_at)
			SELECT u.g, u.t, u.p, u.o, u.m, u.mem, u.e, clock_timestamp()
			FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::text[], $6::text[], $7::int[]) AS u(g, t, p, o, m, mem, e)
			ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET committed_offset = excluded.committed_offset,
				metadata = excluded.metadata, member_id = excluded.member_id, member_epoch = excluded.member_epoch,
				committed_at = excluded.committed_at`,
			groups, ids, parts, offs, metas, members, epochs)
	}
	return marks
}

// DescribeTxns describes transactional ids (see catalog.Transactions).
func (c *Catalog) DescribeTxns(ctx context.Context, ids []string) ([]catalog.TxnDescription, error) {
	out := make([]catalog.TxnDescription, len(ids))
	at := map[string][]int{}
	for i, id := range ids {
		out[i] = catalog.TxnDescription{TransactionalID: id, ProducerID: -1, Epoch: -1}
		at[id] = append(at[id], i)
	}
	if ids == nil {
		ids = []string{}
	}
	rows, err := c.pool.Query(ctx, `SELECT t.transactional_id, t.producer_id, p.epoch, t.state, t.timeout_ms, t.started_at,
			coalesce((SELECT array_agg(g.group_name ORDER BY g.group_name COLLATE "C") FROM txn_groups g
				WHERE g.transactional_id = t.transactional_id), '{}'),
			coalesce((SELECT array_agg(tp.name ORDER BY tp.name COLLATE "C", x.partition) FROM txn_partitions x JOIN topics tp ON tp.id = x.topic_id
				WHERE x.transactional_id = t.transactional_id), '{}'),
			coalesce((SELECT array_agg(x.partition ORDER BY tp.name COLLATE "C", x.partition) FROM txn_partitions x JOIN topics tp ON tp.id = x.topic_id
				WHERE x.transactional_id = t.transactional_id), '{}')
		FROM transactions t JOIN producers p ON p.id = t.producer_id
		WHERE t.transactional_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("postgres: describe transactions: %w", err)
	}
	var (
		d         catalog.TxnDescription
		timeoutMs int64
		started   *time.Time
		names     []string
		parts     []int32
	)
	_, err = pgx.ForEachRow(rows, []any{&d.TransactionalID, &d.ProducerID, &d.Epoch, &d.State, &timeoutMs, &started, &d.Groups, &names, &parts}, func() error {
		d.Timeout = time.Duration(timeoutMs) * time.Millisecond
		d.StartedAt = time.Time{}
		if started != nil {
			d.StartedAt = started.UTC()
		}
		d.Partitions = nil
		for i, name := range names {
			if n := len(d.Partitions); n > 0 && d.Partitions[n-1].Topic == name {
				d.Partitions[n-1].Partitions = append(d.Partitions[n-1].Partitions, parts[i])
			} else {
				d.Partitions = append(d.Partitions, catalog.TopicPartitions{Topic: name, Partitions: []int32{parts[i]}})
			}
		}
		if len(d.Groups) == 0 {
			d.Groups = nil
		}
		for _, i := range at[d.TransactionalID] {
			out[i] = d
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: describe transactions: %w", err)
	}
	return out, nil
}

// ListTxns lists transactional ids (see catalog.Transactions).
func (c *Catalog) ListTxns(ctx context.Context, f catalog.TxnFilter) ([]catalog.TxnDescription, error) {
	states, pids := f.States, f.ProducerIDs
	if states == nil {
		states = []string{}
	}
	if pids == nil {
		pids = []int64{}
	}
	rows, err := c.pool.Query(ctx, `SELECT t.transactional_id, t.producer_id, p.epoch, t.state, t.timeout_ms, t.started_at
		FROM transactions t JOIN producers p ON p.id = t.producer_id
		WHERE (cardinality($1::text[]) = 0 OR t.state = ANY($1))
		  AND (cardinality($2::bigint[]) = 0 OR t.producer_id = ANY($2))
		  AND ($3 <= 0 OR (t.state = 'ongoing' AND t.started_at <= clock_timestamp() - $3 * interval '1 millisecond'))
		ORDER BY t.transactional_id COLLATE "C"`, states, pids, f.OngoingFor.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("postgres: list transactions: %w", err)
	}
	var (
		out       []catalog.TxnDescription
		d         catalog.TxnDescription
		timeoutMs int64
		started   *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&d.TransactionalID, &d.ProducerID, &d.Epoch, &d.State, &timeoutMs, &started}, func() error {
		d.Timeout = time.Duration(timeoutMs) * time.Millisecond
		d.StartedAt = time.Time{}
		if started != nil {
			d.StartedAt = started.UTC()
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list transactions: %w", err)
	}
	return out, nil
}

// PendingTxnOffsets lists a group's partitions with offsets in an ongoing transaction.
func (c *Catalog) PendingTxnOffsets(ctx context.Context, group string) ([]catalog.TopicPartitions, error) {
	rows, err := c.pool.Query(ctx, `SELECT tp.name, array_agg(DISTINCT o.partition ORDER BY o.partition) FROM txn_offsets o
		JOIN transactions t ON t.transactional_id = o.transactional_id AND t.state = 'ongoing'
		JOIN topics tp ON tp.id = o.topic_id AND tp.deleted_at IS NULL
		WHERE o.group_name = $1 GROUP BY tp.name ORDER BY tp.name COLLATE "C"`, group)
	if err != nil {
		return nil, fmt.Errorf("postgres: pending transactional offsets of group %s: %w", group, err)
	}
	var (
		out []catalog.TopicPartitions
		tp  catalog.TopicPartitions
	)
	_, err = pgx.ForEachRow(rows, []any{&tp.Topic, &tp.Partitions}, func() error {
		out = append(out, tp)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: pending transactional offsets of group %s: %w", group, err)
	}
	return out, nil
}

// TxnStats counts the ongoing transactions (see catalog.Transactions).
func (c *Catalog) TxnStats(ctx context.Context) (catalog.TxnStats, error) {
	var (
		s      catalog.TxnStats
		oldest *time.Time
	)
	err := c.pool.QueryRow(ctx, `SELECT count(*), min(started_at), clock_timestamp() FROM transactions WHERE state = 'ongoing'`).
		Scan(&s.Open, &oldest, &s.DatabaseTime)
	if err != nil {
		return s, fmt.Errorf("postgres: transaction stats: %w", err)
	}
	if oldest != nil {
		s.OldestOpen = oldest.UTC()
	}
	s.DatabaseTime = s.DatabaseTime.UTC()
	return s, nil
}
