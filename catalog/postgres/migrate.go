package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// The plpgsql functions live one file each in functions/, applied after the migrations
// at every start (applyFunctions), so a function's live body is in one place: a change
// to it is a change to its file, not a new migration that copies the body whole. The
// migrations that defined them before (0002 to 0135) stay as they were merged, so a
// database at any version upgrades through them and ends with the files' bodies.
//
//go:embed functions/*.sql
var functionFS embed.FS

// migrateLockID is the pg_advisory_lock key that serialises migrations across nodes
// (an arbitrary constant: "strata" in ASCII).
const migrateLockID int64 = 0x737472617461

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded files NNNN_name.sql in version order.
func migrations() ([]migration, error) {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, f := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(f, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", f)
		}
		b, err := migrationFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migration version %d appears twice", ms[i].version)
		}
	}
	return ms, nil
}

// migrate applies the embedded migrations not yet recorded in schema_migrations, each in
// its own transaction, on a dedicated connection holding a session advisory lock: nodes
// starting together queue on the lock and find the work done. Closing the connection
// releases the lock even if ctx ends mid-way.
func migrate(ctx context.Context, cfg *pgx.ConnConfig, log *slog.Logger) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres: migrate: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()

	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockID); err != nil {
		return fmt.Errorf("postgres: migrate: take advisory lock: %w", err)
	}
	// Created under the lock: concurrent CREATE TABLE IF NOT EXISTS can still collide.
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    int PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return fmt.Errorf("postgres: migrate: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("postgres: migrate: read schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("postgres: migrate: read schema_migrations: %w", err)
	}
	for _, v := range versions {
		applied[int(v)] = true
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// Simple protocol: a migration file holds several statements.
			if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: migrate: apply %04d_%s: %w", m.version, m.name, err)
		}
		log.Info("applied migration", "version", m.version, "name", m.name)
	}
	if err := applyFunctions(ctx, conn, ms, log); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, migrateLockID); err != nil {
		return fmt.Errorf("postgres: migrate: release advisory lock: %w", err)
	}
	return nil
}

// function is one file of functions/.
type function struct {
	name string // the file's name without .sql: the function's
	sql  string
}

// functions lists the embedded functions/*.sql in name order.
func functions() ([]function, error) {
	files, err := fs.Glob(functionFS, "functions/*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]function, 0, len(files))
	for _, f := range files {
		b, err := functionFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, function{name: strings.TrimSuffix(strings.TrimPrefix(f, "functions/"), ".sql"), sql: string(b)})
	}
	return out, nil
}

// applyFunctions runs every functions/ file (CREATE OR REPLACE FUNCTION) in one
// transaction, under the migration lock the caller holds, unless the catalog has
// migrations this binary does not know: then it belongs to a newer release, whose
// functions a node of this one must not put back to its own (a change to a function
// ships with a migration, so the newer release always has one more; see
// TestFunctionChangesShipWithAMigration).
func applyFunctions(ctx context.Context, conn *pgx.Conn, ms []migration, log *slog.Logger) error {
	fns, err := functions()
	if err != nil {
		return fmt.Errorf("postgres: functions: %w", err)
	}
	var dbMax int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&dbMax); err != nil {
		return fmt.Errorf("postgres: functions: read schema_migrations: %w", err)
	}
	if known := ms[len(ms)-1].version; dbMax > known {
		log.Warn("catalog is at a newer migration than this binary knows; leaving its functions as they are",
			"catalog_version", dbMax, "binary_version", known)
		return nil
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, f := range fns {
			// Simple protocol: the file is one statement with a dollar-quoted body.
			if _, err := tx.Exec(ctx, f.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("postgres: apply functions/%s.sql: %w", f.name, err)
			}
		}
		return nil
	})
}
