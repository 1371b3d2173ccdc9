package pgcdc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	"github.com/jackc/pglogrepl"

	"github.com/strata-io/strata/connect"
)

// Headers every record carries.
const (
	HeaderCommitLSN     = "pg.commit_lsn"     // the transaction's commit LSN (snapshot: the slot's consistent point)
	HeaderSeq           = "pg.seq"            // the record's index within its transaction (snapshot: within the epoch)
	HeaderXID           = "pg.xid"            // the transaction id (none on snapshot rows)
	HeaderEpoch         = "pg.snapshot_epoch" // the snapshot epoch the record belongs to
	HeaderSchemaVersion = "pg.schema_version" // fingerprint of the table's columns (names and types)
)

// Postgres type OIDs decoded into JSON numbers, booleans or documents; every other type
// is carried as its text form.
const (
	oidBool    = 16
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidOID     = 26
	oidJSON    = 114
	oidFloat4  = 700
	oidFloat8  = 701
	oidNumeric = 1700
	oidJSONB   = 3802
)

// column is one column of a relation as the stream or the snapshot describes it.
type column struct {
	name string
	oid  uint32
}

// relation is a table's shape: its columns, its primary key's columns, and the
// fingerprint of the column list (the schema version).
type relation struct {
	table   table
	cols    []column
	key     []string
	version string
}

func newRelation(t table, cols []column, key []string) *relation {
	h := fnv.New64a()
	for _, c := range cols {
		fmt.Fprintf(h, "%s:%d;", c.name, c.oid)
	}
	return &relation{table: t, cols: cols, key: key, version: strconv.FormatUint(h.Sum64(), 16)}
}

// decodeText turns a column's text form into a JSON-ready value.
func decodeText(oid uint32, text []byte) (any, error) {
	s := string(text)
	switch oid {
	case oidBool:
		return s == "t", nil
	case oidInt2, oidInt4, oidInt8, oidOID:
		if !json.Valid(text) {
			return s, nil
		}
		return json.Number(s), nil
	case oidFloat4, oidFloat8, oidNumeric:
		if f, err := strconv.ParseFloat(s, 64); err != nil || math.IsNaN(f) || math.IsInf(f, 0) || !json.Valid(text) {
			return s, nil // NaN, Infinity: not JSON numbers
		}
		return json.Number(s), nil
	case oidJSON, oidJSONB:
		d := json.NewDecoder(bytes.NewReader(text))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("column of type json: %w", err)
		}
		return v, nil
	}
	return s, nil
}

// row is a tuple decoded: values by column name; toast lists the columns the tuple
// left out because they are unchanged TOASTed values.
type row struct {
	values map[string]any
	toast  []string
}

func decodeTuple(rel *relation, tup *pglogrepl.TupleData) (row, error) {
	r := row{values: map[string]any{}}
	if tup == nil {
		return r, nil
	}
	if len(tup.Columns) != len(rel.cols) {
		return r, fmt.Errorf("%s: a tuple of %d columns for a relation of %d", rel.table, len(tup.Columns), len(rel.cols))
	}
	for i, c := range tup.Columns {
		name := rel.cols[i].name
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull:
			r.values[name] = nil
		case pglogrepl.TupleDataTypeToast:
			r.toast = append(r.toast, name)
		case pglogrepl.TupleDataTypeText:
			v, err := decodeText(rel.cols[i].oid, c.Data)
			if err != nil {
				return r, fmt.Errorf("%s.%s: %w", rel.table, name, err)
			}
			r.values[name] = v
		default:
			return r, fmt.Errorf("%s.%s: tuple data of kind %q", rel.table, name, c.DataType)
		}
	}
	return r, nil
}

// keyOf is the record key: the primary key's columns of the row (nil: no key).
func (rel *relation) keyOf(values map[string]any) any {
	if len(rel.key) == 0 || values == nil {
		return nil
	}
	k := make(map[string]any, len(rel.key))
	for _, c := range rel.key {
		k[c] = values[c]
	}
	return k
}

// source is what an event says of where it comes from (Debezium's source block).
type source struct {
	prefix   string
	db       string
	lsn      pglogrepl.LSN
	xid      uint32
	tsMS     int64
	snapshot string // "true", "last" or "false"
}

// event is one change: op c, u, d, r or t.
type event struct {
	rel    *relation
	op     string
	before map[string]any
	after  map[string]any
	toast  []string
}

// records turns a change into its records (a delete is followed by its tombstone),
// seq numbering them within the transaction.
func (ev event) records(topic string, src source, epoch int64, seq *int64) []connect.Record {
	s := map[string]any{
		"version": "strata-1", "connector": "postgresql", "name": src.prefix, "db": src.db,
		"schema": ev.rel.table.schema, "table": ev.rel.table.name,
		"lsn": json.Number(strconv.FormatUint(uint64(src.lsn), 10)), "ts_ms": src.tsMS, "snapshot": src.snapshot,
	}
	if src.xid != 0 {
		s["txId"] = int64(src.xid)
	}
	val := map[string]any{"before": nilIfEmpty(ev.before), "after": nilIfEmpty(ev.after), "source": s, "op": ev.op, "ts_ms": src.tsMS}
	if len(ev.toast) > 0 {
		ts := make([]any, len(ev.toast))
		for i, c := range ev.toast {
			ts[i] = c
		}
		val["unchanged_toast"] = ts
	}
	key := ev.rel.keyOf(ev.after)
	if ev.op == "d" {
		key = ev.rel.keyOf(ev.before)
	}
	if ev.op == "t" {
		key = nil
	}
	rec := func(v any) connect.Record {
		h := []connect.Header{
			{Key: HeaderCommitLSN, Value: []byte(src.lsn.String())},
			{Key: HeaderSeq, Value: strconv.AppendInt(nil, *seq, 10)},
			{Key: HeaderEpoch, Value: strconv.AppendInt(nil, epoch, 10)},
			{Key: HeaderSchemaVersion, Value: []byte(ev.rel.version)},
		}
		if src.xid != 0 {
			h = append(h, connect.Header{Key: HeaderXID, Value: strconv.AppendUint(nil, uint64(src.xid), 10)})
		}
		*seq++
		return connect.Record{Topic: topic, Partition: -1, Key: key, Value: v, Headers: h, Timestamp: src.tsMS}
	}
	out := []connect.Record{rec(val)}
	if ev.op == "d" && key != nil {
		out = append(out, rec(nil)) // the tombstone: compaction and sinks drop the row
	}
	return out
}

func nilIfEmpty(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}
