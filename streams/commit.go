package streams

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
)

// One commit of one task is one request (docs/design.md "Streams"): its outputs, repartition
// and changelog records, and — exactly-once — the group offsets of every input
// partition of the task, unchanged ones too, so that a member that lost the task has
// even a punctuator's output refused. The request is sealed once, with its producer
// sequences, and sent again unchanged after an unknown outcome.

// commitOutcome is how a commit ended.
type commitOutcome struct {
	res     client.AtomicResult
	err     error
	dropped bool          // refused for good: drop the task
	took    time.Duration // from sending to the outcome
}

func (r *taskRunner) commit(u *unit) commitOutcome {
	a := r.a
	req, err := r.request(u)
	if err != nil {
		return commitOutcome{err: err}
	}
	offsets := r.groupOffsets(u)
	if len(req.Records) == 0 {
		return r.commitOffsets(offsets)
	}
	eos := a.cfg.Guarantee == ExactlyOnce
	if eos {
		epoch, _ := a.memberEpoch(nil)
		if epoch <= 0 {
			// Fenced or lapsed meanwhile: the member loop is dropping every task.
			return commitOutcome{err: errDropped, dropped: true}
		}
		req.GroupOffsets = &client.GroupCommit{Group: a.group(), MemberID: a.cfg.InstanceID, MemberEpoch: epoch, Offsets: offsets}
	}
	out := r.send(&req)
	if out.err != nil || eos {
		return out
	}
	// At least once: the outputs are visible; a crash before this commit processes
	// their inputs again.
	if o := r.commitOffsets(offsets); o.err != nil {
		return o
	}
	return out
}

// request seals a unit into a records request, with base sequences.
func (r *taskRunner) request(u *unit) (client.RecordsRequest, error) {
	a := r.a
	req := client.RecordsRequest{Records: make([]client.TopicRecord, 0, len(u.outs)+len(u.changelog))}
	for _, o := range u.outs {
		m := a.topics[o.topic]
		k, err := field(o.key, m.keyFormat, o.topic, "key")
		if err != nil {
			return req, fmt.Errorf("streams: task %s: %w", r.id, err)
		}
		v, err := field(o.value, m.valueFormat, o.topic, "value")
		if err != nil {
			return req, fmt.Errorf("streams: task %s: %w", r.id, err)
		}
		req.Records = append(req.Records, client.TopicRecord{Topic: o.topic, Record: client.Record{
			Key: k, Value: v, Headers: o.headers, Partition: client.Int32(o.partition), Timestamp: fromMsNonZero(o.ts)}})
	}
	for _, w := range u.changelog {
		rec := client.Record{Key: client.Binary(w.key), Partition: client.Int32(r.id.Partition), Timestamp: fromMsNonZero(w.ts)}
		if !w.del {
			rec.Value = client.Binary(w.value)
		}
		req.Records = append(req.Records, client.TopicRecord{Topic: a.topo.b.changelogTopic(w.store), Record: rec})
	}
	counts := map[client.TopicPartition]int32{}
	for _, rec := range req.Records {
		counts[client.TopicPartition{Topic: rec.Topic, Partition: *rec.Partition}]++
	}
	req.Producer = &client.ProducerSequences{ProducerIdentity: r.ident, Sequences: map[client.TopicPartition]int32{}}
	for tp, n := range counts {
		seq := r.nextSeq[tp]
		req.Producer.Sequences[tp] = seq
		r.nextSeq[tp] = int32((int64(seq) + int64(n)) % (1 << 31))
	}
	return req, nil
}

func fromMsNonZero(v int64) time.Time {
	if v == 0 {
		return time.UnixMilli(0).Add(time.Millisecond)
	}
	return fromMs(v)
}

// groupOffsets are the positions of every input partition at the unit's end, with the
// stream time.
func (r *taskRunner) groupOffsets(u *unit) []client.GroupOffset {
	offs := make([]client.GroupOffset, len(r.tps))
	for i, tp := range r.tps {
		offs[i] = client.GroupOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: u.b.positions[tp]}
		if u.b.hasTime {
			offs[i].Metadata = "st=" + strconv.FormatInt(u.b.streamTime, 10)
		}
	}
	return offs
}

// errNotMember: the member loop has dropped the membership (fenced, or the session
// lapsed): nothing of this member may commit.
var errNotMember = errors.New("streams: not a member of the group now")

// refusal says whether the server refused a commit for good: the member does not own
// the task any more, or another instance holds its transactional id.
func refusal(err error) bool {
	for _, c := range []string{client.CodeNotOwner, client.CodeUnknownMember, client.CodeGroupNotFound, client.CodeProducerFenced,
		client.CodeOutOfOrderSequence, client.CodeUnknownProducer} {
		if client.HasCode(err, c) {
			return true
		}
	}
	return false
}

// unknownOutcome says whether a commit may or may not have happened, or was not done
// and may succeed later: send the same request again.
func unknownOutcome(err error) bool {
	return client.StatusOf(err) == 0 || client.IsRetryable(err) || client.HasCode(err, "commit_outcome_unknown")
}

func (r *taskRunner) refused(err error) commitOutcome {
	r.a.metrics.CommitsRefused.Add(1)
	var e *client.Error
	code := ""
	if errors.As(err, &e) {
		code = e.Code
	}
	r.log().Warn("commit refused: dropping the task's pending work", "code", code, "err", err)
	return commitOutcome{err: errDropped, dropped: true}
}

