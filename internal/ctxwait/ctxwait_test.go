package ctxwait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepWaits(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v, want at least 20ms", d)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("a zero wait: %v", err)
	}
}

// A context that ends during the wait ends it, with the context's error; one already
// ended does not wait at all, whatever d is.
func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled sleep: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an hour's sleep did not end with its context")
	}
	for _, d := range []time.Duration{-time.Second, 0, time.Nanosecond, time.Hour} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep(ended context, %v) = %v, want context.Canceled at once", d, err)
		}
	}
	dl, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	if err := Sleep(dl, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sleep past a deadline: %v, want context.DeadlineExceeded", err)
	}
}
