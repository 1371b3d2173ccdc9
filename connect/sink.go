package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/segment"
)

// A sink task is a member of its connector's group, connect-<name>, through the core's
// server-side groups (the catalog's, as every consumer's): heartbeats bring its
// partitions, and its offsets commit at its member epoch, so a member that lost a
// partition cannot commit it. It fetches, converts, transforms and puts records, and
// every offset.flush.interval.ms (or sooner, when much is buffered) asks the task what is
// durable downstream (PreCommit) and commits that. A member that has not heard the
// group within its session stops writing on its own before the group hands its
// partitions on: leases cannot stop a paused process, so the process must.

// Bounds of what a sink puts between flushes.
const (
	sinkFetchRecords = 1000
	sinkFlushRecords = 50000
	sinkIdleWait     = 200 * time.Millisecond
)

type sinkContext struct{ e *taskEnv }

func (c sinkContext) Logger() *slog.Logger { return c.e.log }

// sinkPart is one partition a member holds.
type sinkPart struct {
	next      int64 // offset to fetch next
	committed int64 // offset last committed
}

type sinkRun struct {
	e        *taskEnv
	task     SinkTask
	group    string
	member   string
	epoch    int32
	session  time.Duration
	topics   []string
	owned    map[TopicPartition]*sinkPart
	beatSent time.Time // when the last heartbeat the group answered was sent
	nextBeat time.Time
	flushed  time.Time
	pending  int // records put since the last flush
	interval time.Duration
	flushing bool // a heartbeat within a flush leaves revoked partitions to it
	// retryAt is when a heartbeat that failed may be tried again (its delay doubles,
	// from sinkRetryDelay to sinkRetryDelayMax, until one succeeds): the loop waits for
	// it rather than spinning, and losing the membership does not bring it forward.
	retryAt    time.Time
	beatDelay  time.Duration
	fetchDelay time.Duration // the same for fetches that fail
}

// Backoff of a sink's failed calls.
const (
	sinkRetryDelay    = 250 * time.Millisecond
	sinkRetryDelayMax = 5 * time.Second
)

// backoff doubles *d from sinkRetryDelay up to sinkRetryDelayMax and answers the wait.
func backoff(d *time.Duration) time.Duration {
	if *d == 0 {
		*d = sinkRetryDelay
	} else {
		*d = min(2**d, sinkRetryDelayMax)
	}
	return *d
}

func runSink(ctx context.Context, e *taskEnv, task SinkTask, session time.Duration) error {
	s := &sinkRun{
		e: e, task: task, group: sinkGroup(e.fence.Connector),
		member:  fmt.Sprintf("%s-%d-g%d", e.fence.Connector, e.fence.Task, e.fence.Generation),
		session: session, topics: e.g.list(cfgTopics), owned: map[TopicPartition]*sinkPart{},
		interval: time.Duration(e.g.int64(cfgFlushInterval)) * time.Millisecond,
	}
	if err := e.ensureDLQ(ctx); err != nil {
		return err
	}
	if err := e.policy.retry(ctx, func() error { return task.Start(ctx, e.cfg, sinkContext{e}) }); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer task.Stop()
	e.report(ctx, catalog.StateRunning, "")
	e.sawTopics(ctx, s.topics...)
	err := s.loop(ctx)
	s.leave(ctx, err == nil)
	return err
}

