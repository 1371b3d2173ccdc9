package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/connect"
)

// Failure codes a task's trace starts with.
const (
	CodeSlotMissing = "SLOT_MISSING" // the slot the offsets continue is gone
	CodeSlotLost    = "SLOT_LOST"    // the slot was invalidated (max_slot_wal_keep_size)
	CodeSlotAhead   = "SLOT_AHEAD"   // the slot was acknowledged past the stored offset
	CodeSlotExists  = "SLOT_EXISTS"  // a fresh start found a slot it did not create
)

// Phases of the offset.
const (
	phaseSnapshot = "snapshot" // the slot is (being) created and the tables read under epoch
	phaseStream   = "stream"   // streaming from lsn
)

// position is the task's source offset: where the next record comes from.
type position struct {
	phase string
	epoch int64
	// lsn: streaming, the end of the last whole transaction taken (the slot's
	// acknowledgeable position); snapshot, the slot's consistent point (0 before the
	// slot is created).
	lsn pglogrepl.LSN
	// txnLSN and txnEvents: a transaction taken in part — its commit LSN and how many
	// of its changes were taken.
	txnLSN    pglogrepl.LSN
	txnEvents int64
	rows      int64 // snapshot rows taken in this epoch
}

func (p position) offset(slot string) connect.Offset {
	o := map[string]any{"phase": p.phase, "epoch": json.Number(strconv.FormatInt(p.epoch, 10)), "lsn": p.lsn.String()}
	if p.txnLSN != 0 {
		o["txn_lsn"] = p.txnLSN.String()
		o["txn_events"] = json.Number(strconv.FormatInt(p.txnEvents, 10))
	}
	if p.phase == phaseSnapshot {
		o["snapshot_rows"] = json.Number(strconv.FormatInt(p.rows, 10))
	}
	return connect.Offset{Partition: map[string]any{"slot": slot}, Offset: o}
}

func parsePosition(o map[string]any) (position, error) {
	var p position
	p.phase, _ = o["phase"].(string)
	if p.phase != phaseSnapshot && p.phase != phaseStream {
		return p, fmt.Errorf("phase %v: want %s or %s", o["phase"], phaseSnapshot, phaseStream)
	}
	var err error
	num := func(k string) int64 {
		n, ok := o[k].(json.Number)
		if !ok {
			return 0
		}
		v, e := n.Int64()
		if e != nil && err == nil {
			err = fmt.Errorf("%s %s: %w", k, n, e)
		}
		return v
	}
	lsn := func(k string) pglogrepl.LSN {
		s, _ := o[k].(string)
		if s == "" {
			return 0
		}
		l, e := pglogrepl.ParseLSN(s)
		if e != nil && err == nil {
			err = fmt.Errorf("%s %q: %w", k, s, e)
		}
		return l
	}
	p.epoch, p.txnEvents, p.rows = num("epoch"), num("txn_events"), num("snapshot_rows")
	p.lsn, p.txnLSN = lsn("lsn"), lsn("txn_lsn")
	if p.phase == phaseStream && p.lsn == 0 && err == nil {
		err = errors.New("a streaming offset without an lsn")
	}
	return p, err
}

// settings is a task's config, read once.
type settings struct {
	url, db, prefix, slot, pub string
	tables                     []table
	autoCreate, snapshot       bool
	heartbeat, linger, metrics time.Duration
	reconnect                  time.Duration
	batch                      int
}

func readSettings(cfg map[string]string) (settings, error) {
	g := connect.NewSettings(cfg, Connector{}.Config())
	s := settings{url: g.String(cfgURL), prefix: g.String(cfgPrefix), slot: g.String(cfgSlot), pub: g.String(cfgPublication),
		autoCreate: g.Bool(cfgAutoCreate), snapshot: g.String(cfgSnapshotMode) != "never",
		heartbeat: time.Duration(g.Int64(cfgHeartbeat)) * time.Millisecond, linger: time.Duration(g.Int64(cfgLinger)) * time.Millisecond,
		metrics: time.Duration(g.Int64(cfgMetrics)) * time.Millisecond, batch: int(g.Int64(cfgBatch)),
		reconnect: time.Duration(g.Int64(cfgReconnect)) * time.Millisecond}
	if s.pub == "" {
		s.pub = s.slot
	}
	var err error
	if s.tables, err = parseTables(g.String(cfgTables)); err != nil {
		return s, err
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return s, fmt.Errorf("%s: %w", cfgURL, err)
	}
	s.db = u.Path
	if len(s.db) > 0 && s.db[0] == '/' {
		s.db = s.db[1:]
	}
	return s, nil
}

