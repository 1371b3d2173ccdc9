package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
)

// Timeouts of the runner's own calls.
const (
	commitTimeout = 30 * time.Second
	reportTimeout = 10 * time.Second
)

// sourceContext is what a source task sees of its runtime.
type sourceContext struct{ e *taskEnv }

func (c sourceContext) Logger() *slog.Logger { return c.e.log }

func (c sourceContext) ReportMetrics(ctx context.Context, m map[string]any) error {
	err := c.e.store.ReportTaskMetrics(ctx, c.e.fence, catalog.MarshalCanonical(m))
	if errors.Is(err, catalog.ErrStaleGeneration) {
		return fmt.Errorf("%w: %v", errFenced, err)
	}
	return err
}

func (c sourceContext) Offsets(ctx context.Context) ([]Offset, error) {
	stored, err := c.e.store.SourceOffsets(ctx, c.e.fence)
	if errors.Is(err, catalog.ErrStaleGeneration) {
		return nil, fmt.Errorf("%w: %v", errFenced, err)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Offset, 0, len(stored))
	for _, o := range stored {
		d, err := decodeOffset(o)
		if err != nil {
			return nil, fmt.Errorf("stored offset %s: %w", o.Partition, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// runSource runs a source task: poll → transforms → converters → one commit of the
// batch's records (dead letters among them) and offsets → Committed, until ctx ends or
// the task fails or is fenced. A task whose ctx has ended still polls once and sends
// what it gets, once: the catalog, not this worker's view of its lease, decides whether
// it may still commit (a zombie hears its refusal and logs it).
func runSource(ctx context.Context, e *taskEnv, task SourceTask) error {
	if err := e.ensureDLQ(ctx); err != nil {
		return err
	}
	if err := e.policy.retry(ctx, func() error { return task.Start(ctx, e.cfg, sourceContext{e}) }); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer task.Stop()
	e.report(ctx, catalog.StateRunning, "")
	for {
		last := ctx.Err() != nil
		if !last && !e.waitRunning(ctx, nil) {
			if paused, _ := e.control.state(); paused {
				return nil // stopped while paused: nothing was polled
			}
			last = true
		}
		var b SourceBatch
		pctx, cancel := e.control.untilPaused(ctx)
		err := e.policy.retry(pctx, func() (err error) {
			b, err = task.Poll(pctx)
			return err
		})
		cancel()
		if err != nil && pctx.Err() == nil {
			return &failedError{f: failure{stage: stagePoll, class: e.cfg[cfgClass], err: err, offset: -1}}
		}
		if len(b.Records) > 0 || len(b.Offsets) > 0 {
			e.fail.hit(fpSourceAfterPoll)
			req, err := e.sourceRequest(b)
			if err != nil {
				return err
			}
			if err := e.commitSource(ctx, req); err != nil {
				return err
			}
			e.fail.hit(fpSourceAfterCommit)
			if err := task.Committed(ctx, b); err != nil && ctx.Err() == nil {
				e.log.Warn("source task: after the commit", "err", err)
			}
		}
		if last || ctx.Err() != nil {
			return nil
		}
	}
}

// sourceRequest turns a batch into the commit: each record through the transforms and
// the converters, failures handled by the error policy (a dead-letter record joins the
// commit), and the offsets.
func (e *taskEnv) sourceRequest(b SourceBatch) (broker.SourceRequest, error) {
	req := broker.SourceRequest{Source: catalog.SourceCommit{Fence: e.fence}}
	for _, o := range b.Offsets {
		so, err := encodeOffset(o)
		if err != nil {
			return req, fmt.Errorf("source task: %w", err)
		}
		req.Source.Offsets = append(req.Source.Offsets, so)
	}
	for _, r := range b.Records {
		rec, dead, err := e.sourceRecord(r)
		if err != nil {
			return req, err
		}
		if rec != nil {
			req.Records = append(req.Records, *rec)
		}
		if dead != nil {
			req.Records = append(req.Records, *dead)
		}
	}
	return req, nil
}

// sourceRecord converts one record; a failure yields its dead letter (or nothing, or
// the task's error).
func (e *taskEnv) sourceRecord(r Record) (rec, dead *broker.Record, err error) {
	f := failure{topic: r.Topic, partition: r.Partition, offset: -1, headers: toSegmentHeaders(r.Headers)}
	raw := func(v any) []byte {
		if b, ok := v.([]byte); ok {
			return b
		}
		b, _ := jsonConverter{}.FromConnect(v)
		return b
	}
	if r.Err != nil {
		f.stage, f.class, f.err, f.value = stagePoll, e.cfg[cfgClass], r.Err, raw(r.Value)
		dead, err = e.policy.tolerate(f)
		return nil, dead, err
	}
	out, err := e.chain.apply(r)
	if err != nil {
		f.stage, f.class, f.err, f.key, f.value = stageTransform, transformClass(err), err, raw(r.Key), raw(r.Value)
		dead, err = e.policy.tolerate(f)
		return nil, dead, err
	}
	if out == nil {
		return nil, nil, nil // filtered
	}
	key, err := e.keyConv.FromConnect(out.Key)
	if err != nil {
		f.stage, f.class, f.err, f.value = stageKeyConverter, e.keyClass, err, raw(out.Value)
		dead, err = e.policy.tolerate(f)
		return nil, dead, err
	}
	val, err := e.valConv.FromConnect(out.Value)
	if err != nil {
		f.stage, f.class, f.err, f.key, f.value = stageValueConverter, e.valClass, err, key, raw(out.Value)
		dead, err = e.policy.tolerate(f)
		return nil, dead, err
	}
	return &broker.Record{Topic: out.Topic, Partition: out.Partition, Key: key, Value: val,
		Headers: toSegmentHeaders(out.Headers), Timestamp: out.Timestamp}, nil, nil
}

func transformClass(err error) string {
	var te *transformError
	if errors.As(err, &te) {
		return te.class
	}
	return "transform"
}

// commitSource commits a batch through the core, with the catalog's answer final: a
// stale generation fences the instance; a record the core refuses is handled by the
// error policy (produce stage) and the rest sent again; failures a retry may cure are
// retried while the task runs (a batch of a stopping task is sent once more at most);
// a refusal of its principal is tried again after a backoff, a few times, then fails the
// task (refused);
// an unknown outcome is settled by restarting the task (a new generation), which waits
// for any commit of the old one still in flight and refuses any later.
func (e *taskEnv) commitSource(ctx context.Context, req broker.SourceRequest) error {
	delay := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		_, err := e.core.CommitSource(cctx, e.who, req)
		cancel()
		if err == nil {
			e.allowed("commit")
			var topics []string
			for i, r := range req.Records {
				if i == 0 || r.Topic != req.Records[i-1].Topic {
					topics = append(topics, r.Topic)
				}
			}
			e.sawTopics(ctx, topics...)
			return nil
		}
		be := broker.AsError("commit source", err)
		switch {
		case be.Code == broker.CodeStaleGeneration:
			e.log.Warn("commit refused: this task instance is fenced (stale generation); stopping it", "code", be.Code, "err", be.Message)
			return fmt.Errorf("%w: %s", errFenced, be.Message)
		case be.Code == broker.CodeCommitOutcomeUnknown:
			return e.settleUnknown(ctx, be)
		case be.Code == broker.CodeForbidden:
			// Not the record's fault: its principal may not write a topic (or a
			// dead-letter topic). Nothing was written; the same batch goes again.
			if ctx.Err() != nil {
				return nil // stopping: the batch is the next instance's to read again
			}
			if err := e.refused(ctx, stageProduce, "commit", be); err != nil {
				return err
			}
		case be.Retriable():
			if ctx.Err() != nil && attempt > 0 {
				return nil // stopping: the batch is the next instance's to read again
			}
			e.log.Warn("commit source: retrying", "code", be.Code, "err", be.Message)
			_ = ctxwait.Sleep(context.WithoutCancel(ctx), delay)
			delay = min(2*delay, 5*time.Second)
		default:
			i, ok := be.Details["record"].(int)
			if !ok || i < 0 || i >= len(req.Records) || req.Records[i].Topic == e.policy.dlq {
				return &failedError{f: failure{stage: stageProduce, class: "broker", err: be, offset: -1}}
			}
			r := req.Records[i]
			dead, terr := e.policy.tolerate(failure{stage: stageProduce, class: "broker", err: be, topic: r.Topic,
				partition: r.Partition, offset: -1, key: r.Key, value: r.Value, headers: r.Headers})
			if terr != nil {
				return terr
			}
			req.Records = append(req.Records[:i:i], req.Records[i+1:]...)
			if dead != nil {
				req.Records = append(req.Records, *dead)
			}
		}
	}
}

// settleUnknown settles a commit whose outcome is unknown: restarting the task gives it
// a new generation in a transaction that waits for the old generation's commits in
// flight, so afterwards the offsets in the catalog say what happened, and the task's
// next instance reads them.
func (e *taskEnv) settleUnknown(ctx context.Context, cause *broker.Error) error {
	e.log.Warn("commit outcome unknown: restarting the task to settle it", "err", cause.Message)
	delay := 100 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
		_, err := e.store.RestartTasks(rctx, e.fence.Connector, e.fence.Task, false)
		cancel()
		if err == nil || errors.Is(err, catalog.ErrConnectorNotFound) || errors.Is(err, catalog.ErrTaskNotFound) {
			return fmt.Errorf("%w: restarted to settle an unknown commit outcome", errFenced)
		}
		e.log.Warn("settle an unknown commit outcome: restart the task", "err", err)
		if ctxwait.Sleep(context.WithoutCancel(ctx), delay) != nil {
			return err
		}
		delay = min(2*delay, 5*time.Second)
	}
}
