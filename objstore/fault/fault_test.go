package fault_test

import (
	"bytes"
	"context"
	"errors"
	"math/bits"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/objstoretest"
)

func newFS(t *testing.T) *fs.Store {
	s, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// With no faults set the decorator is transparent.
func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return fault.New(newFS(t)) })
}

func TestFailNext(t *testing.T) {
	inner := newFS(t)
	s := fault.New(inner)
	ctx := t.Context()
	boom := errors.New("boom")
	s.FailNext(fault.Put, 2, boom)
	for i := range 2 {
		if err := s.Put(ctx, "k", []byte("v")); !errors.Is(err, boom) {
			t.Fatalf("put %d = %v, want boom", i, err)
		}
	}
	if _, err := inner.Head(ctx, "k"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("a failed put reached the inner store: Head = %v", err)
	}
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("third put = %v, want nil once the fault is spent", err)
	}
	if got, want := s.Calls(fault.Put), int64(3); got != want {
		t.Errorf("Calls(Put) = %d, want %d", got, want)
	}
	if got, want := s.Injected(fault.Put), int64(2); got != want {
		t.Errorf("Injected(Put) = %d, want %d", got, want)
	}
	// Other operations are untouched.
	if _, err := s.Get(ctx, "k"); err != nil {
		t.Errorf("Get = %v", err)
	}
}

func TestFailAlwaysUntilCleared(t *testing.T) {
	s := fault.New(newFS(t))
	ctx := t.Context()
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.FailAlways(fault.Get, nil)
	for range 5 {
		if _, err := s.Get(ctx, "k"); !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("Get = %v, want ErrInjected", err)
		}
	}
	s.Clear(fault.Get)
	if _, err := s.Get(ctx, "k"); err != nil {
		t.Errorf("Get after Clear = %v", err)
	}
	s.FailAlways(fault.Delete, nil)
	s.FailAlways(fault.List, nil)
	s.ClearAll()
	if err := s.Delete(ctx, "k"); err != nil {
		t.Errorf("Delete after ClearAll = %v", err)
	}
}

