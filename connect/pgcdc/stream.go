package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/ctxwait"
)

// streamState is where the stream is, beyond the last batch handed out.
type streamState struct {
	from      pglogrepl.LSN // the position replication (re)started at
	inTxn     bool
	begin     pglogrepl.BeginMessage
	events    int64 // changes of the current transaction seen
	seq       int64 // records of the current transaction made
	skipTxn   bool  // the current transaction was committed before from
	skipLSN   pglogrepl.LSN
	skip      int64         // changes of the transaction at skipLSN taken before
	lastEnd   pglogrepl.LSN // the end of the last whole transaction (or idle position) seen
	handedOut time.Time     // when the last batch was handed out
	hbAsked   bool          // a keepalive was asked for a heartbeat
}

// connectStream checks the slot and starts replication from the stored position.
func (t *task) connectStream(ctx context.Context) error {
	si, err := t.slotState(ctx)
	if err != nil {
		return err
	}
	if err := si.check(t.s.slot, t.pos.lsn); err != nil {
		return err
	}
	if err := t.takeOver(ctx, si); err != nil {
		return err
	}
	repl, err := pgconn.Connect(ctx, t.s.replicationURL())
	if err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: replication connection: %w", err)}
	}
	err = pglogrepl.StartReplication(ctx, repl, t.s.slot, t.pos.lsn, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '1'", "publication_names '" + t.s.pub + "'"}})
	if err != nil {
		repl.Close(context.WithoutCancel(ctx))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55000" { // object_not_in_prerequisite_state: invalidated
			return fmt.Errorf("%s: replication slot %s cannot be read: %s", CodeSlotLost, t.s.slot, pe.Message)
		}
		return &connect.RetriableError{Err: fmt.Errorf("postgres source: start replication at %s: %w", t.pos.lsn, err)}
	}
	t.repl, t.relations = repl, map[uint32]*relation{}
	t.st = streamState{from: t.pos.lsn, lastEnd: t.pos.lsn, skipLSN: t.pos.txnLSN, skip: t.pos.txnEvents, handedOut: time.Now()}
	t.log.Info("postgres source: streaming", "from", t.pos.lsn, "skip_events", t.pos.txnEvents)
	return nil
}

