package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// KV is one store seen as a byte key-value map, the thing the window and session
// layouts are built on: a task's store (its uncommitted writes over the committed
// state) or, in tests, a DB's store written directly. Range calls fn for lo <= key <
// hi (hi nil: no bound) in byte order until fn returns false; fn must not keep key or
// value, nor write to the store (collect first, write after).
type KV interface {
	Get(key []byte) ([]byte, bool, error)
	Put(key, value []byte) error
	Delete(key []byte) error
	Range(lo, hi []byte, fn func(key, value []byte) bool) error
}

// Direct is a KV over one store of a DB that applies each write at once, without a
// checkpoint: for tests and the conformance suite.
func Direct(db DB, store string) KV { return direct{db, store} }

type direct struct {
	db    DB
	store string
}

func (d direct) Get(key []byte) ([]byte, bool, error) { return d.db.Get(d.store, key) }
func (d direct) Put(key, value []byte) error {
	return d.db.Apply([]Write{{Store: d.store, Key: key, Value: value}}, nil)
}
func (d direct) Delete(key []byte) error {
	return d.db.Apply([]Write{{Store: d.store, Key: key, Delete: true}}, nil)
}
func (d direct) Range(lo, hi []byte, fn func(key, value []byte) bool) error {
	return d.db.Range(d.store, lo, hi, fn)
}

// Timed is the layout of window and session stores: values by (key, time, n) — a
// window's start and a sequence number keeping duplicates apart, or a session's end
// and start — held twice over in one store's key space:
//
//	'e' | uint32 len(key) | key | time | n  →  value   (entries: a key's by time)
//	'i' | time | uint32 len(key) | key | n  →  ""      (the index: everything by time)
//	'm' | name                              →  value   (the operator's own metadata)
//
// with times and n as 8 big-endian bytes, sign bit flipped, so they sort as numbers.
// A key's entries in a time range is one range scan; so is everything before a time,
// which is how windows close and old entries expire without scanning the rest. Every
// one of these is an ordinary store entry: changelogged and restored like any other.
type Timed struct{ kv KV }

// NewTimed lays out kv as a Timed store.
func NewTimed(kv KV) Timed { return Timed{kv} }

const (
	entryTag = 'e'
	indexTag = 'i'
	metaTag  = 'm'
)

// ErrCorrupt: a stored key does not follow the layout.
var ErrCorrupt = errors.New("store: key does not follow the timed layout")

