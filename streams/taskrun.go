package streams

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/streams/store"
)

// taskRunner runs one task in its own goroutine: open the stores, take the task's
// transactional id, restore, seek the inputs to the committed offsets, then process,
// punctuate and commit until revoked (final commit) or lost (no commit).
type taskRunner struct {
	a    *App
	id   TaskID
	sub  *subtopology
	tps  []client.TopicPartition // input partitions
	ctx  context.Context         // ends when the task is lost
	stop context.CancelFunc

	revokeMu sync.Mutex
	revoked  chan struct{}
	isRevoke bool

	ident   client.ProducerIdentity
	nextSeq map[client.TopicPartition]int32
	parts   []*inputPart // the inputs as the loop holds them (task goroutine)
	purged  map[client.TopicPartition]int64
	purgeAt time.Time
	bg      sync.WaitGroup // purges
}

func (a *App) newRunner(parent context.Context, s *subtopology, p int32) *taskRunner {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	r := &taskRunner{a: a, id: TaskID{s.index, p}, sub: s, ctx: ctx, stop: cancel, revoked: make(chan struct{}),
		nextSeq: map[client.TopicPartition]int32{}, purged: map[client.TopicPartition]int64{}}
	for _, src := range s.sources {
		r.tps = append(r.tps, client.TopicPartition{Topic: src.topic, Partition: p})
	}
	return r
}

// revokeOnce asks the task to commit what it processed and end.
func (r *taskRunner) revokeOnce() {
	r.revokeMu.Lock()
	if !r.isRevoke {
		r.isRevoke = true
		close(r.revoked)
	}
	r.revokeMu.Unlock()
	r.a.iq.unregister(r) // a task moving is not queryable: its next owner will be
}

func (r *taskRunner) revoking() bool {
	r.revokeMu.Lock()
	defer r.revokeMu.Unlock()
	return r.isRevoke
}

// lose ends the task at once, dropping its pending work.
func (r *taskRunner) lose() {
	r.stop()
	r.revokeMu.Lock() // after a queryable that did not see the stop
	r.revokeMu.Unlock()
	r.a.iq.unregister(r)
}

// queryable registers the task for interactive queries unless it is being revoked
// or lost: under revokeMu, so that revokeOnce and lose unregister it after.
func (r *taskRunner) queryable(db store.DB) {
	r.revokeMu.Lock()
	defer r.revokeMu.Unlock()
	if !r.isRevoke && r.ctx.Err() == nil {
		r.a.iq.register(r, db)
	}
}

func (r *taskRunner) log() *slogger { return &slogger{r} }

// slogger prefixes the task's log lines.
type slogger struct{ r *taskRunner }

func (l *slogger) Info(msg string, args ...any) {
	l.r.a.log.Info(msg, append([]any{"task", l.r.id.String()}, args...)...)
}
func (l *slogger) Warn(msg string, args ...any) {
	l.r.a.log.Warn(msg, append([]any{"task", l.r.id.String()}, args...)...)
}

// run is the task goroutine; it reports its end on exits.
func (r *taskRunner) run(exits chan<- taskExit) {
	a := r.a
	a.setStatus(r.id, TaskRestoring)
	a.sb.yield(r.id) // its standby, if any, closes the stores this task opens
	err := r.runTask()
	a.sb.release(r.id)
	r.bg.Wait()
	a.setStatus(r.id, "")
	dropped := false
	if errors.Is(err, errDropped) || r.ctx.Err() != nil && err != nil {
		dropped, err = true, nil // refused, or lost while starting or committing: not a failure
	}
	r.stop()
	exits <- taskExit{r: r, dropped: dropped, err: err}
}

// errDropped ends a task whose commit the server refused for good: it is no longer
// this member's (or its transactional id moved on). Its pending work is dropped; it
// restores from the log if it is assigned here again.
var errDropped = errors.New("task dropped")

func (r *taskRunner) openDB() (store.DB, error) {
	if r.a.cfg.StateDir == "" {
		return store.NewMemory(), nil
	}
	dir := filepath.Join(r.a.cfg.StateDir, r.a.topo.App(), r.id.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("streams: task %s: state directory: %w", r.id, err)
	}
	return store.OpenPebble(dir, r.a.log)
}