// pollStream collects whole transactions until the batch is full or the stream goes
// quiet for the linger time; a transaction larger than a batch is handed out in
// chunks. An idle stream asks the server for its position every heartbeat interval
// and hands it out as an offset alone.
func (t *task) pollStream(ctx context.Context) (connect.SourceBatch, error) {
	if t.repl == nil {
		if err := t.reconnect(ctx); err != nil || t.repl == nil {
			return connect.SourceBatch{}, err
		}
	}
	var b connect.SourceBatch
	hand := func() (connect.SourceBatch, error) {
		t.pos = position{phase: phaseStream, epoch: t.pos.epoch, lsn: t.st.lastEnd}
		if t.st.inTxn {
			t.pos.txnLSN, t.pos.txnEvents = t.st.begin.FinalLSN, t.st.events
		}
		t.st.handedOut, t.st.hbAsked = time.Now(), false
		b.Offsets = []connect.Offset{t.pos.offset(t.s.slot)}
		return b, nil
	}
	for {
		if len(b.Records) >= t.s.batch {
			return hand()
		}
		wait := t.s.linger
		if len(b.Records) == 0 || t.st.inTxn {
			wait = time.Second
			if t.s.heartbeat > 0 && !t.st.inTxn {
				if t.st.hbAsked {
					wait = 200 * time.Millisecond // for the keepalive asked for
				} else {
					wait = min(wait, max(time.Until(t.st.handedOut.Add(t.s.heartbeat)), time.Millisecond))
				}
			}
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := t.repl.ReceiveMessage(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			// Stopping: hand out what was taken (its offset says exactly how far), and
			// leave the connection, which may be mid-message.
			t.repl.Close(context.Background())
			t.repl = nil
			if len(b.Records) > 0 {
				return hand()
			}
			return connect.SourceBatch{}, nil
		case err != nil && pgconn.Timeout(err):
			if len(b.Records) > 0 && !t.st.inTxn {
				return hand()
			}
			if !t.st.inTxn && len(b.Records) == 0 {
				switch {
				case t.st.lastEnd > t.pos.lsn && t.heartbeatDue():
					return hand() // progress without records (idle, or empty transactions)
				case t.heartbeatDue() && t.st.hbAsked:
					t.st.handedOut, t.st.hbAsked = time.Now(), false // no progress: wait a whole interval again
				case t.heartbeatDue():
					t.st.hbAsked = true // the server answers with a keepalive carrying its position
					if err := pglogrepl.SendStandbyStatusUpdate(ctx, t.repl, pglogrepl.StandbyStatusUpdate{WALWritePosition: t.acked, ReplyRequested: true}); err != nil {
						return t.lostStream(err)
					}
				}
				t.reportMetrics(ctx)
			}
			continue
		case err != nil:
			return t.lostStream(err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := t.handleCopyData(ctx, m.Data, &b); err != nil {
				return connect.SourceBatch{}, err
			}
			if len(b.Records) >= t.s.batch && t.st.inTxn {
				return hand() // a chunk of a large transaction
			}
		case *pgproto3.ErrorResponse:
			return t.lostStream(pgconn.ErrorResponseToPgError(m))
		default:
			return t.lostStream(fmt.Errorf("unexpected message %T", msg))
		}
	}
}

func (t *task) heartbeatDue() bool {
	return t.s.heartbeat > 0 && time.Since(t.st.handedOut) >= t.s.heartbeat
}

// lostStream drops the replication connection: the next poll reconnects from the last
// batch handed out (what this poll collected is dropped and read again).
func (t *task) lostStream(err error) (connect.SourceBatch, error) {
	t.log.Warn("postgres source: replication stream lost; reconnecting from the last batch", "from", t.pos.lsn, "err", err)
	t.repl.Close(context.Background())
	t.repl, t.lost = nil, time.Now()
	return connect.SourceBatch{}, nil
}

// reconnect starts streaming again, retrying what may pass (the database restarting)
// for reconnect.timeout.ms; a slot check's failure is final at once. Without a
// connection when ctx ends, it returns nothing.
func (t *task) reconnect(ctx context.Context) error {
	delay := 200 * time.Millisecond
	start := time.Now()
	if time.Since(t.lost) > time.Second {
		delay = 0 // not a loss just now: no pause
	}
	for {
		if delay > 0 && ctxwait.Sleep(ctx, delay) != nil {
			return nil
		}
		err := t.connectStream(ctx)
		var re *connect.RetriableError
		if err == nil || !errors.As(err, &re) || ctx.Err() != nil {
			return err
		}
		if time.Since(start) > t.s.reconnect {
			return fmt.Errorf("postgres source: no replication connection for %s: %w", t.s.reconnect, err)
		}
		t.log.Warn("postgres source: reconnecting", "err", err)
		if t.meta != nil {
			t.meta.Close(context.WithoutCancel(ctx)) // it may be as dead as the stream
		}
		delay = min(max(2*delay, 200*time.Millisecond), 5*time.Second)
	}
}

func (t *task) handleCopyData(ctx context.Context, data []byte, b *connect.SourceBatch) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("postgres source: keepalive: %w", err)
		}
		// Every transaction that commits before the server's position was sent before
		// this keepalive: outside a transaction, the position is a resumable one.
		if !t.st.inTxn && ka.ServerWALEnd > t.st.lastEnd {
			t.st.lastEnd = ka.ServerWALEnd
		}
		if ka.ReplyRequested {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, t.repl, pglogrepl.StandbyStatusUpdate{WALWritePosition: t.acked}); err != nil {
				return fmt.Errorf("postgres source: status update: %w", err)
			}
		}
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("postgres source: XLogData: %w", err)
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return fmt.Errorf("postgres source: decode message at %s: %w", x.WALStart, err)
		}
		return t.handleMessage(ctx, m, b)
	}
	return nil
}