// replicationURL is the URL with replication=database: a walsender connection.
func (s settings) replicationURL() string {
	u, _ := url.Parse(s.url)
	q := u.Query()
	q.Set("replication", "database")
	u.RawQuery = q.Encode()
	return u.String()
}

// task is one slot's reader.
type task struct {
	s   settings
	sc  connect.SourceContext
	log *slog.Logger

	meta *pgx.Conn      // ordinary queries: the slot's state, keys, metrics
	repl *pgconn.PgConn // the walsender connection (nil: not connected)

	pos   position // after the last batch handed out
	acked pglogrepl.LSN
	stage int // stageIntent, stageSnapshot, stageStream

	snap        *snapshot
	relations   map[uint32]*relation
	keys        map[table][]string
	topics      map[table]string
	st          streamState
	lastMetrics time.Time
	lost        time.Time // when the replication stream was last lost
}

const (
	stageIntent   = iota // record the intent to (re)create the slot under pos.epoch first
	stageSnapshot        // the slot created; reading the tables
	stageStream          // streaming from the slot
)

func (t *task) Start(ctx context.Context, cfg map[string]string, sc connect.SourceContext) error {
	s, err := readSettings(cfg)
	if err != nil {
		return err
	}
	t.s, t.sc, t.log = s, sc, sc.Logger().With("slot", s.slot)
	t.topics = map[table]string{}
	for _, tb := range s.tables {
		t.topics[tb] = s.prefix + "." + tb.schema + "." + tb.name
	}
	if t.meta, err = pgx.Connect(ctx, s.url); err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: connect: %w", err)}
	}
	if err := t.loadKeys(ctx); err != nil {
		return err
	}
	if err := t.ensurePublication(ctx); err != nil {
		return err
	}
	offs, err := sc.Offsets(ctx)
	if err != nil {
		return err
	}
	var stored *position
	for _, o := range offs {
		if o.Partition["slot"] != s.slot {
			continue
		}
		p, err := parsePosition(o.Offset)
		if err != nil {
			return fmt.Errorf("postgres source: the stored offset of slot %s: %w", s.slot, err)
		}
		stored = &p
	}
	slot, err := t.slotState(ctx)
	if err != nil {
		return err
	}
	switch {
	case stored == nil:
		// A fresh start: the slot must not exist — one this connector did not record
		// creating is someone else's, or a predecessor's whose offsets were reset.
		if slot.exists {
			return fmt.Errorf("%s: slot %s exists but this connector has no offset for it: drop the slot (pg_drop_replication_slot) to start afresh, or set the offset to resume from it", CodeSlotExists, s.slot)
		}
		t.pos, t.stage = position{phase: phaseSnapshot, epoch: 1}, stageIntent
	case stored.phase == phaseSnapshot:
		// A snapshot cannot be resumed (its exported snapshot died with its
		// connection): start it again under a new epoch, in a new slot. The stored
		// offset records that the slot was created for this connector.
		if slot.exists {
			if err := t.dropSlot(ctx, slot); err != nil {
				return err
			}
		}
		t.pos, t.stage = position{phase: phaseSnapshot, epoch: stored.epoch + 1}, stageIntent
		t.log.Info("postgres source: the snapshot did not finish; starting it again under a new epoch", "epoch", t.pos.epoch)
	default:
		if err := slot.check(s.slot, stored.lsn); err != nil {
			return err
		}
		t.pos, t.stage, t.acked = *stored, stageStream, slot.confirmed
	}
	return nil
}

