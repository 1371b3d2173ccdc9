package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Pebble is a DB in a Pebble database on local disk: a task that finds its directory
// again after a restart restores only the changelog records after its checkpoints.
//
// Keys: 'd' + uint16 length of the store name + name + key for entries, 'c' + name
// for checkpoints, so no store's keys can run into another's. A Pebble belongs to one
// task and is used from its goroutine only (Range keeps an iterator between calls).
type Pebble struct {
	db     *pebble.DB
	closed atomic.Bool
	// it is an iterator kept between Range calls until the next write: opening one
	// costs more than most ranges a join or window reads (a seek per record), and an
	// iterator sees the DB as it was when opened. busy: a Range is using it (a Range
	// inside another's fn opens its own).
	it   *pebble.Iterator
	busy bool
}

var _ DB = (*Pebble)(nil)

// OpenPebble opens (creating it if missing) the database in dir. Pebble locks the
// directory: a second opener gets an error, never a shared store.
func OpenPebble(dir string, log *slog.Logger) (*Pebble, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A task's state is small and hot; what costs is reading it back: a block cache
	// that holds it, and a memtable large enough that it is rarely flushed.
	cache := pebble.NewCache(32 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{log.With("component", "pebble", "dir", dir)}, Cache: cache, MemTableSize: 16 << 20})
	if err != nil {
		return nil, fmt.Errorf("store: open pebble in %s: %w", dir, err)
	}
	return &Pebble{db: db}, nil
}

func dataPrefix(store string) []byte {
	p := make([]byte, 0, 3+len(store))
	p = append(p, 'd')
	p = binary.BigEndian.AppendUint16(p, uint16(len(store)))
	return append(p, store...)
}

func checkKey(store string) []byte { return append([]byte{'c'}, store...) }

// prefixEnd is the smallest key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func (p *Pebble) Get(store string, key []byte) ([]byte, bool, error) {
	if p.closed.Load() {
		return nil, false, ErrClosed
	}
	v, c, err := p.db.Get(append(dataPrefix(store), key...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: get from %s: %w", store, err)
	}
	defer c.Close()
	return bytes.Clone(v), true, nil
}

func (p *Pebble) Range(store string, lo, hi []byte, fn func(key, value []byte) bool) error {
	if p.closed.Load() {
		return ErrClosed
	}
	pre := dataPrefix(store)
	lower, upper := append(bytes.Clone(pre), lo...), prefixEnd(pre)
	if hi != nil {
		upper = append(bytes.Clone(pre), hi...)
	}
	it := p.it
	nested := p.busy
	if it == nil || nested {
		var err error
		if it, err = p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}); err != nil {
			return fmt.Errorf("store: range over %s: %w", store, err)
		}
		if !nested {
			p.it = it
		}
	} else {
		it.SetBounds(lower, upper)
	}
	if !nested {
		p.busy = true
		defer func() { p.busy = false }()
	}
	var rerr error
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			rerr = err
			break
		}
		if !fn(it.Key()[len(pre):], v) {
			break
		}
	}
	if rerr == nil {
		rerr = it.Error()
	}
	if nested || rerr != nil {
		if err := it.Close(); err != nil && rerr == nil {
			rerr = err
		}
		if !nested {
			p.it = nil
		}
	}
	if rerr != nil {
		return fmt.Errorf("store: range over %s: %w", store, rerr)
	}
	return nil
}

// dropIter closes the kept iterator: the DB is about to change.
func (p *Pebble) dropIter() error {
	if p.it == nil {
		return nil
	}
	err := p.it.Close()
	p.it = nil
	return err
}

func (p *Pebble) Apply(writes []Write, checkpoints map[string]int64) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if err := p.dropIter(); err != nil {
		return fmt.Errorf("store: close an iterator: %w", err)
	}
	b := p.db.NewBatch()
	defer b.Close()
	for _, w := range writes {
		k := append(dataPrefix(w.Store), w.Key...)
		var err error
		if w.Delete {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, w.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("store: batch: %w", err)
		}
	}
	for s, off := range checkpoints {
		if err := b.Set(checkKey(s), binary.BigEndian.AppendUint64(nil, uint64(off)), nil); err != nil {
			return fmt.Errorf("store: batch: %w", err)
		}
	}
	// No fsync: a killed process keeps what reached the WAL (it is in the page cache),
	// and what a machine crash loses is only a tail of the changelog to replay again,
	// since the entries and their checkpoints go together.
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: apply %d writes: %w", len(writes), err)
	}
	return nil
}

func (p *Pebble) Checkpoints() (map[string]int64, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'c'}, UpperBound: []byte{'d'}})
	if err != nil {
		return nil, fmt.Errorf("store: read checkpoints: %w", err)
	}
	defer it.Close()
	out := map[string]int64{}
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		if len(v) != 8 {
			return nil, fmt.Errorf("store: checkpoint of %s is %d bytes, not 8", it.Key()[1:], len(v))
		}
		out[string(it.Key()[1:])] = int64(binary.BigEndian.Uint64(v))
	}
	return out, nil
}

func (p *Pebble) Wipe(store string) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if err := p.dropIter(); err != nil {
		return fmt.Errorf("store: close an iterator: %w", err)
	}
	pre := dataPrefix(store)
	b := p.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(pre, prefixEnd(pre), nil); err != nil {
		return fmt.Errorf("store: wipe %s: %w", store, err)
	}
	if err := b.Delete(checkKey(store), nil); err != nil {
		return fmt.Errorf("store: wipe %s: %w", store, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: wipe %s: %w", store, err)
	}
	return nil
}

func (p *Pebble) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	_ = p.dropIter()
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("store: close pebble: %w", err)
	}
	return nil
}

// pebbleLogger sends Pebble's lines to slog: its chatty informational ones at debug.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...))
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// pebbleReader reads a Pebble from another goroutine: Pebble's Get and iterators are
// safe beside writes; the iterator Range keeps between calls is not, so each range
// opens its own.
type pebbleReader struct{ p *Pebble }

// Reader reads p from other goroutines (store.DB).
func (p *Pebble) Reader() Reader { return pebbleReader{p} }

func (r pebbleReader) Get(store string, key []byte) ([]byte, bool, error) { return r.p.Get(store, key) }

func (r pebbleReader) Range(store string, lo, hi []byte, fn func(key, value []byte) bool) error {
	if r.p.closed.Load() {
		return ErrClosed
	}
	pre := dataPrefix(store)
	lower, upper := append(bytes.Clone(pre), lo...), prefixEnd(pre)
	if hi != nil {
		upper = append(bytes.Clone(pre), hi...)
	}
	it, err := r.p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("store: range over %s: %w", store, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("store: range over %s: %w", store, err)
		}
		if !fn(it.Key()[len(pre):], v) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("store: range over %s: %w", store, err)
	}
	return nil
}
