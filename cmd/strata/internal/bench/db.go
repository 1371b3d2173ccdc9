package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"

	_ "modernc.org/sqlite" // the embedded catalog's driver
)

// DB is direct access to the catalog's database, for two things only the bench does:
// the commit floor (transactions of the commit's shape on a table of the bench's own)
// and seeding chunk rows for the scale phase. Seeding knows the catalog's schema (the
// chunks and partitions tables of catalog/postgres and catalog/sqlite's migrations):
// a measuring tool may; nothing else outside the catalog does.
type DB struct {
	kind string // "postgres" or "sqlite"
	pg   *pgx.Conn
	sq   *sql.DB // the catalog file (sqlite)
	// floor: the commit floor's own file, beside the catalog's, on the same disk with
	// the same settings (sqlite).
	floorPath string
	floor     *sql.DB
}

// OpenPostgres connects to the catalog's Postgres database.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: connect to the catalog database: %w", err)
	}
	return &DB{kind: "postgres", pg: c}, nil
}

// OpenSQLite opens the embedded catalog's SQLite file (the node has it open too: WAL
// lets both in) and a file for the commit floor in the same directory.
func OpenSQLite(ctx context.Context, catalogPath, floorPath string) (*DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(30000)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", catalogPath+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("bench: open catalog %s: %w", catalogPath, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("bench: open catalog %s: %w", catalogPath, err)
	}
	return &DB{kind: "sqlite", sq: db, floorPath: floorPath}, nil
}

// Close closes the connections and removes the floor's file.
func (db *DB) Close() error {
	var errs []error
	if db.pg != nil {
		errs = append(errs, db.pg.Close(context.Background()))
	}
	if db.sq != nil {
		errs = append(errs, db.sq.Close())
	}
	if db.floor != nil {
		errs = append(errs, db.floor.Close())
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(db.floorPath + suffix)
		}
	}
	return errors.Join(errs...)
}

// Kind is "postgres" or "sqlite".
func (db *DB) Kind() string { return db.kind }

var floorIDs = []int32{1, 2, 3, 4, 5, 6, 7, 8}

// commitFloor prepares a table of 8 rows and returns one transaction of the commit's
// shape: one statement, one round trip, 8 rows updated, durably committed (Postgres's
// synchronous_commit as configured; SQLite WAL with synchronous FULL, as the catalog
// opens it). cleanup drops the table.
func (db *DB) commitFloor(ctx context.Context) (commit func(context.Context) error, cleanup func(), err error) {
	table := "strata_bench_floor_" + strconv.Itoa(os.Getpid())
	switch db.kind {
	case "postgres":
		if _, err := db.pg.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (id int PRIMARY KEY, v bigint NOT NULL);
			INSERT INTO `+table+` SELECT g, 0 FROM generate_series(1, 8) g ON CONFLICT DO NOTHING`); err != nil {
			return nil, nil, fmt.Errorf("bench: commit floor table: %w", err)
		}
		commit = func(ctx context.Context) error {
			_, err := db.pg.Exec(ctx, `UPDATE `+table+` SET v = v + 1 WHERE id = ANY($1)`, floorIDs)
			return err
		}
		cleanup = func() { _, _ = db.pg.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) }
		return commit, cleanup, nil
	default:
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(5000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
		f, err := sql.Open("sqlite", db.floorPath+"?"+q.Encode())
		if err != nil {
			return nil, nil, fmt.Errorf("bench: commit floor file: %w", err)
		}
		f.SetMaxOpenConns(1)
		db.floor = f
		if _, err := f.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
			INSERT OR IGNORE INTO floor (id, v) VALUES (1,0),(2,0),(3,0),(4,0),(5,0),(6,0),(7,0),(8,0)`); err != nil {
			return nil, nil, fmt.Errorf("bench: commit floor table: %w", err)
		}
		commit = func(ctx context.Context) error {
			_, err := f.ExecContext(ctx, `UPDATE floor SET v = v + 1 WHERE id IN (1,2,3,4,5,6,7,8)`)
			return err
		}
		return commit, func() {}, nil
	}
}

// analyze refreshes the planner's statistics of the catalog's tables, as autovacuum
// does within a minute of a table's growth (Postgres; SQLite's catalog keeps none).
// The capacity phase runs it before each measurement: its topics are created moments
// before, and plans made while the partitions table held a few rows scan it whole
// (measured: a flush commit of 64 partitions took 20 ms of the server's CPU on such a
// plan, under 2 ms once analyzed).
func (db *DB) analyze(ctx context.Context) error {
	if db.kind != "postgres" {
		return nil
	}
	if _, err := db.pg.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("bench: analyze the catalog: %w", err)
	}
	return nil
}

