package tables

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/registry"
	"github.com/strata-io/strata/segment"
)

// Values that do not match: a record of a typed table topic whose value is not framed
// for the registry, names a schema id not registered under the value subject, does not
// decode with that schema, or does not fit the table's columns stops its partition's
// table at that record. What comes before it commits; from it on the partition commits
// nothing, its lag grows, strata_tables_stopped_partitions{topic} counts it, Status
// says why, and the role logs it at error (once, when it stops). The role tries again
// every commit interval, so the partition goes on by itself once the record fits (the
// schema id registered under the subject, say). A latest schema whose columns the
// table cannot follow (a type Iceberg cannot widen to) stops every partition the same
// way. The table's properties say it too, for engines and every node's REST catalog:
// strata.stopped.<partition> = "offset N: reason", set by the commit that stops the
// partition (one of no rows when nothing else commits) and removed by the one that
// passes the record. Stopping rather than a dead-letter topic: no row ever goes missing from the
// table or lands somewhere a reader of the table does not look, the tables role stays
// a reader of the log (it never produces), and the record stays where it is, in the
// topic, for whoever fixes the cause.

// PartitionStatus is why a partition of a table stopped.
type PartitionStatus struct {
	Partition int32
	// Offset is the record the table stopped at: the offsets below it are in the table.
	Offset int64
	Reason string
}

// stops is the partitions stopped, guarded: Status reads it from other goroutines.
type stops struct {
	mu sync.Mutex
	m  map[partKey]PartitionStatus
}

