// Package pgsink is a Postgres sink connector: records upserted into a table by key,
// deleted on a tombstone (or a Debezium delete event), exactly once.
//
// Exactly once into the table: every Put is one transaction in the target database
// that applies the records and advances the sink's own offsets, kept in a table beside
// the data (offsets.table.name) — and reads them first, FOR UPDATE, skipping any record
// below them. A crash before the commit leaves neither; a crash after it leaves both,
// and the records the group's (older) offset gives again are skipped. The group's
// offsets only follow the database's (PreCommit answers them), so a zombie instance
// replaying an older batch finds its records already applied and changes nothing.
package pgsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-io/strata/connect"
)

// Class is the connector's class.
const Class = "io.strata.connect.postgres.PostgresSinkConnector"

// Connector is the sink plugin.
type Connector struct{}

var _ connect.SinkConnector = Connector{}

func (Connector) Class() string   { return Class }
func (Connector) Version() string { return "1.0" }

// ValidateConfig has nothing to check across the keys: a table that does not exist is
// found by the task.
func (Connector) ValidateConfig(map[string]string) map[string]string { return nil }

const (
	cfgURL     = "connection.url"
	cfgTable   = "table.name.format"
	cfgPK      = "pk.fields"
	cfgOffsets = "offsets.table.name"
	group      = "Postgres"
)

func (Connector) Config() []connect.ConfigKey {
	return []connect.ConfigKey{
		{Name: cfgURL, Type: connect.TypePassword, NoDefault: true, Importance: "HIGH", Group: group, DisplayName: "Database URL",
			Doc: "postgres:// URL of the target database."},
		{Name: cfgTable, Type: connect.TypeString, Default: "${topic}", Importance: "MEDIUM", Group: group, DisplayName: "Table",
			Doc: "The target table, ${topic} replaced by the record's topic (dots and dashes becoming underscores); schema.table allowed. The table must exist."},
		{Name: cfgPK, Type: connect.TypeList, Default: "", Importance: "MEDIUM", Group: group, DisplayName: "Primary key fields",
			Doc: "The table's key columns (default: the record key's fields). Records are upserted on them."},
		{Name: cfgOffsets, Type: connect.TypeString, Default: "strata_sink_offsets", Importance: "LOW", Group: group, DisplayName: "Offsets table",
			Doc: "The table in the target database holding the sink's offsets, written in the same transaction as the rows."},
	}
}

func (Connector) TaskConfigs(cfg map[string]string, maxTasks int) ([]map[string]string, error) {
	out := make([]map[string]string, maxTasks)
	for i := range out {
		out[i] = map[string]string{}
	}
	return out, nil
}

func (Connector) NewTask() connect.SinkTask { return &task{} }

type task struct {
	name, format, offsets string
	pk                    []string
	conn                  *pgx.Conn
	log                   *slog.Logger

	mu   sync.Mutex
	next map[connect.TopicPartition]int64 // what the database holds, per partition held
}

func (t *task) Start(ctx context.Context, cfg map[string]string, sc connect.SinkContext) error {
	g := connect.NewSettings(cfg, Connector{}.Config())
	t.name, t.format, t.pk, t.offsets = cfg["name"], g.String(cfgTable), g.List(cfgPK), g.String(cfgOffsets)
	t.log, t.next = sc.Logger(), map[connect.TopicPartition]int64{}
	var err error
	if t.conn, err = pgx.Connect(ctx, g.String(cfgURL)); err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres sink: connect: %w", err)}
	}
	_, err = t.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+qualified(t.offsets)+` (connector text NOT NULL, topic text NOT NULL,
		kafka_partition int NOT NULL, next_offset bigint NOT NULL, PRIMARY KEY (connector, topic, kafka_partition))`)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // created by another task at once
		err = nil
	}
	if err != nil {
		return fmt.Errorf("postgres sink: create %s: %w", t.offsets, err)
	}
	return nil
}

// Open reads the database's offsets of the partitions: they, not the group's, say
// what was written.
func (t *task) Open(ctx context.Context, parts map[connect.TopicPartition]int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tp, groupNext := range parts {
		var n int64
		err := t.conn.QueryRow(ctx, `SELECT next_offset FROM `+qualified(t.offsets)+` WHERE connector = $1 AND topic = $2 AND kafka_partition = $3`,
			t.name, tp.Topic, tp.Partition).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			n, err = groupNext, nil
		}
		if err != nil {
			return &connect.RetriableError{Err: fmt.Errorf("postgres sink: read the offset of %s: %w", tp, err)}
		}
		t.next[tp] = n
	}
	return nil
}

