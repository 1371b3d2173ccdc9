package postgres

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
)

// lastFunctionMigration is the last migration that defined a function whole; after it
// every function lives in functions/ alone.
const lastFunctionMigration = 135

var createFunction = regexp.MustCompile(`(?im)^\s*CREATE\s+(OR\s+REPLACE\s+)?FUNCTION\s+([a-z_0-9]+)\s*\(`)

// TestFunctionChangesShipWithAMigration checks the functions/ files against
// functions/versions.txt: every file is listed with the digest of its statement and the
// migration that shipped that body, which names the function; every function a
// migration ever defined has its file; and no migration after lastFunctionMigration
// defines one (its body would be a second copy). A changed file fails here until a new
// migration names it and the list records both.
func TestFunctionChangesShipWithAMigration(t *testing.T) {
	fns, err := functions()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	byVersion := map[int]migration{}
	defined := map[string]bool{}
	for _, m := range ms {
		byVersion[m.version] = m
		for _, sub := range createFunction.FindAllStringSubmatch(m.sql, -1) {
			defined[sub[2]] = true
			if m.version > lastFunctionMigration {
				t.Errorf("migration %04d_%s defines function %s: its body belongs in functions/%s.sql alone", m.version, m.name, sub[2], sub[2])
			}
		}
	}
	listed := readVersions(t)
	files := map[string]bool{}
	for _, f := range fns {
		files[f.name] = true
		subs := createFunction.FindAllStringSubmatch(f.sql, -1)
		if len(subs) != 1 || subs[0][2] != f.name || subs[0][1] == "" {
			t.Errorf("functions/%s.sql must hold one CREATE OR REPLACE FUNCTION %s", f.name, f.name)
			continue
		}
		stmt := f.sql[strings.Index(f.sql, "CREATE OR REPLACE FUNCTION"):]
		sum := sha256.Sum256([]byte(stmt))
		digest := hex.EncodeToString(sum[:])
		l, ok := listed[f.name]
		switch {
		case !ok:
			t.Errorf("functions/%s.sql is not in functions/versions.txt", f.name)
		case l.digest != digest:
			t.Errorf("functions/%s.sql changed (digest %s, listed %s): add a migration that names %s (it may hold only a comment), "+
				"so that nodes of the release before leave the new body alone, and record its version and the new digest in functions/versions.txt",
				f.name, digest, l.digest, f.name)
		}
		if m, ok := byVersion[l.version]; ok && !strings.Contains(m.sql, f.name) {
			t.Errorf("functions/versions.txt: migration %04d_%s does not name %s", m.version, m.name, f.name)
		} else if !ok {
			t.Errorf("functions/versions.txt: %s names migration %04d, which does not exist", f.name, l.version)
		}
	}
	for name := range listed {
		if !files[name] {
			t.Errorf("functions/versions.txt lists %s, which has no file", name)
		}
	}
	for name := range defined {
		if !files[name] {
			t.Errorf("migrations define function %s, which has no file in functions/", name)
		}
	}
}

type listedFunction struct {
	version int
	digest  string
}

func readVersions(t *testing.T) map[string]listedFunction {
	t.Helper()
	b, err := os.ReadFile("functions/versions.txt") // not embedded: the binary needs only the .sql
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]listedFunction{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("functions/versions.txt: %q: want name, migration, digest", line)
		}
		v, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("functions/versions.txt: %q: %v", line, err)
		}
		out[f[0]] = listedFunction{version: v, digest: f[2]}
	}
	return out
}

// liveFunctions answers every function in the database's schema: identity (name and
// arguments) → its whole definition, as Postgres prints it.
func liveFunctions(t *testing.T, dsn string) map[string]string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')', pg_get_functiondef(p.oid)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var id, def string
	if _, err := pgx.ForEachRow(rows, []any{&id, &def}, func() error {
		out[id] = def
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// migrateTo applies the migrations up to version, as the binary of that release did
// (migrations only, no functions/), to the empty database dsn.
func migrateTo(t *testing.T, dsn string, version int) {
	t.Helper()
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
		if m.version > version {
			break
		}
		if _, err := conn.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("migration %d: %v", m.version, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFunctionsFreshAndUpgraded: a fresh database and databases left at each release
// that changed a function (migrated as that release did) end, once opened, with the
// same functions, one per file of functions/, each with its file's body; and a catalog
// at a migration this binary does not know keeps its functions as they are.
func TestFunctionsFreshAndUpgraded(t *testing.T) {
	t.Parallel()
	fns, err := functions()
	if err != nil {
		t.Fatal(err)
	}
	fresh := newDatabase(t)
	openDSN(t, fresh, catalog.Options{})
	want := liveFunctions(t, fresh)
	if len(want) != len(fns) {
		t.Errorf("fresh database has %d functions, functions/ %d: %v", len(want), len(fns), keys(want))
	}
	for _, f := range fns {
		body := dollarBody(t, f)
		var found bool
		for id, def := range want {
			if strings.HasPrefix(id, f.name+"(") {
				found = true
				if !strings.Contains(def, body) {
					t.Errorf("%s: the live body is not functions/%s.sql's", id, f.name)
				}
			}
		}
		if !found {
			t.Errorf("functions/%s.sql: no such function in a fresh database", f.name)
		}
	}
	for _, v := range []int{2, 20, 40, 50, 70, 80, 120, lastFunctionMigration} {
		t.Run(fmt.Sprintf("from_%04d", v), func(t *testing.T) {
			t.Parallel()
			dsn := newDatabase(t)
			migrateTo(t, dsn, v)
			openDSN(t, dsn, catalog.Options{})
			got := liveFunctions(t, dsn)
			for id, def := range want {
				if got[id] != def {
					t.Errorf("%s differs from a fresh database's (present: %v)", id, got[id] != "")
				}
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					t.Errorf("%s: not in a fresh database", id)
				}
			}
		})
	}
	t.Run("newer_catalog_kept", func(t *testing.T) {
		t.Parallel()
		dsn := newDatabase(t)
		openDSN(t, dsn, catalog.Options{})
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		// A newer release's catalog: a migration past ours, and (standing for a body
		// it changed) one function gone.
		if _, err := conn.Exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (999999, 'newer')`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), `DROP FUNCTION strata_commit_txn`); err != nil {
			t.Fatal(err)
		}
		openDSN(t, dsn, catalog.Options{})
		for id := range liveFunctions(t, dsn) {
			if strings.HasPrefix(id, "strata_commit_txn(") {
				t.Errorf("%s was put back on a catalog of a newer release", id)
			}
		}
	})
}

// dollarBody is the body of f's function, between its $fn$ quotes.
func dollarBody(t *testing.T, f function) string {
	t.Helper()
	_, rest, ok := strings.Cut(f.sql, "$fn$")
	body, _, ok2 := strings.Cut(rest, "$fn$")
	if !ok || !ok2 {
		t.Fatalf("functions/%s.sql: no $fn$-quoted body", f.name)
	}
	return body
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