func (t *task) handleMessage(ctx context.Context, msg pglogrepl.Message, b *connect.SourceBatch) error {
	st := &t.st
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		return t.relationMessage(ctx, m)
	case *pglogrepl.BeginMessage:
		st.inTxn, st.begin, st.events, st.seq = true, *m, 0, 0
		st.skipTxn = m.FinalLSN < st.from // committed before where we started: taken already
		return nil
	case *pglogrepl.CommitMessage:
		st.inTxn = false
		if m.TransactionEndLSN > st.lastEnd {
			st.lastEnd = m.TransactionEndLSN
		}
		return nil
	case *pglogrepl.InsertMessage, *pglogrepl.UpdateMessage, *pglogrepl.DeleteMessage, *pglogrepl.TruncateMessage:
	default:
		return nil // type, origin and logical messages
	}
	if !st.inTxn {
		return errors.New("postgres source: a change outside a transaction")
	}
	index := st.events
	st.events++
	evs, err := t.changeEvents(msg)
	if err != nil {
		return err
	}
	src := source{prefix: t.s.prefix, db: t.s.db, lsn: st.begin.FinalLSN, xid: st.begin.Xid, tsMS: st.begin.CommitTime.UnixMilli(), snapshot: "false"}
	for _, ev := range evs {
		topic, ok := t.topics[ev.rel.table]
		if !ok {
			continue // a table of the publication this connector does not capture
		}
		recs := ev.records(topic, src, t.pos.epoch, &st.seq)
		if st.skipTxn || (st.begin.FinalLSN == st.skipLSN && index < st.skip) {
			continue // taken before a restart: made again only to number the rest alike
		}
		b.Records = append(b.Records, recs...)
	}
	return nil
}

// relationMessage caches a relation; a changed column list changes its version.
func (t *task) relationMessage(ctx context.Context, m *pglogrepl.RelationMessage) error {
	tb := table{schema: m.Namespace, name: m.RelationName}
	cols := make([]column, len(m.Columns))
	for i, c := range m.Columns {
		cols[i] = column{name: c.Name, oid: c.DataType}
	}
	key, ok := t.keys[tb]
	if old := t.relations[m.RelationID]; !ok || (old != nil && old.version != newRelation(tb, cols, nil).version) {
		if err := t.loadKeys(ctx); err != nil { // the key may have changed with the columns
			return err
		}
		key = t.keys[tb]
	}
	t.relations[m.RelationID] = newRelation(tb, cols, key)
	return nil
}

// changeEvents decodes one change message.
func (t *task) changeEvents(msg pglogrepl.Message) ([]event, error) {
	rel := func(id uint32) (*relation, error) {
		r, ok := t.relations[id]
		if !ok {
			return nil, fmt.Errorf("postgres source: a change to relation %d before its description", id)
		}
		return r, nil
	}
	switch m := msg.(type) {
	case *pglogrepl.InsertMessage:
		r, err := rel(m.RelationID)
		if err != nil {
			return nil, err
		}
		after, err := decodeTuple(r, m.Tuple)
		return []event{{rel: r, op: "c", after: after.values}}, err
	case *pglogrepl.UpdateMessage:
		r, err := rel(m.RelationID)
		if err != nil {
			return nil, err
		}
		before, err := decodeTuple(r, m.OldTuple)
		if err != nil {
			return nil, err
		}
		after, err := decodeTuple(r, m.NewTuple)
		if err != nil {
			return nil, err
		}
		ev := event{rel: r, op: "u", after: after.values}
		if m.OldTuple != nil {
			ev.before = before.values
			if oldKey := r.keyOf(before.values); oldKey != nil && catalog.MarshalCanonical(oldKey) != catalog.MarshalCanonical(r.keyOf(after.values)) {
				// The key changed: as Debezium, a delete (and tombstone) of the old key,
				// then a create under the new one, so that by-key consumers drop the old row.
				ev.op = "c"
				return []event{{rel: r, op: "d", before: before.values}, ev}, nil
			}
		}
		for _, c := range after.toast {
			// Unchanged TOAST: under REPLICA IDENTITY FULL the old row, from the same
			// WAL record, has the value; otherwise it is marked, never invented.
			if v, ok := before.values[c]; ok && m.OldTupleType == pglogrepl.UpdateMessageTupleTypeOld {
				ev.after[c] = v
			} else {
				ev.toast = append(ev.toast, c)
			}
		}
		return []event{ev}, nil
	case *pglogrepl.DeleteMessage:
		r, err := rel(m.RelationID)
		if err != nil {
			return nil, err
		}
		before, err := decodeTuple(r, m.OldTuple)
		return []event{{rel: r, op: "d", before: before.values}}, err
	case *pglogrepl.TruncateMessage:
		var out []event
		for _, id := range m.RelationIDs {
			r, err := rel(id)
			if err != nil {
				return nil, err
			}
			out = append(out, event{rel: r, op: "t"})
		}
		return out, nil
	}
	return nil, nil
}