// Put applies records in one transaction with the offsets they reach.
func (t *task) Put(ctx context.Context, recs []connect.Record) error {
	if len(recs) == 0 {
		return nil
	}
	tx, err := t.conn.Begin(ctx)
	if err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres sink: begin: %w", err)}
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	stored := map[connect.TopicPartition]int64{}
	reached := map[connect.TopicPartition]int64{}
	var (
		b   pgx.Batch
		bad error
	)
	for i, r := range recs {
		tp := connect.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		from, ok := stored[tp]
		if !ok {
			err := tx.QueryRow(ctx, `SELECT next_offset FROM `+qualified(t.offsets)+` WHERE connector = $1 AND topic = $2 AND kafka_partition = $3 FOR UPDATE`,
				t.name, tp.Topic, tp.Partition).Scan(&from)
			if errors.Is(err, pgx.ErrNoRows) {
				from, err = 0, nil
			}
			if err != nil {
				return &connect.RetriableError{Err: fmt.Errorf("postgres sink: read the offset of %s: %w", tp, err)}
			}
			stored[tp] = from
		}
		if r.Offset < from {
			continue // applied before (a replay after a crash, or a zombie's)
		}
		if err := t.queue(&b, r); err != nil {
			// The records before it are taken (committed below); the runtime applies
			// the error tolerance to this one and puts the rest again.
			bad = &connect.BadRecordError{Index: i, Err: err}
			break
		}
		reached[tp] = r.Offset + 1
	}
	for tp, n := range reached {
		b.Queue(`INSERT INTO `+qualified(t.offsets)+` (connector, topic, kafka_partition, next_offset) VALUES ($1, $2, $3, $4)
			ON CONFLICT (connector, topic, kafka_partition) DO UPDATE SET next_offset = EXCLUDED.next_offset`, t.name, tp.Topic, tp.Partition, n)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return fmt.Errorf("postgres sink: write: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return &connect.RetriableError{Err: fmt.Errorf("postgres sink: commit: %w", err)}
	}
	t.mu.Lock()
	for tp, n := range reached {
		t.next[tp] = max(t.next[tp], n)
	}
	for tp, n := range stored {
		t.next[tp] = max(t.next[tp], n)
	}
	t.mu.Unlock()
	return bad
}

// queue adds one record's statement: a Debezium envelope's after image (op c, u, r),
// its delete (op d) or truncate (op t); a tombstone deletes by key; any other object
// is the row.
func (t *task) queue(b *pgx.Batch, r connect.Record) error {
	tbl := qualified(strings.ReplaceAll(t.format, "${topic}", strings.NewReplacer(".", "_", "-", "_").Replace(r.Topic)))
	row, isMap := r.Value.(map[string]any)
	if r.Value != nil && !isMap {
		return fmt.Errorf("postgres sink: a value of type %T is not a row", r.Value)
	}
	del := r.Value == nil
	if op, ok := row["op"].(string); ok && row["source"] != nil {
		switch op {
		case "c", "u", "r":
			row, _ = row["after"].(map[string]any)
		case "d":
			del = true
		case "t":
			b.Queue(`DELETE FROM ` + tbl)
			return nil
		default:
			return fmt.Errorf("postgres sink: op %q", op)
		}
	}
	key, _ := r.Key.(map[string]any)
	pk := t.pk
	if len(pk) == 0 {
		pk = sortedKeys(key)
	}
	if len(pk) == 0 {
		return errors.New("postgres sink: no key: set pk.fields or give records a key object")
	}
	if del {
		if key == nil {
			return errors.New("postgres sink: a delete without a key object")
		}
		kj, err := json.Marshal(key)
		if err != nil {
			return err
		}
		conds := make([]string, len(pk))
		for i, c := range pk {
			conds[i] = "t." + quoteIdent(c) + " = k." + quoteIdent(c)
		}
		b.Queue(`DELETE FROM `+tbl+` t USING jsonb_populate_record(NULL::`+tbl+`, $1::jsonb) k WHERE `+strings.Join(conds, " AND "), string(kj))
		return nil
	}
	if row == nil {
		return errors.New("postgres sink: an event without an after image")
	}
	cols := sortedKeys(row)
	for _, c := range pk {
		if !slices.Contains(cols, c) {
			if v, ok := key[c]; ok {
				row[c] = v
				cols = append(cols, c)
			}
		}
	}
	rj, err := json.Marshal(row)
	if err != nil {
		return err
	}
	q := make([]string, len(cols))
	var set []string
	for i, c := range cols {
		q[i] = quoteIdent(c)
		if !slices.Contains(pk, c) {
			set = append(set, q[i]+" = EXCLUDED."+q[i])
		}
	}
	qpk := make([]string, len(pk))
	for i, c := range pk {
		qpk[i] = quoteIdent(c)
	}
	action := "NOTHING"
	if len(set) > 0 {
		action = "UPDATE SET " + strings.Join(set, ", ")
	}
	list := strings.Join(q, ", ")
	b.Queue(`INSERT INTO `+tbl+` (`+list+`) SELECT `+list+` FROM jsonb_populate_record(NULL::`+tbl+`, $1::jsonb)
		ON CONFLICT (`+strings.Join(qpk, ", ")+`) DO `+action, string(rj))
	return nil
}

// PreCommit answers what the database holds.
func (t *task) PreCommit(context.Context) (map[connect.TopicPartition]int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[connect.TopicPartition]int64, len(t.next))
	for tp, n := range t.next {
		out[tp] = n
	}
	return out, nil
}

func (t *task) Close(_ context.Context, parts []connect.TopicPartition) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tp := range parts {
		delete(t.next, tp)
	}
	return nil
}

func (t *task) Stop() error {
	if t.conn != nil {
		t.conn.Close(context.Background())
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// qualified quotes a table name, schema.table or table.
func qualified(name string) string {
	if i := strings.IndexByte(name, '.'); i > 0 {
		return quoteIdent(name[:i]) + "." + quoteIdent(name[i+1:])
	}
	return quoteIdent(name)
}
