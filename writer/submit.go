package writer

import (
	"context"
	"errors"
)

// Submitted is a request Submit has buffered; Wait answers it.
type Submitted struct {
	p    *pending
	resp Response
	err  error
}

// Submit is Produce without the wait: it validates and buffers req and returns at once,
// so that a caller serving several requests of one client connection at a time can
// buffer them in the order they arrived (calls to Submit from one goroutine are
// buffered in call order, and a partition's records take offsets in buffer order) and
// wait for them concurrently. Its errors are those Produce returns before buffering;
// req's byte slices must not change until the request is answered.
func (w *Writer) Submit(req Request) (*Submitted, error) {
	p, err := w.prepare(req)
	if err != nil {
		return nil, err
	}
	if err := w.enqueue(p); err != nil {
		return nil, err
	}
	return &Submitted{p: p}, nil
}

// Answered is a Submitted request with its answer already known: for writers that
// answer synchronously (test doubles of the writer role).
func Answered(resp Response, err error) *Submitted { return &Submitted{resp: resp, err: err} }

// Wait waits until the request's flush is answered, as Produce does. If ctx ends first
// it returns ctx.Err(), and the request still commits or not.
func (s *Submitted) Wait(ctx context.Context) (Response, error) {
	if s.p == nil {
		return s.resp, s.err
	}
	select {
	case <-s.p.done:
		return s.p.resp, s.p.err
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

// SubmitWait is Submit that, while the buffer is full, waits for room instead of
// refusing with ErrBufferFull, until ctx ends (then ErrBufferFull): for a front end
// whose clients are pushed back by waiting (the Kafka protocol: a broker slows its
// producers down rather than refuse them) rather than by a refusal to retry.
func (w *Writer) SubmitWait(ctx context.Context, req Request) (*Submitted, error) {
	p, err := w.prepare(req)
	if err != nil {
		return nil, err
	}
	for {
		w.mu.Lock()
		full := !w.closed && w.held > 0 && w.held+p.size > w.cfg.BufferBytes
		var room chan struct{}
		if full {
			if w.room == nil {
				w.room = make(chan struct{})
			}
			room = w.room
		}
		w.mu.Unlock()
		if !full {
			err := w.enqueue(p)
			if errors.Is(err, ErrBufferFull) {
				continue // filled meanwhile: wait for the next release
			}
			if err != nil {
				return nil, err
			}
			return &Submitted{p: p}, nil
		}
		select {
		case <-room:
		case <-ctx.Done():
			w.m.rejected.WithLabelValues("buffer_full").Inc()
			return nil, ErrBufferFull
		}
	}
}

// roomLocked wakes the SubmitWait calls waiting for room. w.mu is held.
func (w *Writer) roomLocked() {
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
}
