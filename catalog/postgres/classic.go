package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Classic groups (catalog.ClassicGroups). A step is one transaction in two round trips
// (twoTrips): BEGIN, the group row locked FOR UPDATE, the clock and every row of the
// group, pipelined; then catalog's state machine runs in Go, and what changed is
// written with the COMMIT. Held JoinGroup and SyncGroup requests are woken by
// notifications on groupChannel, sent after the commit by the notifier (never inside
// the transaction).

var _ catalog.ClassicGroups = (*Catalog)(nil)

// groupChannel carries the names of classic groups that changed, separated by commas
// (group names have none).
const groupChannel = "strata_group"

// encodeGroups lays names out as payloads of at most maxPayload bytes.
func encodeGroups(names map[string]bool) []string {
	var out []string
	var sb strings.Builder
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	}) {
		if sb.Len() > 0 && sb.Len()+1+len(name) > maxPayload {
			out = append(out, sb.String())
			sb.Reset()
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(name)
	}
	if sb.Len() > 0 {
		out = append(out, sb.String())
	}
	return out
}

// ListenGroups delivers the names of classic groups that changed, on every node (see
// catalog.ClassicGroups).
func (c *Catalog) ListenGroups(ctx context.Context, fn func(group string)) error {
	return c.listen(ctx, groupChannel, func(payload string) {
		for name := range strings.SplitSeq(payload, ",") {
			if name != "" {
				fn(name)
			}
		}
	})
}

const classicMemberCols = `member_id, coalesce(instance_id, ''), client_id, client_host, session_timeout_ms,
	rebalance_timeout_ms, protocols, topics, assignment, generation, joining, syncing, pending,
	session_deadline, joined_at`

// classicRead is a classic group read queued in a batch; done builds the group once the
// batch has been sent.
type classicRead struct {
	name         string
	found        bool // the groups row
	classicFound bool // the classic_groups row
	typ          string
	created      time.Time
	now          time.Time
	live         int64
	state        engine.ClassicGroup
	deadline     *time.Time
	members      []*engine.ClassicMember
	decodeErr    error
}

// queueClassicRead queues in b: create the group (a JoinGroup), lock its row (lock:
// "FOR UPDATE" or ""), read the clock, its classic row and members, and its live
// group_members (the other type's members, when it is a consumer group).
func queueClassicRead(b *pgx.Batch, name string, create bool, lock string) *classicRead {
	r := &classicRead{name: name}
	if create {
		b.Queue(`INSERT INTO groups (name, assignor, type) VALUES ($1, $2, 'classic') ON CONFLICT (name) DO NOTHING`, name, catalog.DefaultAssignor)
	}
	b.Queue(`SELECT type, created_at FROM groups WHERE name = $1 `+lock, name).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&r.typ, &r.created)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		r.found = err == nil
		return err
	})
	b.Queue(groupNowSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&r.now) })
	b.Queue(`SELECT state, generation, synced_generation, protocol_type, protocol, leader, deadline
		FROM classic_groups WHERE name = $1`, name).QueryRow(func(row pgx.Row) error {
		s := &r.state
		err := row.Scan(&s.State, &s.Generation, &s.SyncedGeneration, &s.ProtocolType, &s.Protocol, &s.Leader, &r.deadline)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		r.classicFound = err == nil
		return err
	})
	b.Queue(`SELECT `+classicMemberCols+` FROM classic_members WHERE group_name = $1`, name).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				m                  engine.ClassicMember
				session, rebalance int64
				protocols          []byte
			)
			if err := rows.Scan(&m.ID, &m.InstanceID, &m.ClientID, &m.ClientHost, &session, &rebalance, &protocols,
				&m.Topics, &m.Assignment, &m.Generation, &m.Joining, &m.Syncing, &m.Pending, &m.SessionDeadline, &m.JoinedAt); err != nil {
				return err
			}
			m.SessionTimeout, m.RebalanceTimeout = time.Duration(session)*time.Millisecond, time.Duration(rebalance)*time.Millisecond
			m.SessionDeadline, m.JoinedAt = m.SessionDeadline.UTC(), m.JoinedAt.UTC()
			var err error
			if m.Protocols, err = engine.DecodeClassicProtocols(protocols); err != nil {
				r.decodeErr = fmt.Errorf("member %s: %w", m.ID, err)
			}
			r.members = append(r.members, &m)
		}
		return rows.Err()
	})
	b.Queue(`SELECT count(*) FROM group_members WHERE group_name = $1 AND expires_at > clock_timestamp()`, name).
		QueryRow(func(row pgx.Row) error { return row.Scan(&r.live) })
	return r
}

