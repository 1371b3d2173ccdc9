package streams

import (
	"encoding/binary"

	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/window"
)

// Table is a changelog-backed table: the latest value per key, kept in the store of
// the operation that made it.
type Table[K, V any] struct {
	changes *port[K, Change[V]]
	store   string
	ks      serde.Serde[K]
	vs      serde.Serde[V]
	stamped bool // the store keeps each value's timestamp (tables read from a topic, joins)
}

// Changes is the table's update stream: every update, with the old and the new value,
// never de-duplicated.
func (tb Table[K, V]) Changes() Stream[K, Change[V]] {
	q := derive[K, Change[V], K, Change[V]](tb.changes)
	q.ks = tb.ks
	tb.changes.to(func(t *task) func(Record[K, Change[V]]) { return q.emitter(t) })
	return Stream[K, Change[V]]{q}
}

// Store names the table's store (for KVStore and streamstest).
func (tb Table[K, V]) Store() string { return tb.store }

// Aggregate folds each key's records into a value: init for a key's first record, then
// add. The table's store and changelog are named by name. A re-keyed input is
// repartitioned through <app>-<name>-repartition.
func Aggregate[K, V, A any](g Grouped[K, V], name string, init func() A, add func(K, V, A) A, as serde.Serde[A]) Table[K, A] {
	return aggregate(g, name, "aggregation", func(k K, v V, old *A) A {
		if old == nil {
			return add(k, v, init())
		}
		return add(k, v, *old)
	}, as)
}

// Reduce combines each key's values with f; a key's first value is kept as it is.
func Reduce[K, V any](g Grouped[K, V], name string, f func(V, V) V, vs serde.Serde[V]) Table[K, V] {
	return aggregate(g, name, "reduce", func(_ K, v V, old *V) V {
		if old == nil {
			return v
		}
		return f(*old, v)
	}, vs)
}

// Count counts each key's records.
func Count[K, V any](g Grouped[K, V], name string) Table[K, int64] {
	return Aggregate(g, name, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64)
}

