package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/internal/ctxwait"
)

// A producer's requests from sealing to their outcome (the producer: producer.go):
// linger, sealing, sequencing and encoding, the window of requests in flight, the
// send loop with its retries, and the reset to a new identity after a refusal.

// linger seals the open request Linger after it was opened.
func (p *Producer) linger() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			if len(p.open) == 0 {
				p.mu.Unlock()
				break
			}
			wait := p.cfg.Linger - time.Since(p.openedAt)
			if wait <= 0 {
				p.sealOpenLocked()
				p.mu.Unlock()
				break
			}
			p.mu.Unlock()
			if ctxwait.Sleep(p.ctx, wait) != nil {
				return
			}
		}
	}
}

// sealOpenLocked seals the open request.
func (p *Producer) sealOpenLocked() {
	if len(p.open) == 0 {
		return
	}
	recs := p.open
	p.open, p.openBytes = nil, 0
	clear(p.sticky)
	p.sealLocked(recs, nil)
}

// sealLocked makes a request of recs, sequences it and queues it.
func (p *Producer) sealLocked(recs []batchRec, group *txnGroup) *sendReq {
	r := &sendReq{idx: p.sealedN, recs: recs, counts: map[tpKey]int32{}, group: group, sealed: time.Now(), done: make(chan struct{})}
	p.sealedN++
	for _, br := range recs {
		r.counts[tpKey{br.topic, br.partition}]++
	}
	p.sequenceLocked(r)
	p.queue = append(p.queue, r)
	p.dispatchLocked()
	return r
}

// sequenceLocked gives r the current identity and the next base sequence of each of
// its partitions, and encodes its body.
func (p *Producer) sequenceLocked(r *sendReq) {
	if !p.cfg.NotIdempotent {
		r.ident = p.ident
		r.seqs = make(map[tpKey]int32, len(r.counts))
		for tp, n := range r.counts {
			seq := p.next[tp]
			r.seqs[tp] = seq
			p.next[tp] = int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
		}
	}
	r.body = p.encode(r)
}

// encode renders r's body: fixed once sealed, except for the member epoch of a request
// sent again after stale_member_epoch.
func (p *Producer) encode(r *sendReq) []byte {
	body := v1.TransactRequest{Records: make([]v1.TransactRecord, len(r.recs)), GroupOffsets: r.group.wire()}
	for i, br := range r.recs {
		body.Records[i] = v1.TransactRecord{Topic: br.topic, ProduceRecord: br.wire}
	}
	if r.seqs != nil {
		seqs := make(map[TopicPartition]int32, len(r.seqs))
		for k, seq := range r.seqs {
			seqs[TopicPartition{k.topic, k.partition}] = seq
		}
		body.Producer = wireProducer(r.ident, seqs)
	}
	b, err := json.Marshal(body)
	if err != nil {
		// Every part was validated JSON when it was sent: a bug, answered as an error.
		b = nil
		r.err = fmt.Errorf("producer: encode request: %w", err)
	}
	return b
}

// dispatchLocked starts the requests the window allows, or, after a gap, a new
// identity once nothing runs.
func (p *Producer) dispatchLocked() {
	if p.fatal != nil {
		for _, r := range slices.Clone(p.queue) {
			if !r.started {
				p.resolveLocked(r, nil, false, p.fatal)
			}
		}
		return
	}
	if p.draining {
		if p.running == 0 && !p.resetting {
			p.resetting = true
			p.wg.Add(1)
			go p.reset()
		}
		return
	}
	// The window is anchored at the oldest unresolved request, counting the resolved
	// ones after it: while a request may still be retried, at most MaxInFlight-1
	// requests sealed after it can commit, so the server still recognises its retry.
	if len(p.queue) == 0 {
		return
	}
	limit := p.queue[0].idx + uint64(p.cfg.MaxInFlight)
	for _, r := range p.queue {
		if r.idx >= limit {
			break
		}
		if r.started || r.stopped {
			continue
		}
		r.started = true
		p.running++
		p.wg.Add(1)
		go p.run(r)
	}
}

// notifyLocked wakes waiters on p.changed.
func (p *Producer) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// resolveLocked ends r with its outcome and hands it to its records.
func (p *Producer) resolveLocked(r *sendReq, offsets []TopicOffset, dup bool, err error) {
	if i := slices.Index(p.queue, r); i >= 0 {
		p.queue = slices.Delete(p.queue, i, i+1)
	}
	p.buffered -= len(r.recs)
	close(p.space)
	p.space = make(chan struct{})
	r.offsets, r.dup, r.err = offsets, dup, err
	for i, br := range r.recs {
		if br.d == nil {
			continue
		}
		br.d.dup, br.d.err = dup, err
		if err == nil && i < len(offsets) {
			br.d.offset = Offset{Partition: offsets[i].Partition, Offset: offsets[i].Offset}
		}
		close(br.d.done)
	}
	close(r.done)
	p.notifyLocked()
}

