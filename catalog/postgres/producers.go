package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Idempotent producers: InitProducer hands out identities from the producers table;
// strata_commit checks every idempotent request against them and against
// producer_state (migrations/0030_producers.sql). The rules are catalog's.

var _ catalog.Producers = (*Catalog)(nil)

// expireSQL forgets producers idle past the expiry, with their state, a thousand at a
// time. Rows a commit holds (FOR SHARE) are in use: skipped, not waited for. The
// subquery locks in id order, as commits do.
// A producer in an ongoing transaction is not idle (the reaper aborts the transaction
// first, at its timeout); a transactional id expires with its producer.
const expireSQL = `WITH gone AS (
	DELETE FROM producers WHERE id IN (
		SELECT id FROM producers p WHERE last_used_at <= clock_timestamp() - $1 * interval '1 millisecond'
		  AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.producer_id = p.id AND t.state = 'ongoing')
		ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED)
	RETURNING id), state AS (
	DELETE FROM producer_state WHERE producer_id IN (SELECT id FROM gone))
DELETE FROM transactions WHERE producer_id IN (SELECT id FROM gone)`

// ExpireProducers runs expireSQL (engine.ProducerBackend).
func (e pgEngine) ExpireProducers(ctx context.Context) error {
	_, err := e.c.pool.Exec(ctx, expireSQL, e.c.producerExpiry.Milliseconds())
	return err
}

// ProducerTx runs an init in one transaction (engine.ProducerBackend).
func (e pgEngine) ProducerTx(ctx context.Context, fn func(engine.ProducerStmts) error) error {
	return pgx.BeginFunc(ctx, e.c.pool, func(tx pgx.Tx) error { return fn(pgProducers{tx}) })
}

// pgProducers is an init's statements (engine.ProducerStmts).
type pgProducers struct{ tx pgx.Tx }

// ProducerRow locks the row FOR UPDATE: it waits for commits holding it, as a
// transactional bump does.
func (q pgProducers) ProducerRow(ctx context.Context, id int64) (epoch int16, transactional, found bool, err error) {
	err = q.tx.QueryRow(ctx, `SELECT epoch, transactional_id IS NOT NULL FROM producers WHERE id = $1 FOR UPDATE`, id).Scan(&epoch, &transactional)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, false, nil
	}
	return epoch, transactional, err == nil, err
}

func (q pgProducers) NewProducer(ctx context.Context, owner string) (int64, error) {
	var id int64
	err := q.tx.QueryRow(ctx, `INSERT INTO producers (epoch, principal) VALUES (0, $1) RETURNING id`, owner).Scan(&id)
	return id, err
}

func (q pgProducers) BumpProducer(ctx context.Context, id int64, epoch int16) error {
	_, err := q.tx.Exec(ctx, `UPDATE producers SET epoch = $2, last_used_at = clock_timestamp() WHERE id = $1`, id, epoch)
	return err
}