func putOrdered(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63)) }
func getOrdered(b []byte) int64           { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func keyPrefix(tag byte, key []byte) []byte {
	b := make([]byte, 0, 1+4+len(key)+16)
	b = append(b, tag)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	return append(b, key...)
}

// EntryKey is the stored key of (key, tm, n) in a Timed store: what a test reading a
// store's raw entries looks up.
func EntryKey(key []byte, tm, n int64) []byte { return entryKey(key, tm, n) }

func entryKey(key []byte, tm, n int64) []byte {
	return putOrdered(putOrdered(keyPrefix(entryTag, key), tm), n)
}

func indexKey(key []byte, tm, n int64) []byte {
	b := make([]byte, 0, 1+8+4+len(key)+8)
	b = putOrdered(append(b, indexTag), tm)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	return putOrdered(append(b, key...), n)
}

// parseIndex splits an index key into key, time and n (key aliases k).
func parseIndex(k []byte) ([]byte, int64, int64, error) {
	if len(k) < 1+8+4+8 || k[0] != indexTag {
		return nil, 0, 0, fmt.Errorf("%w: index key %x", ErrCorrupt, k)
	}
	tm := getOrdered(k[1:9])
	n := int(binary.BigEndian.Uint32(k[9:13]))
	if len(k) != 13+n+8 {
		return nil, 0, 0, fmt.Errorf("%w: index key %x", ErrCorrupt, k)
	}
	return k[13 : 13+n], tm, getOrdered(k[13+n:]), nil
}

// Get returns the value at (key, tm, n).
func (s Timed) Get(key []byte, tm, n int64) ([]byte, bool, error) {
	return s.kv.Get(entryKey(key, tm, n))
}

// Put sets the value at (key, tm, n), indexing it if it is new.
func (s Timed) Put(key []byte, tm, n int64, value []byte) error {
	ek := entryKey(key, tm, n)
	_, ok, err := s.kv.Get(ek)
	if err != nil {
		return err
	}
	if !ok {
		if err := s.kv.Put(indexKey(key, tm, n), []byte{}); err != nil {
			return err
		}
	}
	return s.kv.Put(ek, value)
}

// Append stores value at (key, tm) under the next free n — 0, 1, … — keeping every
// value put at one time (a join buffer's duplicates), and returns that n.
func (s Timed) Append(key []byte, tm int64, value []byte) (int64, error) {
	n := int64(0)
	pre := putOrdered(keyPrefix(entryTag, key), tm)
	err := s.kv.Range(pre, prefixEnd(pre), func(k, _ []byte) bool {
		if len(k) == len(pre)+8 {
			n = max(n, getOrdered(k[len(pre):])+1)
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if err := s.kv.Put(indexKey(key, tm, n), []byte{}); err != nil {
		return 0, err
	}
	return n, s.kv.Put(entryKey(key, tm, n), value)
}

// Delete removes (key, tm, n) and its index entry; deleting what is absent writes
// nothing.
func (s Timed) Delete(key []byte, tm, n int64) error {
	ek := entryKey(key, tm, n)
	_, ok, err := s.kv.Get(ek)
	if err != nil || !ok {
		return err
	}
	if err := s.kv.Delete(indexKey(key, tm, n)); err != nil {
		return err
	}
	return s.kv.Delete(ek)
}

// Fetch calls fn for key's entries with from <= tm <= to, by time then n, until fn
// returns false.
func (s Timed) Fetch(key []byte, from, to int64, fn func(tm, n int64, value []byte) bool) error {
	if from > to {
		return nil
	}
	pre := keyPrefix(entryTag, key)
	lo := putOrdered(bytes.Clone(pre), from)
	var hi []byte
	if to == 1<<63-1 {
		hi = prefixEnd(pre)
	} else {
		hi = putOrdered(bytes.Clone(pre), to+1)
	}
	var bad error
	err := s.kv.Range(lo, hi, func(k, v []byte) bool {
		if len(k) != len(pre)+16 {
			bad = fmt.Errorf("%w: entry key %x", ErrCorrupt, k)
			return false
		}
		return fn(getOrdered(k[len(pre):]), getOrdered(k[len(pre)+8:]), v)
	})
	if bad != nil {
		return bad
	}
	return err
}

// Indexed calls fn for every key's entries with from <= tm < to in time order (then
// key, then n), from the index, until fn returns false. fn gets the entry's key but
// not its value (Get it, after the scan if the scan is long).
func (s Timed) Indexed(from, to int64, fn func(key []byte, tm, n int64) bool) error {
	if from >= to {
		return nil
	}
	lo := putOrdered([]byte{indexTag}, from)
	hi := putOrdered([]byte{indexTag}, to)
	var bad error
	err := s.kv.Range(lo, hi, func(k, _ []byte) bool {
		key, tm, n, err := parseIndex(k)
		if err != nil {
			bad = err
			return false
		}
		return fn(key, tm, n)
	})
	if bad != nil {
		return bad
	}
	return err
}

// Ref names one entry of a Timed store.
type Ref struct {
	Key  []byte
	Time int64
	N    int64
}

// Before returns up to limit entries (limit <= 0: all) with tm < before, oldest first:
// what a caller closes or expires.
func (s Timed) Before(before int64, limit int) ([]Ref, error) {
	var out []Ref
	err := s.Indexed(-1<<63, before, func(key []byte, tm, n int64) bool {
		out = append(out, Ref{bytes.Clone(key), tm, n})
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// Meta reads the operator's metadata value name.
func (s Timed) Meta(name string) ([]byte, bool, error) {
	return s.kv.Get(append([]byte{metaTag}, name...))
}

// SetMeta sets the operator's metadata value name.
func (s Timed) SetMeta(name string, value []byte) error {
	return s.kv.Put(append([]byte{metaTag}, name...), value)
}
