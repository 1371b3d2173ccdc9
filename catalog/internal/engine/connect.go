package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The connector rules a backend runs inside its transactions: the fence check of a
// flush's source offsets (with the flush, in the same transaction — Postgres has its SQL
// twin in strata_commit_connect, and catalogtest guards that the twins agree), and the
// plan of a worker's heartbeat.

// The refusals of CheckFence, by code: a backend that checks fences inside the database
// answers one of these, and FenceRefusal builds the error the Go check gives.
const (
	RefusedUnknownTask     = "unknown_task"     // no such task (never created, or removed)
	RefusedStaleGeneration = "stale_generation" // value: the task's generation
)

// FenceRefusal is the error for refusing an instance at f with code.
func FenceRefusal(f catalog.TaskFence, code string, current int64) error {
	switch code {
	case RefusedUnknownTask:
		return fmt.Errorf("%w: connector %s has no task %d (removed, or the connector was deleted): this instance must stop",
			catalog.ErrStaleGeneration, f.Connector, f.Task)
	case RefusedStaleGeneration:
		return fmt.Errorf("%w: connector %s task %d runs at generation %d, not %d (it moved to another worker, restarted or was reconfigured): this instance must stop",
			catalog.ErrStaleGeneration, f.Connector, f.Task, current, f.Generation)
	}
	return fmt.Errorf("catalog: unknown fence refusal %q for connector %s task %d", code, f.Connector, f.Task)
}

// CheckFence checks an instance's fence against its task's generation, read under the
// task's lock (found: the task exists).
func CheckFence(f catalog.TaskFence, current int64, found bool) error {
	switch {
	case !found:
		return FenceRefusal(f, RefusedUnknownTask, 0)
	case current != f.Generation:
		return FenceRefusal(f, RefusedStaleGeneration, current)
	}
	return nil
}

// Fences lists the distinct tasks whose source offsets the flush's requests commit,
// sorted by (connector, task): the order in which a backend locks their rows, after the
// partitions, producer state and groups.
func (p *Plan) Fences() []catalog.TaskID {
	var ids []catalog.TaskID
	for _, r := range p.Segment.Requests {
		if r.Source != nil {
			ids = append(ids, r.Source.Fence.ID())
		}
	}
	slices.SortFunc(ids, compareTasks)
	return slices.Compact(ids)
}

func compareTasks(a, b catalog.TaskID) int {
	if c := cmp.Compare(a.Connector, b.Connector); c != 0 {
		return c
	}
	return cmp.Compare(a.Task, b.Task)
}

// SourceCheck is the outcome of Plan.CheckSources.
type SourceCheck struct {
	// Errs is the errors passed in with the fence refusals added.
	Errs []error
	plan *Plan
}

// SourceOffsetRow is one source offset a commit stores.
type SourceOffsetRow struct {
	Connector string
	catalog.SourceOffset
}

// CheckSources checks the fence of every request that commits source offsets and is not
// already refused in errs: first its shape (catalog.ValidateSourceCommit), then CheckFence
// against generations, the current generation of each task of Fences that exists (read
// under the tasks' locks). A refused fence refuses its whole request: its records and
// its offsets.
func (p *Plan) CheckSources(errs []error, generations map[catalog.TaskID]int64) *SourceCheck {
	sc := &SourceCheck{Errs: append([]error(nil), errs...), plan: p}
	for ri, r := range p.Segment.Requests {
		sr := r.Source
		if sr == nil || sc.Errs[ri] != nil {
			continue
		}
		if err := catalog.ValidateSourceCommit(*sr); err != nil {
			sc.Errs[ri] = fmt.Errorf("source offsets: %w", err)
			continue
		}
		gen, ok := generations[sr.Fence.ID()]
		if err := CheckFence(sr.Fence, gen, ok); err != nil {
			sc.Errs[ri] = err
		}
	}
	return sc
}

