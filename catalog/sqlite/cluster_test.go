package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
)

// TestMigrationGivesTopicsUUIDs: topics made before migration 0060 each get their own
// UUID when it runs.
func TestMigrationGivesTopicsUUIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version >= 60 {
			break
		}
		if err := applyMigration(t.Context(), db, m); err != nil {
			t.Fatalf("migration %d: %v", m.version, err)
		}
	}
	if _, err := db.Exec(`INSERT INTO topics (name, partitions, created_at) VALUES ('a', 1, 0), ('b', 1, 0), ('c', 1, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	c := openPath(t, path)
	catalogtest.WantDistinctUUIDs(t, c, 3)
}

func openPath(t *testing.T, path string) *Catalog {
	t.Helper()
	c, err := Open(t.Context(), path, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
