package streams

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
	"github.com/strata-io/strata/streams/window"
)

// StoreSpec declares a store of a processor (ProcessWithStores).
type StoreSpec struct {
	name      string
	kind      storeKind
	retention int64
	sessions  bool
}

// KeyValueStoreSpec declares a key-value store, opened with KVStore.
func KeyValueStoreSpec(name string) StoreSpec { return StoreSpec{name: name, kind: kvStore} }

// WindowStoreSpec declares a window store, opened with WindowStoreOf: values by key and
// window start. Entries whose start is more than retention behind the task's stream
// time are gone: reads skip them, a put of one is dropped (as Kafka drops writes to
// expired segments), and the runtime deletes them (0: kept until deleted).
func WindowStoreSpec(name string, retention time.Duration) StoreSpec {
	return StoreSpec{name: name, kind: timedStore, retention: retention.Milliseconds()}
}

// SessionStoreSpec declares a session store, opened with SessionStoreOf: values by key
// and session. Sessions whose last instant is more than retention behind the task's
// stream time are gone: reads skip them, a put of one is dropped, and the runtime
// deletes them (0: kept until removed).
func SessionStoreSpec(name string, retention time.Duration) StoreSpec {
	return StoreSpec{name: name, kind: timedStore, retention: retention.Milliseconds(), sessions: true}
}

func declared(t *task, name string, kind storeKind, sessions bool) (*storeDef, bool) {
	for _, sd := range t.sub.stores {
		if sd.name == name && sd.kind == kind && sd.sessions == sessions {
			return sd, true
		}
	}
	return nil, false
}

// expired says a put at time tm (a window's start, a session's last instant) is past
// the store's retention.
func expired(t *task, retention, tm int64) bool {
	return retention > 0 && t.hasTime && tm < t.streamTime-retention
}

// WindowStore is a typed view of a processor's window store (Kafka Streams'
// WindowStore): one value per key and window start. Reads see the committed state
// plus everything written since; writes become durable with the task's next
// confirmed commit.
type WindowStore[K, V any] struct {
	t         *task
	retention int64
	name      string
	s         store.Timed
	ks        serde.Serde[K]
	vs        serde.Serde[V]
}

// WindowStoreOf opens the window store name, declared with WindowStoreSpec.
func WindowStoreOf[K, V any](src StoreSource, name string, ks serde.Serde[K], vs serde.Serde[V]) (*WindowStore[K, V], error) {
	t := src.taskOf()
	sd, ok := declared(t, name, timedStore, false)
	if !ok {
		return nil, fmt.Errorf("%w: window store %q (declare it with streams.WindowStoreSpec)", ErrNoStore, name)
	}
	return &WindowStore[K, V]{t: t, retention: sd.retentionMs, name: name, s: t.timed(name), ks: ks, vs: vs}, nil
}

func (w *WindowStore[K, V]) key(k K) ([]byte, error) {
	kb, err := w.ks.Encode(k)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode key: %w", w.name, err)
	}
	return kb, nil
}

// Put sets k's value in the window starting at start (dropped if the window is past
// the retention).
func (w *WindowStore[K, V]) Put(k K, start time.Time, v V) error {
	if expired(w.t, w.retention, ms(start)) {
		return nil
	}
	kb, err := w.key(k)
	if err != nil {
		return err
	}
	vb, err := w.vs.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: encode value: %w", w.name, err)
	}
	return w.s.Put(kb, ms(start), 0, vb)
}

// Get returns k's value in the window starting at start.
func (w *WindowStore[K, V]) Get(k K, start time.Time) (v V, ok bool, err error) {
	kb, err := w.key(k)
	if err != nil {
		return v, false, err
	}
	raw, ok, err := w.s.Get(kb, ms(start), 0)
	if err != nil || !ok || expired(w.t, w.retention, ms(start)) {
		return v, false, err
	}
	v, err = w.vs.Decode(raw)
	return v, err == nil, err
}

// Delete removes k's value in the window starting at start.
func (w *WindowStore[K, V]) Delete(k K, start time.Time) error {
	kb, err := w.key(k)
	if err != nil {
		return err
	}
	return w.s.Delete(kb, ms(start), 0)
}

// Fetch calls fn for k's windows starting from from to to (both included), oldest
// first, until fn returns false.
func (w *WindowStore[K, V]) Fetch(k K, from, to time.Time, fn func(start time.Time, v V) bool) error {
	kb, err := w.key(k)
	if err != nil {
		return err
	}
	var derr error
	err = w.s.Fetch(kb, ms(from), ms(to), func(start, _ int64, raw []byte) bool {
		if expired(w.t, w.retention, start) {
			return true
		}
		v, err := w.vs.Decode(raw)
		if err != nil {
			derr = fmt.Errorf("store %s: decode value: %w", w.name, err)
			return false
		}
		return fn(fromMs(start), v)
	})
	if derr != nil {
		return derr
	}
	return err
}

