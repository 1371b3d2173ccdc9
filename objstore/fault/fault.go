// Package fault wraps an objstore.Store and makes it misbehave on cue, so tests can
// drive the writer, reader and compactor through failures a real store produces only
// rarely: errors, slowness, responses lost after the operation took effect, and
// corrupted reads.
//
// Faults are set per operation and apply to the calls that follow; a Store with no
// faults set passes every call straight through. All methods are safe for concurrent use.
package fault

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/objstore"
)

// Op names a Store operation.
type Op string

// The operations of objstore.Store.
const (
	Put      Op = "put"
	Get      Op = "get"
	GetRange Op = "get_range"
	Head     Op = "head"
	Delete   Op = "delete"
	List     Op = "list"
)

// Ops lists every operation.
var Ops = []Op{Put, Get, GetRange, Head, Delete, List}

// ErrInjected is the error of a fault that was given none.
var ErrInjected = errors.New("fault: injected failure")

// Fault says what happens to calls of one operation. Its effects apply in the order of
// the fields: wait Latency, then fail with Err, or perform the call and then lose its
// response, then corrupt what it read.
type Fault struct {
	// Times is how many calls the fault applies to; after that the operation behaves
	// again. 0 means every call until Clear.
	Times int
	// Latency delays the call before it reaches the inner store. A context that ends
	// during the wait ends the call with its error, without reaching the inner store.
	Latency time.Duration
	// Err fails the call without reaching the inner store. With LoseResponse it is
	// the error returned after the call succeeded.
	Err error
	// LoseResponse performs the call on the inner store and then returns Err (or
	// ErrInjected) in place of its result, so the caller cannot tell whether the
	// operation happened: a PUT that succeeded but whose response never arrived.
	LoseResponse bool
	// Truncate drops this many bytes from the end of what Get or GetRange read (all of
	// it when it is shorter), as a store that breaks its "exactly n bytes" promise.
	Truncate int
	// FlipBit flips the lowest bit of the middle byte of what Get or GetRange read,
	// as silent corruption on the wire or at rest. Empty results are left alone.
	FlipBit bool
}

// Store is an objstore.Store that injects faults into calls to an inner store.
type Store struct {
	inner objstore.Store

	mu     sync.Mutex
	faults map[Op]*Fault
	before func(op Op, key string) error

	calls    [6]atomic.Int64 // indexed like Ops
	injected [6]atomic.Int64
}

var (
	_ objstore.Store        = (*Store)(nil)
	_ objstore.CRC32CPutter = (*Store)(nil)
)

// New returns a Store passing every call to inner until told otherwise.
func New(inner objstore.Store) *Store {
	return &Store{inner: inner, faults: make(map[Op]*Fault)}
}

// Inject sets the fault for op, replacing any set before.
func (s *Store) Inject(op Op, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = &f
}

// FailNext fails the next n calls of op with err (ErrInjected when nil), without
// reaching the inner store.
func (s *Store) FailNext(op Op, n int, err error) {
	s.Inject(op, Fault{Times: n, Err: orInjected(err)})
}

// FailAlways fails every call of op with err (ErrInjected when nil) until Clear.
func (s *Store) FailAlways(op Op, err error) {
	s.Inject(op, Fault{Err: orInjected(err)})
}

// Delay adds d to every call of op until Clear.
func (s *Store) Delay(op Op, d time.Duration) {
	s.Inject(op, Fault{Latency: d})
}

// LoseNext performs the next n calls of op and then returns ErrInjected instead of
// their results.
func (s *Store) LoseNext(op Op, n int) {
	s.Inject(op, Fault{Times: n, LoseResponse: true})
}

// Clear removes the fault of op.
func (s *Store) Clear(op Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.faults, op)
}

// ClearAll removes every fault and the Before hook.
func (s *Store) ClearAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
	s.before = nil
}

