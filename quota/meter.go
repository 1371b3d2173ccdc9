package quota

import (
	"sync"
	"sync/atomic"
	"time"
)

// Window is a sliding window of Slots slots of Slot each, as Kafka's quota samples
// (quota.window.num 11 of quota.window.size.seconds 1).
type Window struct {
	Slots int
	Slot  time.Duration
}

// DefaultWindow is Kafka's: 11 one-second slots.
var DefaultWindow = Window{Slots: 11, Slot: time.Second}

func (w Window) orDefault() Window {
	if w.Slots < 2 || w.Slot <= 0 {
		return DefaultWindow
	}
	return w
}

// Meter counts an amount (bytes, records, nanoseconds of handler time, mutations) over a
// sliding window, and in total since it was made. Callers add once per request or per
// flush — an aggregate, never per record — so a meter costs one uncontended mutex per
// call on the hot path. Safe for concurrent use.
type Meter struct {
	w     Window
	total atomic.Int64

	mu    sync.Mutex
	first int64    // unix ns of the first Add: the window starts no earlier
	slots []sample // ring, by slot index modulo len
}

type sample struct {
	idx int64 // the slot index the count is for
	n   int64
}

// NewMeter returns a meter over w (DefaultWindow when w is zero).
func NewMeter(w Window) *Meter {
	w = w.orDefault()
	return &Meter{w: w, first: -1, slots: make([]sample, w.Slots)}
}

// Add counts n at now.
func (m *Meter) Add(now time.Time, n int64) {
	m.total.Add(n)
	ns := now.UnixNano()
	idx := ns / int64(m.w.Slot)
	m.mu.Lock()
	if m.first < 0 {
		m.first = ns
	}
	s := &m.slots[idx%int64(len(m.slots))]
	if s.idx != idx {
		s.idx, s.n = idx, 0
	}
	s.n += n
	m.mu.Unlock()
}

// Total is everything counted since the meter was made.
func (m *Meter) Total() int64 { return m.total.Load() }

// Sum answers what the window ending at now holds and how long it spans: from the
// start of its oldest slot (or the first Add, when later) to now.
func (m *Meter) Sum(now time.Time) (sum int64, span time.Duration) {
	ns := now.UnixNano()
	idx := ns / int64(m.w.Slot)
	oldest := idx - int64(len(m.slots)) + 1
	m.mu.Lock()
	first := m.first
	for i := range m.slots {
		if s := m.slots[i]; s.idx >= oldest && s.idx <= idx {
			sum += s.n
		}
	}
	m.mu.Unlock()
	if first < 0 {
		return 0, 0
	}
	start := max(oldest*int64(m.w.Slot), first)
	return sum, time.Duration(ns - start)
}

// Delay answers how long the meter's owner must pause for the window to come back to
// limit per second: what it holds beyond limit × span, at limit per second. Zero at or
// under the limit. Kafka's throttle time ((rate − quota) / quota × window) is the same
// figure.
func (m *Meter) Delay(now time.Time, limit float64) time.Duration {
	if limit <= 0 {
		return 0
	}
	sum, span := m.Sum(now)
	over := float64(sum) - limit*span.Seconds()
	if over <= 0 {
		return 0
	}
	return time.Duration(over / limit * float64(time.Second))
}

// Meters is a set of meters by key — principals here, topics for per-topic usage —
// made on first use. Lookups of an existing key take a read lock only.
type Meters[K comparable] struct {
	w  Window
	mu sync.RWMutex
	m  map[K]*Meter
}

// NewMeters returns an empty set whose meters slide over w.
func NewMeters[K comparable](w Window) *Meters[K] {
	return &Meters[K]{w: w.orDefault(), m: map[K]*Meter{}}
}

// Get returns k's meter, made on first use.
func (ms *Meters[K]) Get(k K) *Meter {
	ms.mu.RLock()
	m := ms.m[k]
	ms.mu.RUnlock()
	if m != nil {
		return m
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m = ms.m[k]; m == nil {
		m = NewMeter(ms.w)
		ms.m[k] = m
	}
	return m
}

// Add counts n for k at now (one call per request or flush).
func (ms *Meters[K]) Add(k K, now time.Time, n int64) { ms.Get(k).Add(now, n) }

// Each calls fn with every key and its meter (for metrics and usage reports).
func (ms *Meters[K]) Each(fn func(K, *Meter)) {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	for k, m := range ms.m {
		fn(k, m)
	}
}

// Len is the number of keys.
func (ms *Meters[K]) Len() int {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	return len(ms.m)
}