// loadKeys reads each table's primary key columns.
func (t *task) loadKeys(ctx context.Context) error {
	t.keys = map[table][]string{}
	for _, tb := range t.s.tables {
		rows, err := t.meta.Query(ctx, `SELECT a.attname FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = $1::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`, tb.ident())
		if err != nil {
			return fmt.Errorf("postgres source: the primary key of %s: %w", tb, err)
		}
		key, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("postgres source: the primary key of %s: %w", tb, err)
		}
		if len(key) == 0 {
			t.log.Warn("postgres source: table has no primary key: its records have no key, and under REPLICA IDENTITY DEFAULT its updates and deletes are not published", "table", tb.String())
		}
		t.keys[tb] = key
	}
	return nil
}

func (t *task) ensurePublication(ctx context.Context) error {
	var exists bool
	if err := t.meta.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, t.s.pub).Scan(&exists); err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: look up publication %s: %w", t.s.pub, err)}
	}
	if exists {
		return nil
	}
	if !t.s.autoCreate {
		return fmt.Errorf("postgres source: publication %s does not exist (and %s is false)", t.s.pub, cfgAutoCreate)
	}
	sql := "CREATE PUBLICATION " + quoteIdent(t.s.pub) + " FOR TABLE "
	for i, tb := range t.s.tables {
		if i > 0 {
			sql += ", "
		}
		sql += tb.ident()
	}
	if _, err := t.meta.Exec(ctx, sql); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42710" { // created meanwhile
			return nil
		}
		return fmt.Errorf("postgres source: create publication %s: %w", t.s.pub, err)
	}
	return nil
}

// slotInfo is a slot as pg_replication_slots shows it.
type slotInfo struct {
	exists    bool
	walStatus string
	confirmed pglogrepl.LSN
	activePID *int32
}

// ensureMeta (re)connects the connection for ordinary queries (after a failure closed it).
func (t *task) ensureMeta(ctx context.Context) error {
	if t.meta != nil && !t.meta.IsClosed() {
		return nil
	}
	c, err := pgx.Connect(ctx, t.s.url)
	if err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: connect: %w", err)}
	}
	t.meta = c
	return nil
}

