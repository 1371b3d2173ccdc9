package streams

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/streams/store"
)

// Standby tasks (Config.NumStandbyReplicas): warm copies of other instances' stateful
// tasks, kept in this instance's state directory — where the task itself would keep
// its stores — by tailing their changelogs. When a task comes here its restore then
// replays only the changelog after the standby's checkpoint, instead of all of it.
//
// Placement is the catalog's (the streams assignor, catalog/internal/engine/standby.go,
// as KIP-1071 places them): every heartbeat reports how far behind each stateful task's
// state here is (0 for the tasks run here, a standby's remaining changelog records), the
// answer names the standbys to keep, and a task whose instance died moves first to one
// caught up on it (within catalog.AcceptableRecoveryLag records), so its restore reads
// only the tail. A standby is never placed beside its active.

// standbyTask is one standby's goroutine and its progress.
type standbyTask struct {
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	remaining int64 // changelog records behind the high watermarks last read (-1: not yet read)
}

// standbys is an App's standby tasks, and the tasks it runs active (never both).
type standbys struct {
	mu       sync.Mutex
	active   map[TaskID]bool
	running  map[TaskID]*standbyTask
	stopping map[TaskID]*standbyTask  // stopped by placement, its store maybe still open
	restores map[TaskID]time.Duration // the last restore of each task run here
	want     map[TaskID]bool          // the standbys the last heartbeat named
	changed  chan struct{}            // want changed (buffered: one pending signal)
}

func newStandbys() *standbys {
	return &standbys{active: map[TaskID]bool{}, running: map[TaskID]*standbyTask{}, stopping: map[TaskID]*standbyTask{}, restores: map[TaskID]time.Duration{},
		want: map[TaskID]bool{}, changed: make(chan struct{}, 1)}
}

// setWant records the standbys a heartbeat named, waking runStandbys when they changed.
func (s *standbys) setWant(want map[TaskID]bool) {
	s.mu.Lock()
	same := maps.Equal(s.want, want)
	s.want = want
	s.mu.Unlock()
	if !same {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
}

// unknownLag is the lag reported for a standby that has not yet read its changelogs'
// ends: far beyond any acceptable lag, yet a report that it holds state.
const unknownLag = 1 << 40

// taskLags is this instance's report for a heartbeat: per stateful task it runs (lag
// 0) or keeps a standby of (its remaining records), named by its first source partition.
func (a *App) taskLags(st *memberState) []client.TaskLag {
	lags := map[TaskID]int64{}
	a.sb.mu.Lock()
	for id, sb := range a.sb.running {
		sb.mu.Lock()
		lags[id] = sb.remaining
		sb.mu.Unlock()
		if lags[id] < 0 {
			lags[id] = unknownLag
		}
	}
	a.sb.mu.Unlock()
	for id := range st.tasks {
		lags[id] = 0
	}
	out := []client.TaskLag{}
	for _, s := range a.topo.subs {
		if len(s.stores) == 0 || len(s.sources) == 0 {
			continue
		}
		for p := range a.counts[s.index] {
			if l, ok := lags[TaskID{s.index, p}]; ok {
				out = append(out, client.TaskLag{Topic: s.sources[0].topic, Partition: p, Lag: l})
			}
		}
	}
	return out
}

// standbysFrom maps a heartbeat's standbys (tasks named by their source partitions) to
// this topology's stateful tasks.
func (a *App) standbysFrom(named []client.TopicPartitions) map[TaskID]bool {
	set := map[client.TopicPartition]bool{}
	for _, tps := range named {
		for _, p := range tps.Partitions {
			set[client.TopicPartition{Topic: tps.Topic, Partition: p}] = true
		}
	}
	want := map[TaskID]bool{}
	for _, s := range a.topo.subs {
		if len(s.stores) == 0 || len(s.sources) == 0 {
			continue
		}
		for p := range a.counts[s.index] {
			if set[client.TopicPartition{Topic: s.sources[0].topic, Partition: p}] {
				want[TaskID{s.index, p}] = true
			}
		}
	}
	return want
}

// yield marks a task active here and stops its standby, waiting until its store is
// closed — also when placement is stopping it already: the task is about to open it.
func (s *standbys) yield(id TaskID) {
	s.mu.Lock()
	s.active[id] = true
	sb, stopping := s.running[id], s.stopping[id]
	delete(s.running, id)
	s.mu.Unlock()
	if sb != nil {
		sb.cancel()
		<-sb.done
	}
	if stopping != nil {
		<-stopping.done
	}
}

// release marks a task no longer active here (its store closed).
func (s *standbys) release(id TaskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, id)
}

// restored records how long a task's restore took.
func (s *standbys) restored(id TaskID, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restores[id] = took
}

// StandbyLags returns, per standby task this instance keeps, the changelog records it
// is behind (-1 until it has read the high watermarks).
func (a *App) StandbyLags() map[TaskID]int64 {
	a.sb.mu.Lock()
	defer a.sb.mu.Unlock()
	out := map[TaskID]int64{}
	for id, sb := range a.sb.running {
		sb.mu.Lock()
		out[id] = sb.remaining
		sb.mu.Unlock()
	}
	return out
}

// RestoreDurations returns how long the last restore of each task run here took:
// replaying its changelogs and reading its committed offsets.
func (a *App) RestoreDurations() map[TaskID]time.Duration {
	a.sb.mu.Lock()
	defer a.sb.mu.Unlock()
	out := make(map[TaskID]time.Duration, len(a.sb.restores))
	for k, v := range a.sb.restores {
		out[k] = v
	}
	return out
}

