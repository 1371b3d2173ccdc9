package streams

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/streams/serde"
)

// Processor is the lower-level API under the DSL: a node that takes records one at a
// time and forwards any number of records, with stores and punctuators through its
// context. One instance runs per task, made by the supplier given to Process.
type Processor[KIn, VIn, KOut, VOut any] interface {
	// Init is called once, before any record, with the context to keep.
	Init(ctx *ProcessorContext[KOut, VOut]) error
	// Process handles one record. An error stops the task (nothing of the commit in
	// progress becomes visible).
	Process(r Record[KIn, VIn]) error
	// Close is called when the task closes.
	Close() error
}

// ProcessorContext is a processor's view of its task.
type ProcessorContext[K, V any] struct {
	t   *task
	out func(Record[K, V])
}

// Forward hands r to the downstream nodes.
func (c *ProcessorContext[K, V]) Forward(r Record[K, V]) { c.out(r) }

// Schedule calls fn every interval: on stream time (deterministic, only as records
// arrive) or on the wall clock. What fn forwards or writes goes into the next commit
// like anything else.
func (c *ProcessorContext[K, V]) Schedule(interval time.Duration, kind PunctuationType, fn func(now time.Time) error) error {
	if interval < time.Millisecond {
		return fmt.Errorf("streams: punctuator interval %s: at least 1ms", interval)
	}
	c.t.punct = append(c.t.punct, &punctuator{kind: kind, interval: interval.Milliseconds(), fn: fn})
	return nil
}

// StreamTime is the largest record timestamp the task has processed; ok is false
// before its first record.
func (c *ProcessorContext[K, V]) StreamTime() (time.Time, bool) {
	return fromMs(c.t.streamTime), c.t.hasTime
}

// TaskID is the task the processor runs in.
func (c *ProcessorContext[K, V]) TaskID() TaskID { return c.t.id }

// Input is the position of the record being processed; ok is false in a punctuator.
func (c *ProcessorContext[K, V]) Input() (Position, bool) {
	if c.t.cur == nil {
		return Position{}, false
	}
	return Position{c.t.cur.Topic, c.t.cur.Partition, c.t.cur.Offset}, true
}

func (c *ProcessorContext[K, V]) taskOf() *task { return c.t }

// StoreSource is what KVStore opens stores through: a ProcessorContext.
type StoreSource interface{ taskOf() *task }

// Process runs a custom processor on the stream. name identifies it in errors; stores
// names the key-value stores it uses (each with its changelog <app>-<store>-changelog),
// opened with KVStore in Init. The output counts as re-keyed (the processor may change
// keys): a later grouping repartitions it. ProcessWithStores declares window and
// session stores too.
func Process[K, V, K2, V2 any](s Stream[K, V], name string, supplier func() Processor[K, V, K2, V2], stores ...string) Stream[K2, V2] {
	specs := make([]StoreSpec, len(stores))
	for i, st := range stores {
		specs[i] = KeyValueStoreSpec(st)
	}
	return ProcessWithStores(s, name, supplier, specs...)
}

