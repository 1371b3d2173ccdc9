package streams

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/strata-io/strata/client"
)

// The member loop: heartbeats in the group <app> with the streams assignor (partition
// n of every co-partitioned input to one member; standbys placed and tasks moved to
// warm copies first, standby.go), starts a task once all its input
// partitions are assigned, revokes it (final commit, then the partitions go back) when
// any of them is taken away, and drops every task at once when the member is fenced or
// its session lapses.

// taskExit is a task goroutine's end.
type taskExit struct {
	r       *taskRunner
	dropped bool  // ended without a final commit: fenced or lost
	err     error // a failure that stops the application
}

// memberState is what the loop keeps between heartbeats.
type memberState struct {
	closing  bool // shutting down: no new tasks
	epoch    int32
	lastOK   time.Time
	interval time.Duration
	tasks    map[TaskID]*taskRunner
	exits    chan taskExit
}

func (a *App) member(ctx context.Context) error {
	st := &memberState{tasks: map[TaskID]*taskRunner{}, exits: make(chan taskExit, 64), interval: a.cfg.SessionTimeout / 10, lastOK: time.Now()}
	a.log.Info("joining", "group", a.group(), "topics", a.subs, "tasks", a.counts)
	var failure error
	timer := time.NewTimer(0)
	defer timer.Stop()
	var waiters []chan struct{}
	for failure == nil {
		select {
		case <-ctx.Done():
			return a.shutdown(st)
		case <-timer.C:
		case w := <-a.hbNow:
			waiters = append(waiters, w)
		case ex := <-st.exits:
			failure = a.taskExited(st, ex)
			continue
		case err := <-a.globalErrs:
			failure = err
			continue
		}
		failure = a.heartbeat(ctx, st)
		for _, w := range waiters {
			close(w)
		}
		waiters = nil
		timer.Reset(st.interval)
	}
	a.log.Error("stopping", "err", failure)
	_ = a.shutdown(st)
	return failure
}

// taskExited forgets an ended task; a failed one stops the application.
func (a *App) taskExited(st *memberState, ex taskExit) error {
	if st.tasks[ex.r.id] == ex.r {
		delete(st.tasks, ex.r.id)
	}
	if ex.dropped {
		a.metrics.TasksDropped.Add(1)
	}
	return ex.err
}

// heartbeat sends one heartbeat and reconciles the tasks with its answer. A heartbeat
// the server refuses as invalid (another assignor in use, say) stops the application.
func (a *App) heartbeat(ctx context.Context, st *memberState) error {
	req := client.HeartbeatRequest{MemberID: a.cfg.InstanceID, MemberEpoch: st.epoch, Owned: a.owned(st), SessionTimeout: a.cfg.SessionTimeout,
		TaskLags: a.taskLags(st)}
	if st.epoch == 0 {
		req.Topics, req.Assignor, req.Owned = a.subs, "streams", nil
		req.StandbyReplicas = int32(a.cfg.NumStandbyReplicas)
	}
	sent := time.Now()
	hctx, cancel := context.WithTimeout(ctx, min(a.cfg.RequestTimeout, a.cfg.SessionTimeout))
	resp, err := a.c.Heartbeat(hctx, a.group(), req)
	cancel()
	switch {
	case err == nil:
		st.lastOK = sent
		st.epoch = resp.MemberEpoch
		if resp.HeartbeatInterval > 0 {
			st.interval = min(resp.HeartbeatInterval, a.cfg.SessionTimeout/5)
		}
		a.reconcile(ctx, st, resp.Assignment)
		a.sb.setWant(a.standbysFrom(resp.Standbys))
	case client.HasCode(err, client.CodeUnknownMember) || client.HasCode(err, client.CodeStaleMemberEpoch):
		a.log.Warn("fenced from the group: dropping every task and joining again", "err", err)
		a.loseAll(st)
	case ctx.Err() != nil:
	case client.StatusOf(err) == 400:
		return fmt.Errorf("streams: join group %s: %w", a.group(), err)
	default:
		a.log.Warn("heartbeat failed", "err", err)
		if time.Since(st.lastOK) >= a.cfg.SessionTimeout {
			// The server has given the partitions away by now; whatever a task would
			// commit is refused anyway, so stop at once.
			a.log.Warn("session lapsed without a heartbeat: dropping every task")
			a.loseAll(st)
		}
	}
	return nil
}

