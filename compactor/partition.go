package compactor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/strata-io/strata/catalog"
)

// rowPage is how many chunk rows one catalog read returns.
const rowPage = 1000

// maxDropRounds bounds the DropChunks calls per partition per pass.
const maxDropRounds = 100

// errStop ends a partition's work without an error to report: a swap lost its
// compare-and-swap (someone else moved the rows or the log start), so the plan is stale
// and the next pass plans again.
var errStop = errors.New("compactor: plan is stale")

// maxWalkRows bounds the rows retention reads per partition per pass; a partition with
// more to judge is due again at once.
const maxWalkRows = 100 * rowPage

// dueBy collects when a partition next needs a pass: the earliest time its pass found
// (zero: none found; only a change — a commit, new configs — makes it due again).
type dueBy struct{ at time.Time }

func (d *dueBy) soon(t time.Time) {
	if d.at.IsZero() || t.Before(d.at) {
		d.at = t
	}
}

// partition does one pass of work on a leased partition and releases it with the time
// it is next due.
func (c *Compactor) partition(ctx context.Context, l catalog.PartitionLease) error {
	log := c.log.With("topic_id", l.TopicID, "partition", l.Partition)
	st, err := c.cat.CompactionState(ctx, l)
	if err != nil {
		// The lease runs out by itself, and the partition stays due.
		return fmt.Errorf("compactor: topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	c.m.waited.Observe(max(0, st.Now.Sub(l.Due)).Seconds())
	var due dueBy
	if st.Deleted {
		reclaimed, err := c.reclaim(ctx, l, st, &due)
		c.release(ctx, l, catalog.PartitionRelease{Checkpoint: st.Checkpoint, Reclaimed: reclaimed, Due: due.at, Seen: &st})
		if reclaimed {
			log.Info("reclaimed partition of deleted topic", "topic", st.Topic.Name)
		}
		return err
	}
	cfg, err := catalog.ParseConfig(st.Topic.Configs)
	if err != nil {
		// Configs are validated when set; a bad one here came from elsewhere. Compact
		// with the defaults rather than not at all.
		log.Warn("topic configs invalid; using defaults", "err", err)
		cfg = catalog.DefaultConfig()
	}
	cp := st.Checkpoint
	err = c.work(ctx, l, &st, cfg, &cp, &due)
	if err != nil {
		// Work remains: due again, after what was due before it.
		due.soon(st.Now)
	}
	if errors.Is(err, errStop) || errors.Is(err, catalog.ErrCompactionConflict) {
		log.Debug("compaction plan went stale or ran out of budget; the partition stays due", "err", err)
		err = nil
	}
	c.release(ctx, l, catalog.PartitionRelease{Checkpoint: cp, Due: due.at, Seen: &st})
	if err != nil {
		return fmt.Errorf("compactor: topic %s partition %d: %w", st.Topic.Name, l.Partition, err)
	}
	return nil
}

// release frees a lease, recording r.
func (c *Compactor) release(ctx context.Context, l catalog.PartitionLease, r catalog.PartitionRelease) {
	if err := c.cat.ReleasePartition(ctx, l, r); err != nil && ctx.Err() == nil {
		c.log.Warn("release lease", "topic_id", l.TopicID, "partition", l.Partition, "err", err)
	}
}

// giveBack frees a lease on a partition not worked on, as it was: its checkpoint and
// its due time unchanged.
func (c *Compactor) giveBack(ctx context.Context, l catalog.PartitionLease) {
	st, err := c.cat.CompactionState(ctx, l)
	if err != nil {
		c.log.Warn("give back lease: read checkpoint", "topic_id", l.TopicID, "partition", l.Partition, "err", err)
		return
	}
	c.release(ctx, l, catalog.PartitionRelease{Checkpoint: st.Checkpoint, Due: l.Due})
}

// settleAge is how long after its commit a row may be rewritten or dropped.
func settleAge(st *catalog.CompactionState) time.Duration { return st.Now.Sub(st.SettledBefore) }

// reclaim drops a deleted topic's partition's rows (settled ones; the rest at a later
// pass, due when they settle) and reports whether none remain.
func (c *Compactor) reclaim(ctx context.Context, l catalog.PartitionLease, st catalog.CompactionState, due *dueBy) (bool, error) {
	for range maxDropRounds {
		dropped, pending, err := c.cat.DropChunks(ctx, l)
		if err != nil {
			due.soon(st.Now)
			return false, err
		}
		c.m.rowsDropped.Add(float64(dropped))
		if pending == 0 {
			return true, nil
		}
		if dropped == 0 {
			// No commit lands on a deleted topic: what remains settles by then.
			due.soon(st.Now.Add(settleAge(&st)))
			return false, nil
		}
	}
	due.soon(st.Now)
	return false, nil
}

// work is one partition's pass: retention, row drops, then key compaction or merging.
// st is updated when retention moves the log start; due collects when the partition
// is next due.
func (c *Compactor) work(ctx context.Context, l catalog.PartitionLease, st *catalog.CompactionState, cfg catalog.Config, cp *catalog.PartitionCheckpoint, due *dueBy) error {
	if strings.Contains(cfg.CleanupPolicy, "delete") {
		moved, err := c.retention(ctx, l, *st, cfg, due)
		if err != nil {
			return err
		}
		if moved {
			if *st, err = c.cat.CompactionState(ctx, l); err != nil {
				return err
			}
		}
	}
	dropped, pending := 0, 0
	for range maxDropRounds {
		var err error
		if dropped, pending, err = c.cat.DropChunks(ctx, l); err != nil {
			return err
		}
		c.m.rowsDropped.Add(float64(dropped))
		if dropped == 0 || pending == 0 {
			break
		}
	}
	switch {
	case pending > 0 && dropped > 0:
		due.soon(st.Now) // more settled rows than the rounds allowed
	case pending > 0:
		due.soon(st.Now.Add(settleAge(st))) // rows not settled yet
	}
	target := cfg.SegmentBytes
	if c.cfg.TargetBytes > 0 {
		target = c.cfg.TargetBytes
	}
	p := &plan{c: c, l: l, st: *st, cfg: cfg, target: target, budget: c.cfg.MaxRewriteBytes, due: due}
	if strings.Contains(cfg.CleanupPolicy, "compact") {
		ran, err := p.compact(ctx, cp)
		if cp.TombstoneDue != 0 {
			due.soon(time.UnixMilli(cp.TombstoneDue))
		}
		if err != nil || ran {
			return err
		}
	}
	return p.merge(ctx)
}

// retention advances the log start by retention.ms and retention.bytes; moved says
// whether it did. It records in due when retention.ms next expires a row.
func (c *Compactor) retention(ctx context.Context, l catalog.PartitionLease, st catalog.CompactionState, cfg catalog.Config, due *dueBy) (bool, error) {
	part := st.Partition
	start := part.LogStartOffset
	walk := func(what string, fn func(r catalog.CompactionChunk) bool) error {
		from, read := part.LogStartOffset, 0
		for read < maxWalkRows {
			rows, err := c.cat.CompactionChunks(ctx, l.TopicID, l.Partition, from, rowPage)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			for _, r := range rows {
				// Not past the last stable offset: an open transaction's records stay
				// until it is decided (its EndTxn makes the partition due).
				if r.LastOffset >= part.LastStableOffset || !fn(r) {
					return nil
				}
				from = r.LastOffset + 1
			}
			if len(rows) < rowPage {
				return nil
			}
			read += len(rows)
		}
		due.soon(st.Now) // more to judge than one pass reads
		return nil
	}
	if ms := cfg.RetentionMs; ms >= 0 {
		// Chunk granularity, from the oldest: a row goes once its retention time —
		// its records' maximum timestamp, clamped to their append time, so no
		// producer's clock can pin it — is more than retention.ms ago. The first row
		// that stays says when retention is next due.
		cutoff := st.Now.UnixMilli() - ms
		err := walk("retention.ms", func(r catalog.CompactionChunk) bool {
			t := r.RetentionTime()
			if t < cutoff {
				start = max(start, r.LastOffset+1)
				return true
			}
			if t <= math.MaxInt64-ms {
				due.soon(time.UnixMilli(t + ms))
			}
			return false
		})
		if err != nil {
			return false, err
		}
	}
	if cfg.RetentionBytes >= 0 && part.Bytes > cfg.RetentionBytes {
		// As Kafka: drop the oldest chunks while what remains is at least
		// retention.bytes. Only a commit adds bytes, and a commit makes the partition
		// due.
		excess := part.Bytes - cfg.RetentionBytes
		err := walk("retention.bytes", func(r catalog.CompactionChunk) bool {
			if r.Len > excess {
				return false
			}
			excess -= r.Len
			start = max(start, r.LastOffset+1)
			return true
		})
		if err != nil {
			return false, err
		}
	}
	if start <= part.LogStartOffset {
		return false, nil
	}
	info, err := c.cat.DeleteRecords(ctx, l.TopicID, l.Partition, start)
	if err != nil {
		return false, fmt.Errorf("retention: advance log start to %d: %w", start, err)
	}
	c.m.logStartAdvances.Inc()
	c.log.Debug("retention advanced the log start", "topic_id", l.TopicID, "partition", l.Partition,
		"from", part.LogStartOffset, "to", info.LogStartOffset)
	return true, nil
}

// plan is one partition's rewrite work in one pass.
type plan struct {
	c      *Compactor
	l      catalog.PartitionLease
	st     catalog.CompactionState
	cfg    catalog.Config
	target int64
	budget int64 // chunk bytes still allowed to be rewritten this pass
	due    *dueBy
}

// settledRows returns the partition's rows from the one holding the log start, in
// offset order, up to the first row whose segment is not settled (Settle may still read
// it back) or that reaches the last stable offset (an open transaction's records are
// not judged before it is decided; its EndTxn makes the partition due), and while the
// bytes of rows not already full stay within maxBytes.
func (p *plan) settledRows(ctx context.Context, maxBytes int64) ([]catalog.CompactionChunk, error) {
	var out []catalog.CompactionChunk
	var small int64
	from := p.st.Partition.LogStartOffset
	for {
		rows, err := p.c.cat.CompactionChunks(ctx, p.l.TopicID, p.l.Partition, from, rowPage)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.LastOffset >= p.st.Partition.LastStableOffset {
				return out, nil
			}
			if !r.SegmentCreated.Before(p.st.SettledBefore) {
				// Not to be rewritten yet: due when it settles.
				p.due.soon(r.SegmentCreated.Add(settleAge(&p.st)))
				return out, nil
			}
			if r.Len < p.target {
				if small+r.Len > maxBytes && len(out) > 0 {
					p.due.soon(p.st.Now) // more than this pass's budget
					return out, nil
				}
				small += r.Len
			}
			out = append(out, r)
			from = r.LastOffset + 1
		}
		if len(rows) < rowPage {
			return out, nil
		}
	}
}

// merge rewrites runs of small settled rows into per-partition objects of about the
// target size. A row already at the target size ends a run; a run of one row is left
// alone, so a quiescent partition is not rewritten again.
func (p *plan) merge(ctx context.Context) error {
	rows, err := p.settledRows(ctx, p.budget)
	if err != nil {
		return err
	}
	aborted, err := p.abortedIn(ctx, rows)
	if err != nil {
		return err
	}
	logStart := p.st.Partition.LogStartOffset
	w := p.rewriter(2, false, aborted, func(off int64, key, value []byte, ts int64) bool { return off >= logStart })
	for _, r := range rows {
		if r.Len >= p.target {
			if err := w.finish(ctx); err != nil {
				return err
			}
			continue
		}
		if err := w.add(ctx, r.Chunk); err != nil {
			return err
		}
	}
	if err := w.finish(ctx); err != nil {
		return err
	}
	p.c.m.recordsRemoved.Add(float64(w.abortedRemoved))
	// Compaction lag: the oldest settled small writer chunk left unmerged, except the
	// partition's last, which waits for a companion.
	for i, r := range rows {
		if i < len(rows)-1 && !r.RealOffsets && r.Len < p.target && !w.swapped[r.BaseOffset] {
			p.c.passLag = max(p.c.passLag, p.st.Now.Sub(r.SegmentCreated))
		}
	}
	return nil
}

// compact runs key compaction when it is due, and reports whether it ran. It keeps the
// latest record of every key in the settled rows, drops tombstones older than
// delete.retention.ms, and never moves a surviving record.
func (p *plan) compact(ctx context.Context, cp *catalog.PartitionCheckpoint) (bool, error) {
	rows, err := p.settledRows(ctx, p.budget)
	if err != nil || len(rows) == 0 {
		return false, err
	}
	var total, dirty int64
	for _, r := range rows {
		total += r.Len
		if r.LastOffset >= cp.CleanOffset {
			dirty += r.Len
		}
	}
	nowMS := p.st.Now.UnixMilli()
	tombstonesDue := cp.TombstoneDue != 0 && nowMS >= cp.TombstoneDue
	if !tombstonesDue && (dirty == 0 || float64(dirty) < p.c.cfg.MinCleanableRatio*float64(total)) {
		return false, nil
	}

	// First read: the latest offset of every key. Records below the log start do not
	// count: they are gone whatever they say; nor do aborted transactions' records,
	// which are no key's value.
	aborted, err := p.abortedIn(ctx, rows)
	if err != nil {
		return false, err
	}
	logStart := p.st.Partition.LogStartOffset
	latest := map[string]int64{}
	for i, r := range rows {
		err := p.c.readRow(ctx, r.Chunk, aborted, func(off int64, key, _ []byte, _ int64) {
			if key != nil && off >= logStart {
				latest[string(key)] = off
			}
		})
		if err != nil {
			return false, err
		}
		if len(latest) > p.c.cfg.MaxCompactionKeys && i+1 < len(rows) {
			// Compact this much now; the rest is dirty, and due, for the next pass.
			rows = rows[:i+1]
			p.due.soon(p.st.Now)
			break
		}
	}

	horizon := nowMS - p.cfg.DeleteRetentionMs
	var due int64
	removed := 0
	keep := func(off int64, key, value []byte, ts int64) bool {
		switch {
		case off < logStart:
			return false
		case key == nil:
			return true // Kafka refuses these on compacted topics; never drop data we cannot judge
		case latest[string(key)] != off:
			removed++
			return false
		case value == nil && ts < horizon:
			removed++
			return false
		case value == nil:
			if d := ts + p.cfg.DeleteRetentionMs; due == 0 || d < due {
				due = d
			}
		}
		return true
	}
	w := p.rewriter(1, true, aborted, keep)
	for _, r := range rows {
		if err := w.add(ctx, r.Chunk); err != nil {
			return true, err
		}
	}
	if err := w.finish(ctx); err != nil {
		return true, err
	}
	removed += w.abortedRemoved
	cleaned := rows[len(rows)-1].LastOffset + 1
	// The markers of the cleaned range go delete.retention.ms after their decision, as
	// Kafka's cleaner removes them: every record they close is rewritten away by now,
	// but an aborted one kept to end a range, whose abort marker (and those after it)
	// must stay to keep it from read_committed readers.
	below := cleaned
	if w.keptAborted >= 0 {
		below = min(below, w.keptAborted)
	}
	dropped, next, err := p.c.cat.DropMarkers(ctx, p.l, below, time.UnixMilli(horizon))
	if err != nil {
		return true, fmt.Errorf("drop markers below %d: %w", below, err)
	}
	if next != 0 {
		if d := next + p.cfg.DeleteRetentionMs; due == 0 || d < due {
			due = d
		}
	}
	if w.kept != nil && w.kept.Value == nil {
		// The range's last record was an expired tombstone kept so that the range is
		// not empty; it goes at a later pass.
		if d := w.kept.Timestamp + p.cfg.DeleteRetentionMs; due == 0 || d < due {
			due = d
		}
	}
	p.c.m.recordsRemoved.Add(float64(removed))
	cp.CleanOffset = cleaned
	cp.TombstoneDue = due
	cp.CompactedAt = p.st.Now
	p.c.log.Debug("key compaction", "topic_id", p.l.TopicID, "partition", p.l.Partition,
		"rows", len(rows), "keys", len(latest), "removed", removed, "markers_dropped", dropped, "clean_offset", cp.CleanOffset)
	return true, nil
}
