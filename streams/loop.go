package streams

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
)

// fetched is one fetch of an input partition.
type fetched struct {
	idx   int
	recs  []rawRecord
	atEnd bool
	hwm   int64
	err   error
}

// fetcher reads one input partition ahead of the task, one fetch per credit, so at
// most two batches per partition wait in memory.
type fetcher struct {
	tp     client.TopicPartition
	credit chan struct{}
	asked  bool
}

func (r *taskRunner) fetch(ctx context.Context, idx int, f *fetcher, offset int64, out chan<- fetched) {
	a := r.a
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.credit:
		}
		for {
			fctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout+a.cfg.FetchWait)
			// Record batches as stored: exact bytes, no JSON or base64 on the way.
			res, err := a.c.FetchBinary(fctx, f.tp.Topic, f.tp.Partition, client.FetchOptions{Offset: offset, MaxRecords: a.cfg.FetchMaxRecords, Wait: a.cfg.FetchWait})
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if client.StatusOf(err) >= 400 && !client.IsRetryable(err) {
					select {
					case out <- fetched{idx: idx, err: fmt.Errorf("streams: fetch %s at %d: %w", f.tp, offset, err)}:
					case <-ctx.Done():
					}
					return
				}
				a.log.Debug("fetch failed; retrying", "partition", f.tp.String(), "err", err)
				if ctxwait.Sleep(ctx, backoff) != nil {
					return
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
			b := fetched{idx: idx, atEnd: res.NextOffset >= res.HighWatermark, hwm: res.HighWatermark, recs: make([]rawRecord, 0, len(res.Records))}
			for _, rec := range res.Records {
				b.recs = append(b.recs, rawOf(f.tp, rec))
			}
			if res.NextOffset > offset {
				offset = res.NextOffset
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
			break
		}
	}
}

func rawOf(tp client.TopicPartition, rec client.RawRecord) rawRecord {
	r := rawRecord{Topic: tp.Topic, Partition: tp.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value, TS: ms(rec.Timestamp)}
	if len(rec.Headers) > 0 {
		r.Headers = make([]client.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			r.Headers[i] = client.Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

// loop processes, punctuates and commits until the task is revoked (then it commits
// everything processed and returns nil) or lost (errDropped).
func (r *taskRunner) loop(t *task) error {
	a := r.a
	fctx, stopFetch := context.WithCancel(r.ctx)
	var fwg sync.WaitGroup
	defer func() { stopFetch(); fwg.Wait() }()
	batches := make(chan fetched, len(r.tps))
	parts := make([]*inputPart, len(r.tps))
	fetchers := make([]*fetcher, len(r.tps))
	for i, tp := range r.tps {
		parts[i] = &inputPart{tp: tp, hwm: -1}
		fetchers[i] = &fetcher{tp: tp, credit: make(chan struct{}, 1)}
		fwg.Add(1)
		go func() { defer fwg.Done(); r.fetch(fctx, i, fetchers[i], t.positions[tp], batches) }()
	}
	r.parts = parts
	var (
		inflight   chan commitOutcome
		cur        *unit
		lastCommit = time.Now()
		tick       = time.NewTimer(a.cfg.CommitInterval)
		closing    bool
	)
	defer tick.Stop()
	settle := func(out commitOutcome) error {
		inflight = nil
		if out.err != nil {
			return out.err
		}
		return r.confirmed(t, cur, out)
	}
	for {
		select {
		case out := <-inflight:
			if err := settle(out); err != nil {
				return err
			}
		case <-r.ctx.Done():
			return r.lastAttempt(t, inflight, cur)
		default:
		}
		revoking := r.revoking()
		if revoking && !closing {
			closing = true
			a.setStatus(r.id, TaskClosing)
		}
		if !revoking {
			for i, f := range fetchers { // more input where little waits
				if !f.asked && len(parts[i].queue) < a.cfg.FetchMaxRecords {
					f.asked = true
					f.credit <- struct{}{}
				}
			}
		}
		processed, err := r.process(t, parts, revoking)
		if err != nil {
			return err
		}
		if inflight == nil && (revoking || len(t.cuts) > 0 || time.Since(lastCommit) >= a.cfg.CommitInterval) {
			lastCommit = time.Now()
			if cur = t.nextUnit(); cur != nil {
				inflight = make(chan commitOutcome, 1)
				go func(u *unit, out chan<- commitOutcome) {
					start := time.Now()
					o := r.commit(u)
					o.took = time.Since(start)
					out <- o
				}(cur, inflight)
			} else if revoking {
				r.log().Info("task revoked: committed and closed")
				return nil
			}
		}
		if processed > 0 && !t.waiting() {
			// More may be processable now; take batches that arrived meanwhile first.
			if err := drain(batches, parts, fetchers); err != nil {
				return err
			}
			continue
		}
		resetTimer(tick, max(a.cfg.CommitInterval-time.Since(lastCommit), time.Millisecond))
		select {
		case <-r.ctx.Done():
			return r.lastAttempt(t, inflight, cur)
		case <-r.revoked:
		case <-tick.C:
		case b := <-batches:
			if err := take(b, parts, fetchers); err != nil {
				return err
			}
		case out := <-inflight:
			if err := settle(out); err != nil {
				return err
			}
		}
	}
}

// lastAttempt ends a lost task: the member believes it no longer holds it (fenced, or
// its session lapsed as far as it can tell). The commit in flight is settled, then the
// due punctuators run and what is uncommitted is sent once: the server, not this
// member's view of its session, decides whether it may still commit, and a member that
// lost its tasks gets its refusal rather than silence. Nothing more is applied
// locally; the task restores from the changelog if it comes back.
func (r *taskRunner) lastAttempt(t *task, inflight chan commitOutcome, cur *unit) error {
	if inflight != nil {
		// Settled before anything else is cut: a unit sent again under new sequences
		// would commit twice.
		out := <-inflight
		if out.err != nil || r.confirmed(t, cur, out) != nil {
			return errDropped
		}
	}
	t.punctuateWall(time.Now())
	if t.err == nil {
		if u := t.nextUnit(); u != nil {
			r.commit(u)
		}
	}
	return errDropped
}

// process runs up to 2,000 records by the determinism rule, unless revoking or a cut
// waits behind the commit in flight, then the due wall-clock punctuators.
func (r *taskRunner) process(t *task, parts []*inputPart, revoking bool) (int, error) {
	if revoking {
		return 0, nil
	}
	processed := 0
	for !t.waiting() && processed < 2000 {
		p, ok := pick(parts)
		if !ok {
			break
		}
		rec := p.queue[0]
		p.queue = p.queue[1:]
		t.processBounded(rec)
		processed++
		if t.err != nil {
			return processed, t.err
		}
		if t.full() && len(t.cuts) == 0 {
			t.cut(t.end())
		}
	}
	t.punctuateWall(time.Now())
	return processed, t.err
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// take queues a fetched batch.
func take(b fetched, parts []*inputPart, fetchers []*fetcher) error {
	if b.err != nil {
		return b.err
	}
	p := parts[b.idx]
	p.queue = append(p.queue, b.recs...)
	p.atEnd = b.atEnd
	p.hwm = b.hwm
	fetchers[b.idx].asked = false
	return nil
}

// drain queues every batch waiting, without blocking.
func drain(batches chan fetched, parts []*inputPart, fetchers []*fetcher) error {
	for {
		select {
		case b := <-batches:
			if err := take(b, parts, fetchers); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}
