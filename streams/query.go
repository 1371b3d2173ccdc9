package streams

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
)

// Interactive queries: reading a running application's key-value stores (and its
// global tables) from outside. A key lives in one task — partition n of its store's
// subtopology, n the murmur2 partition of its encoded bytes, as the producer of an
// input keyed by it would choose — and a task is queryable only on the instance that
// runs it, from the moment its stores are restored until its revocation begins: a
// lookup reads the committed state, and anywhere else, or while the task restores or
// moves, it answers ErrNotAvailable rather than a stale or a missing value. Which
// instance runs what comes from the compacted topic <app>-instances, where each
// instance publishes its endpoint (Config.ApplicationServer) and running tasks;
// that is only routing: the instance asked checks its own tasks before answering.

// ErrNotAvailable: the key's task is not queryable now — restoring, moving between
// instances (a rebalance), or its instance unknown or unreachable. Retry shortly.
var ErrNotAvailable = errors.New("streams: not available")

// ErrNotQueryable: the store is none of the topology's key-value stores or global
// tables.
var ErrNotQueryable = errors.New("streams: no queryable store of that name")

// liveTask is a running task's state as queries read it. open is cleared, under mu,
// before the task's stores close or it starts to move.
type liveTask struct {
	r    *taskRunner
	mu   sync.RWMutex
	rd   store.Reader
	open bool
}

// queries is an App's interactive-query state.
type queries struct {
	mu        sync.Mutex
	live      map[TaskID]*liveTask
	changed   chan struct{} // the running tasks changed: publish them (capacity 1)
	instances map[string]instanceInfo
	http      *http.Client
}

func newQueries() *queries {
	return &queries{live: map[TaskID]*liveTask{}, changed: make(chan struct{}, 1), instances: map[string]instanceInfo{}}
}

func (q *queries) notify() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// register makes a restored task queryable.
func (q *queries) register(r *taskRunner, db store.DB) {
	q.mu.Lock()
	q.live[r.id] = &liveTask{r: r, rd: db.Reader(), open: true}
	q.mu.Unlock()
	q.notify()
}

// unregister ends queries of r's task, waiting for those reading it. Idempotent.
func (q *queries) unregister(r *taskRunner) {
	q.mu.Lock()
	lt := q.live[r.id]
	if lt == nil || lt.r != r {
		q.mu.Unlock()
		return
	}
	delete(q.live, r.id)
	q.mu.Unlock()
	lt.mu.Lock()
	lt.open = false
	lt.mu.Unlock()
	q.notify()
}