// FetchAll calls fn for every key's windows starting from from to to (both
// included), by start then key, until fn returns false.
func (w *WindowStore[K, V]) FetchAll(from, to time.Time, fn func(k K, start time.Time, v V) bool) error {
	var refs []store.Ref
	if err := w.s.Indexed(ms(from), ms(to)+1, func(key []byte, tm, n int64) bool {
		if !expired(w.t, w.retention, tm) {
			refs = append(refs, store.Ref{Key: append([]byte(nil), key...), Time: tm, N: n})
		}
		return true
	}); err != nil {
		return err
	}
	for _, r := range refs {
		raw, ok, err := w.s.Get(r.Key, r.Time, r.N)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		k, err := w.ks.Decode(r.Key)
		if err != nil {
			return fmt.Errorf("store %s: decode key: %w", w.name, err)
		}
		v, err := w.vs.Decode(raw)
		if err != nil {
			return fmt.Errorf("store %s: decode value: %w", w.name, err)
		}
		if !fn(k, fromMs(r.Time), v) {
			return nil
		}
	}
	return nil
}

// SessionStore is a typed view of a processor's session store (Kafka Streams'
// SessionStore): one value per key and session. A session is a window.Window from its
// first record's time to its last record's plus 1ms.
type SessionStore[K, V any] struct {
	t         *task
	retention int64
	name      string
	s         store.Timed
	ks        serde.Serde[K]
	vs        serde.Serde[V]
}

// SessionStoreOf opens the session store name, declared with SessionStoreSpec.
func SessionStoreOf[K, V any](src StoreSource, name string, ks serde.Serde[K], vs serde.Serde[V]) (*SessionStore[K, V], error) {
	t := src.taskOf()
	sd, ok := declared(t, name, timedStore, true)
	if !ok {
		return nil, fmt.Errorf("%w: session store %q (declare it with streams.SessionStoreSpec)", ErrNoStore, name)
	}
	return &SessionStore[K, V]{t: t, retention: sd.retentionMs, name: name, s: t.timed(name), ks: ks, vs: vs}, nil
}

func (s *SessionStore[K, V]) key(k K) ([]byte, error) {
	kb, err := s.ks.Encode(k)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode key: %w", s.name, err)
	}
	return kb, nil
}

// Put sets k's value for the session w (dropped if the session is past the
// retention).
func (s *SessionStore[K, V]) Put(k K, w window.Window, v V) error {
	if w.End <= w.Start {
		return fmt.Errorf("store %s: session [%d,%d): empty", s.name, w.Start, w.End)
	}
	if expired(s.t, s.retention, w.End-1) {
		return nil
	}
	kb, err := s.key(k)
	if err != nil {
		return err
	}
	vb, err := s.vs.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: encode value: %w", s.name, err)
	}
	return s.s.Put(kb, w.End-1, w.Start, vb)
}

// Get returns k's value for the session w.
func (s *SessionStore[K, V]) Get(k K, w window.Window) (v V, ok bool, err error) {
	kb, err := s.key(k)
	if err != nil {
		return v, false, err
	}
	raw, ok, err := s.s.Get(kb, w.End-1, w.Start)
	if err != nil || !ok || expired(s.t, s.retention, w.End-1) {
		return v, false, err
	}
	v, err = s.vs.Decode(raw)
	return v, err == nil, err
}

// Remove removes k's session w.
func (s *SessionStore[K, V]) Remove(k K, w window.Window) error {
	kb, err := s.key(k)
	if err != nil {
		return err
	}
	return s.s.Delete(kb, w.End-1, w.Start)
}

// FindSessions calls fn for k's sessions that end at or after earliestEnd (their last
// instant) and start at or before latestStart — those a record at t with a gap g
// merges with are FindSessions(k, t-g, t+g) — by end then start, until fn returns
// false.
func (s *SessionStore[K, V]) FindSessions(k K, earliestEnd, latestStart time.Time, fn func(w window.Window, v V) bool) error {
	kb, err := s.key(k)
	if err != nil {
		return err
	}
	var derr error
	ls := ms(latestStart)
	err = s.s.Fetch(kb, ms(earliestEnd), 1<<63-1, func(end, start int64, raw []byte) bool {
		if start > ls || expired(s.t, s.retention, end) {
			return true
		}
		v, err := s.vs.Decode(raw)
		if err != nil {
			derr = fmt.Errorf("store %s: decode value: %w", s.name, err)
			return false
		}
		return fn(window.Window{Start: start, End: end + 1}, v)
	})
	if derr != nil {
		return derr
	}
	return err
}
