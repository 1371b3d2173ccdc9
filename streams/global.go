package streams

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
)

// Global tables (Kafka Streams' GlobalKTable): every instance keeps a full copy of a
// topic's latest value per key, restored to the topic's high watermark before any task
// starts and then kept up to date by tailing every partition, outside the group. The
// topic is its own changelog: a global table writes no internal topic, and a stream
// joins it by any key it derives, without repartitioning.

// GlobalTable is a table replicated in full to every instance.
type GlobalTable[K, V any] struct {
	b    *Builder
	name string
	ks   serde.Serde[K]
	vs   serde.Serde[V]
}

// globalDef is a global table of the topology: its topic and store name, and how to
// check a record before it is kept (a record its serdes refuse is skipped and counted
// as poison: a task cannot decode it when joining either).
type globalDef struct {
	topic, name string
	check       func(key, value []byte) error
}

// FromGlobalTable reads topic as a global table named name (its store; no changelog:
// the topic itself is restored). A null value deletes its key; a record with a null
// key is skipped.
func FromGlobalTable[K, V any](b *Builder, topic, name string, ks serde.Serde[K], vs serde.Serde[V]) GlobalTable[K, V] {
	g := GlobalTable[K, V]{b: b, name: name, ks: ks, vs: vs}
	if ks == nil || vs == nil {
		b.errorf("FromGlobalTable %s: key and value serdes are required", topic)
		return g
	}
	if !b.claim(name, "global table "+topic) {
		return g
	}
	for _, d := range b.globals {
		if d.topic == topic {
			b.errorf("FromGlobalTable %s: the topic is already the global table %s", topic, d.name)
			return g
		}
	}
	b.globals = append(b.globals, &globalDef{topic: topic, name: name, check: func(key, value []byte) error {
		if _, err := ks.Decode(key); err != nil {
			return fmt.Errorf("key: %w", err)
		}
		if value != nil {
			if _, err := vs.Decode(value); err != nil {
				return fmt.Errorf("value: %w", err)
			}
		}
		return nil
	}})
	return g
}

// JoinGlobal joins each stream record with the global table's current value for the
// key keyOf derives from it (Kafka Streams' KStream-GlobalKTable join); a record
// whose table key is absent is dropped. The result keeps the stream's key and
// timestamp. No repartition is needed: every instance holds the whole table. The
// table is read as this instance has it when the record is processed: an update
// joins the records processed after it reached this instance.
func JoinGlobal[K, V, GK, GV, R any](s Stream[K, V], g GlobalTable[GK, GV], keyOf func(K, V) GK, f func(K, V, GV) R) Stream[K, R] {
	return joinGlobal(s, g, "JoinGlobal", keyOf, func(k K, v V, gv *GV) (R, bool) {
		if gv == nil {
			var z R
			return z, false
		}
		return f(k, v, *gv), true
	})
}

// LeftJoinGlobal is JoinGlobal keeping records without a table value (gv is nil).
func LeftJoinGlobal[K, V, GK, GV, R any](s Stream[K, V], g GlobalTable[GK, GV], keyOf func(K, V) GK, f func(K, V, *GV) R) Stream[K, R] {
	return joinGlobal(s, g, "LeftJoinGlobal", keyOf, func(k K, v V, gv *GV) (R, bool) { return f(k, v, gv), true })
}

func joinGlobal[K, V, GK, GV, R any](s Stream[K, V], g GlobalTable[GK, GV], what string, keyOf func(K, V) GK, f func(K, V, *GV) (R, bool)) Stream[K, R] {
	b := s.p.b
	q := derive[K, V, K, R](s.p)
	q.ks = s.p.ks
	if g.b == nil || g.ks == nil || g.vs == nil {
		b.errorf("%s: the global table is not usable (FromGlobalTable failed)", what)
		return Stream[K, R]{q}
	}
	if g.b != b {
		b.errorf("%s: the global table %s belongs to another Builder", what, g.name)
		return Stream[K, R]{q}
	}
	s.p.to(func(t *task) func(Record[K, V]) {
		out := q.emitter(t)
		return func(r Record[K, V]) {
			kb, err := g.ks.Encode(keyOf(r.Key, r.Value))
			if err != nil {
				t.failf("%s with %s: encode key: %w", what, g.name, err)
				return
			}
			var gp *GV
			raw, ok, err := t.env.globals.get(g.name, kb)
			if err != nil {
				t.failf("%s with %s: %w", what, g.name, err)
				return
			}
			if ok {
				gv, err := g.vs.Decode(raw)
				if err != nil {
					t.failf("%s with %s: decode value: %w", what, g.name, err)
					return
				}
				gp = &gv
			}
			if res, ok := f(r.Key, r.Value, gp); ok {
				out(Record[K, R]{Key: r.Key, Value: res, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	})
	return Stream[K, R]{q}
}

// globalSet holds an instance's global tables in one DB: entries under each table's
// name, and per partition of its topic the offset of the last record applied, as the
// checkpoint "<name>@<partition>". Tasks read it while the tailers write it.
type globalSet struct {
	mu   sync.RWMutex
	db   store.DB
	defs []*globalDef
	next map[string]map[int32]int64 // table → partition → next offset to apply
}

func newGlobalSet(db store.DB, defs []*globalDef) *globalSet {
	return &globalSet{db: db, defs: defs, next: map[string]map[int32]int64{}}
}

func globalCheckpoint(name string, p int32) string { return name + "@" + strconv.Itoa(int(p)) }

func (g *globalSet) get(name string, key []byte) ([]byte, bool, error) {
	if g == nil {
		return nil, false, fmt.Errorf("global table %s: no global tables are running", name)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.db.Get(name, key)
}

// rangeOf calls fn for a table's entries in [lo, hi), in key order.
func (g *globalSet) rangeOf(name string, lo, hi []byte, fn func(k, v []byte) bool) error {
	g.mu.Lock() // a Pebble range keeps an iterator: one at a time
	defer g.mu.Unlock()
	return g.db.Range(name, lo, hi, fn)
}

func (g *globalSet) def(name string) *globalDef {
	for _, d := range g.defs {
		if d.name == name {
			return d
		}
	}
	return nil
}

// apply keeps the records of one fetch of a table's partition (checked by the
// table's serdes; refused ones are skipped and returned) with its checkpoint.
func (g *globalSet) apply(d *globalDef, p int32, recs []rawRecord, next int64) (skipped []rawRecord, err error) {
	writes := make([]store.Write, 0, len(recs))
	for _, r := range recs {
		if r.Key == nil {
			continue
		}
		if err := d.check(r.Key, r.Value); err != nil {
			skipped = append(skipped, r)
			continue
		}
		writes = append(writes, store.Write{Store: d.name, Key: r.Key, Value: r.Value, Delete: r.Value == nil})
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.db.Apply(writes, map[string]int64{globalCheckpoint(d.name, p): next - 1}); err != nil {
		return skipped, fmt.Errorf("streams: global table %s: apply: %w", d.name, err)
	}
	if g.next[d.name] == nil {
		g.next[d.name] = map[int32]int64{}
	}
	g.next[d.name][p] = next
	return skipped, nil
}

// positions returns the next offset to apply per partition of a table's topic.
func (g *globalSet) positions(name string) map[int32]int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := map[int32]int64{}
	for p, o := range g.next[name] {
		out[p] = o
	}
	return out
}
