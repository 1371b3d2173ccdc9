package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
)

// TestLookupsUseIndexes seeds a million chunk rows and checks that the lookups by
// offset and by time are index seeks, under both the custom plans of the first
// executions and the generic plan a prepared statement switches to later.
func TestLookupsUseIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds a million rows")
	}
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	tp := mustTopic(t, c, "big", 10, nil)

	// 10 partitions × 100,000 chunks of 10 offsets; timestamps rise with the offset.
	start := time.Now()
	var seg int64
	if err := c.pool.QueryRow(ctx, `INSERT INTO segments (key, size, state) VALUES ('seed', 1000, 'live') RETURNING id`).Scan(&seg); err != nil {
		t.Fatal(err)
	}
	// Seeding is several times faster into an unlogged table without indexes, with the
	// migration's own index definitions built afterwards. Persistence does not change
	// plans; the foreign key is left off, as it plays no part in them either.
	restore := stripChunkIndexes(t, c)
	if _, err := c.pool.Exec(ctx, `
		INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len, max_timestamp, running_max_timestamp)
		SELECT $1, g / 100000, (g % 100000) * 10, (g % 100000) * 10 + 9, $2, 0, 100, 1000000 + g % 100000, 1000000 + g % 100000
		FROM generate_series(0, 999999) AS g`, tp.ID, seg); err != nil {
		t.Fatal(err)
	}
	restore()
	if _, err := c.pool.Exec(ctx, `UPDATE partitions SET high_watermark = 1000000, bytes = 10000000 WHERE topic_id = $1`, tp.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.pool.Exec(ctx, `ANALYZE chunks; ANALYZE partitions; ANALYZE segments; ANALYZE topics`); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded 1,000,000 chunk rows in %v", time.Since(start).Round(time.Millisecond))

	// The lookups answer correctly on this data.
	list, err := c.Chunks(ctx, tp.ID, 3, 500005, 250)
	if err != nil || len(list.Chunks) != 2 || list.Chunks[0].BaseOffset != 500000 || list.Chunks[1].BaseOffset != 500010 {
		t.Errorf("chunks at 500005: %+v, %v; want the chunks at 500000 and 500010", list.Chunks, err)
	}
	if off, err := c.OffsetForTime(ctx, tp.ID, 3, 1050000); err != nil || off != 500000 {
		t.Errorf("offset for time 1050000: %d, %v; want 500000", off, err)
	}

	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []struct {
		name  string
		sql   string
		types string
		args  []any
	}{
		{"chunks", chunksSQL, "bigint, int, bigint, bigint, int", []any{tp.ID, int32(3), int64(500005), int64(1 << 20), maxChunksPerLookup}},
		{"offset for time", offsetForTimeSQL, "bigint, int, bigint", []any{tp.ID, int32(3), int64(1050000)}},
	} {
		custom, generic := plans(t, conn.Conn(), q.sql, q.types, q.args...)
		checkIndexPlan(t, q.name+" (custom plan)", custom)
		checkIndexPlan(t, q.name+" (generic plan)", generic)
	}
}

// plans returns a statement's plans: the custom plan of its first executions, and the
// generic plan a prepared statement may switch to later. types are its parameters'
// types, args their values.
func plans(t *testing.T, conn *pgx.Conn, sql, types string, args ...any) (custom, generic string) {
	t.Helper()
	ctx := context.Background()
	custom = explain(t, conn, "EXPLAIN "+sql, args...)
	prepare, execute := `PREPARE planned AS `+sql, "EXPLAIN EXECUTE planned"
	if len(args) > 0 {
		// EXPLAIN EXECUTE takes no bind parameters: the values go in as literals.
		literals := make([]string, len(args))
		for i, a := range args {
			literals[i] = fmt.Sprint(a)
			if s, ok := a.(string); ok {
				literals[i] = "'" + strings.ReplaceAll(s, "'", "''") + "'"
			}
		}
		prepare, execute = `PREPARE planned (`+types+`) AS `+sql, execute+"("+strings.Join(literals, ", ")+")"
	}
	if _, err := conn.Exec(ctx, prepare); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	generic = explain(t, conn, execute)
	if _, err := conn.Exec(ctx, `DEALLOCATE planned; RESET plan_cache_mode`); err != nil {
		t.Fatal(err)
	}
	return custom, generic
}

// stripChunkIndexes drops the chunks table's indexes, primary key and foreign keys and
// makes it unlogged; the returned func rebuilds the indexes and primary key from their
// saved definitions.
func stripChunkIndexes(t *testing.T, c *Catalog) (restore func()) {
	t.Helper()
	ctx := context.Background()
	var cons []struct{ Name, Type, Def string }
	rows, err := c.pool.Query(ctx, `SELECT conname, contype::text, pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'chunks'::regclass AND contype IN ('p', 'f', 'u')`)
	if err != nil {
		t.Fatal(err)
	}
	cons, err = pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Type, Def string }])
	if err != nil {
		t.Fatal(err)
	}
	rows, err = c.pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'chunks'
		AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = 'chunks'::regclass)`)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Def string }])
	if err != nil {
		t.Fatal(err)
	}
	for _, cn := range cons {
		mustExec(t, c, `ALTER TABLE chunks DROP CONSTRAINT `+cn.Name)
	}
	for _, ix := range idx {
		mustExec(t, c, `DROP INDEX `+ix.Name)
	}
	mustExec(t, c, `ALTER TABLE chunks SET UNLOGGED`)
	return func() {
		for _, cn := range cons {
			if cn.Type != "f" {
				mustExec(t, c, `ALTER TABLE chunks ADD CONSTRAINT `+cn.Name+` `+cn.Def)
			}
		}
		for _, ix := range idx {
			mustExec(t, c, ix.Def)
		}
	}
}

func mustExec(t *testing.T, c *Catalog, sql string) {
	t.Helper()
	if _, err := c.pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func explain(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}

func checkIndexPlan(t *testing.T, name, plan string) {
	t.Helper()
	if strings.Contains(plan, "Seq Scan on chunks") || !strings.Contains(plan, "Index") ||
		!(strings.Contains(plan, "chunks_pkey") || strings.Contains(plan, "chunks_time")) {
		t.Errorf("%s: not an index seek on chunks:\n%s", name, plan)
	} else {
		t.Logf("%s:\n%s", name, plan)
	}
}