// Rows lists the source offsets to store once results are final: those of requests
// that committed now (not refused, not duplicates). When two requests of a flush set one
// partition of a connector, the later wins. Sorted by (connector, partition).
func (sc *SourceCheck) Rows(results []catalog.Result) []SourceOffsetRow {
	at := map[[2]string]int{}
	var rows []SourceOffsetRow
	for ri, r := range sc.plan.Segment.Requests {
		sr := r.Source
		if sr == nil || sc.Errs[ri] != nil || results[ri].Err != nil || results[ri].Duplicate {
			continue
		}
		for _, o := range sr.Offsets {
			row := SourceOffsetRow{Connector: sr.Fence.Connector, SourceOffset: o}
			k := [2]string{row.Connector, o.Partition}
			if j, ok := at[k]; ok {
				rows[j] = row
				continue
			}
			at[k] = len(rows)
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b SourceOffsetRow) int {
		if c := cmp.Compare(a.Connector, b.Connector); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
	return rows
}

// WorkerRow is a worker as the catalog knows it.
type WorkerRow struct {
	ID         string
	LeaseUntil time.Time
}

// TaskLease is what a worker's heartbeat plan needs of one task.
type TaskLease struct {
	catalog.TaskID
	Owner       string
	LeaseUntil  time.Time
	TargetState string // its connector's
}

// WorkerPlan is what a worker's heartbeat changes: tasks whose leases it renews,
// releases (owner cleared) and claims (owner set, a new generation), and the tasks it
// holds beyond its share, which it should stop and release in its next beat.
type WorkerPlan struct {
	Renew, Release, Claim, Excess []catalog.TaskID
	Workers                       int
}

// PlanWorkerBeat plans a worker's heartbeat at now over every worker and task row (read
// under the lock that serialises heartbeats). The rules:
//
//   - the live workers are those whose lease runs past now, and the beating worker
//     (unless it leaves), in id order;
//   - the tasks to run are those of connectors not STOPPED, shared out connector by
//     connector: of a connector's n tasks, with w live workers, each gets ⌊n/w⌋ and n
//     mod w of them one more — the workers that follow, in turn, the last to get one
//     for the connector before (so every connector spreads over the workers, and the
//     totals differ by one at most);
//   - the worker keeps (renews) the tasks it owns, except those it releases, all of
//     them when it leaves, and those of STOPPED connectors, which it releases;
//   - below its share of a connector, it claims that connector's tasks that no live
//     worker holds — owner empty, or the owner's lease ended — lowest first;
//   - above its share, Excess names its highest tasks of the connector beyond it: the
//     worker stops them and releases them in its next beat (never here, so that a task
//     is never claimed while its instance still runs).
func PlanWorkerBeat(now time.Time, b catalog.WorkerBeat, workers []WorkerRow, tasks []TaskLease) WorkerPlan {
	live := []string{}
	if !b.Leave {
		live = append(live, b.Worker)
	}
	for _, w := range workers {
		if w.ID != b.Worker && w.LeaseUntil.After(now) {
			live = append(live, w.ID)
		}
	}
	slices.Sort(live)
	released := make(map[catalog.TaskID]bool, len(b.Release))
	for _, id := range b.Release {
		released[id] = true
	}
	plan := WorkerPlan{Workers: len(live)}
	type conn struct {
		runnable        int
		held, claimable []catalog.TaskID
	}
	var order []string
	byConn := map[string]*conn{}
	for _, t := range tasks {
		c := byConn[t.Connector]
		if c == nil {
			c = &conn{}
			byConn[t.Connector] = c
			order = append(order, t.Connector)
		}
		run := t.TargetState != catalog.StateStopped
		if run {
			c.runnable++
		}
		switch {
		case t.Owner == b.Worker && (b.Leave || released[t.TaskID] || !run):
			plan.Release = append(plan.Release, t.TaskID)
		case t.Owner == b.Worker:
			plan.Renew = append(plan.Renew, t.TaskID)
			c.held = append(c.held, t.TaskID)
		case run && (t.Owner == "" || !t.LeaseUntil.After(now)):
			c.claimable = append(c.claimable, t.TaskID)
		}
	}
	if b.Leave {
		return plan
	}
	me := slices.Index(live, b.Worker)
	slices.Sort(order)
	next := 0 // the worker that gets the next connector's first extra task
	for _, name := range order {
		c := byConn[name]
		share := c.runnable / len(live)
		rem := c.runnable % len(live)
		if (me-next+len(live))%len(live) < rem {
			share++
		}
		next = (next + rem) % len(live)
		slices.SortFunc(c.held, compareTasks)
		slices.SortFunc(c.claimable, compareTasks)
		if len(c.held) > share {
			plan.Excess = append(plan.Excess, c.held[share:]...)
			continue
		}
		plan.Claim = append(plan.Claim, c.claimable[:min(len(c.claimable), share-len(c.held))]...)
	}
	return plan
}

// ConnectBackend reads connectors.
type ConnectBackend interface {
	// ReadConnectors reads connector name, or every connector when name is empty, in
	// one snapshot.
	ReadConnectors(ctx context.Context, name string) ([]catalog.Connector, error)
}
