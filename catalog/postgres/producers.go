package postgres

import (
	"context"
	"errors"
	"fmt"

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

// InitProducer hands out a producer identity (see catalog.Producers), and forgets the
// producers idle past the expiry on the way.
func (c *Catalog) InitProducer(ctx context.Context, transactionalID string, current *catalog.Producer, owner string) (catalog.Producer, error) {
	p, err := c.initProducer(ctx, transactionalID, current, owner)
	if err != nil {
		if transactionalID == "" {
			return catalog.Producer{}, fmt.Errorf("postgres: init producer: %w", err)
		}
		return catalog.Producer{}, fmt.Errorf("postgres: init producer %q: %w", transactionalID, err)
	}
	return p, nil
}

func (c *Catalog) initProducer(ctx context.Context, tid string, current *catalog.Producer, owner string) (catalog.Producer, error) {
	if tid != "" {
		if err := catalog.ValidateTransactionalID(tid); err != nil {
			return catalog.Producer{}, err
		}
	}
	if _, err := c.pool.Exec(ctx, expireSQL, c.producerExpiry.Milliseconds()); err != nil {
		return catalog.Producer{}, fmt.Errorf("expire idle producers: %w", err)
	}
	if tid != "" {
		// A transactional id is the coordinator's (engine.InitTxnProducer: an ongoing
		// transaction is aborted, the epoch bumped).
		return engine.InitTxnProducer(ctx, c, catalog.InitTxn{TransactionalID: tid, Timeout: catalog.DefaultTxnTimeout, Current: current, Owner: owner})
	}
	if tid == "" && current != nil {
		// KIP-360: the producer keeps its id at the next epoch when
		// engine.NextIdempotentEpoch allows. FOR UPDATE waits for commits holding the
		// row, as a transactional bump does.
		var p catalog.Producer
		err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
			var (
				epoch int16
				txnal bool
			)
			err := tx.QueryRow(ctx, `SELECT epoch, transactional_id IS NOT NULL FROM producers WHERE id = $1 FOR UPDATE`, current.ID).Scan(&epoch, &txnal)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			next, ok := engine.NextIdempotentEpoch(*current, err == nil, txnal, epoch)
			if !ok {
				p.Epoch = 0
				return tx.QueryRow(ctx, `INSERT INTO producers (epoch, principal) VALUES (0, $1) RETURNING id`, owner).Scan(&p.ID)
			}
			p = catalog.Producer{ID: current.ID, Epoch: next}
			_, err = tx.Exec(ctx, `UPDATE producers SET epoch = $2, last_used_at = clock_timestamp() WHERE id = $1`, p.ID, next)
			return err
		})
		return p, err
	}
	var p catalog.Producer
	err := c.pool.QueryRow(ctx, `INSERT INTO producers (epoch, principal) VALUES (0, $1) RETURNING id`, owner).Scan(&p.ID)
	return p, err
}
