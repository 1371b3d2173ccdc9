package streams

import (
	"fmt"

	"github.com/strata-io/strata/streams/serde"
)

// Tables read from topics or materialized from streams, and table-table joins. Their
// stores keep each value with its timestamp (stamp), so that a join's result carries
// the later of its inputs' times, as in Kafka Streams.

// read returns the table's value for the encoded key kb and its timestamp (0 for a
// table that does not keep them: aggregations); ok is false when there is none.
func (tb Table[K, V]) read(t *task, kb []byte) (v V, ts int64, ok bool, err error) {
	raw, ok := t.get(tb.store, kb)
	if t.err != nil {
		return v, 0, false, t.err
	}
	if !ok {
		return v, 0, false, nil
	}
	if tb.stamped {
		var good bool
		if ts, raw, good = unstamp(raw); !good {
			return v, 0, false, fmt.Errorf("store %s: a value without its timestamp", tb.store)
		}
	}
	if v, err = tb.vs.Decode(raw); err != nil {
		return v, 0, false, fmt.Errorf("store %s: decode value: %w", tb.store, err)
	}
	return v, ts, true, nil
}

// materialized is a stamped table store written by one operator: upsert sets a key's
// value (nil: deletes it) and forwards the change, unless nothing was there before
// and nothing is now.
type materialized[K, V any] struct {
	tb  Table[K, V]
	out func(Record[K, Change[V]])
}

func (m materialized[K, V]) upsert(t *task, k K, kb []byte, v *V, ts int64, r Record[K, V]) error {
	old, _, had, err := m.tb.read(t, kb)
	if err != nil {
		return err
	}
	var oldp *V
	if had {
		oldp = &old
	}
	switch {
	case v == nil && !had:
		return nil
	case v == nil:
		t.del(m.tb.store, kb)
	default:
		vb, err := m.tb.vs.Encode(*v)
		if err != nil {
			return fmt.Errorf("store %s: encode value: %w", m.tb.store, err)
		}
		t.put(m.tb.store, kb, stamp(ts, vb))
	}
	m.out(Record[K, Change[V]]{Key: k, Value: Change[V]{Old: oldp, New: v}, Timestamp: fromMs(ts), Headers: r.Headers})
	return nil
}

// newTable makes the port and the Table of a stamped table named name.
func newTable[K, V any](b *Builder, name string, ks serde.Serde[K], vs serde.Serde[V]) Table[K, V] {
	out := newPort[K, Change[V]](b)
	out.ks = ks
	return Table[K, V]{changes: out, store: name, ks: ks, vs: vs, stamped: true}
}

// FromTable reads topic as a table (Kafka Streams' builder.table): the latest value
// per key, a null value deleting the key, kept in the store name (changelog
// <app>-<name>-changelog). Changes forwards every update with the value before it.
func FromTable[K, V any](b *Builder, topic, name string, ks serde.Serde[K], vs serde.Serde[V]) Table[K, V] {
	tb := newTable(b, name, ks, vs)
	if ks == nil || vs == nil {
		b.errorf("FromTable %s: key and value serdes are required", topic)
		return tb
	}
	if !b.claim(name, "table "+topic) {
		return tb
	}
	b.stores[name] = &storeDef{name: name, kind: kvStore, node: tb.changes.id, stamped: true}
	b.sources = append(b.sources, &sourceDef{topic: topic, node: tb.changes.id, entry: func(t *task) func(rawRecord) {
		m := materialized[K, V]{tb, tb.changes.emitter(t)}
		return func(r rawRecord) {
			var (
				k   K
				v   V
				err error
			)
			if r.Key != nil {
				k, err = ks.Decode(r.Key)
			}
			if err == nil && r.Value != nil {
				v, err = vs.Decode(r.Value)
			}
			if err != nil {
				t.poison(r, err)
				return
			}
			var vp *V
			if r.Value != nil {
				vp = &v
			}
			if err := m.upsert(t, k, r.Key, vp, r.TS, Record[K, V]{Headers: r.Headers}); err != nil {
				t.failf("table %s: %w", name, err)
			}
		}
	}})
	return tb
}

// ToTable materializes a stream as a table (Kafka Streams' toTable): each record
// becomes its key's value, kept in the store name. A re-keyed stream is repartitioned
// first, through <app>-<name>-repartition.
func ToTable[K, V any](s Stream[K, V], name string, with ...Serdes[K, V]) Table[K, V] {
	b := s.p.b
	ks, vs := s.p.ks, s.p.vs
	if len(with) > 0 {
		ks, vs = with[0].Key, with[0].Value
	}
	tb := newTable(b, name, ks, vs)
	if !b.claim(name, "ToTable") {
		return tb
	}
	if ks == nil || vs == nil {
		b.errorf("ToTable %s: the stream's serdes are not known (it was mapped): pass streams.With(keySerde, valueSerde)", name)
		return tb
	}
	in := s
	if s.p.rekeyed {
		in = repartition(s, name, []Serdes[K, V]{{ks, vs}})
	}
	b.link(in.p.id, tb.changes.id)
	b.stores[name] = &storeDef{name: name, kind: kvStore, node: tb.changes.id, stamped: true}
	in.p.to(func(t *task) func(Record[K, V]) {
		m := materialized[K, V]{tb, tb.changes.emitter(t)}
		return func(r Record[K, V]) {
			kb, err := ks.Encode(r.Key)
			if err != nil {
				t.failf("ToTable %s: encode key: %w", name, err)
				return
			}
			if err := m.upsert(t, r.Key, kb, &r.Value, ms(r.Timestamp), r); err != nil {
				t.failf("ToTable %s: %w", name, err)
			}
		}
	})
	return tb
}

