package connect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
)

// WorkerConfig configures a worker.
type WorkerConfig struct {
	// Name names the worker in statuses; a random suffix is added, so that a restarted
	// worker never inherits its predecessor's task instances. Default: the host name.
	Name string
	// Lease is how long the worker holds its tasks without a heartbeat; it beats every
	// third of it, and a sink task's group session is the same. Default DefaultLease.
	Lease time.Duration
	// Providers resolve config provider references (off by default).
	Providers Providers
	// Plugins are the connectors it runs; nil: DefaultPlugins.
	Plugins *Plugins
	Log     *slog.Logger
}

// DefaultLease is WorkerConfig.Lease when it is zero.
const DefaultLease = 10 * time.Second

// Worker runs the tasks it holds through the catalog: every beat renews its lease and
// its tasks', gives back what it stopped, takes its share of the tasks nobody holds, and
// then starts, stops, pauses and resumes its task instances to match.
type Worker struct {
	id    string
	store Store
	core  Core
	cfg   WorkerConfig
	log   *slog.Logger
	fail  *failpoints
	runs  map[catalog.TaskID]*taskRun // Run's goroutine's alone
}

// taskRun is one task instance of the worker's.
type taskRun struct {
	fence   catalog.TaskFence
	control *taskControl
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewWorker builds a worker over the catalog (store) and the core.
func NewWorker(store Store, core Core, cfg WorkerConfig) *Worker {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Plugins == nil {
		cfg.Plugins = DefaultPlugins()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
		if cfg.Name == "" {
			cfg.Name = "worker"
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := cfg.Name + "-" + hex.EncodeToString(b[:])
	log := cfg.Log.With("component", "connect", "worker", id)
	return &Worker{id: id, store: store, core: core, cfg: cfg, log: log, fail: loadFailpoints(log), runs: map[catalog.TaskID]*taskRun{}}
}

// ID is the worker's id, as statuses show it.
func (w *Worker) ID() string { return w.id }

// Run beats until ctx ends, then stops every task (each sends what it has once) and
// gives its tasks back.
func (w *Worker) Run(ctx context.Context) error {
	w.log.Info("connect worker started", "lease", w.cfg.Lease)
	interval := w.cfg.Lease / 3
	var release []catalog.TaskID
	lastOK := time.Now()
	for {
		bctx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
		a, err := w.store.WorkerHeartbeat(bctx, catalog.WorkerBeat{Worker: w.id, Lease: w.cfg.Lease, Release: release})
		cancel()
		wait := interval
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Warn("connect worker heartbeat", "err", err)
			if time.Since(lastOK) > w.cfg.Lease {
				// Its lease is over: its tasks may run elsewhere. Stopping them is a
				// courtesy — the catalog refuses their commits anyway.
				w.reconcile(ctx, catalog.WorkerAssignment{})
			}
			wait = time.Second
		case err == nil:
			lastOK = time.Now()
			release = w.reconcile(ctx, a)
			if len(release) > 0 {
				wait = 0 // give them back now
			}
		}
		if ctxwait.Sleep(ctx, wait) != nil {
			break
		}
	}
	w.stopAll()
	lctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	if _, err := w.store.WorkerHeartbeat(lctx, catalog.WorkerBeat{Worker: w.id, Leave: true}); err != nil {
		w.log.Warn("connect worker: give the tasks back", "err", err)
	}
	w.log.Info("connect worker stopped")
	return nil
}

// reconcile makes the running instances the assignment's: instances whose task is gone
// or has a new generation stop; held tasks without one start; paused ones pause. Tasks
// the worker holds beyond its share (Excess) stop, and it returns them to release. Only
// Run's goroutine touches the instances.
func (w *Worker) reconcile(ctx context.Context, a catalog.WorkerAssignment) []catalog.TaskID {
	held := map[catalog.TaskID]catalog.AssignedTask{}
	for _, at := range a.Tasks {
		held[at.ID()] = at
	}
	for _, id := range a.Excess {
		delete(held, id)
	}
	var stop []*taskRun
	for id, run := range w.runs {
		if at, ok := held[id]; !ok || at.Generation != run.fence.Generation {
			stop = append(stop, run)
			delete(w.runs, id)
		}
	}
	stopRuns(stop)
	if len(a.Excess) > 0 {
		w.log.Info("connect worker: giving tasks back to balance the workers", "tasks", len(a.Excess))
	}
	for id, at := range held {
		run := w.runs[id]
		if run == nil {
			run = w.start(ctx, at)
			w.runs[id] = run
		}
		run.control.set(at.TargetState == catalog.StatePaused)
	}
	return a.Excess
}

// stopRuns cancels instances and waits for them (each finishes its commit in flight).
func stopRuns(runs []*taskRun) {
	for _, r := range runs {
		r.cancel()
	}
	for _, r := range runs {
		<-r.done
	}
}

func (w *Worker) stopAll() {
	runs := make([]*taskRun, 0, len(w.runs))
	for id, r := range w.runs {
		runs = append(runs, r)
		delete(w.runs, id)
	}
	stopRuns(runs)
}

// start runs a task instance in its own goroutine. An instance that fails reports
// FAILED with its trace and stays stopped until its task gets a new generation (a
// restart, a config change, a move).
func (w *Worker) start(ctx context.Context, at catalog.AssignedTask) *taskRun {
	tctx, cancel := context.WithCancel(ctx)
	run := &taskRun{fence: at.TaskFence, control: newTaskControl(at.TargetState == catalog.StatePaused), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		defer cancel()
		var resolved secrets
		err := w.runTask(tctx, at, run.control, &resolved)
		log := w.log.With("connector", at.Connector, "task", at.Task, "generation", at.Generation)
		switch {
		case err == nil:
			log.Info("task stopped")
		case errors.Is(err, errFenced):
			log.Warn("task instance fenced; stopped", "err", err)
		default:
			log.Error("task failed", "err", err)
			e := &taskEnv{fence: at.TaskFence, worker: w.id, store: w.store, log: log}
			e.report(tctx, catalog.TaskFailed, resolved.redact(traceOf(err)))
		}
	}()
	return run
}

// runTask runs a task instance until it stops or fails; resolved gets what its config's
// provider references resolved to, which its trace must not show.
func (w *Worker) runTask(ctx context.Context, at catalog.AssignedTask, control *taskControl, resolved *secrets) error {
	plugin, ok := w.cfg.Plugins.Lookup(at.ConnectorConfig[cfgClass])
	if !ok {
		return fmt.Errorf("no connector plugin %q on this worker", at.ConnectorConfig[cfgClass])
	}
	e, err := newTaskEnv(at, w, control)
	if err != nil {
		return err
	}
	*resolved = e.resolved
	e.log.Info("task starting")
	if plugin.sink != nil {
		return runSink(ctx, e, plugin.sink.NewTask(), w.cfg.Lease)
	}
	return runSource(ctx, e, plugin.source.NewTask())
}

// traceOf is a failed task's status trace: the failure and its causes (a record's
// failure names the record, never its bytes: errorChain).
func traceOf(err error) string {
	return "org.apache.kafka.connect.errors.ConnectException: " + errorChain(err)
}