// SetBefore installs fn, called at the start of every call with the operation and its
// key (the prefix, for List), before any fault. A non-nil error fails the call without
// reaching the inner store. fn may block, to hold a call at a chosen point of a test;
// it runs concurrently for concurrent calls. nil removes the hook.
func (s *Store) SetBefore(fn func(op Op, key string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = fn
}

// Calls returns how many calls of op the Store has received, faulted or not.
func (s *Store) Calls(op Op) int64 { return s.calls[index(op)].Load() }

// Injected returns how many calls of op a fault applied to.
func (s *Store) Injected(op Op) int64 { return s.injected[index(op)].Load() }

func index(op Op) int {
	for i, o := range Ops {
		if o == op {
			return i
		}
	}
	panic(fmt.Sprintf("fault: unknown operation %q", op))
}

func orInjected(err error) error {
	if err == nil {
		return ErrInjected
	}
	return err
}

// take counts a call of op and returns the hook and the fault that apply to it, if any.
func (s *Store) take(op Op) (func(Op, string) error, *Fault) {
	i := index(op)
	s.calls[i].Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.faults[op]
	if !ok {
		return s.before, nil
	}
	s.injected[i].Add(1)
	got := *f
	if f.Times > 0 {
		f.Times--
		if f.Times == 0 {
			delete(s.faults, op)
		}
	}
	return s.before, &got
}

// enter runs what happens before the inner call. proceed is false when the call must
// end with err without reaching the inner store.
func (s *Store) enter(ctx context.Context, op Op, key string) (f *Fault, proceed bool, err error) {
	before, f := s.take(op)
	if before != nil {
		if err := before(op, key); err != nil {
			return nil, false, err
		}
	}
	if f == nil {
		return nil, true, nil
	}
	if f.Latency > 0 {
		if err := ctxwait.Sleep(ctx, f.Latency); err != nil {
			return nil, false, err
		}
	}
	if f.Err != nil && !f.LoseResponse {
		return nil, false, f.Err
	}
	return f, true, nil
}

// corrupt applies Truncate and FlipBit to a read result, on a copy: the inner store may
// share its slices (a cache).
func corrupt(f *Fault, b []byte) []byte {
	if f == nil || (f.Truncate == 0 && !f.FlipBit) {
		return b
	}
	b = append([]byte(nil), b[:len(b)-min(f.Truncate, len(b))]...)
	if f.FlipBit && len(b) > 0 {
		b[len(b)/2] ^= 1
	}
	return b
}

func wrap(op Op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("fault: %s %s: %w", op, key, err)
}

// Put implements objstore.Store: PutParts of one part.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	return s.PutParts(ctx, key, [][]byte{body})
}

// PutParts implements objstore.Store; its faults are Put's.
func (s *Store) PutParts(ctx context.Context, key string, parts [][]byte) error {
	return s.put(ctx, key, func() error { return s.inner.PutParts(ctx, key, parts) })
}

// put runs put, a PUT of key, with Put's faults.
func (s *Store) put(ctx context.Context, key string, put func() error) error {
	f, ok, err := s.enter(ctx, Put, key)
	if !ok {
		return wrap(Put, key, err)
	}
	err = put()
	if f != nil && f.LoseResponse {
		return wrap(Put, key, orInjected(f.Err))
	}
	return err
}

// PutPartsCRC32C implements objstore.CRC32CPutter, through the inner store's (or
// objstore.PutPartsCRC32C's check when it has none); its faults are Put's.
func (s *Store) PutPartsCRC32C(ctx context.Context, key string, parts [][]byte, crc uint32) error {
	return s.put(ctx, key, func() error { return objstore.PutPartsCRC32C(ctx, s.inner, key, parts, crc) })
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	f, ok, err := s.enter(ctx, Get, key)
	if !ok {
		return nil, wrap(Get, key, err)
	}
	b, err := s.inner.Get(ctx, key)
	if f != nil && f.LoseResponse {
		return nil, wrap(Get, key, orInjected(f.Err))
	}
	if err != nil {
		return nil, err
	}
	return corrupt(f, b), nil
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	f, ok, err := s.enter(ctx, GetRange, key)
	if !ok {
		return nil, wrap(GetRange, key, err)
	}
	b, err := s.inner.GetRange(ctx, key, off, n)
	if f != nil && f.LoseResponse {
		return nil, wrap(GetRange, key, orInjected(f.Err))
	}
	if err != nil {
		return nil, err
	}
	return corrupt(f, b), nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	f, ok, err := s.enter(ctx, Head, key)
	if !ok {
		return objstore.Info{}, wrap(Head, key, err)
	}
	info, err := s.inner.Head(ctx, key)
	if f != nil && f.LoseResponse {
		return objstore.Info{}, wrap(Head, key, orInjected(f.Err))
	}
	return info, err
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	f, ok, err := s.enter(ctx, Delete, key)
	if !ok {
		return wrap(Delete, key, err)
	}
	err = s.inner.Delete(ctx, key)
	if f != nil && f.LoseResponse {
		return wrap(Delete, key, orInjected(f.Err))
	}
	return err
}

// List implements objstore.Store. With LoseResponse the inner listing runs to the end,
// calling fn for every key, and the call then fails.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	f, ok, err := s.enter(ctx, List, prefix)
	if !ok {
		return wrap(List, prefix, err)
	}
	err = s.inner.List(ctx, prefix, fn)
	if f != nil && f.LoseResponse {
		return wrap(List, prefix, orInjected(f.Err))
	}
	return err
}