// send sends the sealed request until it commits or is refused for good.
func (r *taskRunner) send(req *client.RecordsRequest) commitOutcome {
	a := r.a
	var epoch int32
	if req.GroupOffsets != nil {
		epoch = req.GroupOffsets.MemberEpoch
	}
	return r.attempts(epoch, func(e int32) {
		if req.GroupOffsets != nil {
			req.GroupOffsets.MemberEpoch = e
		}
	}, func(ctx context.Context) (client.AtomicResult, error) {
		res, err := a.c.ProduceRecords(ctx, *req)
		if err == nil && res.Duplicate {
			a.metrics.CommitDuplicates.Add(1)
			r.log().Info("commit answered as a duplicate: an earlier attempt had committed", "records", len(req.Records))
		}
		return res, err
	})
}

// commitOffsets commits the offsets alone (nothing to produce), at the member's epoch.
func (r *taskRunner) commitOffsets(offsets []client.GroupOffset) commitOutcome {
	a := r.a
	epoch, _ := a.memberEpoch(nil)
	return r.attempts(epoch, func(e int32) { epoch = e }, func(ctx context.Context) (client.AtomicResult, error) {
		if epoch <= 0 {
			return client.AtomicResult{}, errNotMember
		}
		return client.AtomicResult{}, a.c.CommitOffsets(ctx, a.group(), a.cfg.InstanceID, epoch, offsets)
	})
}

// attempts runs one commit call until it succeeds or is refused: an unknown outcome is
// sent again unchanged; one refused for a stale member epoch (epoch, the one it
// carries) is sent again at the new epoch (setEpoch) after a heartbeat, if the task is
// still this member's.
func (r *taskRunner) attempts(epoch int32, setEpoch func(int32), call func(context.Context) (client.AtomicResult, error)) commitOutcome {
	a := r.a
	backoff := 50 * time.Millisecond
	stale := 0
	for attempt := 0; ; attempt++ {
		// A commit once cut is sent at least once, even by a task being dropped: the
		// server is the judge of whether it still may commit, and an attempt already
		// on the wire is not cut short.
		if attempt > 0 && r.ctx.Err() != nil {
			return commitOutcome{err: errDropped, dropped: true}
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), a.cfg.RequestTimeout)
		res, err := call(ctx)
		cancel()
		switch {
		case err == nil:
			return commitOutcome{res: res}
		case client.HasCode(err, client.CodeStaleMemberEpoch):
			// The member was granted partitions meanwhile: its epoch moved on. A task
			// it still holds commits at the new epoch; a mere bump never drops one.
			a.heartbeatNow(r.ctx)
			cur, owned := a.memberEpoch(r.tps)
			if !owned && !r.revoking() || cur <= 0 {
				return r.refused(err)
			}
			if cur == epoch {
				if stale++; stale > 20 {
					return r.refused(err)
				}
				_ = ctxwait.Sleep(r.ctx, backoff)
				continue
			}
			epoch = cur
			setEpoch(cur)
			a.metrics.EpochResends.Add(1)
		case refusal(err):
			return r.refused(err)
		case errors.Is(err, errNotMember) || r.ctx.Err() != nil:
			return commitOutcome{err: errDropped, dropped: true}
		case unknownOutcome(err):
			a.metrics.CommitResends.Add(1)
			r.log().Warn("commit outcome unknown: sending the same request again", "err", err)
			if ctxwait.Sleep(r.ctx, backoff) != nil {
				return commitOutcome{err: errDropped, dropped: true}
			}
			backoff = min(2*backoff, 2*time.Second)
		default:
			return commitOutcome{err: fmt.Errorf("streams: task %s: commit: %w", r.id, err)}
		}
	}
}

// confirmed applies a committed unit locally, with the changelog offsets as the
// stores' checkpoints, and purges consumed repartition records now and then.
func (r *taskRunner) confirmed(t *task, u *unit, out commitOutcome) error {
	a := r.a
	cps := map[string]int64{}
	if len(out.res.Offsets) == len(u.outs)+len(u.changelog) {
		for j, w := range u.changelog {
			off := out.res.Offsets[len(u.outs)+j].Offset
			if cur, ok := cps[w.store]; !ok || off > cur {
				cps[w.store] = off
			}
		}
	} else if len(u.changelog) > 0 {
		return fmt.Errorf("streams: task %s: the commit answered %d offsets for %d records", r.id, len(out.res.Offsets), len(u.outs)+len(u.changelog))
	}
	if err := t.confirmed(u, cps); err != nil {
		return err
	}
	a.metrics.Commits.Add(1)
	t.pm.committed(out.took)
	for _, p := range r.parts {
		if p.hwm >= 0 {
			t.pm.lagOf(p.tp.Topic, p.hwm-u.b.positions[p.tp])
		}
	}
	r.purge(u)
	return nil
}

// purge deletes consumed repartition records below the committed offsets, at most
// every few seconds per task, in the background (best effort: a failure only keeps
// records longer).
func (r *taskRunner) purge(u *unit) {
	if time.Since(r.purgeAt) < 5*time.Second {
		return
	}
	r.purgeAt = time.Now()
	for _, src := range r.sub.sources {
		if !src.internal {
			continue
		}
		tp := client.TopicPartition{Topic: src.topic, Partition: r.id.Partition}
		off := u.b.positions[tp]
		if off <= r.purged[tp] {
			continue
		}
		r.purged[tp] = off
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			ctx, cancel := context.WithTimeout(r.ctx, r.a.cfg.RequestTimeout)
			defer cancel()
			if _, err := r.a.c.DeleteRecords(ctx, tp.Topic, tp.Partition, off); err != nil {
				r.log().Warn("purging consumed repartition records", "partition", tp.String(), "err", err)
				return
			}
			r.a.metrics.RepartitionPurges.Add(1)
		}()
	}
}
