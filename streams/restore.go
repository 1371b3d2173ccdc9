package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/store"
)

// restore brings every store of the task up to its changelog's high watermark, from
// the store's checkpoint (the changelog offset it reflects) or from the log start. The
// high watermark read here is final: only this task's holder writes the changelog, and
// the previous holder was fenced (its transactional id taken, its membership gone)
// before the partitions came here.
func (r *taskRunner) restore(t *task) error {
	a := r.a
	cps, err := t.db.Checkpoints()
	if err != nil {
		return fmt.Errorf("streams: task %s: read checkpoints: %w", r.id, err)
	}
	for _, sd := range r.sub.stores {
		topic := a.topo.b.changelogTopic(sd.name)
		tp := client.TopicPartition{Topic: topic, Partition: r.id.Partition}
		logStart, hwm, err := r.bounds(tp)
		if err != nil {
			return err
		}
		from := logStart
		if cp, ok := cps[sd.name]; ok {
			switch {
			case cp >= hwm || cp+1 < logStart:
				// The changelog does not go on from this checkpoint (recreated, or
				// truncated past it): rebuild the store from the log.
				r.log().Warn("checkpoint outside the changelog: rebuilding the store", "store", sd.name, "checkpoint", cp, "log_start", logStart, "high_watermark", hwm)
				if err := t.db.Wipe(sd.name); err != nil {
					return fmt.Errorf("streams: task %s: wipe store %s: %w", r.id, sd.name, err)
				}
			default:
				from = cp + 1
			}
		} else if err := t.db.Wipe(sd.name); err != nil {
			return fmt.Errorf("streams: task %s: wipe store %s: %w", r.id, sd.name, err)
		}
		start := time.Now()
		t.pm.restoring(sd.name, hwm-from)
		n, err := r.replay(t, sd.name, tp, from, hwm)
		if err != nil {
			return err
		}
		t.pm.restoring(sd.name, 0)
		a.metrics.RestoredRecords.Add(n)
		if n > 0 {
			r.log().Info("restored store", "store", sd.name, "records", n, "from", from, "to", hwm, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	return nil
}

// replay applies the changelog records of tp in [from, to) to the store, a fetched
// batch at a time with its checkpoint.
func (r *taskRunner) replay(t *task, name string, tp client.TopicPartition, from, to int64) (int64, error) {
	db := t.db
	var n int64
	for off := from; off < to; {
		res, err := retry(r.ctx, r.a, "fetch changelog "+tp.String(), func(ctx context.Context) (client.BinaryFetchResult, error) {
			return r.a.c.FetchBinary(ctx, tp.Topic, tp.Partition, client.FetchOptions{Offset: off, MaxRecords: 10_000, MaxBytes: 8 << 20})
		})
		if err != nil {
			return n, err
		}
		writes := make([]store.Write, 0, len(res.Records))
		last := int64(-1)
		for _, rec := range res.Records {
			if rec.Offset >= to {
				break
			}
			writes = append(writes, store.Write{Store: name, Key: rec.Key, Value: rec.Value, Delete: rec.Value == nil})
			last = rec.Offset
		}
		if last >= 0 {
			if err := db.Apply(writes, map[string]int64{name: last}); err != nil {
				return n, fmt.Errorf("streams: restore %s: %w", name, err)
			}
			n += int64(len(writes))
			t.pm.replayed(name, int64(len(writes)))
			t.pm.restoring(name, to-last-1)
		}
		if res.NextOffset <= off {
			return n, fmt.Errorf("streams: changelog %s: fetch at %d made no progress (high watermark %d)", tp, off, res.HighWatermark)
		}
		off = res.NextOffset
	}
	return n, nil
}
