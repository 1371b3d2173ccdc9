package writer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

// Submit buffers in call order and answers through Wait; SubmitWait, with the buffer
// full, waits for a flush to release room instead of refusing, and refuses with
// ErrBufferFull only when its context ends first.
func TestSubmitAndSubmitWait(t *testing.T) {
	one := req(rec(1, 1, 0, "", strings.Repeat("v", 1000)))
	p, _ := New(newMemStore(), newFakeCatalog(t, nil), Config{}, nil, nil).prepare(one)
	h := start(t, Config{Linger: never, MaxFlushBytes: 2 * p.size, BufferBytes: 2 * p.size}, true)
	gate := make(chan struct{})
	h.store.block = func(int) { <-gate }

	var subs []*Submitted
	for range 2 { // the second fills a flush: cut, stuck in Put
		s, err := h.w.Submit(one)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	testwait.Until(t, 20*time.Second, "the put to start", func() bool { puts, _, _ := h.store.counts(); return puts == 1 })
	if _, err := h.w.Submit(one); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("Submit with the buffer full = %v, want ErrBufferFull at once", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := h.w.SubmitWait(short, one); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("SubmitWait until its context ended = %v, want ErrBufferFull", err)
	}
	waited := make(chan error, 1)
	var third *Submitted
	go func() {
		var err error
		third, err = h.w.SubmitWait(context.Background(), one)
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("SubmitWait returned (%v) with the buffer still full", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate) // the flush completes and releases its bytes
	if err := <-waited; err != nil {
		t.Fatalf("SubmitWait after the release: %v", err)
	}
	if err := h.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, s := range append(subs, third) {
		resp, err := s.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, resp.Records[0].Offset)
	}
	if offsets[0] != 0 || offsets[1] != 1 || offsets[2] != 2 {
		t.Fatalf("offsets %v, want 0 1 2: submit order", offsets)
	}
	if resp, err := Answered(Response{Duplicate: true}, nil).Wait(context.Background()); err != nil || !resp.Duplicate {
		t.Fatalf("Answered: %+v %v", resp, err)
	}
}
