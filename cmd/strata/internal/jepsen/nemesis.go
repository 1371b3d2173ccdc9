package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/internal/testkit/faultproxy"
	"github.com/strata-io/strata/objstore/fault"
)

// Fault is one kind of misbehaviour, started and stopped by the schedule. Start says
// what it did (for the history); Stop heals it. A Fault is used by one schedule at a
// time.
type Fault interface {
	Name() string
	Start(ctx context.Context) (string, error)
	Stop(ctx context.Context) error
	// Restarts says that healing it restarts processes, which are waited for until
	// they are ready: it heals after every other fault (HealOrder).
	Restarts() bool
}

// Schedule runs faults against a workload: Quiet without faults, then Active with
// them, over and over until ctx ends. Alone starts one fault per window in turn;
// otherwise every fault runs in every window (faults together).
type Schedule struct {
	Faults []Fault
	Quiet  time.Duration // default 2s
	Active time.Duration // default 4s
	Alone  bool
}

// Run runs the schedule until ctx ends, then heals whatever is active. It records
// every start and stop in h, and returns the first error a fault returned.
func (s Schedule) Run(ctx context.Context, h *History) error {
	if s.Quiet <= 0 {
		s.Quiet = 2 * time.Second
	}
	if s.Active <= 0 {
		s.Active = 4 * time.Second
	}
	var errs []error
	for i := 0; ctx.Err() == nil; i++ {
		ctxwait.Sleep(ctx, s.Quiet)
		if ctx.Err() != nil {
			break
		}
		active := s.Faults
		if s.Alone {
			active = []Fault{s.Faults[i%len(s.Faults)]}
		}
		var started []Fault
		for _, f := range active {
			// A start that failed may have half happened (a server stopped, its
			// pg_ctl timed out): it is healed like the others.
			started = append(started, f)
			what, err := f.Start(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: start: %w", f.Name(), err))
				h.AddEvent(f.Name(), "start failed: "+err.Error())
				continue
			}
			h.AddEvent(f.Name(), "start: "+what)
		}
		ctxwait.Sleep(ctx, s.Active)
		// Healing must happen even when the run is over, each fault with its own time:
		// one that cannot heal must not leave the others no time to.
		for _, f := range HealOrder(started) {
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			err := f.Stop(hctx)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: stop: %w", f.Name(), err))
				h.AddEvent(f.Name(), "stop failed: "+err.Error())
				continue
			}
			h.AddEvent(f.Name(), "stop")
		}
	}
	return errors.Join(errs...)
}

// HealOrder is the order to stop faults in: the last started first, except that
// restarting killed processes comes after everything else. A restarted process is
// waited for until it is ready, which it cannot be while Postgres is still down or the
// store still failing; healed first, it would wait out its time and leave the catalog
// down (the "all" class did so for a whole long run).
func HealOrder(faults []Fault) []Fault {
	out := slices.Clone(faults)
	slices.Reverse(out)
	slices.SortStableFunc(out, func(a, b Fault) int {
		ka, kb := a.Restarts(), b.Restarts()
		switch {
		case ka == kb:
			return 0
		case kb:
			return -1
		}
		return 1
	})
	return out
}

// KillFault SIGKILLs a random process of Procs and restarts it when stopped.
type KillFault struct {
	Procs  []*Proc
	victim *Proc
}

func (f *KillFault) Name() string   { return "kill" }
func (f *KillFault) Restarts() bool { return true }

func (f *KillFault) Start(context.Context) (string, error) {
	f.victim = f.Procs[rand.IntN(len(f.Procs))]
	f.victim.Kill()
	return "SIGKILL " + f.victim.Name, nil
}

func (f *KillFault) Stop(ctx context.Context) error {
	if f.victim == nil {
		return nil
	}
	p := f.victim
	f.victim = nil
	if err := p.Restart(); err != nil {
		return err
	}
	return WaitReady(ctx, []string{p.URL})
}

// PauseFault SIGSTOPs a random process of Procs and SIGCONTs it when stopped.
type PauseFault struct {
	Procs  []*Proc
	victim *Proc
}

func (f *PauseFault) Name() string   { return "pause" }
func (f *PauseFault) Restarts() bool { return false }

func (f *PauseFault) Start(context.Context) (string, error) {
	f.victim = f.Procs[rand.IntN(len(f.Procs))]
	f.victim.Pause()
	return "SIGSTOP " + f.victim.Name, nil
}

func (f *PauseFault) Stop(context.Context) error {
	if f.victim != nil {
		f.victim.Resume()
		f.victim = nil
	}
	return nil
}

// storeMode is one way the fault decorator misbehaves.
type storeMode struct {
	name   string
	faults map[fault.Op]fault.Fault
}

// storeWrites and storeReads are the object store faults of the decorator: each
// window takes the next of each list, so every one has run after four windows.
var (
	storeWrites = []storeMode{
		{"put errors", map[fault.Op]fault.Fault{fault.Put: {Err: fault.ErrInjected}}},
		{"put lost responses", map[fault.Op]fault.Fault{fault.Put: {LoseResponse: true}}},
		{"put timeouts", map[fault.Op]fault.Fault{fault.Put: {Latency: 45 * time.Second}}},
		{"slow puts", map[fault.Op]fault.Fault{fault.Put: {Latency: time.Second}}},
	}
	storeReads = []storeMode{
		{"read errors", map[fault.Op]fault.Fault{fault.GetRange: {Err: fault.ErrInjected}, fault.Get: {Err: fault.ErrInjected}, fault.Head: {Err: fault.ErrInjected}}},
		{"slow, truncated reads", map[fault.Op]fault.Fault{fault.GetRange: {Latency: time.Second, Truncate: 7}, fault.Get: {Latency: time.Second, Truncate: 7}}},
		{"bit-flipped reads", map[fault.Op]fault.Fault{fault.GetRange: {FlipBit: true}, fault.Get: {FlipBit: true}}},
		{"slow reads, responses lost", map[fault.Op]fault.Fault{fault.GetRange: {Latency: time.Second, LoseResponse: true}, fault.Get: {Latency: time.Second, LoseResponse: true}}},
	}
)