// runStandbys runs the standby tasks the heartbeats name until ctx ends, then stops
// them all. It reconciles when they change, and every second (a standby that failed
// starts again).
func (a *App) runStandbys(ctx context.Context) {
	defer func() {
		a.sb.mu.Lock()
		all := a.sb.running
		a.sb.running = map[TaskID]*standbyTask{}
		a.sb.mu.Unlock()
		for _, sb := range all {
			sb.cancel()
			<-sb.done
		}
	}()
	subs := map[int]*subtopology{}
	for _, s := range a.topo.subs {
		subs[s.index] = s
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		a.sb.mu.Lock()
		want := map[TaskID]*subtopology{}
		for id := range a.sb.want {
			want[id] = subs[id.Subtopology]
		}
		a.sb.mu.Unlock()
		a.reconcileStandbys(ctx, want)
		select {
		case <-ctx.Done():
			return
		case <-a.sb.changed:
		case <-tick.C:
		}
	}
}

// reconcileStandbys starts the standbys wanted that are neither running nor active
// here, and stops those no longer wanted.
func (a *App) reconcileStandbys(ctx context.Context, want map[TaskID]*subtopology) {
	var stop []*standbyTask
	a.sb.mu.Lock()
	for id, sb := range a.sb.running {
		if want[id] == nil {
			delete(a.sb.running, id)
			a.sb.stopping[id] = sb
			stop = append(stop, sb)
		}
	}
	for id, s := range want {
		if a.sb.running[id] != nil || a.sb.active[id] {
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		sb := &standbyTask{cancel: cancel, done: make(chan struct{}), remaining: -1}
		a.sb.running[id] = sb
		go func() {
			defer close(sb.done)
			if err := a.standby(sctx, id, s, sb); err != nil && sctx.Err() == nil {
				a.log.Warn("standby task stopped; starting it again", "task", id.String(), "err", err)
			}
			a.sb.mu.Lock() // the next placement starts it again if still wanted
			if a.sb.running[id] == sb {
				delete(a.sb.running, id)
			}
			a.sb.mu.Unlock()
		}()
	}
	a.sb.mu.Unlock()
	for _, sb := range stop {
		sb.cancel()
		<-sb.done
	}
	a.sb.mu.Lock()
	for id, sb := range a.sb.stopping {
		if slices.Contains(stop, sb) {
			delete(a.sb.stopping, id)
		}
	}
	a.sb.mu.Unlock()
}

// standby keeps task id's stores in its state directory up to date with their
// changelogs until ctx ends.
func (a *App) standby(ctx context.Context, id TaskID, s *subtopology, sb *standbyTask) error {
	dir := filepath.Join(a.cfg.StateDir, a.topo.App(), id.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("streams: standby %s: state directory: %w", id, err)
	}
	db, err := store.OpenPebble(dir, a.log)
	if err != nil {
		return err
	}
	defer db.Close()
	cps, err := db.Checkpoints()
	if err != nil {
		return fmt.Errorf("streams: standby %s: read checkpoints: %w", id, err)
	}
	next := map[string]int64{}
	hwm := map[string]int64{}
	for _, sd := range s.stores {
		topic := a.topo.b.changelogTopic(sd.name)
		ps, err := retry(ctx, a, "read partitions of "+topic, func(ctx context.Context) ([]client.Partition, error) {
			return a.c.Partitions(ctx, topic)
		})
		if err != nil {
			return err
		}
		if int(id.Partition) >= len(ps) {
			return fmt.Errorf("streams: standby %s: %s has no partition %d", id, topic, id.Partition)
		}
		p := ps[id.Partition]
		next[sd.name], hwm[sd.name] = p.LogStartOffset, p.HighWatermark
		if cp, ok := cps[sd.name]; ok && cp < p.HighWatermark && cp+1 >= p.LogStartOffset {
			next[sd.name] = cp + 1
		} else if err := db.Wipe(sd.name); err != nil {
			return fmt.Errorf("streams: standby %s: wipe store %s: %w", id, sd.name, err)
		}
	}
	for ctx.Err() == nil {
		var behind int64
		for _, sd := range s.stores {
			tp := client.TopicPartition{Topic: a.topo.b.changelogTopic(sd.name), Partition: id.Partition}
			wait := time.Duration(0)
			if next[sd.name] >= hwm[sd.name] {
				wait = a.cfg.FetchWait / time.Duration(len(s.stores))
			}
			fctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout+wait)
			res, err := a.c.FetchBinary(fctx, tp.Topic, tp.Partition, client.FetchOptions{Offset: next[sd.name], MaxRecords: 10_000, MaxBytes: 8 << 20, Wait: wait})
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if client.StatusOf(err) >= 400 && !client.IsRetryable(err) {
					return fmt.Errorf("streams: standby %s: fetch %s: %w", id, tp, err)
				}
				_ = ctxwait.Sleep(ctx, 200*time.Millisecond)
				continue
			}
			writes := make([]store.Write, 0, len(res.Records))
			last := int64(-1)
			for _, rec := range res.Records {
				writes = append(writes, store.Write{Store: sd.name, Key: rec.Key, Value: rec.Value, Delete: rec.Value == nil})
				last = rec.Offset
			}
			if last >= 0 {
				if err := db.Apply(writes, map[string]int64{sd.name: last}); err != nil {
					return fmt.Errorf("streams: standby %s: apply: %w", id, err)
				}
			}
			next[sd.name] = max(next[sd.name], res.NextOffset)
			hwm[sd.name] = res.HighWatermark
			behind += max(0, hwm[sd.name]-next[sd.name])
		}
		sb.mu.Lock()
		sb.remaining = behind
		sb.mu.Unlock()
	}
	return nil
}

// maxStandbyReplicas is the most standbys per task the server places
// (catalog.MaxStandbyReplicas).
const maxStandbyReplicas = 16