// ProcessWithStores is Process with the processor's stores of every kind: key-value
// (KeyValueStoreSpec, opened with KVStore), window (WindowStoreSpec, WindowStoreOf) and
// session (SessionStoreSpec, SessionStoreOf) stores, each with its changelog.
func ProcessWithStores[K, V, K2, V2 any](s Stream[K, V], name string, supplier func() Processor[K, V, K2, V2], stores ...StoreSpec) Stream[K2, V2] {
	b := s.p.b
	q := derive[K, V, K2, V2](s.p)
	q.rekeyed = true
	if !b.claim(name, "processor") {
		return Stream[K2, V2]{q}
	}
	for _, st := range stores {
		if st.retention < 0 {
			b.errorf("processor %s: store %s: retention %dms must not be negative", name, st.name, st.retention)
			continue
		}
		if b.claim(st.name, "store of processor "+name) {
			b.stores[st.name] = &storeDef{name: st.name, kind: st.kind, node: q.id, retentionMs: st.retention, sessions: st.sessions}
		}
	}
	s.p.to(func(t *task) func(Record[K, V]) {
		ctx := &ProcessorContext[K2, V2]{t: t, out: q.emitter(t)}
		p := supplier()
		if err := p.Init(ctx); err != nil {
			t.failf("processor %s: init: %w", name, err)
		}
		t.closers = append(t.closers, p.Close)
		type retained struct {
			exp       *expirer
			retention int64
		}
		var timed []retained
		for _, st := range stores {
			if st.kind == timedStore && st.retention > 0 {
				timed = append(timed, retained{newExpirer(t.timed(st.name), st.retention/16), st.retention})
			}
		}
		return func(r Record[K, V]) {
			if err := p.Process(r); err != nil {
				t.failf("processor %s: %w", name, err)
				return
			}
			for _, st := range timed { // what is older than the retention goes
				st.exp.expire(t, t.streamTime-st.retention)
			}
		}
	})
	return Stream[K2, V2]{q}
}

// KeyValueStore is a typed view of a task's key-value store. Reads see the committed
// state plus everything written since; writes become durable with the task's next
// confirmed commit.
type KeyValueStore[K, V any] struct {
	t    *task
	name string
	ks   serde.Serde[K]
	vs   serde.Serde[V]
}

// ErrNoStore: the store is not one the processor declared.
var ErrNoStore = errors.New("streams: no such store in this task")

// KVStore opens the store name, declared with Process, in the processor's task.
func KVStore[K, V any](src StoreSource, name string, ks serde.Serde[K], vs serde.Serde[V]) (*KeyValueStore[K, V], error) {
	t := src.taskOf()
	for _, sd := range t.sub.stores {
		if sd.name == name && sd.kind == kvStore {
			return &KeyValueStore[K, V]{t: t, name: name, ks: ks, vs: vs}, nil
		}
	}
	return nil, fmt.Errorf("%w: %q (declare it in streams.Process)", ErrNoStore, name)
}

// Get returns the value of k; ok is false when there is none.
func (s *KeyValueStore[K, V]) Get(k K) (v V, ok bool, err error) {
	kb, err := s.ks.Encode(k)
	if err != nil {
		return v, false, fmt.Errorf("store %s: encode key: %w", s.name, err)
	}
	raw, ok := s.t.get(s.name, kb)
	if s.t.err != nil {
		return v, false, s.t.err
	}
	if !ok {
		return v, false, nil
	}
	v, err = s.vs.Decode(raw)
	if err != nil {
		return v, false, fmt.Errorf("store %s: decode value: %w", s.name, err)
	}
	return v, true, nil
}

// Put sets k to v.
func (s *KeyValueStore[K, V]) Put(k K, v V) error {
	kb, err := s.ks.Encode(k)
	if err != nil {
		return fmt.Errorf("store %s: encode key: %w", s.name, err)
	}
	vb, err := s.vs.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: encode value: %w", s.name, err)
	}
	s.t.put(s.name, kb, vb)
	return nil
}

// Delete removes k.
func (s *KeyValueStore[K, V]) Delete(k K) error {
	kb, err := s.ks.Encode(k)
	if err != nil {
		return fmt.Errorf("store %s: encode key: %w", s.name, err)
	}
	s.t.del(s.name, kb)
	return nil
}

// All calls fn for every entry in the byte order of the encoded keys, until fn
// returns false.
func (s *KeyValueStore[K, V]) All(fn func(K, V) bool) error {
	var ferr error
	s.t.rangeStore(s.name, nil, nil, func(kb, vb []byte) bool {
		k, err := s.ks.Decode(kb)
		if err != nil {
			ferr = fmt.Errorf("store %s: decode key: %w", s.name, err)
			return false
		}
		v, err := s.vs.Decode(vb)
		if err != nil {
			ferr = fmt.Errorf("store %s: decode value: %w", s.name, err)
			return false
		}
		return fn(k, v)
	})
	if ferr != nil {
		return ferr
	}
	return s.t.err
}