// StoreFault makes the objstore/fault decorator misbehave, a different way each
// window.
type StoreFault struct {
	Store *fault.Store
	n     int
}

func (f *StoreFault) Name() string   { return "store" }
func (f *StoreFault) Restarts() bool { return false }

func (f *StoreFault) Start(context.Context) (string, error) {
	w, r := storeWrites[f.n%len(storeWrites)], storeReads[f.n%len(storeReads)]
	f.n++
	for _, m := range []storeMode{w, r} {
		for op, ft := range m.faults {
			f.Store.Inject(op, ft)
		}
	}
	return w.name + " + " + r.name, nil
}

func (f *StoreFault) Stop(context.Context) error {
	f.Store.ClearAll()
	return nil
}

type proxyMode struct {
	name  string
	fault faultproxy.Fault
}

// proxyWrites and proxyReads are the faults of the HTTP proxy in front of MinIO: each
// window takes the next of each list. Rates stay below 1 where the SDK retries, so
// some requests get through.
var (
	proxyWrites = []proxyMode{
		{"503 SlowDown on half the PUTs", faultproxy.Fault{Rate: 0.5, Methods: []string{http.MethodPut}, Status: http.StatusServiceUnavailable}},
		{"500 on every PUT", faultproxy.Fault{Methods: []string{http.MethodPut}, Status: http.StatusInternalServerError}},
		{"lost PUT responses", faultproxy.Fault{Rate: 0.5, Methods: []string{http.MethodPut}, LoseResponse: true}},
		{"slow PUTs (1.5s)", faultproxy.Fault{Rate: 0.7, Methods: []string{http.MethodPut}, Latency: 1500 * time.Millisecond}},
	}
	proxyReads = []proxyMode{
		{"truncated GETs", faultproxy.Fault{Rate: 0.5, Methods: []string{http.MethodGet}, Truncate: true}},
		{"bit-flipped GETs", faultproxy.Fault{Rate: 0.5, Methods: []string{http.MethodGet}, FlipBit: true}},
		{"lost GET responses", faultproxy.Fault{Rate: 0.5, Methods: []string{http.MethodGet}, LoseResponse: true}},
		{"503 on half the GETs and HEADs", faultproxy.Fault{Rate: 0.5, Methods: []string{http.MethodGet, http.MethodHead}, Status: http.StatusServiceUnavailable}},
	}
)

// ProxyFault makes the HTTP proxy in front of the object store misbehave, a
// different way each window.
type ProxyFault struct {
	Proxy *faultproxy.HTTP
	n     int
}

func (f *ProxyFault) Name() string   { return "s3proxy" }
func (f *ProxyFault) Restarts() bool { return false }

func (f *ProxyFault) Start(context.Context) (string, error) {
	w, r := proxyWrites[f.n%len(proxyWrites)], proxyReads[f.n%len(proxyReads)]
	f.n++
	f.Proxy.Set(w.fault, r.fault)
	return w.name + " + " + r.name, nil
}

func (f *ProxyFault) Stop(context.Context) error {
	f.Proxy.Set()
	return nil
}

// PGRestartFault crashes Postgres (pg_ctl stop -m immediate) and starts it again
// when stopped.
type PGRestartFault struct {
	PG   *PrivatePostgres
	down bool
}

func (f *PGRestartFault) Name() string   { return "pg-restart" }
func (f *PGRestartFault) Restarts() bool { return false }

func (f *PGRestartFault) Start(ctx context.Context) (string, error) {
	// Marked down first, and not cut short by the end of the run: a stop that was
	// interrupted may still have stopped the server, which Stop must then start.
	f.down = true
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := f.PG.Stop(sctx, "immediate"); err != nil {
		return "", err
	}
	return "pg_ctl stop -m immediate", nil
}

// Stop starts the server unless it already runs. It is safe to call at any time (the
// run's final healing calls it whatever happened).
func (f *PGRestartFault) Stop(ctx context.Context) error {
	if f.PG.Running(ctx) {
		f.down = false
		return nil
	}
	if err := f.PG.Start(ctx); err != nil {
		return err
	}
	f.down = false
	return nil
}

// PGCutFault cuts a share of the catalog's connections right after a writing
// transaction committed, through the TCP proxy in front of Postgres.
type PGCutFault struct {
	Proxy *faultproxy.Postgres
	Rate  float64 // default 0.3
}

func (f *PGCutFault) Name() string   { return "pg-cut" }
func (f *PGCutFault) Restarts() bool { return false }

func (f *PGCutFault) Start(context.Context) (string, error) {
	r := f.Rate
	if r <= 0 {
		r = 0.3
	}
	f.Proxy.SetCutRate(r)
	return fmt.Sprintf("cut %.0f%% of connections after COMMIT", 100*r), nil
}

func (f *PGCutFault) Stop(context.Context) error {
	f.Proxy.SetCutRate(0)
	return nil
}

// FuncFault adapts two functions.
type FuncFault struct {
	FaultName string
	OnStart   func(ctx context.Context) (string, error)
	OnStop    func(ctx context.Context) error
	mu        sync.Mutex
}

func (f *FuncFault) Name() string   { return f.FaultName }
func (f *FuncFault) Restarts() bool { return false }

func (f *FuncFault) Start(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.OnStart(ctx)
}

func (f *FuncFault) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.OnStop == nil {
		return nil
	}
	return f.OnStop(ctx)
}
