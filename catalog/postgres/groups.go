package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Consumer groups. A heartbeat is one transaction in two round trips (twoTrips): BEGIN,
// the lock of its group's row FOR UPDATE and every read, pipelined; then catalog's
// rules run in Go, and what changed is written with the COMMIT in the second. An offset
// commit is the same with the row locked FOR SHARE, so commits of one group run side by
// side but never beside a heartbeat. Lock order, everywhere: partitions (sorted), then
// producer state, then groups — nothing here locks partition rows (high watermarks only
// grow, so a plain read bounds a commit safely).

var _ catalog.Groups = (*Catalog)(nil)

const (
	groupLockSQL   = `SELECT assignor, epoch, created_at, type FROM groups WHERE name = $1`
	groupNowSQL    = `SELECT clock_timestamp()`
	groupMembersQL = `SELECT member_id, epoch, prev_epoch, topics, session_timeout_ms, expires_at, joined_at,
		task_lags, standby_replicas FROM group_members WHERE group_name = $1`
	groupOwnersSQL = `SELECT topic_id, partition, coalesce(owner, ''), coalesce(target, ''), owner_epoch,
		coalesce(released_by, '') FROM group_assignments WHERE group_name = $1`
	// The live topics a heartbeat needs: every member's subscription and the caller's.
	groupTopicsSQL = `SELECT id, name, partitions FROM topics WHERE deleted_at IS NULL AND name IN (
		SELECT unnest(topics) FROM group_members WHERE group_name = $1
		UNION SELECT unnest($2::text[]))`
)

// groupRead is a group read queued in a batch: st and the rest are set by done, once
// the batch has been sent and closed.
type groupRead struct {
	st     *engine.GroupState
	found  bool
	now    time.Time
	topics map[string]engine.TopicMeta

	name     string
	assignor string
	typ      string
	epoch    int32
	created  time.Time
	members  []*engine.GroupMember
	owners   map[catalog.TopicPartition]*engine.Ownership
}

// readGroup sends one batch of queueGroupRead.
func readGroup(ctx context.Context, q pgx.Tx, name, lock string, create bool, assignor string, withTopics bool, extra []string) (*groupRead, error) {
	b := &pgx.Batch{}
	r := queueGroupRead(b, name, lock, create, assignor, withTopics, extra)
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	r.done()
	return r, nil
}

