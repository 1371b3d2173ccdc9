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

// InitProducer hands out a producer identity (see catalog.Producers), and forgets the
// producers idle past the expiry on the way.
func (c *Catalog) InitProducer(ctx context.Context, transactionalID string, current *catalog.Producer, owner string) (catalog.Producer, error) {
	p, err := c.initProducer(ctx, transactionalID, current, owner)
	if err != nil {
		if transactionalID == "" {
			return catalog.Producer{}, fmt.Errorf("sqlite: init producer: %w", err)
		}
		return catalog.Producer{}, fmt.Errorf("sqlite: init producer %q: %w", transactionalID, err)
	}
	return p, nil
}

func (c *Catalog) initProducer(ctx context.Context, tid string, current *catalog.Producer, owner string) (catalog.Producer, error) {
	if tid != "" {
		if err := catalog.ValidateTransactionalID(tid); err != nil {
			return catalog.Producer{}, err
		}
		// A transactional id is the coordinator's (engine.InitTxnProducer: an ongoing
		// transaction is aborted, the epoch bumped), after the expiry pass.
		if err := c.expire(ctx); err != nil {
			return catalog.Producer{}, err
		}
		return engine.InitTxnProducer(ctx, c, catalog.InitTxn{TransactionalID: tid, Timeout: catalog.DefaultTxnTimeout, Current: current, Owner: owner})
	}
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return catalog.Producer{}, err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return catalog.Producer{}, err
	}
	if err := expireProducers(ctx, tx, now, c.opts.ProducerExpiry); err != nil {
		return catalog.Producer{}, fmt.Errorf("expire idle producers: %w", err)
	}
	ms := now.UnixMilli()
	insert := func(tid sql.NullString) (catalog.Producer, error) {
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO producers (transactional_id, epoch, created_at, last_used_at, principal)
			VALUES (?, 0, ?, ?, ?) RETURNING id`, tid, ms, ms, owner).Scan(&id)
		return catalog.Producer{ID: id}, err
	}
	var p catalog.Producer
	switch {
	case tid == "" && current != nil:
		p, err = bumpIdempotent(ctx, tx, *current, ms)
		if err == nil && p.ID < 0 {
			p, err = insert(sql.NullString{})
		}
	default:
		p, err = insert(sql.NullString{})
	}
	if err != nil {
		return catalog.Producer{}, err
	}
	if err := tx.Commit(); err != nil {
		return catalog.Producer{}, fmt.Errorf("commit: %w", err)
	}
	return p, nil
}

// expire runs the expiry pass in a transaction of its own.
func (c *Catalog) expire(ctx context.Context) error {
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now, err := scanNow(tx.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return err
	}
	if err := expireProducers(ctx, tx, now, c.opts.ProducerExpiry); err != nil {
		return fmt.Errorf("expire idle producers: %w", err)
	}
	return tx.Commit()
}

// bumpIdempotent moves a producer without a transactional id to its next epoch when
// engine.NextIdempotentEpoch allows; otherwise it answers id -1 (hand out a new id).
func bumpIdempotent(ctx context.Context, tx *sql.Tx, current catalog.Producer, ms int64) (catalog.Producer, error) {
	var (
		epoch int16
		txnal bool
	)
	err := tx.QueryRowContext(ctx, `SELECT epoch, transactional_id IS NOT NULL FROM producers WHERE id = ?`, current.ID).Scan(&epoch, &txnal)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return catalog.Producer{}, err
	}
	next, ok := engine.NextIdempotentEpoch(current, err == nil, txnal, epoch)
	if !ok {
		return catalog.Producer{ID: -1}, nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE producers SET epoch = ?, last_used_at = ? WHERE id = ?`, next, ms, current.ID)
	return catalog.Producer{ID: current.ID, Epoch: next}, err
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