// owned lists the partitions this member holds: those assigned, and those of tasks
// still closing (their revocation is acknowledged by leaving them out).
func (a *App) owned(st *memberState) []client.TopicPartitions {
	set := map[client.TopicPartition]bool{}
	a.mu.Lock()
	for tp := range a.assigned {
		set[tp] = true
	}
	a.mu.Unlock()
	for _, r := range st.tasks {
		for _, tp := range r.tps {
			set[tp] = true
		}
	}
	return groupTPs(set)
}

func groupTPs(set map[client.TopicPartition]bool) []client.TopicPartitions {
	by := map[string][]int32{}
	for tp := range set {
		by[tp.Topic] = append(by[tp.Topic], tp.Partition)
	}
	out := make([]client.TopicPartitions, 0, len(by))
	for t, ps := range by {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, client.TopicPartitions{Topic: t, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// reconcile starts the tasks whose partitions are all assigned and revokes those that
// lost one.
func (a *App) reconcile(ctx context.Context, st *memberState, assignment []client.TopicPartitions) {
	assigned := map[client.TopicPartition]bool{}
	for _, tps := range assignment {
		for _, p := range tps.Partitions {
			assigned[client.TopicPartition{Topic: tps.Topic, Partition: p}] = true
		}
	}
	a.mu.Lock()
	a.epoch, a.assigned = st.epoch, assigned
	a.mu.Unlock()
	for _, s := range a.topo.subs {
		for p := int32(0); p < a.counts[s.index]; p++ {
			id := TaskID{s.index, p}
			all := true
			for _, src := range s.sources {
				all = all && assigned[client.TopicPartition{Topic: src.topic, Partition: p}]
			}
			r := st.tasks[id]
			switch {
			case all && r == nil && !st.closing:
				r = a.newRunner(ctx, s, p)
				st.tasks[id] = r
				go r.run(st.exits)
			case !all && r != nil:
				r.revokeOnce()
			}
		}
	}
}

// loseAll drops every task without a final commit (the member was fenced or its
// session lapsed: a commit would be refused) and starts over as a new member.
func (a *App) loseAll(st *memberState) {
	for _, r := range st.tasks {
		r.lose()
	}
	for len(st.tasks) > 0 {
		ex := <-st.exits
		if st.tasks[ex.r.id] == ex.r {
			delete(st.tasks, ex.r.id)
		}
		a.metrics.TasksDropped.Add(1)
	}
	st.epoch = 0
	a.mu.Lock()
	a.epoch, a.assigned = 0, map[client.TopicPartition]bool{}
	a.mu.Unlock()
}

// shutdown revokes every task (each commits what it processed), waits for them, and
// leaves the group.
func (a *App) shutdown(st *memberState) error {
	st.closing = true
	for _, r := range st.tasks {
		r.revokeOnce()
	}
	deadline := time.NewTimer(a.cfg.SessionTimeout)
	defer deadline.Stop()
	var errs []error
	for len(st.tasks) > 0 {
		select {
		case ex := <-st.exits:
			if err := a.taskExited(st, ex); err != nil {
				errs = append(errs, err)
			}
		case w := <-a.hbNow: // a final commit found the epoch moved on
			ctx, cancel := context.WithTimeout(context.Background(), a.cfg.RequestTimeout)
			_ = a.heartbeat(ctx, st)
			cancel()
			close(w)
		case <-deadline.C:
			a.log.Warn("tasks did not finish their final commits in time: dropping them", "tasks", len(st.tasks))
			for _, r := range st.tasks {
				r.lose()
			}
			deadline.Reset(time.Hour)
		}
	}
	if st.epoch > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.RequestTimeout)
		_, err := a.c.Heartbeat(ctx, a.group(), client.HeartbeatRequest{MemberID: a.cfg.InstanceID, MemberEpoch: -1})
		cancel()
		if err != nil {
			a.log.Warn("leaving the group", "err", err)
		}
	}
	a.log.Info("stopped", "metrics", fmt.Sprintf("%+v", a.metrics.Snapshot()))
	return errors.Join(errs...)
}

// memberEpoch returns the member's epoch and whether it holds every partition of tps.
func (a *App) memberEpoch(tps []client.TopicPartition) (int32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, tp := range tps {
		if !a.assigned[tp] {
			return a.epoch, false
		}
	}
	return a.epoch, true
}

// heartbeatNow asks the member loop for a heartbeat and waits for it (or ctx).
func (a *App) heartbeatNow(ctx context.Context) {
	w := make(chan struct{})
	select {
	case a.hbNow <- w:
	case <-ctx.Done():
		return
	}
	select {
	case <-w:
	case <-ctx.Done():
	}
}