func (r *taskRunner) runTask() (err error) {
	a := r.a
	db, err := r.openDB()
	if err != nil {
		return err
	}
	defer db.Close()
	if a.cfg.Guarantee == ExactlyOnce {
		// Taking the task's transactional id fences every earlier holder: a request it
		// still has in flight can no longer commit.
		if r.ident, err = retry(r.ctx, a, "take the transactional id", func(ctx context.Context) (client.ProducerIdentity, error) {
			return a.c.InitProducer(ctx, a.topo.App()+"/"+r.id.String(), nil)
		}); err != nil {
			return err
		}
	} else if r.ident, err = retry(r.ctx, a, "init producer", func(ctx context.Context) (client.ProducerIdentity, error) {
		return a.c.InitProducer(ctx, "", nil)
	}); err != nil {
		return err
	}
	env := &taskEnv{partitions: a.partitions, inputHeader: a.cfg.InputPositionHeader, deadLetters: a.cfg.DeadLetterTopic,
		lateTopic: a.cfg.LateRecordTopic, maxRecords: a.cfg.MaxCommitRecords, maxBytes: a.cfg.MaxCommitBytes, metrics: &a.metrics, log: a.log,
		prom: a.prom, app: a.topo.App(), globals: a.globals}
	t := newTask(a.topo, r.sub, r.id.Partition, db, env)
	defer t.pm.forget() // the task's series go with it (again, if close ran)
	start := time.Now()
	if err := r.restore(t); err != nil {
		return err
	}
	positions, streamTime, ok, err := r.committed()
	if err != nil {
		return err
	}
	if err := t.init(positions); err != nil {
		return err
	}
	t.streamTime, t.hasTime = streamTime, ok
	t.base.streamTime, t.base.hasTime = streamTime, ok
	a.metrics.TasksRestored.Add(1)
	took := time.Since(start)
	a.sb.restored(r.id, took)
	r.log().Info("task running", "restore", took.Round(time.Millisecond), "positions", fmt.Sprint(positions))
	// Queryable from now until its revocation begins, it is lost, or it ends (before
	// its stores close: this defer runs before db.Close's).
	r.queryable(db)
	defer a.iq.unregister(r)
	a.setStatus(r.id, TaskRunning)
	defer func() {
		if cerr := t.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return r.loop(t)
}

// committed reads the group's committed offsets of the task's inputs (the log start
// where there is none) and the stream time saved with them.
func (r *taskRunner) committed() (map[client.TopicPartition]int64, int64, bool, error) {
	a := r.a
	offs, err := retry(r.ctx, a, "read committed offsets", func(ctx context.Context) ([]client.GroupOffset, error) {
		offs, err := a.c.GroupOffsets(ctx, a.group())
		if client.HasCode(err, client.CodeGroupNotFound) {
			return nil, nil
		}
		return offs, err
	})
	if err != nil {
		return nil, 0, false, err
	}
	positions := map[client.TopicPartition]int64{}
	var st int64
	has := false
	for _, o := range offs {
		tp := client.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if o.Partition != r.id.Partition || !r.reads(tp) {
			continue
		}
		positions[tp] = o.Offset
		if v, ok := strings.CutPrefix(o.Metadata, "st="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && (!has || n > st) {
				st, has = n, true
			}
		}
	}
	for _, tp := range r.tps {
		if _, ok := positions[tp]; ok {
			continue
		}
		start, _, err := r.bounds(tp)
		if err != nil {
			return nil, 0, false, err
		}
		positions[tp] = start
	}
	return positions, st, has, nil
}

func (r *taskRunner) reads(tp client.TopicPartition) bool {
	for _, x := range r.tps {
		if x == tp {
			return true
		}
	}
	return false
}

// bounds returns a partition's log start offset and high watermark.
func (r *taskRunner) bounds(tp client.TopicPartition) (int64, int64, error) {
	ps, err := retry(r.ctx, r.a, "read partitions of "+tp.Topic, func(ctx context.Context) ([]client.Partition, error) {
		return r.a.c.Partitions(ctx, tp.Topic)
	})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range ps {
		if p.Partition == tp.Partition {
			return p.LogStartOffset, p.HighWatermark, nil
		}
	}
	return 0, 0, fmt.Errorf("streams: %s has no partition %d", tp.Topic, tp.Partition)
}

// retry runs f until it succeeds, fails for good (an error the server says is not
// retryable) or ctx ends.
func retry[T any](ctx context.Context, a *App, what string, f func(context.Context) (T, error)) (T, error) {
	backoff := 50 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
		v, err := f(cctx)
		cancel()
		if err == nil {
			return v, nil
		}
		var e *client.Error
		if errors.As(err, &e) && !e.Retryable() {
			return v, fmt.Errorf("streams: %s: %w", what, err)
		}
		if ctx.Err() != nil {
			return v, fmt.Errorf("streams: %s: %w", what, ctx.Err())
		}
		a.log.Debug("retrying", "what", what, "err", err)
		if ctxwait.Sleep(ctx, backoff) != nil {
			return v, fmt.Errorf("streams: %s: %w", what, ctx.Err())
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