// done builds the group from what the batch read: an empty classic group when it has no
// classic row yet (or does not exist).
func (r *classicRead) done() (*engine.ClassicGroup, error) {
	if r.decodeErr != nil {
		return nil, r.decodeErr
	}
	r.now = r.now.UTC()
	g := engine.NewClassicGroup(r.name, r.created.UTC())
	g.Type = r.typ
	if r.classicFound {
		s := r.state
		g.State, g.Generation, g.SyncedGeneration = s.State, s.Generation, s.SyncedGeneration
		g.ProtocolType, g.Protocol, g.Leader = s.ProtocolType, s.Protocol, s.Leader
		if r.deadline != nil {
			g.Deadline = r.deadline.UTC()
		}
	}
	if g.Type != catalog.GroupTypeClassic {
		g.OtherLive = int(r.live)
	}
	for _, m := range r.members {
		g.Members[m.ID] = m
	}
	return g, nil
}

// queueClassicWrites queues in b what changed between before and after.
func queueClassicWrites(b *pgx.Batch, before, after *engine.ClassicGroup, ch engine.ClassicChanges, newRow bool) {
	name := after.Name
	if ch.TypeChanged {
		b.Queue(`UPDATE groups SET type = $2 WHERE name = $1`, name, after.Type)
		// The other type's members are all gone (CheckGroupType): their rows go too.
		b.Queue(`DELETE FROM group_assignments WHERE group_name = $1`, name)
		b.Queue(`DELETE FROM group_members WHERE group_name = $1`, name)
		if after.Type != catalog.GroupTypeClassic {
			b.Queue(`DELETE FROM classic_members WHERE group_name = $1`, name)
		}
	}
	if ch.GroupChanged || newRow {
		var deadline *time.Time
		if !after.Deadline.IsZero() {
			deadline = &after.Deadline
		}
		b.Queue(`INSERT INTO classic_groups (name, state, generation, synced_generation, protocol_type, protocol, leader, deadline)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (name) DO UPDATE SET state = excluded.state, generation = excluded.generation,
				synced_generation = excluded.synced_generation, protocol_type = excluded.protocol_type,
				protocol = excluded.protocol, leader = excluded.leader, deadline = excluded.deadline`,
			name, after.State, after.Generation, after.SyncedGeneration, after.ProtocolType, after.Protocol, after.Leader, deadline)
	}
	if len(ch.DeleteMembers) > 0 {
		b.Queue(`DELETE FROM classic_members WHERE group_name = $1 AND member_id = ANY($2::text[])`, name, ch.DeleteMembers)
	}
	for _, m := range ch.UpsertMembers {
		var instance *string
		if m.InstanceID != "" {
			instance = &m.InstanceID
		}
		b.Queue(`INSERT INTO classic_members (group_name, member_id, instance_id, client_id, client_host,
				session_timeout_ms, rebalance_timeout_ms, protocols, topics, assignment, generation, joining,
				syncing, pending, session_deadline, joined_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
			ON CONFLICT (group_name, member_id) DO UPDATE SET instance_id = excluded.instance_id,
				client_id = excluded.client_id, client_host = excluded.client_host,
				session_timeout_ms = excluded.session_timeout_ms, rebalance_timeout_ms = excluded.rebalance_timeout_ms,
				protocols = excluded.protocols, topics = excluded.topics, assignment = excluded.assignment,
				generation = excluded.generation, joining = excluded.joining, syncing = excluded.syncing,
				pending = excluded.pending, session_deadline = excluded.session_deadline, joined_at = excluded.joined_at`,
			name, m.ID, instance, m.ClientID, m.ClientHost, m.SessionTimeout.Milliseconds(), m.RebalanceTimeout.Milliseconds(),
			engine.EncodeClassicProtocols(m.Protocols), m.Topics, m.Assignment, m.Generation, m.Joining, m.Syncing,
			m.Pending, m.SessionDeadline, m.JoinedAt)
	}
	if len(ch.DeleteMirror) > 0 {
		b.Queue(`DELETE FROM group_members WHERE group_name = $1 AND member_id = ANY($2::text[])`, name, ch.DeleteMirror)
	}
	for _, m := range ch.UpsertMirror {
		b.Queue(`INSERT INTO group_members
			(group_name, member_id, epoch, prev_epoch, topics, session_timeout_ms, expires_at, joined_at)
			VALUES ($1, $2, $3, $4, $5::text[], $6, $7, $8)
			ON CONFLICT (group_name, member_id) DO UPDATE SET
				epoch = excluded.epoch, prev_epoch = excluded.prev_epoch, topics = excluded.topics,
				session_timeout_ms = excluded.session_timeout_ms, expires_at = excluded.expires_at,
				joined_at = excluded.joined_at`,
			name, m.ID, m.Epoch, m.PrevEpoch, m.Topics, m.SessionTimeout.Milliseconds(), m.ExpiresAt, m.JoinedAt)
	}
}

