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

// Idempotent producers: the registry of ids and epochs (InitProducer) and the per
// partition state the commit checks (commit.go). The rules are catalog's.

var _ catalog.Producers = (*Catalog)(nil)

// ExpireProducers runs the expiry pass in a transaction of its own
// (engine.ProducerBackend).
func (e sqliteEngine) ExpireProducers(ctx context.Context) error {
	return e.c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error {
		return expireProducers(ctx, tx, now, e.c.opts.ProducerExpiry)
	})
}

// ProducerTx runs an init in one immediate transaction (engine.ProducerBackend).
func (e sqliteEngine) ProducerTx(ctx context.Context, fn func(engine.ProducerStmts) error) error {
	return e.c.writeTx(ctx, func(tx *sql.Tx, now time.Time) error { return fn(sqliteProducers{tx, now.UnixMilli()}) })
}

// sqliteProducers is an init's statements (engine.ProducerStmts); ms is the clock
// writeTx read.
type sqliteProducers struct {
	tx *sql.Tx
	ms int64
}

func (q sqliteProducers) ProducerRow(ctx context.Context, id int64) (epoch int16, transactional, found bool, err error) {
	err = q.tx.QueryRowContext(ctx, `SELECT epoch, transactional_id IS NOT NULL FROM producers WHERE id = ?`, id).Scan(&epoch, &transactional)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, false, nil
	}
	return epoch, transactional, err == nil, err
}

func (q sqliteProducers) NewProducer(ctx context.Context, owner string) (int64, error) {
	var id int64
	err := q.tx.QueryRowContext(ctx, `INSERT INTO producers (transactional_id, epoch, created_at, last_used_at, principal)
		VALUES (NULL, 0, ?, ?, ?) RETURNING id`, q.ms, q.ms, owner).Scan(&id)
	return id, err
}

func (q sqliteProducers) BumpProducer(ctx context.Context, id int64, epoch int16) error {
	_, err := q.tx.ExecContext(ctx, `UPDATE producers SET epoch = ?, last_used_at = ? WHERE id = ?`, epoch, q.ms, id)
	return err
}

// expireProducers deletes the producers idle past expiry, with their state. One writer
// connection serialises it with every commit, so a producer cannot commit between its
// check and its deletion.
func expireProducers(ctx context.Context, tx *sql.Tx, now time.Time, expiry time.Duration) error {
	// A producer in an ongoing transaction is not idle: the reaper aborts the
	// transaction first, at its timeout.
	rows, err := tx.QueryContext(ctx, `SELECT id FROM producers p WHERE last_used_at <= ?
		AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.producer_id = p.id AND t.state = 'ongoing')
		ORDER BY id LIMIT 1000`, now.Add(-expiry).UnixMilli())
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	return deleteProducers(ctx, tx, ids)
}

func deleteProducers(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM producer_state WHERE producer_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
		return err
	}
	// A transactional id forgotten with its producer (its transactions row and the
	// rows under it: none is ongoing, expireProducers skips those).
	if _, err := tx.ExecContext(ctx, `DELETE FROM transactions WHERE producer_id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM producers WHERE id IN (SELECT value FROM json_each(?))`, string(list))
	return err
}

// encodeBatches stores a state's batches as [[first, last, base], ...].
func encodeBatches(bs []engine.ProducerBatch) string {
	out := make([][3]int64, len(bs))
	for i, b := range bs {
		out[i] = [3]int64{int64(b.FirstSequence), int64(b.LastSequence), b.BaseOffset}
	}
	j, _ := json.Marshal(out) // plain integers: cannot fail
	return string(j)
}

func decodeBatches(s string) ([]engine.ProducerBatch, error) {
	var in [][3]int64
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("producer state batches %q: %w", s, err)
	}
	out := make([]engine.ProducerBatch, len(in))
	for i, b := range in {
		out[i] = engine.ProducerBatch{FirstSequence: int32(b[0]), LastSequence: int32(b[1]), BaseOffset: b[2]}
	}
	return out, nil
}
