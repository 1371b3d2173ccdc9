package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestMigrationGivesTopicsUUIDs: topics made before migration 0060 each get their own
// UUID when it runs.
func TestMigrationGivesTopicsUUIDs(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version int PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version >= 60 {
			break
		}
		if _, err := conn.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("migration %d: %v", m.version, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO topics (name, partitions) VALUES ('a', 1), ('b', 1), ('c', 1)`); err != nil {
		t.Fatal(err)
	}
	c := openDSN(t, dsn, catalog.Options{})
	catalogtest.WantDistinctUUIDs(t, c, 3)
}
