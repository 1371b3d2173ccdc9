// Package postgres is the production catalog: topics, partitions, segments and chunk
// rows in PostgreSQL through pgx, with the one-round-trip segment commit as a plpgsql
// function installed by the embedded migrations, commit notifications over
// LISTEN/NOTIFY, and the fencing insert that settles unknown commit outcomes.
package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Backend = (*Catalog)(nil)

// Catalog is a catalog.Catalog on PostgreSQL. It is safe for concurrent use.
type Catalog struct {
	pool          *pgxpool.Pool
	connConfig    *pgx.ConnConfig // for Listen's dedicated connections
	commitTimeout time.Duration
	// producerExpiry forgets idle producers (catalog.Options.ProducerExpiry).
	producerExpiry time.Duration
	log            *slog.Logger
	notify         *notifier

	// maxTimestampAfterMs bounds message.timestamp.after.max.ms (catalog.CheckConfigLimits).
	maxTimestampAfterMs int64

	closeOnce sync.Once

	registry // catalog.Registry, the engine's (set by OpenConfig)
	tables   // catalog.Tables, the engine's (set by OpenConfig)
	push     // catalog.PushSubscriptions, the engine's (set by OpenConfig)
	scripts  // the methods whose scripts are the engine's (set by OpenConfig)
	scram    // catalog.Scram, the engine's (set by OpenConfig)
}

// Open connects to the database at dsn, applies the embedded migrations (under an
// advisory lock, so many nodes may start at once) and returns the catalog.
//
// The DSN takes pgx's and pgxpool's parameters, among them:
//   - default_query_exec_mode: cache_statement (the default: prepared statements cached
//     per connection), or exec / simple_protocol behind a transaction-pooling proxy
//     (RDS Proxy, PgBouncer) where prepared statements would pin or break sessions;
//   - pool_max_conns: the pool size (default max(4, CPUs)); commits hold a connection for
//     one round trip only, so a small pool serves a busy writer.
func Open(ctx context.Context, dsn string, opts catalog.Options) (*Catalog, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", err)
	}
	return OpenConfig(ctx, cfg, opts)
}

// OpenConfig is Open for a pool configuration built by the caller, e.g. to set
// cfg.ConnConfig.DefaultQueryExecMode or cfg.MaxConns in code rather than in the DSN.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config, opts catalog.Options) (*Catalog, error) {
	if opts.CommitTimeout < 0 {
		return nil, fmt.Errorf("postgres: open: commit timeout %v is negative: use a positive duration (default %v)", opts.CommitTimeout, catalog.DefaultCommitTimeout)
	}
	opts = opts.WithDefaults()
	log := opts.Logger.With("component", "catalog", "backend", "postgres")
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "strata"
	}

	if err := migrate(ctx, cfg.ConnConfig.Copy(), log); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", err)
	}
	c := &Catalog{
		pool:           pool,
		connConfig:     cfg.ConnConfig.Copy(),
		commitTimeout:  opts.CommitTimeout,
		producerExpiry: opts.ProducerExpiry,
		log:            log,
	}
	c.maxTimestampAfterMs = opts.MaxTimestampAfterMs
	c.registry = registry{DB: pgEngine{c}}
	c.tables = tables{DB: pgEngine{c}}
	c.push = push{DB: pgEngine{c}}
	c.scripts = scripts{DB: pgEngine{c}}
	c.scram = scram{DB: pgEngine{c}}
	c.notify = startNotifier(pool, log)
	return c, nil
}

// Close stops the notifier (pending notifications are dropped: readers also poll) and
// closes the pool. Listen loops end with their own contexts.
func (c *Catalog) Close() error {
	c.closeOnce.Do(func() {
		c.notify.stop()
		c.pool.Close()
	})
	return nil
}

// Now is the database clock.
func (c *Catalog) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := c.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("postgres: now: %w", err)
	}
	return t.UTC(), nil
}