func (t *task) slotState(ctx context.Context) (slotInfo, error) {
	if err := t.ensureMeta(ctx); err != nil {
		return slotInfo{}, err
	}
	var (
		si        slotInfo
		confirmed *string
		status    *string
	)
	err := t.meta.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, wal_status, active_pid FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`,
		t.s.slot).Scan(&confirmed, &status, &si.activePID)
	if errors.Is(err, pgx.ErrNoRows) {
		return si, nil
	}
	if err != nil {
		return si, &connect.RetriableError{Err: fmt.Errorf("postgres source: look up slot %s: %w", t.s.slot, err)}
	}
	si.exists = true
	if status != nil {
		si.walStatus = *status
	}
	if confirmed != nil {
		if si.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return si, err
		}
	}
	return si, nil
}

// check refuses to stream from a slot that cannot give what follows lsn.
func (si slotInfo) check(slot string, lsn pglogrepl.LSN) error {
	switch {
	case !si.exists:
		return fmt.Errorf("%s: replication slot %s is gone; the changes after %s cannot be read. It is not recreated: reset the connector's offsets to snapshot again (README: Postgres CDC)", CodeSlotMissing, slot, lsn)
	case si.walStatus == "lost":
		return fmt.Errorf("%s: replication slot %s was invalidated (wal_status lost: max_slot_wal_keep_size exceeded); the changes after %s are gone. Reset the connector's offsets to snapshot again", CodeSlotLost, slot, lsn)
	case si.confirmed > lsn:
		return fmt.Errorf("%s: replication slot %s was acknowledged to %s, past the committed offset %s: the changes between were never committed here", CodeSlotAhead, slot, si.confirmed, lsn)
	}
	return nil
}

// takeOver ends the walsender still holding the slot: the task was given to this
// instance, so its previous owner's lease has passed.
func (t *task) takeOver(ctx context.Context, si slotInfo) error {
	if si.activePID == nil {
		return nil
	}
	// Only the task's current instance may: a fenced read fails for a zombie (woken
	// after its lease passed), which would otherwise end its successor's walsender.
	if _, err := t.sc.Offsets(ctx); err != nil {
		return fmt.Errorf("postgres source: before taking slot %s over: %w", t.s.slot, err)
	}
	t.log.Warn("postgres source: the slot is held by another walsender (a previous owner's); terminating it", "pid", *si.activePID)
	if _, err := t.meta.Exec(ctx, `SELECT pg_terminate_backend($1)`, *si.activePID); err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: terminate walsender %d of slot %s: %w", *si.activePID, t.s.slot, err)}
	}
	for range 100 {
		s, err := t.slotState(ctx)
		if err != nil || s.activePID == nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &connect.RetriableError{Err: fmt.Errorf("postgres source: slot %s is still active", t.s.slot)}
}

func (t *task) dropSlot(ctx context.Context, si slotInfo) error {
	if err := t.takeOver(ctx, si); err != nil {
		return err
	}
	t.log.Info("postgres source: dropping the slot this connector created for an unfinished snapshot")
	if _, err := t.meta.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, t.s.slot); err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: drop slot %s: %w", t.s.slot, err)}
	}
	return nil
}

// Poll hands out the next batch: the intent record, snapshot rows, or whole
// transactions (or a chunk of one), or an offset alone as a heartbeat.
func (t *task) Poll(ctx context.Context) (connect.SourceBatch, error) {
	if ctx.Err() != nil {
		return connect.SourceBatch{}, nil
	}
	switch t.stage {
	case stageIntent:
		// Recorded before the slot exists: a restart that finds this offset knows the
		// slot, if any, is this connector's to drop.
		t.stage = stageSnapshot
		return connect.SourceBatch{Offsets: []connect.Offset{t.pos.offset(t.s.slot)}}, nil
	case stageSnapshot:
		return t.pollSnapshot(ctx)
	}
	return t.pollStream(ctx)
}

// Committed acknowledges the slot up to the batch's position: the catalog holds it.
func (t *task) Committed(ctx context.Context, b connect.SourceBatch) error {
	if len(b.Offsets) == 0 {
		return nil
	}
	p, err := parsePosition(b.Offsets[len(b.Offsets)-1].Offset)
	if err != nil || p.phase != phaseStream {
		return err
	}
	if p.lsn > t.acked {
		t.acked = p.lsn
		if t.repl != nil {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, t.repl, pglogrepl.StandbyStatusUpdate{WALWritePosition: t.acked}); err != nil {
				return fmt.Errorf("postgres source: acknowledge %s: %w", t.acked, err)
			}
		}
	}
	t.reportMetrics(ctx)
	return nil
}

// reportMetrics measures the slot now and then: lag, wal_status, safe WAL size.
func (t *task) reportMetrics(ctx context.Context) {
	if time.Since(t.lastMetrics) < t.s.metrics || t.ensureMeta(ctx) != nil {
		return
	}
	t.lastMetrics = time.Now()
	var (
		lag, safe *int64
		status    *string
	)
	err := t.meta.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, wal_status, safe_wal_size
		FROM pg_replication_slots WHERE slot_name = $1`, t.s.slot).Scan(&lag, &status, &safe)
	if err != nil {
		t.log.Warn("postgres source: measure the slot", "err", err)
		return
	}
	m := map[string]any{"slot": t.s.slot, "acknowledged_lsn": t.acked.String()}
	if lag != nil {
		m["slot_lag_bytes"] = *lag
	}
	if status != nil {
		m["wal_status"] = *status
	}
	if safe != nil {
		m["safe_wal_size"] = *safe
	}
	if err := t.sc.ReportMetrics(ctx, m); err != nil {
		t.log.Warn("postgres source: report metrics", "err", err)
	}
}

func (t *task) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if t.snap != nil {
		t.snap.close(ctx)
	}
	if t.repl != nil {
		t.repl.Close(ctx)
	}
	if t.meta != nil {
		t.meta.Close(ctx)
	}
	return nil
}