// queueGroupRead queues in b: lock the group row (lock: "FOR UPDATE", "FOR SHARE" or
// ""), read the clock after the lock is held, then the members, assignments and, when
// withTopics, the live topics of the subscriptions plus extra. create inserts the group
// first when it is missing. Call done on the answer once b is closed.
func queueGroupRead(b *pgx.Batch, name, lock string, create bool, assignor string, withTopics bool, extra []string) *groupRead {
	if create {
		if assignor == "" {
			assignor = catalog.DefaultAssignor
		}
		b.Queue(`INSERT INTO groups (name, assignor) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, assignor)
	}
	r := &groupRead{name: name, owners: map[catalog.TopicPartition]*engine.Ownership{}, topics: map[string]engine.TopicMeta{}}
	b.Queue(groupLockSQL+" "+lock, name).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&r.assignor, &r.epoch, &r.created, &r.typ)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err == nil {
			r.found = true
		}
		return err
	})
	b.Queue(groupNowSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&r.now) })
	b.Queue(groupMembersQL, name).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				m       engine.GroupMember
				session int64
				lags    []byte
			)
			if err := rows.Scan(&m.ID, &m.Epoch, &m.PrevEpoch, &m.Topics, &session, &m.ExpiresAt, &m.JoinedAt, &lags, &m.StandbyReplicas); err != nil {
				return err
			}
			if err := json.Unmarshal(lags, &m.Lags); err != nil {
				return fmt.Errorf("member %s: task_lags: %w", m.ID, err)
			}
			m.SessionTimeout = time.Duration(session) * time.Millisecond
			m.ExpiresAt, m.JoinedAt = m.ExpiresAt.UTC(), m.JoinedAt.UTC()
			r.members = append(r.members, &m)
		}
		return rows.Err()
	})
	b.Queue(groupOwnersSQL, name).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				tp catalog.TopicPartition
				o  engine.Ownership
			)
			if err := rows.Scan(&tp.TopicID, &tp.Partition, &o.Owner, &o.Target, &o.Epoch, &o.ReleasedBy); err != nil {
				return err
			}
			r.owners[tp] = &o
		}
		return rows.Err()
	})
	if withTopics {
		if extra == nil {
			extra = []string{}
		}
		b.Queue(groupTopicsSQL, name, extra).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var t engine.TopicMeta
				if err := rows.Scan(&t.ID, &t.Name, &t.Partitions); err != nil {
					return err
				}
				r.topics[t.Name] = t
			}
			return rows.Err()
		})
	}
	return r
}

// done builds the group from what the batch read.
func (r *groupRead) done() {
	r.now = r.now.UTC()
	if !r.found {
		return
	}
	r.st = engine.NewGroupState(r.name, r.assignor, r.created.UTC())
	r.st.Epoch, r.st.Type = r.epoch, r.typ
	for _, m := range r.members {
		r.st.Members[m.ID] = m
	}
	r.st.Owners = r.owners
}

// queueGroupWrites queues in b what changed between before and after.
func queueGroupWrites(b *pgx.Batch, before, after *engine.GroupState) {
	ch := engine.DiffGroup(before, after)
	name := after.Name
	if ch.GroupChanged {
		b.Queue(`UPDATE groups SET epoch = $2, assignor = $3 WHERE name = $1`, name, after.Epoch, after.Assignor)
	}
	if before.Type != after.Type { // an empty classic group became a consumer group
		b.Queue(`UPDATE groups SET type = $2 WHERE name = $1`, name, after.Type)
		b.Queue(`DELETE FROM classic_members WHERE group_name = $1`, name)
	}
	if len(ch.DeleteMembers) > 0 {
		b.Queue(`DELETE FROM group_members WHERE group_name = $1 AND member_id = ANY($2::text[])`, name, ch.DeleteMembers)
	}
	for _, m := range ch.UpsertMembers {
		topics := m.Topics
		if topics == nil {
			topics = []string{}
		}
		lags := engine.EncodeTaskLags(m.Lags)
		b.Queue(`INSERT INTO group_members
			(group_name, member_id, epoch, prev_epoch, topics, session_timeout_ms, expires_at, joined_at,
			 task_lags, standby_replicas)
			VALUES ($1, $2, $3, $4, $5::text[], $6, $7, $8, $9::jsonb, $10)
			ON CONFLICT (group_name, member_id) DO UPDATE SET
				epoch = excluded.epoch, prev_epoch = excluded.prev_epoch, topics = excluded.topics,
				session_timeout_ms = excluded.session_timeout_ms, expires_at = excluded.expires_at,
				joined_at = excluded.joined_at, task_lags = excluded.task_lags,
				standby_replicas = excluded.standby_replicas`,
			name, m.ID, m.Epoch, m.PrevEpoch, topics, m.SessionTimeout.Milliseconds(), m.ExpiresAt, m.JoinedAt,
			lags, m.StandbyReplicas)
	}
	if len(ch.DeleteOwners) > 0 {
		ids := make([]int64, len(ch.DeleteOwners))
		parts := make([]int32, len(ch.DeleteOwners))
		for i, tp := range ch.DeleteOwners {
			ids[i], parts[i] = tp.TopicID, tp.Partition
		}
		b.Queue(`DELETE FROM group_assignments WHERE group_name = $1
			AND (topic_id, partition) IN (SELECT * FROM unnest($2::bigint[], $3::int[]))`, name, ids, parts)
	}
	if len(ch.UpsertOwners) > 0 {
		tps := make([]catalog.TopicPartition, 0, len(ch.UpsertOwners))
		for tp := range ch.UpsertOwners {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, func(a, b catalog.TopicPartition) int {
			if a.TopicID != b.TopicID {
				return compareInt(a.TopicID, b.TopicID)
			}
			return compareInt(int64(a.Partition), int64(b.Partition))
		})
		ids := make([]int64, len(tps))
		parts := make([]int32, len(tps))
		owners := make([]string, len(tps))
		targets := make([]string, len(tps))
		epochs := make([]int32, len(tps))
		released := make([]string, len(tps))
		for i, tp := range tps {
			o := ch.UpsertOwners[tp]
			ids[i], parts[i], owners[i], targets[i], epochs[i], released[i] = tp.TopicID, tp.Partition, o.Owner, o.Target, o.Epoch, o.ReleasedBy
		}
		b.Queue(`INSERT INTO group_assignments (group_name, topic_id, partition, owner, target, owner_epoch, released_by)
			SELECT $1, t, p, nullif(o, ''), nullif(g, ''), e, nullif(r, '')
			FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::int[], $7::text[]) AS u(t, p, o, g, e, r)
			ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET
				owner = excluded.owner, target = excluded.target, owner_epoch = excluded.owner_epoch,
				released_by = excluded.released_by`,
			name, ids, parts, owners, targets, epochs, released)
	}
}

// twoTrips runs one transaction in two round trips: BEGIN pipelined with the
// statements read queues (locks first, then reads), and — once their answers are in —
// the statements write queues, pipelined with COMMIT. An error rolls back, which costs a
// third round trip only then. Postgres runs a pipeline's statements in order and skips
// the rest of it after an error, COMMIT included.
func (c *Catalog) twoTrips(ctx context.Context, read func(b *pgx.Batch), write func(b *pgx.Batch) error) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left inside a transaction (a rollback that failed, a cancelled
	// batch) is closed by Release, never reused.
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	read(b)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return rollback(conn, err)
	}
	w := &pgx.Batch{}
	if err := write(w); err != nil {
		return rollback(conn, err)
	}
	w.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	if err := conn.SendBatch(ctx, w).Close(); err != nil {
		return rollback(conn, err)
	}
	return nil
}

// rollback ends a failed transaction of twoTrips and returns err.
func rollback(conn *pgxpool.Conn, err error) error {
	pc := conn.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, "ROLLBACK")
	return err
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GroupTx runs one group call (engine.GroupBackend) in two round trips (twoTrips): the
// group created when asked, locked and read, with the topics asked for, after BEGIN;
// then the audit record and the writes with the COMMIT.
func (e pgEngine) GroupTx(ctx context.Context, load engine.GroupLoad, decide func(*engine.GroupView) (*engine.GroupWrites, error)) error {
	lock := "FOR SHARE"
	if load.Exclusive {
		lock = "FOR UPDATE"
	}
	var r *groupRead
	topics := map[string]engine.TopicMeta{}
	hws := map[catalog.TopicPartition]int64{}
	return e.c.twoTrips(ctx, func(b *pgx.Batch) {
		r = queueGroupRead(b, load.Group, lock, load.Create, load.Assignor, load.SubscribedTopics, load.ExtraTopics)
		if len(load.CommitTopics) > 0 {
			b.Queue(`SELECT t.id, t.name, t.partitions, p.partition, p.high_watermark
				FROM topics t JOIN partitions p ON p.topic_id = t.id
				WHERE t.deleted_at IS NULL AND t.name = ANY($1::text[])`, load.CommitTopics).Query(func(rows pgx.Rows) error {
				var (
					t  engine.TopicMeta
					p  int32
					hw int64
				)
				_, err := pgx.ForEachRow(rows, []any{&t.ID, &t.Name, &t.Partitions, &p, &hw}, func() error {
					topics[t.Name] = t
					hws[catalog.TopicPartition{TopicID: t.ID, Partition: p}] = hw
					return nil
				})
				return err
			})
		}
	}, func(b *pgx.Batch) error {
		r.done()
		v := &engine.GroupView{Now: r.now, State: r.st, Topics: r.topics, HighWatermarks: hws}
		if len(load.CommitTopics) > 0 {
			v.Topics = topics
		}
		w, err := decide(v)
		if err != nil {
			return err
		}
		queueAudit(ctx, b) // a reset's (security.go)
		if w.Before != nil {
			queueGroupWrites(b, w.Before, w.After)
		}
		if len(w.Offsets) > 0 {
			queueOffsetRows(b, w.Offsets)
		}
		return nil
	})
}

// queueOffsetRows queues the upsert of an offset commit's rows (one group's, one
// member's or none), in their order.
func queueOffsetRows(b *pgx.Batch, rows []engine.GroupOffsetRow) {
	ids := make([]int64, len(rows))
	parts := make([]int32, len(rows))
	offs := make([]int64, len(rows))
	metas := make([]string, len(rows))
	for i, r := range rows {
		ids[i], parts[i], offs[i], metas[i] = r.TopicID, r.Partition, r.Offset, r.Metadata
	}
	var member *string
	var epoch *int32
	if rows[0].MemberID != "" {
		member, epoch = &rows[0].MemberID, &rows[0].MemberEpoch
	}
	b.Queue(`INSERT INTO group_offsets
		(group_name, topic_id, partition, committed_offset, metadata, member_id, member_epoch, committed_at)
		SELECT $1, t, p, o, m, $6, $7, clock_timestamp()
		FROM unnest($2::bigint[], $3::int[], $4::bigint[], $5::text[]) AS u(t, p, o, m)
		ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET
			committed_offset = excluded.committed_offset, metadata = excluded.metadata,
			member_id = excluded.member_id, member_epoch = excluded.member_epoch,
			committed_at = excluded.committed_at`,
		rows[0].Group, ids, parts, offs, metas, member, epoch)
}

// GroupOffsets lists a group's committed offsets of live topics.
func (c *Catalog) GroupOffsets(ctx context.Context, group string) ([]catalog.GroupOffset, error) {
	if err := catalog.ValidateGroupName(group); err != nil {
		return nil, fmt.Errorf("postgres: offsets of group %q: %w: %w", group, catalog.ErrGroupNotFound, err)
	}
	rows, err := c.pool.Query(ctx, `SELECT t.name, o.topic_id, o.partition, o.committed_offset, o.metadata, o.committed_at
		FROM groups g
		LEFT JOIN group_offsets o ON o.group_name = g.name
		LEFT JOIN topics t ON t.id = o.topic_id AND t.deleted_at IS NULL
		WHERE g.name = $1 ORDER BY t.name, o.partition`, group)
	if err != nil {
		return nil, fmt.Errorf("postgres: offsets of group %s: %w", group, err)
	}
	var (
		out   []catalog.GroupOffset
		found bool
	)
	var (
		name   *string
		id     *int64
		part   *int32
		off    *int64
		meta   *string
		commit *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &id, &part, &off, &meta, &commit}, func() error {
		found = true
		if name == nil || id == nil { // no offsets, or a deleted topic's
			return nil
		}
		out = append(out, catalog.GroupOffset{Topic: *name, TopicID: *id, Partition: *part, Offset: *off, Metadata: *meta, CommittedAt: commit.UTC()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: offsets of group %s: %w", group, err)
	}
	if !found {
		return nil, fmt.Errorf("postgres: offsets of group %s: %w", group, catalog.ErrGroupNotFound)
	}
	return out, nil
}

// GroupLag answers lag per partition (engine.GroupLagOf).
func (c *Catalog) GroupLag(ctx context.Context, group string) ([]catalog.PartitionLag, error) {
	l, err := engine.GroupLagOf(ctx, c, group)
	if err != nil {
		return nil, fmt.Errorf("postgres: lag of group %s: %w", group, err)
	}
	return l, nil
}

// DescribeGroup reads a group in one snapshot (one repeatable-read transaction).
func (c *Catalog) DescribeGroup(ctx context.Context, group string) (catalog.GroupDescription, error) {
	if err := catalog.ValidateGroupName(group); err != nil {
		return catalog.GroupDescription{}, fmt.Errorf("postgres: describe group %q: %w: %w", group, catalog.ErrGroupNotFound, err)
	}
	var d catalog.GroupDescription
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		r, err := readGroup(ctx, tx, group, "", false, "", false, nil)
		if err != nil {
			return err
		}
		if !r.found {
			return catalog.ErrGroupNotFound
		}
		rows, err := tx.Query(ctx, `SELECT id, name FROM topics WHERE deleted_at IS NULL AND id IN
			(SELECT topic_id FROM group_assignments WHERE group_name = $1)`, group)
		if err != nil {
			return err
		}
		names := map[int64]string{}
		var (
			id   int64
			name string
		)
		if _, err := pgx.ForEachRow(rows, []any{&id, &name}, func() error { names[id] = name; return nil }); err != nil {
			return err
		}
		d = r.st.Describe(r.now, names)
		return nil
	})
	if err != nil {
		return catalog.GroupDescription{}, fmt.Errorf("postgres: describe group %s: %w", group, err)
	}
	return d, nil
}

// ListGroups lists every group with its state at the database clock.
func (c *Catalog) ListGroups(ctx context.Context) ([]catalog.GroupSummary, error) {
	// A revocation pending from an expired member is not reconciling: the next
	// heartbeat frees it.
	rows, err := c.pool.Query(ctx, `WITH now AS (SELECT clock_timestamp() AS t)
		SELECT g.name, g.assignor,
			(SELECT count(*) FROM group_members m, now WHERE m.group_name = g.name AND m.expires_at > now.t),
			EXISTS (SELECT 1 FROM group_assignments a WHERE a.group_name = g.name AND a.owner IS DISTINCT FROM a.target
				AND (a.owner IS NULL OR a.owner IN (SELECT member_id FROM group_members m, now
					WHERE m.group_name = g.name AND m.expires_at > now.t)))
		FROM groups g ORDER BY g.name`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list groups: %w", err)
	}
	var (
		out         []catalog.GroupSummary
		s           catalog.GroupSummary
		members     int64
		reconciling bool
	)
	_, err = pgx.ForEachRow(rows, []any{&s.Name, &s.Assignor, &members, &reconciling}, func() error {
		s.Members = int(members)
		switch {
		case s.Members == 0:
			s.State = catalog.GroupEmpty
		case reconciling:
			s.State = catalog.GroupReconciling
		default:
			s.State = catalog.GroupStable
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list groups: %w", err)
	}
	return out, nil
}

// DeleteGroup deletes a group without live members, with its offsets.
func (c *Catalog) DeleteGroup(ctx context.Context, group string) error {
	if err := catalog.ValidateGroupName(group); err != nil {
		return fmt.Errorf("postgres: delete group %q: %w: %w", group, catalog.ErrGroupNotFound, err)
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		r, err := readGroup(ctx, tx, group, "FOR UPDATE", false, "", false, nil)
		if err != nil {
			return err
		}
		if !r.found {
			return catalog.ErrGroupNotFound
		}
		if n := r.st.LiveMembers(r.now); n > 0 {
			return fmt.Errorf("%w: %d live members", catalog.ErrGroupNotEmpty, n)
		}
		_, err = tx.Exec(ctx, `DELETE FROM groups WHERE name = $1`, group)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: delete group %s: %w", group, err)
	}
	return nil
}
