package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/internal/ctxwait"
)

// A partition's worker: where it starts, its poll loop, and the retries that keep it
// from ever guessing a position.
//
// The rule (issue 13; the reliability harness saw a group's committed offset go back
// from 4,667 to 400 when a failed lookup was taken for "nothing committed"): a worker
// starts at StartAt only when a successful lookup says the partition has no committed
// offset, or the offset is out of range and the reset policy applies. A failed lookup
// is retried with backoff until it succeeds, the partition is revoked or the consumer
// stops. The position a successful lookup gives is the partition's baseline: nothing
// is committed for the partition before it exists, and auto-commit never goes below it.

// Start-position retries back off from lookupBackoffMin, doubling, up to
// lookupBackoffMax.
const (
	lookupBackoffMin = 50 * time.Millisecond
	lookupBackoffMax = 2 * time.Second
)

// backoff is an exponential, jittered wait between attempts.
type backoff struct{ next time.Duration }

// wait sleeps before the next attempt; false when ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	if b.next == 0 {
		b.next = lookupBackoffMin
	}
	d := b.next/2 + rand.N(b.next/2+1) // jitter: workers of one member do not retry in step
	b.next = min(2*b.next, lookupBackoffMax)
	return ctxwait.Sleep(ctx, d) == nil
}

// work is one partition's poll loop: the start position, long-poll fetches, the
// handler, processed offsets. committed is what the lookup made at assignment found
// (-1: none), known whether that lookup succeeded.
func (gc *Consumer) work(ctx context.Context, h Handler, tp TopicPartition, committed int64, known bool) {
	// A partition given up is no longer a failure of this consumer's.
	defer gc.resolvedPrefix(tp.String() + ": ")
	offset, ok := gc.startPosition(ctx, tp, committed, known)
	if !ok {
		return
	}
	gc.setBaseline(tp, offset)
	var retry backoff
	for ctx.Err() == nil && gc.alive() {
		res, err := gc.c.Fetch(ctx, tp.Topic, tp.Partition, FetchOptions{Offset: offset, MaxRecords: gc.cfg.MaxRecords, Wait: gc.cfg.FetchWait,
			Isolation: gc.cfg.Isolation})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if HasCode(err, v1.CodeOffsetOutOfRange) {
				// A definite answer: the reset policy applies, from a successful lookup.
				off, ok := gc.resetPosition(ctx, tp)
				if !ok {
					return
				}
				gc.log.Info("offset out of range: starting over", "partition", tp.String(), "offset", offset, "start", off)
				offset = off
				gc.setBaseline(tp, off)
				continue
			}
			gc.report(tp.String()+": fetch", err) // the client's error names the partition and offset
			if !retry.wait(ctx) {
				return
			}
			continue
		}
		if retry.next > 0 {
			retry = backoff{}
			gc.resolved(tp.String() + ": fetch")
		}
		if len(res.Records) == 0 {
			offset = max(offset, res.NextOffset)
			continue
		}
		// Checked again after the fetch: a revocation or a lost session may have begun
		// while it waited, and this batch must then not be processed.
		if ctx.Err() != nil || !gc.alive() {
			return
		}
		if err := h(ctx, Batch{Topic: tp.Topic, Partition: tp.Partition, Records: res.Records, NextOffset: res.NextOffset, HighWatermark: res.HighWatermark}); err != nil {
			if ctx.Err() != nil {
				return // stopped mid-batch: not processed
			}
			gc.setFailure(fmt.Errorf("consumer: handler for %s: %w", tp, err))
			return
		}
		offset = res.NextOffset
		gc.mu.Lock()
		gc.processed[tp] = offset
		gc.mu.Unlock()
	}
}

// startPosition answers where tp starts: its committed offset when a successful lookup
// finds one, else the StartAt position of a successful lookup of the partition. It
// retries failed lookups until one succeeds; false when ctx ended first.
func (gc *Consumer) startPosition(ctx context.Context, tp TopicPartition, committed int64, known bool) (int64, bool) {
	return gc.retry(ctx, tp.String()+": start position", func(ctx context.Context) (int64, error) {
		if !known {
			lctx, cancel := context.WithTimeout(ctx, gc.lookupTimeout())
			offs, err := gc.c.GroupOffsets(lctx, gc.cfg.Group)
			cancel()
			if err != nil {
				return 0, fmt.Errorf("read the committed offset of %s: %w", tp, err)
			}
			known, committed = true, committedOf(offs, tp)
		}
		if committed >= 0 {
			return committed, nil
		}
		off, err := gc.policyOffset(ctx, tp)
		if err != nil {
			return 0, fmt.Errorf("%s has no committed offset, and finding its %s offset failed: %w", tp, gc.cfg.StartAt, err)
		}
		return off, nil
	})
}

// resetPosition is where tp starts over after an out-of-range fetch, per StartAt,
// retried like startPosition.
func (gc *Consumer) resetPosition(ctx context.Context, tp TopicPartition) (int64, bool) {
	return gc.retry(ctx, tp.String()+": reset position", func(ctx context.Context) (int64, error) {
		off, err := gc.policyOffset(ctx, tp)
		if err != nil {
			return 0, fmt.Errorf("%s is out of range, and finding its %s offset failed: %w", tp, gc.cfg.StartAt, err)
		}
		return off, nil
	})
}

// retry runs lookup until it succeeds, reporting each failure as what and backing off
// between attempts; false when ctx ended first.
func (gc *Consumer) retry(ctx context.Context, what string, lookup func(context.Context) (int64, error)) (int64, bool) {
	var b backoff
	for {
		v, err := lookup(ctx)
		if err == nil {
			gc.resolved(what)
			return v, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		gc.report(what, err)
		if !b.wait(ctx) {
			return 0, false
		}
	}
}

// lookupTimeout bounds one lookup (a committed offset, a partition's bounds, a topic):
// a node that does not answer is given up on, and the lookup retried, well within the
// session.
func (gc *Consumer) lookupTimeout() time.Duration {
	return max(gc.cfg.SessionTimeout/3, time.Second)
}

// committedOf is tp's committed offset in offs, -1 when it has none.
func committedOf(offs []GroupOffset, tp TopicPartition) int64 {
	for _, o := range offs {
		if o.Topic == tp.Topic && o.Partition == tp.Partition {
			return o.Offset
		}
	}
	return -1
}

// policyOffset is StartAt's offset for tp: its log start or its high watermark.
func (gc *Consumer) policyOffset(ctx context.Context, tp TopicPartition) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, gc.lookupTimeout())
	defer cancel()
	ps, err := gc.c.Partitions(ctx, tp.Topic)
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if p.Partition == tp.Partition {
			if gc.cfg.StartAt == StartLatest {
				// A read_committed member starts at the last stable offset: an open
				// transaction's records are below the high watermark, and appear at
				// its commit.
				if gc.cfg.Isolation == ReadUncommitted {
					return p.HighWatermark, nil
				}
				return p.LastStableOffset, nil
			}
			return p.LogStartOffset, nil
		}
	}
	return 0, fmt.Errorf("topic %s has no partition %d", tp.Topic, tp.Partition)
}

// setBaseline records the position a successful lookup gave tp.
func (gc *Consumer) setBaseline(tp TopicPartition, off int64) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	gc.baseline[tp] = off
}
