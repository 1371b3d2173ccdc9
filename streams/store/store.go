// Package store holds a stream task's local state: the entries of its stores and, per
// store, the changelog offset they reflect (the checkpoint). The runtime writes a batch
// only after the commit that carried it to the changelog is confirmed, together with the
// new checkpoints, so a store never runs ahead of its changelog and a crash never
// needs a wipe (docs/design.md "Streams").
//
// Two implementations share one conformance suite (storetest): Pebble, which keeps
// state across restarts so a task restores only the changelog tail, and memory, which
// restores from the changelog's start every time.
package store

import "errors"

// DB is one task's state: any number of named stores in one key space, written
// atomically across stores.
type DB interface {
	// Get returns a store's value for key; ok is false when there is none.
	Get(store string, key []byte) (value []byte, ok bool, err error)
	// Range calls fn for the store's entries with lo <= key < hi (hi nil: no upper
	// bound) in byte order of the keys, until fn returns false. fn must not keep key or
	// value after it returns.
	Range(store string, lo, hi []byte, fn func(key, value []byte) bool) error
	// Apply applies writes in order and sets the checkpoints given, atomically: after a
	// crash either all of it is there or none.
	Apply(writes []Write, checkpoints map[string]int64) error
	// Checkpoints returns every store's checkpoint: the changelog offset of the last
	// record applied.
	Checkpoints() (map[string]int64, error)
	// Wipe removes a store's entries and its checkpoint.
	Wipe(store string) error
	// Reader reads the DB from other goroutines (interactive queries) while its task
	// writes it.
	Reader() Reader
	Close() error
}

// Write is one change to a store: a put, or a delete when Delete is set.
type Write struct {
	Store  string
	Key    []byte
	Value  []byte
	Delete bool
}

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("store: closed")

// Reader reads a DB from any goroutine while its owner writes it: each call sees the
// DB as some Apply left it, never half of one. (A DB itself is used from its task's
// goroutine only.) Interactive queries read a task's stores through it.
type Reader interface {
	Get(store string, key []byte) (value []byte, ok bool, err error)
	Range(store string, lo, hi []byte, fn func(key, value []byte) bool) error
}