// ClassicTx runs one classic step (engine.ClassicBackend) in two round trips: the group
// created when asked, locked and read, with the topics' high watermarks, after BEGIN;
// then the writes with the COMMIT.
func (e pgEngine) ClassicTx(ctx context.Context, load engine.ClassicLoad, decide func(*engine.ClassicView) (*engine.ClassicWrites, error)) error {
	var (
		r      *classicRead
		topics = map[string]engine.TopicMeta{}
		hws    = map[catalog.TopicPartition]int64{}
		notify bool
	)
	err := e.c.twoTrips(ctx, func(b *pgx.Batch) {
		r = queueClassicRead(b, load.Group, load.Create, "FOR UPDATE")
		if len(load.Topics) > 0 {
			queueHighWatermarks(b, load.Topics, topics, hws)
		}
	}, func(b *pgx.Batch) error {
		g, err := r.done()
		if err != nil {
			return err
		}
		w, err := decide(&engine.ClassicView{Now: r.now, Group: g, Found: r.found, ClassicFound: r.classicFound,
			Topics: topics, HighWatermarks: hws})
		if err != nil {
			return err
		}
		if w == nil {
			return errNothingToWrite
		}
		if o := w.Offsets; o != nil {
			queueOffsets(b, load.Group, o.TPs, o.Offsets, &o.MemberID, &o.Generation)
		}
		queueClassicWrites(b, w.Before, w.After, w.Changes, w.NewClassicRow)
		notify = w.Changes.Notify
		return nil
	})
	if errors.Is(err, errNothingToWrite) {
		return nil
	}
	if err != nil {
		return err
	}
	if notify {
		e.c.notify.addGroup(load.Group)
	}
	return nil
}

// errNothingToWrite rolls back a transaction that found nothing to write.
var errNothingToWrite = errors.New("nothing to write")