// action is what an attempt's error calls for.
type action int

const (
	actRetry action = iota
	actWaitEarlier
	actResend // under a new identity
	actRefreshGroup
	actFatal
	actFail
)

func (p *Producer) classify(r *sendReq, err error) action {
	var e *Error
	if !errors.As(err, &e) {
		// No answer: the request may or may not have committed.
		if p.cfg.NotIdempotent {
			return actFail
		}
		return actRetry
	}
	switch e.Code {
	case CodeProducerFenced:
		return actFatal
	case CodeOutOfOrderSequence:
		return actWaitEarlier
	case CodeUnknownProducer:
		return actResend
	case CodeStaleMemberEpoch:
		if r.group != nil && r.group.refresh != nil {
			return actRefreshGroup
		}
	case "commit_outcome_unknown":
		if p.cfg.NotIdempotent {
			return actFail
		}
	}
	if e.Retryable() {
		return actRetry
	}
	return actFail
}

// run sends r until it is resolved or stopped.
func (p *Producer) run(r *sendReq) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		p.running--
		p.dispatchLocked()
		p.mu.Unlock()
	}()
	backoff := p.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		p.mu.Lock()
		body, ident, encErr := r.body, r.ident, r.err
		pendingBefore := p.earlierPendingLocked(r)
		p.mu.Unlock()
		if encErr != nil {
			p.mu.Lock()
			p.resolveLocked(r, nil, false, encErr)
			p.mu.Unlock()
			return
		}
		out, err := p.post(body)
		if err == nil && len(out.Offsets) != len(r.recs) {
			err = fmt.Errorf("producer: the server answered %d offsets for %d records", len(out.Offsets), len(r.recs))
			p.mu.Lock()
			p.resolveLocked(r, nil, false, err)
			p.mu.Unlock()
			return
		}
		if err == nil {
			p.mu.Lock()
			p.resolveLocked(r, out.Offsets, out.Duplicate, nil)
			p.mu.Unlock()
			return
		}
		act := p.classify(r, err)
		p.mu.Lock()
		fatal := p.fatal
		p.mu.Unlock()
		if fatal != nil && act != actFatal {
			// Closed or fenced meanwhile: no more attempts.
			p.mu.Lock()
			p.resolveLocked(r, nil, false, fmt.Errorf("%w (last attempt: %v)", fatal, err))
			p.mu.Unlock()
			return
		}
		switch act {
		case actRetry:
			wait := backoff
			var e *Error
			if errors.As(err, &e) && e.RetryAfter > 0 {
				wait = e.RetryAfter
			}
			backoff = min(2*backoff, 2*time.Second)
			if time.Since(r.sealed)+wait > p.cfg.DeliveryTimeout {
				p.mu.Lock()
				p.resolveLocked(r, nil, false, fmt.Errorf("producer: gave up after %d attempts in %s: %w", attempt, p.cfg.DeliveryTimeout, err))
				p.mu.Unlock()
				return
			}
			p.log.Debug("retrying request", "attempt", attempt, "wait", wait, "err", err)
			if ctxwait.Sleep(p.ctx, wait) != nil {
				continue // closing: the next attempt fails fast and resolves
			}
		case actWaitEarlier:
			p.log.Debug("refused as out of order", "earlier_pending", pendingBefore, "err", err)
			// Refused as out of order: an earlier request on one of its partitions had
			// not committed when this attempt was sent. If none was pending then, the
			// gap is for good; else wait for them and try again.
			if !pendingBefore || p.awaitEarlier(r) {
				p.stop(r, ident, err)
				return
			}
		case actResend:
			p.stop(r, ident, err)
			return
		case actRefreshGroup:
			epoch := r.group.refresh()
			p.mu.Lock()
			if epoch <= 0 || epoch == r.group.MemberEpoch {
				p.resolveLocked(r, nil, false, err)
				p.mu.Unlock()
				return
			}
			r.group.MemberEpoch = epoch
			r.body = p.encode(r)
			p.mu.Unlock()
		case actFatal:
			p.setFatal(fmt.Errorf("%w: %w", ErrProducerFenced, err))
			p.mu.Lock()
			p.resolveLocked(r, nil, false, fmt.Errorf("%w: %w", ErrProducerFenced, err))
			p.mu.Unlock()
			return
		default:
			p.mu.Lock()
			p.resolveLocked(r, nil, false, err)
			p.mu.Unlock()
			return
		}
	}
}