// JoinTables joins two tables on their keys (Kafka Streams' KTable-KTable join): the
// result table, kept in the store name, holds f(key, left, right) for every key both
// have, and follows every update of either side — an update that ends a key's result
// forwards its deletion (Change.New nil). A result is timestamped with the later of
// its two values' times. The tables must be co-partitioned (checked at start-up).
func JoinTables[K, L, R, O any](l Table[K, L], r Table[K, R], name string, f func(K, L, R) O, os serde.Serde[O]) Table[K, O] {
	return tableJoin(l, r, name, innerJoin, func(k K, lv *L, rv *R) (O, bool) {
		if lv == nil || rv == nil {
			var z O
			return z, false
		}
		return f(k, *lv, *rv), true
	}, os)
}

// LeftJoinTables is JoinTables keeping every key of the left table: f gets nil for a
// right value missing.
func LeftJoinTables[K, L, R, O any](l Table[K, L], r Table[K, R], name string, f func(K, L, *R) O, os serde.Serde[O]) Table[K, O] {
	return tableJoin(l, r, name, leftJoin, func(k K, lv *L, rv *R) (O, bool) {
		if lv == nil {
			var z O
			return z, false
		}
		return f(k, *lv, rv), true
	}, os)
}

// OuterJoinTables is JoinTables keeping every key of either table: f gets nil for the
// side missing.
func OuterJoinTables[K, L, R, O any](l Table[K, L], r Table[K, R], name string, f func(K, *L, *R) O, os serde.Serde[O]) Table[K, O] {
	return tableJoin(l, r, name, outerJoin, func(k K, lv *L, rv *R) (O, bool) {
		if lv == nil && rv == nil {
			var z O
			return z, false
		}
		return f(k, lv, rv), true
	}, os)
}

func tableJoin[K, L, R, O any](l Table[K, L], r Table[K, R], name string, kind joinKind, f func(K, *L, *R) (O, bool), os serde.Serde[O]) Table[K, O] {
	what := "table-table " + kind.String()
	if l.changes == nil || r.changes == nil {
		panic("streams: " + what + " of a zero Table")
	}
	b := l.changes.b
	ks := l.ks
	if ks == nil {
		ks = r.ks
	}
	tb := newTable(b, name, ks, os)
	if !b.claim(name, what) {
		return tb
	}
	if ks == nil || os == nil || l.vs == nil || r.vs == nil {
		b.errorf("%s %s: a table is not usable (its operation failed to build) or the result serde is missing", what, name)
		return tb
	}
	b.link(l.changes.id, tb.changes.id)
	b.link(r.changes.id, tb.changes.id)
	b.stores[name] = &storeDef{name: name, kind: kvStore, node: tb.changes.id, stamped: true}
	// On an update of one side: look the other up, recompute the key's result.
	state := func(t *task) materialized[K, O] {
		return shared(t, tb.changes.id, func() materialized[K, O] { return materialized[K, O]{tb, tb.changes.emitter(t)} })
	}
	update := func(t *task, m materialized[K, O], k K, ts int64, lv *L, rv *R, otherTs int64, headers Record[K, O]) {
		kb, err := ks.Encode(k)
		if err != nil {
			t.failf("%s %s: encode key: %w", what, name, err)
			return
		}
		res, ok := f(k, lv, rv)
		var resp *O
		if ok {
			resp = &res
		}
		if err := m.upsert(t, k, kb, resp, max(ts, otherTs), headers); err != nil {
			t.failf("%s %s: %w", what, name, err)
		}
	}
	l.changes.to(func(t *task) func(Record[K, Change[L]]) {
		m := state(t)
		return func(c Record[K, Change[L]]) {
			kb, err := ks.Encode(c.Key)
			if err != nil {
				t.failf("%s %s: encode key: %w", what, name, err)
				return
			}
			rv, rts, ok, err := r.read(t, kb)
			if err != nil {
				t.failf("%s %s: %w", what, name, err)
				return
			}
			var rp *R
			if ok {
				rp = &rv
			}
			update(t, m, c.Key, ms(c.Timestamp), c.Value.New, rp, rts, Record[K, O]{Headers: c.Headers})
		}
	})
	r.changes.to(func(t *task) func(Record[K, Change[R]]) {
		m := state(t)
		return func(c Record[K, Change[R]]) {
			kb, err := ks.Encode(c.Key)
			if err != nil {
				t.failf("%s %s: encode key: %w", what, name, err)
				return
			}
			lv, lts, ok, err := l.read(t, kb)
			if err != nil {
				t.failf("%s %s: %w", what, name, err)
				return
			}
			var lp *L
			if ok {
				lp = &lv
			}
			update(t, m, c.Key, ms(c.Timestamp), lp, c.Value.New, lts, Record[K, O]{Headers: c.Headers})
		}
	})
	return tb
}
