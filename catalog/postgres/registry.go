package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog/internal/engine"
)

// The schema registry (catalog.Registry): its methods, statements and rules are the
// engine's (engine.Registry, which Catalog embeds); this file runs them on the pool.

func (r pgEngine) WriteTx(ctx context.Context, fn func(q engine.RegistryQuerier) error) error {
	return pgx.BeginFunc(ctx, r.c.pool, func(tx pgx.Tx) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		return fn(txQuerier{tx})
	})
}

func (r pgEngine) Reader() engine.RegistryQuerier { return poolQuerier{r.c} }

type txQuerier struct{ tx pgx.Tx }

func (q txQuerier) Query(ctx context.Context, sql string, args ...any) (engine.RegistryRows, error) {
	return q.tx.Query(ctx, sql, args...)
}

func (q txQuerier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

type poolQuerier struct{ c *Catalog }

func (q poolQuerier) Query(ctx context.Context, sql string, args ...any) (engine.RegistryRows, error) {
	return q.c.pool.Query(ctx, sql, args...)
}

func (q poolQuerier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.c.pool.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}