// aggregate is the one table-building operation: step computes a key's new value from
// the record and the old value (nil for a key not seen yet).
func aggregate[K, V, A any](g Grouped[K, V], name, what string, step func(K, V, *A) A, as serde.Serde[A]) Table[K, A] {
	b := g.s.p.b
	out := newPort[K, Change[A]](b)
	tb := Table[K, A]{changes: out, store: name, ks: g.s.p.ks, vs: as}
	if len(g.with) > 0 {
		tb.ks = g.with[0].Key
	}
	out.ks = tb.ks
	if !b.claim(name, what) {
		return tb
	}
	if tb.ks == nil || as == nil {
		b.errorf("%s %s: the key serde is not known (the stream was mapped): pass streams.With to GroupByKey/GroupBy; the value serde is required", what, name)
		return tb
	}
	in := g.input(name)
	b.link(in.p.id, out.id)
	b.stores[name] = &storeDef{name: name, kind: kvStore, node: out.id}
	ks := tb.ks
	in.p.to(func(t *task) func(Record[K, V]) {
		emit := out.emitter(t)
		return func(r Record[K, V]) {
			kb, err := ks.Encode(r.Key)
			if err != nil {
				t.failf("%s %s: encode key: %w", what, name, err)
				return
			}
			var old *A
			if raw, ok := t.get(name, kb); ok {
				a, err := as.Decode(raw)
				if err != nil {
					t.failf("%s %s: decode stored value: %w", what, name, err)
					return
				}
				old = &a
			}
			acc := step(r.Key, r.Value, old)
			vb, err := as.Encode(acc)
			if err != nil {
				t.failf("%s %s: encode value: %w", what, name, err)
				return
			}
			t.put(name, kb, vb)
			emit(Record[K, Change[A]]{Key: r.Key, Value: Change[A]{Old: old, New: &acc}, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	})
	return tb
}

// JoinTable joins each stream record with the table's current value for its key; a
// record whose key is absent from the table is dropped. The stream and the table must
// be co-partitioned: a re-keyed stream must be repartitioned first.
func JoinTable[K, V, T, R any](s Stream[K, V], tb Table[K, T], f func(K, V, T) R) Stream[K, R] {
	return joinTable(s, tb, "JoinTable", func(k K, v V, t *T) (R, bool) {
		if t == nil {
			var z R
			return z, false
		}
		return f(k, v, *t), true
	})
}

// LeftJoinTable is JoinTable that keeps records without a table value (t is nil).
func LeftJoinTable[K, V, T, R any](s Stream[K, V], tb Table[K, T], f func(K, V, *T) R) Stream[K, R] {
	return joinTable(s, tb, "LeftJoinTable", func(k K, v V, t *T) (R, bool) { return f(k, v, t), true })
}

func joinTable[K, V, T, R any](s Stream[K, V], tb Table[K, T], what string, f func(K, V, *T) (R, bool)) Stream[K, R] {
	b := s.p.b
	q := derive[K, V, K, R](s.p)
	q.ks = s.p.ks
	if s.p.rekeyed {
		b.errorf("%s with table %s: the stream was re-keyed, so its records are not in the table's partitions: streams.Repartition it first", what, tb.store)
		return Stream[K, R]{q}
	}
	if tb.changes == nil || tb.ks == nil {
		b.errorf("%s: the table is not usable (its aggregation failed to build)", what)
		return Stream[K, R]{q}
	}
	b.link(s.p.id, tb.changes.id)
	ks, name := tb.ks, tb.store
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) {
			kb, err := ks.Encode(r.Key)
			if err != nil {
				t.failf("%s with %s: encode key: %w", what, name, err)
				return
			}
			tv, _, ok, err := tb.read(t, kb)
			if err != nil {
				t.failf("%s with %s: %w", what, name, err)
				return
			}
			var tp *T
			if ok {
				tp = &tv
			}
			if res, ok := f(r.Key, r.Value, tp); ok {
				out(Record[K, R]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	})
	return Stream[K, R]{q}
}

// Emit says when a windowed aggregation forwards results.
type Emit int

const (
	// EmitEveryUpdate forwards the window's new value on every record.
	EmitEveryUpdate Emit = iota
	// EmitOnWindowClose forwards each window's final value once, when stream time
	// passes its end plus grace.
	EmitOnWindowClose
)

// WindowedAggregate folds each key's records per window (tumbling, hopping or
// sliding, with grace). The result stream keeps the key and carries the window in the
// value. A record whose windows have all closed is late: dropped, counted in
// Metrics.LateRecordsDropped and sent to Config.LateRecordTopic when set.
func WindowedAggregate[K, V, A any](g Grouped[K, V], name string, w window.Spec, init func() A, add func(K, V, A) A, as serde.Serde[A], emit Emit) Stream[K, window.Result[A]] {
	if w.IsSliding() {
		return slidingAggregate(g, name, w, init, add, as, emit)
	}
	b := g.s.p.b
	out := newPort[K, window.Result[A]](b)
	ks := g.s.p.ks
	if len(g.with) > 0 {
		ks = g.with[0].Key
	}
	out.ks = ks
	if !b.claim(name, "windowed aggregation") {
		return Stream[K, window.Result[A]]{out}
	}
	if err := w.Validate(); err != nil {
		b.errorf("windowed aggregation %s: %w", name, err)
		return Stream[K, window.Result[A]]{out}
	}
	if ks == nil || as == nil {
		b.errorf("windowed aggregation %s: the key serde is not known (the stream was mapped): pass streams.With to GroupByKey/GroupBy; the aggregate's serde is required", name)
		return Stream[K, window.Result[A]]{out}
	}
	in := g.input(name)
	b.link(in.p.id, out.id)
	// The changelog keeps a window's records for its life plus grace and a margin; the
	// store deletes closed windows, whose tombstones compaction removes.
	b.stores[name] = &storeDef{name: name, kind: windowStore, node: out.id, retentionMs: w.Size() + w.Grace() + 24*3600_000}
	in.p.to(func(t *task) func(Record[K, V]) {
		emitOut := out.emitter(t)
		wa := &windowAgg[K, V, A]{t: t, name: name, w: w, ks: ks, as: as, init: init, add: add, emit: emit, out: emitOut, closedTo: minStart}
		t.onTime = append(t.onTime, wa.closeWindows)
		return wa.process
	})
	return Stream[K, window.Result[A]]{out}
}

// WindowedCount counts each key's records per window.
func WindowedCount[K, V any](g Grouped[K, V], name string, w window.Spec, emit Emit) Stream[K, window.Result[int64]] {
	return WindowedAggregate(g, name, w, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64, emit)
}

const minStart = -1 << 63

type windowAgg[K, V, A any] struct {
	t        *task
	name     string
	w        window.Spec
	ks       serde.Serde[K]
	as       serde.Serde[A]
	init     func() A
	add      func(K, V, A) A
	emit     Emit
	out      func(Record[K, window.Result[A]])
	closedTo int64 // windows starting at or before this are closed and gone
}

// windowKey orders a window store by window start, then key: closing windows is a
// scan of the store's head. The start's sign bit is flipped so negative times sort
// first.
func windowKey(start int64, key []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(key)), uint64(start)^(1<<63))
	return append(b, key...)
}

func splitWindowKey(k []byte) (int64, []byte) {
	return int64(binary.BigEndian.Uint64(k[:8]) ^ (1 << 63)), k[8:]
}

func (a *windowAgg[K, V, A]) process(r Record[K, V]) {
	t := a.t
	kb, err := a.ks.Encode(r.Key)
	if err != nil {
		t.failf("windowed aggregation %s: encode key: %w", a.name, err)
		return
	}
	ts := ms(r.Timestamp)
	counted := false
	for _, win := range a.w.For(ts) {
		if a.w.Closed(win, t.streamTime) {
			continue
		}
		counted = true
		wk := windowKey(win.Start, kb)
		acc := a.init()
		if raw, ok := t.get(a.name, wk); ok {
			if acc, err = a.as.Decode(raw); err != nil {
				t.failf("windowed aggregation %s: decode stored value: %w", a.name, err)
				return
			}
		}
		acc = a.add(r.Key, r.Value, acc)
		vb, err := a.as.Encode(acc)
		if err != nil {
			t.failf("windowed aggregation %s: encode value: %w", a.name, err)
			return
		}
		t.put(a.name, wk, vb)
		if a.emit == EmitEveryUpdate {
			a.out(Record[K, window.Result[A]]{Key: r.Key, Value: window.Result[A]{Window: win, Value: acc}, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	}
	if !counted {
		t.late()
	}
}

// closeWindows forwards (EmitOnWindowClose) and deletes the windows stream time has
// closed.
func (a *windowAgg[K, V, A]) closeWindows() {
	t := a.t
	upTo := a.w.ClosedBefore(t.streamTime)
	if upTo <= a.closedTo {
		return
	}
	type closed struct {
		win window.Window
		key []byte
		val []byte
	}
	var cs []closed
	hi := windowKey(upTo+1, nil) // every window starting at or before upTo sorts below
	// Windows starting at or before closedTo were deleted (and none is made there):
	// start after them, not at the store's start — Pebble keeps deleted entries as
	// tombstones until compaction, and a scan over them would grow with every window.
	var lo []byte
	if a.closedTo != minStart {
		lo = windowKey(a.closedTo+1, nil)
	}
	t.rangeStore(a.name, lo, hi, func(k, v []byte) bool {
		start, key := splitWindowKey(k)
		cs = append(cs, closed{window.Window{Start: start, End: start + a.w.Size()}, append([]byte(nil), key...), append([]byte(nil), v...)})
		return true
	})
	a.closedTo = upTo
	for _, c := range cs {
		t.del(a.name, windowKey(c.win.Start, c.key))
		if a.emit != EmitOnWindowClose {
			continue
		}
		k, err := a.ks.Decode(c.key)
		if err != nil {
			t.failf("windowed aggregation %s: decode stored key: %w", a.name, err)
			return
		}
		v, err := a.as.Decode(c.val)
		if err != nil {
			t.failf("windowed aggregation %s: decode stored value: %w", a.name, err)
			return
		}
		a.out(Record[K, window.Result[A]]{Key: k, Value: window.Result[A]{Window: c.win, Value: v}, Timestamp: fromMs(c.win.End - 1)})
	}
}

// late counts a record no window took, and sends it to the late-record topic if set.
func (t *task) late() {
	t.env.metrics.LateRecordsDropped.Add(1)
	t.pm.late.Inc()
	if t.env.lateTopic != "" && t.cur != nil {
		r := t.cur
		t.send(t.env.lateTopic, r.Key, r.Value, r.TS, nil)
	}
}