// TestLoseNext: the operation happens, the caller hears it failed, and an identical
// retry of a create-only put settles it.
func TestLoseNext(t *testing.T) {
	inner := newFS(t)
	s := fault.New(inner)
	ctx := t.Context()
	s.LoseNext(fault.Put, 1)
	if err := s.Put(ctx, "k", []byte("v")); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("Put with lost response = %v, want ErrInjected", err)
	}
	if got, err := inner.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("inner store after lost put: %q, %v; want the object", got, err)
	}
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Errorf("retried Put = %v, want nil", err)
	}

	lost := errors.New("connection reset")
	s.Inject(fault.Delete, fault.Fault{Times: 1, LoseResponse: true, Err: lost})
	if err := s.Delete(ctx, "k"); !errors.Is(err, lost) {
		t.Errorf("Delete with lost response = %v, want the given error", err)
	}
	if _, err := inner.Head(ctx, "k"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("lost Delete did not happen: Head = %v", err)
	}

	// A lost listing still walked everything.
	for _, k := range []string{"a", "b"} {
		if err := s.Put(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.LoseNext(fault.List, 1)
	n := 0
	if err := s.List(ctx, "", func(objstore.Info) error { n++; return nil }); !errors.Is(err, fault.ErrInjected) || n != 2 {
		t.Errorf("lost List: %d keys, %v; want 2 keys and ErrInjected", n, err)
	}
}

func TestLatency(t *testing.T) {
	s := fault.New(newFS(t))
	ctx := t.Context()
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Delay(fault.Head, 50*time.Millisecond)
	start := time.Now()
	if _, err := s.Head(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("delayed Head took %v, want at least 50ms", d)
	}

	// A context ending during the delay ends the call, which never reaches the store.
	s.Delay(fault.Put, time.Hour)
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := s.Put(ctx2, "late", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put delayed past its deadline = %v, want DeadlineExceeded", err)
	}
	s.Clear(fault.Put)
	if _, err := s.Head(ctx, "late"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("a Put cancelled during its delay happened: Head = %v", err)
	}
}

func TestCorruptReads(t *testing.T) {
	s := fault.New(newFS(t))
	ctx := t.Context()
	body := []byte("0123456789")
	if err := s.Put(ctx, "k", body); err != nil {
		t.Fatal(err)
	}
	s.Inject(fault.Get, fault.Fault{Times: 1, Truncate: 3})
	if got, err := s.Get(ctx, "k"); err != nil || string(got) != "0123456" {
		t.Errorf("truncated Get = %q, %v; want %q", got, err, "0123456")
	}
	s.Inject(fault.GetRange, fault.Fault{Times: 1, Truncate: 100})
	if got, err := s.GetRange(ctx, "k", 2, 4); err != nil || len(got) != 0 {
		t.Errorf("GetRange truncated past its length = %q, %v; want empty", got, err)
	}
	s.Inject(fault.GetRange, fault.Fault{Times: 1, FlipBit: true})
	got, err := s.GetRange(ctx, "k", 2, 4)
	if err != nil || len(got) != 4 {
		t.Fatalf("bit-flipped GetRange = %q, %v", got, err)
	}
	if diff := bitDiff(got, body[2:6]); diff != 1 {
		t.Errorf("bit-flipped GetRange = %q differs from %q in %d bits, want 1", got, body[2:6], diff)
	}
	// The fault is spent and the stored object was never touched.
	if got, err := s.Get(ctx, "k"); err != nil || !bytes.Equal(got, body) {
		t.Errorf("Get after corrupt reads = %q, %v; want %q", got, err, body)
	}
}

func bitDiff(a, b []byte) int {
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

func TestBefore(t *testing.T) {
	s := fault.New(newFS(t))
	ctx := t.Context()
	var (
		mu   sync.Mutex
		seen []string
	)
	blocked := errors.New("blocked by hook")
	s.SetBefore(func(op fault.Op, key string) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(op)+" "+key)
		if key == "forbidden" {
			return blocked
		}
		return nil
	})
	s.Put(ctx, "k", []byte("v"))
	s.GetRange(ctx, "k", 0, 1)
	if err := s.Put(ctx, "forbidden", []byte("v")); !errors.Is(err, blocked) {
		t.Errorf("Put refused by hook = %v, want its error", err)
	}
	if _, err := s.Head(ctx, "forbidden"); !errors.Is(err, blocked) {
		t.Errorf("Head refused by hook = %v, want its error", err)
	}
	s.List(ctx, "pre", func(objstore.Info) error { return nil })
	s.SetBefore(nil)
	if _, err := s.Head(ctx, "forbidden"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("Head after hook removed = %v, want ErrNotExist (the refused put never happened)", err)
	}
	want := []string{"put k", "get_range k", "put forbidden", "head forbidden", "list pre"}
	if len(seen) != len(want) {
		t.Fatalf("hook saw %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("hook call %d = %q, want %q", i, seen[i], want[i])
		}
	}
}

// TestBeforeBlocks shows the hook holding a call so a test can act while it is pending.
func TestBeforeBlocks(t *testing.T) {
	s := fault.New(newFS(t))
	ctx := t.Context()
	entered, release := make(chan struct{}), make(chan struct{})
	s.SetBefore(func(op fault.Op, key string) error {
		if op == fault.Put {
			close(entered)
			<-release
		}
		return nil
	})
	done := make(chan error)
	go func() { done <- s.Put(ctx, "k", []byte("v")) }()
	<-entered
	if _, err := s.Head(ctx, "k"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("Head while the put is held = %v, want ErrNotExist", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, "k"); err != nil {
		t.Errorf("Head after the put = %v", err)
	}
}