func (s *sinkRun) loop(ctx context.Context) error {
	s.flushed = time.Now()
	for ctx.Err() == nil {
		if !time.Now().Before(s.nextBeat) {
			if err := s.heartbeat(ctx); err != nil {
				return err
			}
		}
		if !s.e.waitRunning(ctx, func() { _ = s.heartbeat(ctx) }) {
			return nil
		}
		if !s.leaseValid() {
			s.lose(ctx, "the group has not answered within the session")
			_ = ctxwait.Sleep(ctx, time.Until(s.nextBeat)) // now, or after a failed heartbeat's backoff
			continue
		}
		n, err := s.fetchAndPut(ctx)
		if err != nil {
			return err
		}
		if s.pending >= sinkFlushRecords || time.Since(s.flushed) >= s.interval {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
		if n == 0 && len(s.owned) == 0 {
			_ = ctxwait.Sleep(ctx, min(sinkIdleWait, time.Until(s.nextBeat)))
		}
	}
	return nil
}

// leaseValid: the group answered a heartbeat sent within the session, less a margin.
func (s *sinkRun) leaseValid() bool {
	return s.epoch > 0 && time.Since(s.beatSent) < s.session-s.session/5
}

// heartbeat renews the membership and applies the assignment: partitions taken away
// are flushed (committed while still ours) and closed; new ones opened at their
// committed offsets.
func (s *sinkRun) heartbeat(ctx context.Context) error {
	hb := catalog.Heartbeat{Group: s.group, MemberID: s.member, MemberEpoch: s.epoch, SessionTimeout: s.session, Owned: s.ownedList()}
	if s.epoch == 0 {
		// Joining (again, after the membership was lost): only while this instance is
		// still its task's — a paused instance whose task moved on must not come back.
		state := catalog.StateRunning
		if paused, _ := s.e.control.state(); paused {
			state = catalog.StatePaused
		}
		if err := s.e.store.ReportTaskState(ctx, s.e.fence, s.e.worker, state, ""); errors.Is(err, catalog.ErrStaleGeneration) {
			return fmt.Errorf("%w: %v", errFenced, err)
		}
		hb.Topics = s.topics
	}
	sent := time.Now()
	hctx, cancel := context.WithTimeout(ctx, s.session/2)
	res, err := s.e.core.Heartbeat(hctx, s.e.who, hb)
	cancel()
	if err != nil {
		var be *broker.Error
		if errors.As(err, &be) && (be.Code == broker.CodeUnknownMember || be.Code == broker.CodeStaleMemberEpoch) {
			s.lose(ctx, be.Message)
			s.nextBeat = time.Now() // join again at once
			return nil
		}
		if errors.As(err, &be) && be.Code == broker.CodeTopicNotFound {
			return &failedError{f: failure{stage: "KAFKA_CONSUME", class: "broker", err: err, offset: -1}}
		}
		if be, ok := forbidden(err); ok {
			if err := s.e.refused(ctx, "KAFKA_CONSUME", "group heartbeat", be); err != nil {
				return err
			}
			s.nextBeat = time.Now()
			return nil
		}
		s.e.log.Warn("sink heartbeat", "err", err)
		s.retryAt = time.Now().Add(backoff(&s.beatDelay))
		s.nextBeat = s.retryAt
		return nil
	}
	s.e.allowed("group heartbeat")
	s.retryAt, s.beatDelay = time.Time{}, 0
	s.epoch, s.beatSent = res.MemberEpoch, sent
	s.nextBeat = sent.Add(res.HeartbeatInterval)
	assigned := map[TopicPartition]bool{}
	for _, tp := range res.Assignment {
		for _, p := range tp.Partitions {
			assigned[TopicPartition{tp.Topic, p}] = true
		}
	}
	var revoked []TopicPartition
	for tp := range s.owned {
		if !assigned[tp] {
			revoked = append(revoked, tp)
		}
	}
	if len(revoked) > 0 {
		if !s.flushing {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
		if err := s.task.Close(ctx, revoked); err != nil {
			return fmt.Errorf("close %v: %w", revoked, err)
		}
		for _, tp := range revoked {
			delete(s.owned, tp)
		}
		s.nextBeat = time.Now() // acknowledge the revocation at once
	}
	var added []TopicPartition
	for tp := range assigned {
		if s.owned[tp] == nil {
			added = append(added, tp)
		}
	}
	if len(added) > 0 {
		return s.open(ctx, added)
	}
	return nil
}

func (s *sinkRun) ownedList() []catalog.TopicPartitions {
	by := map[string][]int32{}
	for tp := range s.owned {
		by[tp.Topic] = append(by[tp.Topic], tp.Partition)
	}
	out := []catalog.TopicPartitions{}
	for t, ps := range by {
		slices.Sort(ps)
		out = append(out, catalog.TopicPartitions{Topic: t, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// open hands newly assigned partitions to the task at their committed offsets (the log
// start for a partition without one).
func (s *sinkRun) open(ctx context.Context, added []TopicPartition) error {
	offs, err := s.e.core.GroupOffsets(ctx, s.e.who, s.group)
	if be, ok := forbidden(err); ok {
		if err := s.e.refused(ctx, "KAFKA_CONSUME", "committed offsets", be); err != nil {
			return err
		}
		s.nextBeat = time.Now() // partitions not opened: the next heartbeat offers them again
		return nil
	}
	s.e.allowed("committed offsets")
	if err != nil {
		var be *broker.Error
		if !errors.As(err, &be) || be.Code != broker.CodeGroupNotFound {
			s.e.log.Warn("sink: read committed offsets; retrying at the next heartbeat", "err", err)
			s.nextBeat = time.Now().Add(time.Second)
			return nil
		}
	}
	committed := map[TopicPartition]int64{}
	for _, o := range offs {
		committed[TopicPartition{o.Topic, o.Partition}] = o.Offset
	}
	start := map[TopicPartition]int64{}
	for _, tp := range added {
		off, ok := committed[tp]
		if !ok {
			if off, err = s.e.core.ListOffset(ctx, s.e.who, tp.Topic, tp.Partition, broker.Earliest); err != nil {
				if be, ok := forbidden(err); ok {
					if err := s.e.refused(ctx, "KAFKA_CONSUME", "log start offset", be); err != nil {
						return err
					}
				}
				s.e.log.Warn("sink: find the log start; retrying at the next heartbeat", "partition", tp, "err", err)
				s.nextBeat = time.Now().Add(time.Second)
				continue
			}
		}
		start[tp] = off
	}
	if len(start) == 0 {
		return nil
	}
	if err := s.task.Open(ctx, start); err != nil {
		return fmt.Errorf("open %v: %w", added, err)
	}
	for tp, off := range start {
		s.owned[tp] = &sinkPart{next: off, committed: off}
	}
	return nil
}

// lose drops every partition without committing: the membership is gone (or cannot be
// trusted), so the group may already have handed them on. The member joins again at
// its next heartbeat (not before a failed one's backoff has passed).
func (s *sinkRun) lose(ctx context.Context, why string) {
	if len(s.owned) > 0 {
		tps := make([]TopicPartition, 0, len(s.owned))
		for tp := range s.owned {
			tps = append(tps, tp)
		}
		s.e.log.Warn("sink: dropping its partitions uncommitted", "why", why, "partitions", len(tps))
		if err := s.task.Close(ctx, tps); err != nil {
			s.e.log.Warn("sink: close", "err", err)
		}
		s.owned = map[TopicPartition]*sinkPart{}
	}
	s.epoch, s.pending = 0, 0
	s.nextBeat = time.Now()
	if s.retryAt.After(s.nextBeat) {
		s.nextBeat = s.retryAt
	}
}

// fetchAndPut reads each owned partition once and puts what it got; it answers how
// many records it read. When nothing was read it waits for records on one partition.
func (s *sinkRun) fetchAndPut(ctx context.Context) (int, error) {
	total := 0
	tps := make([]TopicPartition, 0, len(s.owned))
	for tp := range s.owned {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].String() < tps[j].String() })
	for i, tp := range tps {
		p := s.owned[tp]
		wait := time.Duration(0)
		if i == len(tps)-1 && total == 0 {
			wait = min(sinkIdleWait, max(time.Until(s.nextBeat), 0))
		}
		res, err := s.e.core.Fetch(ctx, s.e.who, broker.FetchRequest{Topic: tp.Topic, Partition: tp.Partition, Offset: p.next,
			MaxRecords: sinkFetchRecords, Wait: wait})
		if err != nil {
			var be *broker.Error
			if errors.As(err, &be) && be.Code == broker.CodeOffsetOutOfRange {
				if start, ok := be.Details["log_start_offset"].(int64); ok && p.next < start {
					s.e.log.Warn("sink: records below the log start are gone; skipping to it", "partition", tp, "from", p.next, "to", start)
					p.next = start
				}
				continue
			}
			if ctx.Err() != nil {
				return total, nil
			}
			if be, ok := forbidden(err); ok {
				if err := s.e.refused(ctx, "KAFKA_CONSUME", "fetch", be); err != nil {
					return total, err
				}
				continue
			}
			d := backoff(&s.fetchDelay)
			s.e.log.Warn("sink: fetch; trying again after a backoff", "partition", tp, "delay", d, "err", err)
			_ = ctxwait.Sleep(ctx, d)
			continue
		}
		s.e.allowed("fetch")
		s.fetchDelay = 0
		if len(res.Records) == 0 {
			continue
		}
		total += len(res.Records)
		if err := s.put(ctx, tp, res.Records); err != nil {
			return total, err
		}
		p.next = res.Records[len(res.Records)-1].Offset + 1
	}
	return total, nil
}

// put converts and transforms a partition's records and hands them to the task; each
// failure is the error policy's (its dead letters are produced before the next commit).
func (s *sinkRun) put(ctx context.Context, tp TopicPartition, recs []segment.DecodedRecord) error {
	e := s.e
	var out []Record
	var dead []broker.Record
	for _, dr := range recs {
		r, f := e.sinkRecord(tp, dr)
		if f != nil {
			d, err := e.policy.tolerate(*f)
			if err != nil {
				return err
			}
			if d != nil {
				dead = append(dead, *d)
			}
			continue
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	for len(out) > 0 {
		if !s.leaseValid() {
			return nil // dropped at the next turn of the loop
		}
		err := e.policy.retry(ctx, func() error { return s.task.Put(ctx, out) })
		var bad *BadRecordError
		switch {
		case err == nil:
			out = nil
		case errors.As(err, &bad) && bad.Index >= 0 && bad.Index < len(out):
			r := out[bad.Index]
			d, terr := e.policy.tolerate(failure{stage: stagePut, class: e.cfg[cfgClass], err: bad.Err, topic: r.Topic,
				partition: r.Partition, offset: r.Offset, key: rawOf(recs, r.Offset, true), value: rawOf(recs, r.Offset, false)})
			if terr != nil {
				return terr
			}
			if d != nil {
				dead = append(dead, *d)
			}
			out = out[bad.Index+1:]
		default:
			return &failedError{f: failure{stage: stagePut, class: e.cfg[cfgClass], err: err, topic: tp.Topic, partition: tp.Partition, offset: -1}}
		}
	}
	s.pending += len(recs)
	if len(dead) > 0 {
		if err := e.policy.retry(ctx, func() error {
			_, err := e.core.Produce(ctx, e.who, broker.ProduceRequest{Records: dead})
			return err
		}); err != nil {
			return &failedError{f: failure{stage: stageProduce, class: "broker", err: fmt.Errorf("dead-letter records: %w", err), offset: -1}}
		}
	}
	return nil
}

func rawOf(recs []segment.DecodedRecord, off int64, key bool) []byte {
	for _, r := range recs {
		if r.Offset == off {
			if key {
				return r.Key
			}
			return r.Value
		}
	}
	return nil
}

// sinkRecord converts and transforms one fetched record; nil, nil: filtered.
func (e *taskEnv) sinkRecord(tp TopicPartition, dr segment.DecodedRecord) (*Record, *failure) {
	f := &failure{topic: tp.Topic, partition: tp.Partition, offset: dr.Offset, key: dr.Key, value: dr.Value, headers: dr.Headers}
	key, err := e.keyConv.ToConnect(dr.Key)
	if err != nil {
		f.stage, f.class, f.err = stageKeyConverter, e.keyClass, err
		return nil, f
	}
	val, err := e.valConv.ToConnect(dr.Value)
	if err != nil {
		f.stage, f.class, f.err = stageValueConverter, e.valClass, err
		return nil, f
	}
	r := Record{Topic: tp.Topic, Partition: tp.Partition, Key: key, Value: val, Headers: fromSegmentHeaders(dr.Headers),
		Timestamp: dr.Timestamp, Offset: dr.Offset}
	out, err := e.chain.apply(r)
	if err != nil {
		f.stage, f.class, f.err = stageTransform, transformClass(err), err
		return nil, f
	}
	if out != nil {
		// A transform may rename the topic (a router), but the record stays the one
		// read: the task's partitions are what it consumes.
		out.Topic, out.Partition, out.Offset = tp.Topic, tp.Partition, dr.Offset
	}
	return out, nil
}

// flush asks the task what is durable downstream and commits it as the group's offsets
// (at the member's epoch; a stale epoch gets one heartbeat and one more try).
func (s *sinkRun) flush(ctx context.Context) error {
	s.flushed = time.Now()
	s.flushing = true
	defer func() { s.flushing = false }()
	if len(s.owned) == 0 || !s.leaseValid() {
		return nil
	}
	var durable map[TopicPartition]int64
	if err := s.e.policy.retry(ctx, func() (err error) {
		durable, err = s.task.PreCommit(ctx)
		return err
	}); err != nil {
		return &failedError{f: failure{stage: stagePut, class: s.e.cfg[cfgClass], err: fmt.Errorf("pre-commit: %w", err), offset: -1}}
	}
	s.pending = 0
	s.e.fail.hit(fpSinkAfterPut)
	var offs []catalog.CommitOffset
	for tp, off := range durable {
		if p := s.owned[tp]; p != nil && off != p.committed {
			offs = append(offs, catalog.CommitOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
		}
	}
	if len(offs) == 0 {
		return nil
	}
	sort.Slice(offs, func(i, j int) bool {
		return offs[i].Topic < offs[j].Topic || (offs[i].Topic == offs[j].Topic && offs[i].Partition < offs[j].Partition)
	})
	for try := 0; ; try++ {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		err := s.e.core.CommitOffsets(cctx, s.e.who, catalog.OffsetCommit{Group: s.group, MemberID: s.member, MemberEpoch: s.epoch, Offsets: offs})
		cancel()
		var be *broker.Error
		switch {
		case err == nil:
			s.e.allowed("offset commit")
			for _, o := range offs {
				s.owned[TopicPartition{o.Topic, o.Partition}].committed = o.Offset
			}
			return nil
		case errors.As(err, &be) && be.Code == broker.CodeStaleMemberEpoch && try == 0:
			if err := s.heartbeat(ctx); err != nil {
				return err
			}
			offs = slices.DeleteFunc(offs, func(o catalog.CommitOffset) bool { return s.owned[TopicPartition{o.Topic, o.Partition}] == nil })
			if len(offs) == 0 {
				return nil
			}
		case errors.As(err, &be) && (be.Code == broker.CodeNotOwner || be.Code == broker.CodeUnknownMember || be.Code == broker.CodeStaleMemberEpoch):
			s.lose(ctx, "offset commit refused: "+be.Message)
			s.nextBeat = time.Now()
			return nil
		case errors.As(err, &be) && be.Code == broker.CodeForbidden:
			// Counted; tried again at the next flush (a flush interval away).
			return s.e.refused(ctx, "KAFKA_CONSUME", "offset commit", be)
		default:
			s.e.log.Warn("sink: offset commit failed; the records are written again from the last commit if this member goes", "err", err)
			return nil
		}
	}
}

// leave flushes (when the task stops cleanly) and leaves the group, so its partitions
// move at once rather than when the session ends.
func (s *sinkRun) leave(ctx context.Context, clean bool) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if clean && s.epoch > 0 {
		if err := s.flush(lctx); err != nil {
			s.e.log.Warn("sink: final flush", "err", err)
		}
	}
	if s.epoch > 0 {
		_, err := s.e.core.Heartbeat(lctx, s.e.who, catalog.Heartbeat{Group: s.group, MemberID: s.member, MemberEpoch: catalog.LeaveEpoch})
		if err != nil {
			s.e.log.Warn("sink: leave the group", "err", err)
		}
	}
}

// afterIdle ticks while a paused task waits, when it has something to do meanwhile.
func afterIdle(idle func()) <-chan time.Time {
	if idle == nil {
		return nil
	}
	return time.After(sinkIdleWait)
}
