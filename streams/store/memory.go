package store

import (
	"bytes"
	"slices"
	"sync"
)

// Memory is a DB held in memory: nothing survives the process, so a task using it
// restores its stores from the changelog's start.
type Memory struct {
	mu     sync.RWMutex
	data   map[string]map[string][]byte
	checks map[string]int64
	closed bool
}

var _ DB = (*Memory)(nil)

// NewMemory returns an empty in-memory DB.
func NewMemory() *Memory {
	return &Memory{data: map[string]map[string][]byte{}, checks: map[string]int64{}}
}

func (m *Memory) Get(store string, key []byte) ([]byte, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, false, ErrClosed
	}
	v, ok := m.data[store][string(key)]
	return bytes.Clone(v), ok, nil
}

func (m *Memory) Range(store string, lo, hi []byte, fn func(key, value []byte) bool) error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return ErrClosed
	}
	type kv struct{ k, v []byte }
	var sel []kv
	for k, v := range m.data[store] {
		kb := []byte(k)
		if bytes.Compare(kb, lo) >= 0 && (hi == nil || bytes.Compare(kb, hi) < 0) {
			sel = append(sel, kv{kb, bytes.Clone(v)})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(sel, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	for _, e := range sel {
		if !fn(e.k, e.v) {
			break
		}
	}
	return nil
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
			s = map[string][]byte{}
			m.data[w.Store] = s
		}
		if w.Delete {
			delete(s, string(w.Key))
		} else {
			s[string(w.Key)] = bytes.Clone(w.Value)
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