// running lists the queryable tasks, in order.
func (q *queries) running() []TaskID {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]TaskID, 0, len(q.live))
	for id := range q.live {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Subtopology != out[j].Subtopology {
			return out[i].Subtopology < out[j].Subtopology
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// read runs f on the task's reader while the task stays queryable.
func (q *queries) read(id TaskID, f func(store.Reader) error) error {
	q.mu.Lock()
	lt := q.live[id]
	q.mu.Unlock()
	if lt == nil {
		return ErrNotAvailable
	}
	lt.mu.RLock()
	defer lt.mu.RUnlock()
	if !lt.open {
		return ErrNotAvailable
	}
	return f(lt.rd)
}

// queryable is a store queries may read: a task's key-value store, or a global
// table (sub -1).
type queryable struct {
	name    string
	sub     int
	stamped bool
}

func (a *App) queryable(name string) (queryable, error) {
	for _, s := range a.topo.subs {
		for _, sd := range s.stores {
			if sd.name == name && sd.kind == kvStore {
				return queryable{name: name, sub: s.index, stamped: sd.stamped}, nil
			}
		}
	}
	for _, g := range a.topo.b.globals {
		if g.name == name {
			return queryable{name: name, sub: -1}, nil
		}
	}
	return queryable{}, fmt.Errorf("%w: %s", ErrNotQueryable, name)
}

// Owner is where a key of a store lives.
type Owner struct {
	Store     string `json:"store"`
	Partition int32  `json:"partition"` // -1: a global table, on every instance
	Instance  string `json:"instance,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	Local     bool   `json:"local"` // this instance runs it, queryable now
}

// KeyOwner answers which instance holds key (its encoded bytes) of a store: this
// one, another (as <app>-instances last said), or ErrNotAvailable when no instance
// is known to run its task.
func (a *App) KeyOwner(storeName string, key []byte) (Owner, error) {
	qs, err := a.queryable(storeName)
	if err != nil {
		return Owner{}, err
	}
	if qs.sub < 0 {
		return Owner{Store: storeName, Partition: -1, Instance: a.cfg.InstanceID, Endpoint: a.cfg.ApplicationServer, Local: a.globalsReady()}, nil
	}
	n, ok := a.taskCount(qs.sub)
	if !ok {
		return Owner{}, fmt.Errorf("%w: the application has not started", ErrNotAvailable)
	}
	return a.partitionOwner(storeName, TaskID{qs.sub, client.KeyPartition(key, n)})
}

func (a *App) partitionOwner(storeName string, id TaskID) (Owner, error) {
	o := Owner{Store: storeName, Partition: id.Partition}
	if a.iq.read(id, func(store.Reader) error { return nil }) == nil {
		o.Instance, o.Endpoint, o.Local = a.cfg.InstanceID, a.cfg.ApplicationServer, true
		return o, nil
	}
	inst, info, ok := a.iq.claimant(id, a.cfg.InstanceID)
	if !ok {
		return o, fmt.Errorf("%w: no instance runs task %s of store %s now", ErrNotAvailable, id, storeName)
	}
	o.Instance, o.Endpoint = inst, info.Endpoint
	return o, nil
}

func (a *App) taskCount(sub int) (int32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.counts[sub]
	return n, ok && n > 0
}

func (a *App) globalsReady() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.globals != nil
}

// Get returns a store's value for key (encoded bytes) from whichever instance holds
// it: read here when this instance runs its task, asked of its instance otherwise.
// found is false when the key has no value; ErrNotAvailable when its task is not
// queryable anywhere now.
func (a *App) Get(ctx context.Context, storeName string, key []byte) (value []byte, found bool, err error) {
	qs, err := a.queryable(storeName)
	if err != nil {
		return nil, false, err
	}
	if qs.sub < 0 {
		return a.localGet(qs, TaskID{}, key)
	}
	o, err := a.KeyOwner(storeName, key)
	if err != nil {
		return nil, false, err
	}
	if o.Local {
		return a.localGet(qs, TaskID{qs.sub, o.Partition}, key)
	}
	return a.remoteGet(ctx, o, key)
}

// localGet reads a key of a task this instance runs (or of a global table).
func (a *App) localGet(qs queryable, id TaskID, key []byte) (v []byte, found bool, err error) {
	if qs.sub < 0 {
		if !a.globalsReady() {
			return nil, false, fmt.Errorf("%w: the global tables are not restored yet", ErrNotAvailable)
		}
		a.mu.Lock()
		g := a.globals
		a.mu.Unlock()
		return g.get(qs.name, key)
	}
	err = a.iq.read(id, func(rd store.Reader) error {
		var rerr error
		v, found, rerr = rd.Get(qs.name, key)
		return rerr
	})
	if err != nil {
		return nil, false, err
	}
	if found && qs.stamped {
		if _, v, found = unstamp(v); !found {
			return nil, false, fmt.Errorf("streams: store %s: a value without its timestamp", qs.name)
		}
	}
	return v, found, nil
}

// Range returns a store's entries with from <= key < to (to nil: no bound), in
// order of their encoded keys, at most limit of them (<= 0: 1,000), gathered from
// every partition's instance; ErrNotAvailable when any partition is not queryable
// now — never a partial answer.
func (a *App) Range(ctx context.Context, storeName string, from, to []byte, limit int) ([]KeyValue[[]byte, []byte], error) {
	qs, err := a.queryable(storeName)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	if qs.sub < 0 {
		return a.localRange(qs, TaskID{}, from, to, limit)
	}
	n, ok := a.taskCount(qs.sub)
	if !ok {
		return nil, fmt.Errorf("%w: the application has not started", ErrNotAvailable)
	}
	var all []KeyValue[[]byte, []byte]
	for p := range n {
		kvs, err := a.partitionRange(ctx, qs, p, from, to, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, kvs...)
	}
	slices.SortFunc(all, func(x, y KeyValue[[]byte, []byte]) int { return bytes.Compare(x.Key, y.Key) })
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// partitionRange is Range over one partition, here or at its instance.
func (a *App) partitionRange(ctx context.Context, qs queryable, p int32, from, to []byte, limit int) ([]KeyValue[[]byte, []byte], error) {
	o, err := a.partitionOwner(qs.name, TaskID{qs.sub, p})
	if err != nil {
		return nil, err
	}
	if o.Local {
		return a.localRange(qs, TaskID{qs.sub, p}, from, to, limit)
	}
	return a.remoteRange(ctx, o, from, to, limit)
}

func (a *App) localRange(qs queryable, id TaskID, from, to []byte, limit int) ([]KeyValue[[]byte, []byte], error) {
	var out []KeyValue[[]byte, []byte]
	var bad bool
	fn := func(k, v []byte) bool {
		if qs.stamped {
			var ok bool
			if _, v, ok = unstamp(v); !ok {
				bad = true
				return false
			}
		}
		out = append(out, KeyValue[[]byte, []byte]{bytes.Clone(k), bytes.Clone(v)})
		return len(out) < limit
	}
	var err error
	if qs.sub < 0 {
		if !a.globalsReady() {
			return nil, fmt.Errorf("%w: the global tables are not restored yet", ErrNotAvailable)
		}
		a.mu.Lock()
		g := a.globals
		a.mu.Unlock()
		err = g.rangeOf(qs.name, from, to, fn)
	} else {
		err = a.iq.read(id, func(rd store.Reader) error { return rd.Range(qs.name, from, to, fn) })
	}
	if err == nil && bad {
		err = fmt.Errorf("streams: store %s: a value without its timestamp", qs.name)
	}
	return out, err
}

// Lookup is App.Get with typed keys and values: k encoded with ks (the store's key
// serde), the value decoded with vs.
func Lookup[K, V any](ctx context.Context, a *App, storeName string, ks serde.Serde[K], vs serde.Serde[V], k K) (v V, found bool, err error) {
	kb, err := ks.Encode(k)
	if err != nil {
		return v, false, fmt.Errorf("streams: lookup in %s: encode key: %w", storeName, err)
	}
	raw, found, err := a.Get(ctx, storeName, kb)
	if err != nil || !found {
		return v, found, err
	}
	if v, err = vs.Decode(raw); err != nil {
		return v, false, fmt.Errorf("streams: lookup in %s: decode value: %w", storeName, err)
	}
	return v, true, nil
}
