// Package sqlite is the catalog of the embedded mode: the catalog.Catalog of one SQLite
// file (modernc.org/sqlite, pure Go). It follows the Postgres catalog's behaviour
// through the shared rules of package catalog; what differs is how it serialises: SQLite
// has no row locks, so every write runs in an immediate transaction on the one writer
// connection (other processes on the same file wait on the busy timeout), and readers
// use a separate pool that reads WAL snapshots without blocking the writer.
//
// Durability: WAL with synchronous=FULL, so a commit that returned survives a crash of
// the process or of the machine.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/strata-io/strata/catalog"
)

var _ catalog.Backend = (*Catalog)(nil)

// BusyTimeout is how long a write waits for another process's write transaction on the
// same file before failing.
const BusyTimeout = 10 * time.Second

// readConns bounds the read pool: each connection holds its own page cache.
const readConns = 4

// Catalog is a catalog in one SQLite file.
type Catalog struct {
	w    *sql.DB // exactly one connection: every write, in BEGIN IMMEDIATE transactions
	r    *sql.DB // read-only pool
	path string
	opts catalog.Options
	log  *slog.Logger
	hub  *hub
	st   stmts // the commit path's statements, prepared once on the writer connection
	// security wakes WatchSecurity (security.go).
	security changes
	// groupHub wakes held classic-group requests (classic.go).
	groupHub groupHub

	closeOnce sync.Once
	closeErr  error

	registry // catalog.Registry, the engine's (set by Open)
	tables   // catalog.Tables, the engine's (set by Open)
	push     // catalog.PushSubscriptions, the engine's (set by Open)
	scripts  // the methods whose scripts are the engine's (set by Open)
	scram    // catalog.Scram, the engine's (set by Open)
}

// Open opens (creating if needed) the catalog in the file at path and applies the
// embedded migrations. path must name a file (not ":memory:": the read pool opens
// separate connections) and must not contain '?'.
func Open(ctx context.Context, path string, opts catalog.Options) (*Catalog, error) {
	if path == "" || strings.Contains(path, "?") || path == ":memory:" {
		return nil, fmt.Errorf("sqlite: open %q: need a file path without '?'", path)
	}
	opts = opts.WithDefaults()
	common := url.Values{}
	common.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	common.Add("_pragma", "foreign_keys(1)")

	wq := url.Values{}
	for k, v := range common {
		wq[k] = append([]string(nil), v...)
	}
	wq.Set("_txlock", "immediate")
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous(FULL)")
	w, err := sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	st, err := prepare(ctx, w)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	rq := common
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: open %s: read pool: %w", path, err)
	}
	log := opts.Logger.With("component", "catalog", "backend", "sqlite")
	c := &Catalog{w: w, r: r, path: path, opts: opts, log: log, hub: newHub(log), st: st}
	c.registry = registry{DB: sqliteEngine{c}}
	c.tables = tables{DB: sqliteEngine{c}}
	c.push = push{DB: sqliteEngine{c}}
	c.scripts = scripts{DB: sqliteEngine{c}}
	c.scram = scram{DB: sqliteEngine{c}}
	return c, nil
}

// Close closes both pools and ends every Listen.
func (c *Catalog) Close() error {
	c.closeOnce.Do(func() {
		c.hub.close()
		c.st.close()
		werr := c.w.Close()
		rerr := c.r.Close()
		if werr != nil {
			c.closeErr = fmt.Errorf("sqlite: close %s: %w", c.path, werr)
		} else if rerr != nil {
			c.closeErr = fmt.Errorf("sqlite: close %s: %w", c.path, rerr)
		}
	})
	return c.closeErr
}

// nowSQL reads the database clock in unix ms. In SQLite that is this process's clock;
// the query keeps the backends alike and runs inside the transaction that uses it.
const nowSQL = `SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanNow reads the answer of nowSQL.
func scanNow(row *sql.Row) (time.Time, error) {
	var ms int64
	if err := row.Scan(&ms); err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

// Now is the database clock.
func (c *Catalog) Now(ctx context.Context) (time.Time, error) {
	t, err := scanNow(c.r.QueryRowContext(ctx, nowSQL))
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: now: %w", err)
	}
	return t, nil
}
