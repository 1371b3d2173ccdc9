package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The table topics' state (catalog.Tables) is a few rows per table, written once per
// commit interval, so, as the registry's, both backends run the same statements
// (written with $N placeholders) through TablesDB; the rules are here, once.

// TablesDB is what a backend gives the table topics' scripts: the registry's
// transactions and statements, and how it reads its clock.
type TablesDB interface {
	RegistryDB
	// ClockSQL is a query answering the database clock in Unix milliseconds (one row,
	// one integer): leases are timed by it, never by a node's clock.
	ClockSQL() string
}

// Tables implements catalog.Tables over DB; a backend embeds it.
type Tables struct{ DB TablesDB }

var _ catalog.Tables = Tables{}

func (t Tables) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", t.DB.Name(), op, err)
}

func (t Tables) now(ctx context.Context, q RegistryQuerier) (int64, error) {
	ms, err := scanInts[int64](q.Query(ctx, t.DB.ClockSQL()))
	if err != nil || len(ms) != 1 {
		return 0, fmt.Errorf("read the database clock: %v %w", ms, err)
	}
	return ms[0], nil
}

type leaseRow struct {
	holder  string
	token   int64
	expires int64
}

func leaseRows(ctx context.Context, q RegistryQuerier, topicID int64, partition int32) ([]leaseRow, error) {
	rows, err := q.Query(ctx, `SELECT holder, token, expires_ms FROM table_leases WHERE topic_id = $1 AND part = $2 FOR UPDATE`, topicID, partition)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []leaseRow
	for rows.Next() {
		var r leaseRow
		if err := rows.Scan(&r.holder, &r.token, &r.expires); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// AcquireTableLease implements catalog.Tables.
func (t Tables) AcquireTableLease(ctx context.Context, topicID int64, partition int32, holder string, ttl time.Duration) (catalog.TableLease, bool, error) {
	if holder == "" || ttl <= 0 {
		return catalog.TableLease{}, false, t.wrap("acquire table lease", fmt.Errorf("%w: a lease needs a holder and a positive ttl", catalog.ErrInvalidTableCommit))
	}
	l := catalog.TableLease{TopicID: topicID, Partition: partition, Holder: holder}
	ok := false
	err := t.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		now, err := t.now(ctx, q)
		if err != nil {
			return err
		}
		rows, err := leaseRows(ctx, q, topicID, partition)
		if err != nil {
			return err
		}
		expires := now + ttl.Milliseconds()
		switch {
		case len(rows) == 0:
			// Two workers may both find no row (FOR UPDATE locks none): the one whose
			// insert finds the other's row lost the race, as if it had found it held.
			l.Token = 1
			var n int64
			n, err = q.Exec(ctx, `INSERT INTO table_leases (topic_id, part, holder, token, expires_ms) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
				topicID, partition, holder, l.Token, expires)
			if err == nil && n == 0 {
				return errDone
			}
		case rows[0].holder == holder && rows[0].expires > now:
			l.Token = rows[0].token
			_, err = q.Exec(ctx, `UPDATE table_leases SET expires_ms = $3 WHERE topic_id = $1 AND part = $2`, topicID, partition, expires)
		case rows[0].holder == "" || rows[0].expires <= now:
			l.Token = rows[0].token + 1
			_, err = q.Exec(ctx, `UPDATE table_leases SET holder = $3, token = $4, expires_ms = $5 WHERE topic_id = $1 AND part = $2`,
				topicID, partition, holder, l.Token, expires)
		default:
			return errDone // held by another
		}
		if err != nil {
			return fmt.Errorf("write the lease: %w", err)
		}
		ok = true
		return nil
	})
	if errors.Is(err, errDone) {
		err = nil
	}
	return l, ok, t.wrap(fmt.Sprintf("acquire table lease on topic %d partition %d", topicID, partition), err)
}

// ReleaseTableLease implements catalog.Tables.
func (t Tables) ReleaseTableLease(ctx context.Context, l catalog.TableLease) error {
	err := t.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		_, err := q.Exec(ctx, `UPDATE table_leases SET holder = '', expires_ms = 0 WHERE topic_id = $1 AND part = $2 AND holder = $3 AND token = $4`,
			l.TopicID, l.Partition, l.Holder, l.Token)
		return err
	})
	return t.wrap(fmt.Sprintf("release table lease on topic %d partition %d", l.TopicID, l.Partition), err)
}

func tableState(ctx context.Context, q RegistryQuerier, topicID int64, lock bool) (catalog.TableState, error) {
	s := catalog.TableState{TopicID: topicID, Next: map[int32]int64{}}
	stmt := `SELECT metadata_location FROM table_topics WHERE topic_id = $1`
	if lock {
		stmt += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, stmt, topicID)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		if err := rows.Scan(&s.MetadataLocation); err != nil {
			rows.Close()
			return s, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	rows, err = q.Query(ctx, `SELECT part, next_offset FROM table_offsets WHERE topic_id = $1`, topicID)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			p    int32
			next int64
		)
		if err := rows.Scan(&p, &next); err != nil {
			return s, err
		}
		s.Next[p] = next
	}
	return s, rows.Err()
}

// TableState implements catalog.Tables.
func (t Tables) TableState(ctx context.Context, topicID int64) (catalog.TableState, error) {
	s, err := tableState(ctx, t.DB.Reader(), topicID, false)
	return s, t.wrap(fmt.Sprintf("read table state of topic %d", topicID), err)
}

// CommitTable implements catalog.Tables. It locks the table's row first (a table's
// commits serialise on it; the first commit inserts it, and of two racing first
// commits one inserts nothing and is refused), then the ranges' lease rows, then
// writes the offsets: lock order table_topics → table_leases → table_offsets, and no
// other kind of row.
func (t Tables) CommitTable(ctx context.Context, c catalog.TableCommit) error {
	if err := c.Check(); err != nil {
		return t.wrap("commit table", err)
	}
	err := t.DB.WriteTx(ctx, func(q RegistryQuerier) error {
		if c.Prev == "" {
			n, err := q.Exec(ctx, `INSERT INTO table_topics (topic_id, metadata_location) VALUES ($1, $2) ON CONFLICT (topic_id) DO NOTHING`, c.TopicID, c.Metadata)
			if err != nil {
				return fmt.Errorf("create the table: %w", err)
			}
			if n == 0 {
				return fmt.Errorf("%w: the table was created meanwhile", catalog.ErrTableConflict)
			}
			return nil
		}
		s, err := tableState(ctx, q, c.TopicID, true)
		if err != nil {
			return err
		}
		if s.MetadataLocation != c.Prev {
			return fmt.Errorf("%w: the table's metadata moved from %s to %s", catalog.ErrTableConflict, c.Prev, s.MetadataLocation)
		}
		now, err := t.now(ctx, q)
		if err != nil {
			return err
		}
		for _, r := range c.Ranges {
			if err := checkLease(ctx, q, c, r.Partition, now); err != nil {
				return err
			}
			if next := s.Next[r.Partition]; next != r.From {
				return fmt.Errorf("%w: partition %d is converted up to %d, not %d", catalog.ErrTableConflict, r.Partition, next, r.From)
			}
		}
		for _, r := range c.Ranges {
			if _, err := q.Exec(ctx, `INSERT INTO table_offsets (topic_id, part, next_offset) VALUES ($1, $2, $3)
				ON CONFLICT (topic_id, part) DO UPDATE SET next_offset = excluded.next_offset`, c.TopicID, r.Partition, r.To); err != nil {
				return fmt.Errorf("advance partition %d: %w", r.Partition, err)
			}
		}
		n, err := q.Exec(ctx, `UPDATE table_topics SET metadata_location = $2 WHERE topic_id = $1 AND metadata_location = $3`, c.TopicID, c.Metadata, c.Prev)
		if err != nil {
			return fmt.Errorf("move the metadata location: %w", err)
		}
		if n != 1 {
			return fmt.Errorf("%w: the table's metadata moved", catalog.ErrTableConflict)
		}
		return nil
	})
	return t.wrap(fmt.Sprintf("commit table of topic %d", c.TopicID), err)
}

// checkLease answers nil when c holds partition p under a lease that is still the
// partition's and unexpired at now.
func checkLease(ctx context.Context, q RegistryQuerier, c catalog.TableCommit, p int32, now int64) error {
	var l catalog.TableLease
	for _, cl := range c.Leases {
		if cl.Partition == p {
			l = cl
		}
	}
	rows, err := leaseRows(ctx, q, c.TopicID, p)
	if err != nil {
		return err
	}
	if len(rows) == 0 || rows[0].holder != l.Holder || rows[0].token != l.Token || rows[0].expires <= now {
		return fmt.Errorf("%w: the lease on partition %d (holder %q, token %d) was lost", catalog.ErrTableConflict, p, l.Holder, l.Token)
	}
	return nil
}