// earlierPendingLocked says whether a request sealed before r, sharing a partition
// with it, has not resolved yet.
func (p *Producer) earlierPendingLocked(r *sendReq) bool {
	for _, e := range p.queue {
		if e == r {
			return false
		}
		if sharesPartition(e, r) {
			return true
		}
	}
	return false
}

// awaitEarlier waits until no request sealed before r that shares a partition with it
// is being sent, and reports whether one of them waits to be sent again under a new
// identity (so r cannot commit under its own either).
func (p *Producer) awaitEarlier(r *sendReq) (stopped bool) {
	for {
		p.mu.Lock()
		running := false
		for _, e := range p.queue {
			if e == r {
				break
			}
			if !sharesPartition(e, r) {
				continue
			}
			if e.stopped {
				p.mu.Unlock()
				return true
			}
			if e.started {
				running = true
			}
		}
		ch := p.changed
		p.mu.Unlock()
		if !running {
			return false
		}
		<-ch
	}
}

func sharesPartition(a, b *sendReq) bool {
	for tp := range a.counts {
		if _, ok := b.counts[tp]; ok {
			return true
		}
	}
	return false
}

// stop parks r, refused as out of order (or for an unknown producer id) under ident:
// it has not committed and cannot under ident. Once nothing runs, the producer takes a
// new identity and sends it again.
func (p *Producer) stop(r *sendReq, ident ProducerIdentity, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.started, r.stopped = false, true
	if !p.draining {
		p.log.Warn("sequence gap: taking a new producer identity for the requests that did not commit", "err", err)
	}
	p.draining = true
	p.notifyLocked()
}

// reset takes a new identity once nothing is in flight, re-sequences every request not
// yet committed under it, and sends them again, in order.
func (p *Producer) reset() {
	defer p.wg.Done()
	p.mu.Lock()
	cur := p.ident
	p.mu.Unlock()
	var current *ProducerIdentity
	if p.cfg.TransactionalID != "" {
		current = &cur
	}
	backoff := p.cfg.RetryBackoff
	start := time.Now()
	var (
		id  ProducerIdentity
		err error
	)
	for {
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
		id, err = p.c.InitProducer(ctx, p.cfg.TransactionalID, current)
		cancel()
		if err == nil || !IsRetryable(err) && !isTransport(err) || time.Since(start) > p.cfg.DeliveryTimeout || p.ctx.Err() != nil {
			break
		}
		_ = ctxwait.Sleep(p.ctx, backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
	if err != nil {
		if HasCode(err, CodeProducerFenced) {
			err = fmt.Errorf("%w: %w", ErrProducerFenced, err)
		}
		p.setFatal(fmt.Errorf("producer: take a new identity after a sequence gap: %w", err))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log.Info("new producer identity", "producer_id", id.ID, "epoch", id.Epoch, "resending", len(p.queue))
	p.ident = id
	p.next = map[tpKey]int32{}
	for _, r := range p.queue {
		r.started, r.stopped = false, false
		p.sequenceLocked(r)
	}
	p.draining, p.resetting = false, false
	p.dispatchLocked()
}

func isTransport(err error) bool {
	var e *Error
	return !errors.As(err, &e)
}

// setFatal ends the producer: every request not being sent now fails with err; those
// being sent fail at their next attempt.
func (p *Producer) setFatal(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fatal == nil {
		p.fatal = err
	}
	for _, r := range slices.Clone(p.queue) {
		if !r.started {
			p.resolveLocked(r, nil, false, p.fatal)
		}
	}
	if len(p.open) > 0 {
		open := p.open
		p.open, p.openBytes = nil, 0
		for _, br := range open {
			p.buffered--
			br.d.err = p.fatal
			close(br.d.done)
		}
	}
	p.draining = false
	p.notifyLocked()
}

// produceAnswer answers POST /v1/records.
type produceAnswer = v1.TransactResponse

// post sends one attempt.
func (p *Producer) post(body []byte) (produceAnswer, error) {
	u, err := p.c.endpoint(nil, "v1", "records")
	if err != nil {
		return produceAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
	defer cancel()
	var out produceAnswer
	err = p.c.once(ctx, http.MethodPost, u, body, &out)
	return out, err
}
