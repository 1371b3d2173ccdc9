package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/strata-io/strata/catalog/internal/engine"
)

// The schema registry (catalog.Registry): its methods, statements and rules are the
// engine's (engine.Registry, which Catalog embeds); this file runs them in immediate
// transactions and on the read pool.

func (r sqliteEngine) WriteTx(ctx context.Context, fn func(q engine.RegistryQuerier) error) error {
	return r.c.writeTx(ctx, func(tx *sql.Tx, _ time.Time) error {
		if err := writeAudit(ctx, tx); err != nil {
			return err
		}
		return fn(sqlQuerier{tx})
	})
}

func (r sqliteEngine) Reader() engine.RegistryQuerier { return sqlQuerier{r.c.r} }

// sqlQuerier runs the engine's statements, their placeholders rewritten, on a
// transaction or the read pool.
type sqlQuerier struct {
	q interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

func (q sqlQuerier) Query(ctx context.Context, stmt string, args ...any) (engine.RegistryRows, error) {
	rows, err := q.q.QueryContext(ctx, engine.SQLitePlaceholders(stmt), args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q sqlQuerier) Exec(ctx context.Context, stmt string, args ...any) (int64, error) {
	res, err := q.q.ExecContext(ctx, engine.SQLitePlaceholders(stmt), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
