package store

import (
	"bytes"
	"strings"
	"sync"

	"github.com/RaduBerinde/btreemap"
)

// Memory is a DB held in memory: nothing survives the process, so a task using it
// restores its stores from the changelog's start. Each store is a B-tree, so a range
// costs what it returns, not the store's size (joins and windows range on every
// record).
type Memory struct {
	mu     sync.RWMutex
	data   map[string]*btreemap.BTreeMap[string, []byte]
	checks map[string]int64
	closed bool
}

var _ DB = (*Memory)(nil)

// NewMemory returns an empty in-memory DB.
func NewMemory() *Memory {
	return &Memory{data: map[string]*btreemap.BTreeMap[string, []byte]{}, checks: map[string]int64{}}
}

func (m *Memory) Get(store string, key []byte) ([]byte, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, false, ErrClosed
	}
	s := m.data[store]
	if s == nil {
		return nil, false, nil
	}
	_, v, ok := s.Get(string(key))
	return bytes.Clone(v), ok, nil
}

// rangeChunk is how many entries Range copies under the lock at a time: fn runs
// without it, so it may read (or, between chunks, write) the DB.
const rangeChunk = 256

func (m *Memory) Range(store string, lo, hi []byte, fn func(key, value []byte) bool) error {
	type kv struct{ k, v []byte }
	from := btreemap.GE(string(lo))
	upper := btreemap.Max[string]()
	if hi != nil {
		upper = btreemap.LT(string(hi))
	}
	buf := make([]kv, 0, rangeChunk)
	for {
		m.mu.RLock()
		if m.closed {
			m.mu.RUnlock()
			return ErrClosed
		}
		buf = buf[:0]
		if s := m.data[store]; s != nil {
			s.AscendFunc(from, upper, func(k string, v []byte) bool {
				buf = append(buf, kv{[]byte(k), bytes.Clone(v)})
				return len(buf) < rangeChunk
			})
		}
		m.mu.RUnlock()
		for _, e := range buf {
			if !fn(e.k, e.v) {
				return nil
			}
		}
		if len(buf) < rangeChunk {
			return nil
		}
		from = btreemap.GT(string(buf[len(buf)-1].k))
	}
}

func (m *Memory) Apply(writes []Write, checkpoints map[string]int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, w := range writes {
		s := m.data[w.Store]
		if s == nil {
			s = btreemap.New[string, []byte](32, strings.Compare)
			m.data[w.Store] = s
		}
		if w.Delete {
			s.Delete(string(w.Key))
		} else {
			s.ReplaceOrInsert(string(w.Key), bytes.Clone(w.Value))
		}
	}
	for s, off := range checkpoints {
		m.checks[s] = off
	}
	return nil
}

func (m *Memory) Checkpoints() (map[string]int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make(map[string]int64, len(m.checks))
	for k, v := range m.checks {
		out[k] = v
	}
	return out, nil
}

// Reader is m itself: Memory takes its lock on every call (store.DB).
func (m *Memory) Reader() Reader { return m }

func (m *Memory) Wipe(store string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.data, store)
	delete(m.checks, store)
	return nil
}

func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