// seed makes a partition hold records records: its chunk rows are copies of its first
// one (whatever one produce request wrote), each taking the next run of offsets, all
// pointing at the same bytes, and its high watermark follows. A fetch anywhere then
// reads real, cached bytes through a catalog of the seeded size. It returns the rows
// inserted.
func (db *DB) seed(ctx context.Context, topic string, partition int32, records int64) (int64, error) {
	switch db.kind {
	case "postgres":
		var n int64
		err := pgx.BeginFunc(ctx, db.pg, func(tx pgx.Tx) error {
			var tid, per, length int64
			err := tx.QueryRow(ctx, `SELECT t.id, c.last_offset - c.base_offset + 1, c.len FROM topics t
				JOIN chunks c ON c.topic_id = t.id AND c.partition = $2
				WHERE t.name = $1 AND t.deleted_at IS NULL ORDER BY c.last_offset LIMIT 1`, topic, partition).Scan(&tid, &per, &length)
			if err != nil {
				return fmt.Errorf("first chunk: %w", err)
			}
			rows := records/per - 1
			tag, err := tx.Exec(ctx, `INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len, max_timestamp, running_max_timestamp)
				SELECT c.topic_id, c.partition, c.base_offset + g * $3, c.last_offset + g * $3, c.segment_id, c.pos, c.len, c.max_timestamp, c.running_max_timestamp
				FROM (SELECT * FROM chunks WHERE topic_id = $1 AND partition = $2 ORDER BY last_offset LIMIT 1) c,
				     generate_series(1, $4::bigint) g`, tid, partition, per, rows)
			if err != nil {
				return fmt.Errorf("insert chunk rows: %w", err)
			}
			n = tag.RowsAffected()
			if _, err := tx.Exec(ctx, `UPDATE partitions SET high_watermark = $3, bytes = $4 WHERE topic_id = $1 AND partition = $2`,
				tid, partition, (rows+1)*per, (rows+1)*length); err != nil {
				return fmt.Errorf("advance the high watermark: %w", err)
			}
			_, err = tx.Exec(ctx, `ANALYZE chunks`)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("bench: seed %s/%d: %w", topic, partition, err)
		}
		return n, nil
	default:
		tx, err := db.sq.BeginTx(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("bench: seed %s/%d: %w", topic, partition, err)
		}
		defer tx.Rollback()
		var tid, per, length int64
		err = tx.QueryRowContext(ctx, `SELECT t.id, c.last_offset - c.base_offset + 1, c.len FROM topics t
			JOIN chunks c ON c.topic_id = t.id AND c.partition = ?2
			WHERE t.name = ?1 AND t.deleted_at IS NULL ORDER BY c.last_offset LIMIT 1`, topic, partition).Scan(&tid, &per, &length)
		if err != nil {
			return 0, fmt.Errorf("bench: seed %s/%d: first chunk: %w", topic, partition, err)
		}
		rows := records/per - 1
		res, err := tx.ExecContext(ctx, `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?3)
			INSERT INTO chunks (topic_id, partition, base_offset, last_offset, segment_id, pos, len, max_timestamp, running_max_timestamp)
			SELECT c.topic_id, c.partition, c.base_offset + g.i * ?4, c.last_offset + g.i * ?4, c.segment_id, c.pos, c.len, c.max_timestamp, c.running_max_timestamp
			FROM (SELECT * FROM chunks WHERE topic_id = ?1 AND partition = ?2 ORDER BY last_offset LIMIT 1) c, g`, tid, partition, rows, per)
		if err != nil {
			return 0, fmt.Errorf("bench: seed %s/%d: insert chunk rows: %w", topic, partition, err)
		}
		n, _ := res.RowsAffected()
		if _, err := tx.ExecContext(ctx, `UPDATE partitions SET high_watermark = ?3, bytes = ?4 WHERE topic_id = ?1 AND partition = ?2`,
			tid, partition, (rows+1)*per, (rows+1)*length); err != nil {
			return 0, fmt.Errorf("bench: seed %s/%d: advance the high watermark: %w", topic, partition, err)
		}
		if err := tx.Commit(); err != nil {
			return 0, fmt.Errorf("bench: seed %s/%d: %w", topic, partition, err)
		}
		_, _ = db.sq.ExecContext(ctx, `ANALYZE chunks`)
		return n, nil
	}
}

// unseed deletes a topic's chunk rows, so a shared catalog does not keep millions of
// rows pointing at one object after the run (the topic itself is deleted through the
// API).
func (db *DB) unseed(ctx context.Context, topic string) error {
	var err error
	switch db.kind {
	case "postgres":
		_, err = db.pg.Exec(ctx, `DELETE FROM chunks WHERE topic_id IN (SELECT id FROM topics WHERE name = $1)`, topic)
	default:
		_, err = db.sq.ExecContext(ctx, `DELETE FROM chunks WHERE topic_id IN (SELECT id FROM topics WHERE name = ?1)`, topic)
	}
	if err != nil {
		return fmt.Errorf("bench: unseed %s: %w", topic, err)
	}
	return nil
}