// queueHighWatermarks queues the read of the live topics among names and their
// partitions' high watermarks, into topics and hws.
func queueHighWatermarks(b *pgx.Batch, names []string, topics map[string]engine.TopicMeta, hws map[catalog.TopicPartition]int64) {
	b.Queue(`SELECT t.id, t.name, t.partitions, p.partition, p.high_watermark
		FROM topics t JOIN partitions p ON p.topic_id = t.id
		WHERE t.deleted_at IS NULL AND t.name = ANY($1::text[])`, names).Query(func(rows pgx.Rows) error {
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

// queueOffsets queues the upsert of committed offsets (tps[i] is offs[i]'s partition),
// in partition order so two commits touching the same rows lock them in one order.
func queueOffsets(b *pgx.Batch, group string, tps []catalog.TopicPartition, offs []catalog.CommitOffset, member *string, epoch *int32) {
	idx := make([]int, len(tps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if tps[a].TopicID != tps[b].TopicID {
			return compareInt(tps[a].TopicID, tps[b].TopicID)
		}
		return compareInt(int64(tps[a].Partition), int64(tps[b].Partition))
	})
	ids := make([]int64, len(idx))
	parts := make([]int32, len(idx))
	values := make([]int64, len(idx))
	metas := make([]string, len(idx))
	for i, k := range idx {
		ids[i], parts[i], values[i], metas[i] = tps[k].TopicID, tps[k].Partition, offs[k].Offset, offs[k].Metadata
	}
	b.Queue(`INSERT INTO group_offsets
		(group_name, topic_id, partition, committed_offset, metadata, member_id, member_epoch, committed_at)
		SELECT $1, t, p, o, m, $6, $7, clock_timestamp()
		FROM unnest($2::bigint[], $3::int[], $4::bigint[], $5::text[]) AS u(t, p, o, m)
		ON CONFLICT (group_name, topic_id, partition) DO UPDATE SET
			committed_offset = excluded.committed_offset, metadata = excluded.metadata,
			member_id = excluded.member_id, member_epoch = excluded.member_epoch,
			committed_at = excluded.committed_at`,
		group, ids, parts, values, metas, member, epoch)
}

// ReadClassic reads a classic group in one snapshot, without a lock
// (engine.ClassicBackend).
func (e pgEngine) ReadClassic(ctx context.Context, group string) (*engine.ClassicGroup, time.Time, error) {
	c := e.c
	var (
		g   *engine.ClassicGroup
		now time.Time
	)
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		r := queueClassicRead(b, group, false, "")
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if !r.found {
			return fmt.Errorf("%w: %w: %s", catalog.ErrNotClassicGroup, catalog.ErrGroupNotFound, group)
		}
		var err error
		if g, err = r.done(); err != nil {
			return err
		}
		if g.Type != catalog.GroupTypeClassic {
			return fmt.Errorf("%w: %s is a %s group", catalog.ErrNotClassicGroup, group, g.Type)
		}
		now = r.now
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("postgres: read classic group %s: %w", group, err)
	}
	return g, now, nil
}

// GroupKinds lists every group's type (and a classic group's state).
func (c *Catalog) GroupKinds(ctx context.Context) ([]catalog.GroupKind, error) {
	rows, err := c.pool.Query(ctx, `SELECT g.name, g.type, coalesce(c.state, ''), coalesce(c.protocol_type, '')
		FROM groups g LEFT JOIN classic_groups c ON c.name = g.name ORDER BY g.name`)
	if err != nil {
		return nil, fmt.Errorf("postgres: group kinds: %w", err)
	}
	var (
		out []catalog.GroupKind
		k   catalog.GroupKind
	)
	_, err = pgx.ForEachRow(rows, []any{&k.Name, &k.Type, &k.ClassicState, &k.ProtocolType}, func() error {
		if k.Type != catalog.GroupTypeClassic {
			k.ClassicState, k.ProtocolType = "", ""
		} else if k.ClassicState == "" {
			k.ClassicState = catalog.ClassicEmpty
		}
		out = append(out, k)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: group kinds: %w", err)
	}
	return out, nil
}

// DeleteOffsets deletes a group's committed offsets of partitions no live member's
// subscription covers.
func (c *Catalog) DeleteOffsets(ctx context.Context, group string, offsets []catalog.TopicPartitionName) ([]error, error) {
	if err := catalog.ValidateGroupName(group); err != nil {
		return nil, fmt.Errorf("postgres: delete offsets of group %q: %w: %w", group, catalog.ErrGroupNotFound, err)
	}
	names := make([]string, len(offsets))
	for i, o := range offsets {
		names[i] = o.Topic
	}
	var errs []error
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var found bool
		var subscribed []string
		topics := map[string]engine.TopicMeta{}
		hws := map[catalog.TopicPartition]int64{}
		b := &pgx.Batch{}
		b.Queue(`SELECT true FROM groups WHERE name = $1 FOR UPDATE`, group).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&found)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		b.Queue(`SELECT coalesce(array_agg(DISTINCT t), '{}') FROM group_members, unnest(topics) AS t
			WHERE group_name = $1 AND expires_at > clock_timestamp()`, group).QueryRow(func(row pgx.Row) error {
			return row.Scan(&subscribed)
		})
		queueHighWatermarks(b, names, topics, hws)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if !found {
			return catalog.ErrGroupNotFound
		}
		var ids []int64
		var parts []int32
		errs = engine.CheckDeleteOffsets(offsets, subscribed, topics, func(tp catalog.TopicPartition) {
			ids, parts = append(ids, tp.TopicID), append(parts, tp.Partition)
		})
		_, err := tx.Exec(ctx, `DELETE FROM group_offsets WHERE group_name = $1
			AND (topic_id, partition) IN (SELECT * FROM unnest($2::bigint[], $3::int[]))`, group, ids, parts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: delete offsets of group %s: %w", group, err)
	}
	return errs, nil
}