// Status lists the partitions of table topic topicID that are stopped, by partition;
// none when the table goes on.
func (r *Role) Status(topicID int64) []PartitionStatus {
	r.stops.mu.Lock()
	defer r.stops.mu.Unlock()
	var out []PartitionStatus
	for k, s := range r.stops.m {
		if k.topic == topicID {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// setStatus records whether partition p of t is stopped (st nil: it goes on), logging
// and counting the changes.
func (r *Role) setStatus(t catalog.Topic, p int32, st *PartitionStatus) {
	k := partKey{t.ID, p}
	r.stops.mu.Lock()
	defer r.stops.mu.Unlock()
	if r.stops.m == nil {
		r.stops.m = map[partKey]PartitionStatus{}
	}
	was, stopped := r.stops.m[k]
	switch {
	case st == nil && !stopped:
		return
	case st == nil:
		delete(r.stops.m, k)
		r.log.Info("table partition goes on", "topic", t.Name, "partition", p, "offset", was.Offset)
	case !stopped || was != *st:
		r.stops.m[k] = *st
		r.log.Error("table partition stopped: a record does not fit the table", "topic", t.Name, "partition", p, "offset", st.Offset, "reason", st.Reason)
	default:
		return
	}
	r.countStopped(t)
}

// forgetStatus drops what this worker knew of partition p of t (its lease is gone).
func (r *Role) forgetStatus(t catalog.Topic, p int32) {
	r.stops.mu.Lock()
	defer r.stops.mu.Unlock()
	if _, ok := r.stops.m[partKey{t.ID, p}]; ok {
		delete(r.stops.m, partKey{t.ID, p})
		r.countStopped(t)
	}
}

// countStopped sets t's gauge of stopped partitions; r.stops.mu held.
func (r *Role) countStopped(t catalog.Topic) {
	n := 0
	for k := range r.stops.m {
		if k.topic == t.ID {
			n++
		}
	}
	r.m.stopped.WithLabelValues(t.Name).Set(float64(n))
}

// SchemaSource is the part of the schema registry's state the role reads for typed
// columns.
type SchemaSource interface {
	SubjectSchemas(ctx context.Context, subject string, deleted bool) ([]catalog.SubjectSchema, error)
}

// valueSchemas are a topic's value subject's schemas: every version's (deleted ones
// too: records written with them stay in the topic) by id, and the typed columns of
// the latest live Avro or JSON one.
type valueSchemas struct {
	subject string
	byID    map[int32]*registry.Schema
	cols    []iceberg.NestedField
}

// valueSchemas answers t's value schemas, nil when its values are not typed: its
// strategy is not TopicNameStrategy, or no live version of <topic>-value is an Avro or
// JSON schema of a record.
func (r *Role) valueSchemas(ctx context.Context, t catalog.Topic, cfg catalog.Config) (*valueSchemas, error) {
	if cfg.ValueSubjectStrategy != string(registry.TopicName) {
		return nil, nil
	}
	subject, _ := registry.TopicName.Subject(t.Name, false, "")
	versions, err := r.cat.SubjectSchemas(ctx, subject, true)
	if err != nil {
		if errors.Is(err, catalog.ErrSubjectNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("read subject %s: %w", subject, err)
	}
	vs := &valueSchemas{subject: subject, byID: map[int32]*registry.Schema{}}
	for _, v := range versions {
		s, err := r.parsedSchema(ctx, v.Schema)
		if err != nil {
			return nil, fmt.Errorf("subject %s version %d: %w", subject, v.Version, err)
		}
		vs.byID[int32(v.ID)] = s
		if !v.Deleted && (s.Type() == registry.TypeAvro || s.Type() == registry.TypeJSON) {
			vs.cols = valueColumns(s) // versions come oldest first: the last one stays
		}
	}
	if len(vs.cols) == 0 {
		return nil, nil
	}
	return vs, nil
}

// parsedSchema parses s with its references, once per role: an id never names
// another schema.
func (r *Role) parsedSchema(ctx context.Context, s catalog.Schema) (*registry.Schema, error) {
	if p, ok := r.schemas[s.ID]; ok {
		return p, nil
	}
	refs, err := r.resolve(ctx, s.References, 0)
	if err != nil {
		return nil, err
	}
	p, err := registry.Parse(s.Type, s.Text, refs)
	if err != nil {
		return nil, fmt.Errorf("parse schema %d: %w", s.ID, err)
	}
	r.schemas[s.ID] = p
	return p, nil
}

func (r *Role) resolve(ctx context.Context, refs []catalog.SchemaReference, depth int) ([]registry.Resolved, error) {
	if depth > 16 {
		return nil, errors.New("schema references nest deeper than 16")
	}
	var out []registry.Resolved
	for _, ref := range refs {
		versions, err := r.cat.SubjectSchemas(ctx, ref.Subject, true)
		if err != nil {
			return nil, fmt.Errorf("reference %q: %w", ref.Name, err)
		}
		i := sort.Search(len(versions), func(i int) bool { return versions[i].Version >= ref.Version })
		if i == len(versions) || versions[i].Version != ref.Version {
			return nil, fmt.Errorf("reference %q: subject %s has no version %d", ref.Name, ref.Subject, ref.Version)
		}
		inner, err := r.resolve(ctx, versions[i].References, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, registry.Resolved{Name: ref.Name, Type: versions[i].Type, Text: versions[i].Text, Refs: inner})
	}
	return out, nil
}

// typedColumns are the columns of sc past the default ones.
func typedColumns(sc *iceberg.Schema) []iceberg.NestedField {
	var out []iceberg.NestedField
	for _, f := range sc.Fields() {
		if !isDefaultColumn(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// decode converts records' values to the typed columns cols, answering one row per
// record up to the first that does not fit (and why it does not); all of them when
// every one fits. vs nil (the subject is gone): every typed column null.
func decode(vs *valueSchemas, cols []iceberg.NestedField, recs []segment.DecodedRecord) ([]typedRow, *PartitionStatus) {
	rows := make([]typedRow, 0, len(recs))
	for _, rec := range recs {
		row, err := decodeValue(vs, cols, rec.Value)
		if err != nil {
			return rows, &PartitionStatus{Offset: rec.Offset, Reason: "offset " + strconv.FormatInt(rec.Offset, 10) + ": " + err.Error()}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func decodeValue(vs *valueSchemas, cols []iceberg.NestedField, value []byte) (typedRow, error) {
	if value == nil || vs == nil {
		return make(typedRow, len(cols)), nil
	}
	id, payload, ok := registry.ParseFrame(value)
	if !ok {
		return nil, errors.New("the value is not framed for the schema registry (magic byte 0 and a 4-byte schema id)")
	}
	s, ok := vs.byID[id]
	if !ok {
		return nil, fmt.Errorf("schema id %d is not registered under subject %s", id, vs.subject)
	}
	if s.Type() != registry.TypeAvro && s.Type() != registry.TypeJSON {
		return nil, fmt.Errorf("schema id %d is a %s schema: the table's columns come from Avro or JSON schemas", id, s.Type())
	}
	v, err := s.Decode(payload)
	if err != nil {
		return nil, fmt.Errorf("the value does not decode with schema id %d: %w", id, err)
	}
	return toTypedRow(cols, v)
}

// StoppedProperty is the table property that says why partition p stopped.
func StoppedProperty(p int32) string { return "strata.stopped." + strconv.Itoa(int(p)) }

// statusProperties sets, in txn, the leased partitions' strata.stopped.<p> properties
// as stopped says (absent: the partition goes on), changing only what differs from
// cur.
func statusProperties(txn *table.Transaction, cur iceberg.Properties, leases []catalog.TableLease, stopped map[int32]*PartitionStatus) error {
	set := iceberg.Properties{}
	var remove []string
	for _, l := range leases {
		k := StoppedProperty(l.Partition)
		old, had := cur[k]
		switch st := stopped[l.Partition]; {
		case st != nil:
			if v := "offset " + strconv.FormatInt(st.Offset, 10) + ": " + st.Reason; v != old || !had {
				set[k] = v
			}
		case had:
			remove = append(remove, k)
		}
	}
	if len(set) > 0 {
		if err := txn.SetProperties(set); err != nil {
			return fmt.Errorf("set the table's status: %w", err)
		}
	}
	if len(remove) > 0 {
		if err := txn.RemoveProperties(remove); err != nil {
			return fmt.Errorf("clear the table's status: %w", err)
		}
	}
	return nil
}

// statusChanged says whether the leased partitions' status properties differ from
// what stopped says.
func statusChanged(cur iceberg.Properties, leases []catalog.TableLease, stopped map[int32]*PartitionStatus) bool {
	for _, l := range leases {
		old, had := cur[StoppedProperty(l.Partition)]
		st := stopped[l.Partition]
		if (st != nil) != had || st != nil && old != "offset "+strconv.FormatInt(st.Offset, 10)+": "+st.Reason {
			return true
		}
	}
	return false
}

// commitStatus commits, with no rows, the leased partitions' status properties when
// they changed.
func (r *Role) commitStatus(ctx context.Context, t catalog.Topic, tbl *table.Table, state catalog.TableState, fio *fileIO, leases []catalog.TableLease, stopped map[int32]*PartitionStatus) error {
	if !statusChanged(tbl.Metadata().Properties(), leases, stopped) {
		return nil
	}
	cio := &commitIO{r: r, fio: fio, topicID: t.ID, prev: state.MetadataLocation, base: tbl.Metadata(), leases: leases}
	txn := table.New(tbl.Identifier(), tbl.Metadata(), state.MetadataLocation, fio.fsF(), cio).NewTransaction()
	if err := statusProperties(txn, tbl.Metadata().Properties(), leases, stopped); err != nil {
		return err
	}
	if _, err := txn.Commit(ctx); err != nil {
		return fmt.Errorf("commit the table's status: %w", err)
	}
	return nil
}
