package pgcdc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/connect"
)

// snapshot is an initial snapshot in progress: one REPEATABLE READ transaction on the
// slot's exported snapshot, read table by table through a cursor.
type snapshot struct {
	conn   *pgx.Conn
	cp     pglogrepl.LSN // the slot's consistent point: streaming starts here
	table  int           // the table being read
	cursor bool          // its cursor is open
	rel    *relation
	tsMS   int64
}

func (s *snapshot) close(ctx context.Context) {
	if s.conn != nil {
		s.conn.Close(ctx)
		s.conn = nil
	}
}

// createSlot creates the slot; with an initial snapshot, it imports the slot's
// exported snapshot into a transaction of its own before the replication connection
// does anything else (which would end the export).
func (t *task) createSlot(ctx context.Context) error {
	repl, err := pgconn.Connect(ctx, t.s.replicationURL())
	if err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: replication connection: %w", err)}
	}
	defer repl.Close(context.WithoutCancel(ctx))
	action := "NOEXPORT_SNAPSHOT"
	if t.s.snapshot {
		action = "EXPORT_SNAPSHOT"
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, t.s.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{SnapshotAction: action, Mode: pglogrepl.LogicalReplication})
	if err != nil {
		return fmt.Errorf("postgres source: create slot %s: %w", t.s.slot, err)
	}
	cp, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return fmt.Errorf("postgres source: slot %s's consistent point %q: %w", t.s.slot, res.ConsistentPoint, err)
	}
	t.log.Info("postgres source: created the slot", "consistent_point", cp, "epoch", t.pos.epoch)
	t.snap = &snapshot{cp: cp, tsMS: time.Now().UnixMilli()}
	if !t.s.snapshot {
		return nil
	}
	conn, err := pgx.Connect(ctx, t.s.url)
	if err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: snapshot connection: %w", err)}
	}
	t.snap.conn = conn
	for _, q := range []string{"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "SET TRANSACTION SNAPSHOT '" + res.SnapshotName + "'"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres source: import snapshot %s: %w", res.SnapshotName, err)
		}
	}
	return nil
}

// pollSnapshot creates the slot at the first call, then hands out the tables' rows as
// op r events, batch by batch; the last batch's offset is the stream's start.
func (t *task) pollSnapshot(ctx context.Context) (connect.SourceBatch, error) {
	if t.snap == nil {
		if err := t.createSlot(ctx); err != nil {
			return connect.SourceBatch{}, err
		}
		t.pos.lsn = t.snap.cp
	}
	s := t.snap
	var b connect.SourceBatch
	for s.conn != nil && s.table < len(t.s.tables) && len(b.Records) < t.s.batch {
		tb := t.s.tables[s.table]
		if !s.cursor {
			order := ""
			for i, k := range t.keys[tb] {
				if i == 0 {
					order = " ORDER BY "
				} else {
					order += ", "
				}
				order += quoteIdent(k)
			}
			if _, err := s.conn.Exec(ctx, "DECLARE strata_snap NO SCROLL CURSOR FOR SELECT * FROM "+tb.ident()+order); err != nil {
				return b, fmt.Errorf("postgres source: snapshot %s: %w", tb, err)
			}
			s.cursor, s.rel = true, nil
		}
		want := t.s.batch - len(b.Records)
		res := s.conn.PgConn().Exec(ctx, "FETCH FORWARD "+strconv.Itoa(want)+" FROM strata_snap")
		rs, err := res.ReadAll()
		if err != nil || len(rs) != 1 {
			return b, fmt.Errorf("postgres source: snapshot %s: fetch: %v", tb, err)
		}
		r := rs[0]
		if s.rel == nil {
			cols := make([]column, len(r.FieldDescriptions))
			for i, f := range r.FieldDescriptions {
				cols[i] = column{name: f.Name, oid: f.DataTypeOID}
			}
			s.rel = newRelation(tb, cols, t.keys[tb])
		}
		src := source{prefix: t.s.prefix, db: t.s.db, lsn: s.cp, tsMS: s.tsMS, snapshot: "true"}
		for _, vals := range r.Rows {
			after := make(map[string]any, len(vals))
			for i, v := range vals {
				if v == nil {
					after[s.rel.cols[i].name] = nil
					continue
				}
				x, err := decodeText(s.rel.cols[i].oid, v)
				if err != nil {
					return b, fmt.Errorf("postgres source: snapshot %s: %w", tb, err)
				}
				after[s.rel.cols[i].name] = x
			}
			ev := event{rel: s.rel, op: "r", after: after}
			b.Records = append(b.Records, ev.records(t.topics[tb], src, t.pos.epoch, &t.pos.rows)...)
		}
		if len(r.Rows) < want {
			if _, err := s.conn.Exec(ctx, "CLOSE strata_snap"); err != nil {
				return b, fmt.Errorf("postgres source: snapshot %s: %w", tb, err)
			}
			s.table, s.cursor = s.table+1, false
		}
	}
	if s.conn == nil || s.table == len(t.s.tables) {
		// Done: the rest comes from the slot, from its consistent point on.
		if s.conn != nil {
			if _, err := s.conn.Exec(ctx, "COMMIT"); err != nil {
				return b, fmt.Errorf("postgres source: end the snapshot: %w", err)
			}
		}
		s.close(ctx)
		t.snap, t.stage = nil, stageStream
		t.log.Info("postgres source: snapshot read", "epoch", t.pos.epoch, "rows", t.pos.rows)
		t.pos = position{phase: phaseStream, epoch: t.pos.epoch, lsn: s.cp}
	}
	b.Offsets = []connect.Offset{t.pos.offset(t.s.slot)}
	return b, nil
}
