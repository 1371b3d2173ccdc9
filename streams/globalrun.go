package streams

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/streams/store"
)

// The global tables' runtime: open their store, restore each table to its topic's
// high watermark (from the checkpoints a state directory kept), then tail every
// partition until the application stops. A tailer that fails for good stops the
// application, as a failed task does.

// globalRun is the running global tables of an App.
type globalRun struct {
	set  *globalSet
	errs chan error // a tailer's failure (buffered: each tailer sends at most once)
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// close stops the tailers, waits for them and closes the store.
func (g *globalRun) close() error {
	if g == nil {
		return nil
	}
	g.stop()
	g.wg.Wait()
	g.set.mu.Lock()
	defer g.set.mu.Unlock()
	return g.set.db.Close()
}

// failures is the channel a tailer's failure arrives on (nil, which blocks forever,
// without global tables).
func (g *globalRun) failures() <-chan error {
	if g == nil {
		return nil
	}
	return g.errs
}

// startGlobals restores every global table and starts their tailers; nil when the
// topology has none.
func (a *App) startGlobals(ctx context.Context) (*globalRun, error) {
	defs := a.topo.b.globals
	if len(defs) == 0 {
		return nil, nil
	}
	var db store.DB = store.NewMemory()
	if a.cfg.StateDir != "" {
		dir := filepath.Join(a.cfg.StateDir, a.topo.App(), "global")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("streams: global tables' state directory: %w", err)
		}
		p, err := store.OpenPebble(dir, a.log)
		if err != nil {
			return nil, fmt.Errorf("streams: global tables: %w", err)
		}
		db = p
	}
	tctx, cancel := context.WithCancel(ctx)
	g := &globalRun{set: newGlobalSet(db, defs), stop: cancel}
	var tails []func()
	for _, d := range defs {
		ends, err := a.restoreGlobal(tctx, g.set, d)
		if err != nil {
			_ = g.close()
			return nil, err
		}
		for p, from := range ends {
			tails = append(tails, func() { a.tailGlobal(tctx, g, d, p, from) })
		}
	}
	g.errs = make(chan error, len(tails))
	for _, tail := range tails {
		g.wg.Add(1)
		go func() { defer g.wg.Done(); tail() }()
	}
	return g, nil
}

// restoreGlobal brings a global table up to its topic's high watermarks, read now;
// it returns where each partition's tailer goes on.
func (a *App) restoreGlobal(ctx context.Context, set *globalSet, d *globalDef) (map[int32]int64, error) {
	parts, err := retry(ctx, a, "read partitions of "+d.topic, func(ctx context.Context) ([]client.Partition, error) {
		return a.c.Partitions(ctx, d.topic)
	})
	if err != nil {
		return nil, err
	}
	cps, err := set.db.Checkpoints()
	if err != nil {
		return nil, fmt.Errorf("streams: global table %s: read checkpoints: %w", d.name, err)
	}
	from := map[int32]int64{}
	wipe := false
	for _, p := range parts {
		from[p.Partition] = p.LogStartOffset
		if cp, ok := cps[globalCheckpoint(d.name, p.Partition)]; ok {
			if cp >= p.HighWatermark || cp+1 < p.LogStartOffset {
				// The topic does not go on from this checkpoint (recreated, or
				// compacted and truncated past it): rebuild the table from the log.
				wipe = true
			}
			from[p.Partition] = cp + 1
		}
	}
	if wipe {
		a.log.Warn("global table checkpoint outside its topic: rebuilding the table", "table", d.name)
		for n := range cps {
			if n == d.name || len(n) > len(d.name) && n[:len(d.name)+1] == d.name+"@" {
				if err := set.db.Wipe(n); err != nil {
					return nil, fmt.Errorf("streams: global table %s: wipe: %w", d.name, err)
				}
			}
		}
		if err := set.db.Wipe(d.name); err != nil {
			return nil, fmt.Errorf("streams: global table %s: wipe: %w", d.name, err)
		}
		for _, p := range parts {
			from[p.Partition] = p.LogStartOffset
		}
	}
	start := time.Now()
	var n int64
	for _, p := range parts {
		tp := client.TopicPartition{Topic: d.topic, Partition: p.Partition}
		for off := from[p.Partition]; off < p.HighWatermark; {
			res, err := retry(ctx, a, "fetch global table "+tp.String(), func(ctx context.Context) (client.BinaryFetchResult, error) {
				return a.c.FetchBinary(ctx, tp.Topic, tp.Partition, client.FetchOptions{Offset: off, MaxRecords: 10_000, MaxBytes: 8 << 20})
			})
			if err != nil {
				return nil, err
			}
			if res.NextOffset <= off {
				return nil, fmt.Errorf("streams: global table %s: fetch %s at %d made no progress (high watermark %d)", d.name, tp, off, res.HighWatermark)
			}
			if err := a.applyGlobal(set, d, tp, res); err != nil {
				return nil, err
			}
			n += int64(len(res.Records))
			off = res.NextOffset
		}
		from[p.Partition] = max(from[p.Partition], p.HighWatermark)
		set.mu.Lock()
		if set.next[d.name] == nil {
			set.next[d.name] = map[int32]int64{}
		}
		set.next[d.name][p.Partition] = from[p.Partition]
		set.mu.Unlock()
	}
	a.metrics.RestoredRecords.Add(n)
	a.log.Info("global table restored", "table", d.name, "records", n, "took", time.Since(start).Round(time.Millisecond))
	return from, nil
}

// applyGlobal keeps one fetch of a global table's partition; records its serdes
// refuse are skipped, counted and logged.
func (a *App) applyGlobal(set *globalSet, d *globalDef, tp client.TopicPartition, res client.BinaryFetchResult) error {
	recs := make([]rawRecord, len(res.Records))
	for i, r := range res.Records {
		recs[i] = rawOf(tp, r)
	}
	skipped, err := set.apply(d, tp.Partition, recs, res.NextOffset)
	for _, r := range skipped {
		a.metrics.PoisonRecords.Add(1)
		a.log.Warn("global table record its serdes refuse: skipped", "table", d.name, "position", Position{r.Topic, r.Partition, r.Offset}.String())
	}
	return err
}

// tailGlobal keeps one partition of a global table up to date until ctx ends.
func (a *App) tailGlobal(ctx context.Context, g *globalRun, d *globalDef, p int32, off int64) {
	tp := client.TopicPartition{Topic: d.topic, Partition: p}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout+a.cfg.FetchWait)
		res, err := a.c.FetchBinary(fctx, tp.Topic, tp.Partition, client.FetchOptions{Offset: off, MaxRecords: a.cfg.FetchMaxRecords, Wait: a.cfg.FetchWait})
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil && res.NextOffset > off {
			if aerr := a.applyGlobal(g.set, d, tp, res); aerr != nil {
				g.errs <- aerr // the local store failed: nothing to retry
				return
			}
			off = res.NextOffset
		}
		if err != nil {
			if client.StatusOf(err) >= 400 && !client.IsRetryable(err) {
				g.errs <- fmt.Errorf("streams: global table %s: tail %s at %d: %w", d.name, tp, off, err)
				return
			}
			a.log.Debug("global table fetch failed; retrying", "partition", tp.String(), "err", err)
			if ctxwait.Sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}
