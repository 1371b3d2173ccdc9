package compactor

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// partition does one pass of work on a leased partition and releases it.
func (c *Compactor) partition(ctx context.Context, l catalog.PartitionLease) error {
	log := c.log.With("topic_id", l.TopicID, "partition", l.Partition)
	st, err := c.cat.CompactionState(ctx, l)
	if err != nil {
		// The lease runs out by itself; releasing would need the checkpoint.
		return fmt.Errorf("compactor: topic id %d partition %d: %w", l.TopicID, l.Partition, err)
	}
	if st.Deleted {
		reclaimed, err := c.reclaim(ctx, l)
		c.release(ctx, l, &st.Checkpoint, reclaimed && err == nil)
		if err == nil && reclaimed {
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
	err = c.work(ctx, l, st, cfg, &cp)
	if errors.Is(err, errStop) || errors.Is(err, catalog.ErrCompactionConflict) {
		log.Debug("compaction plan went stale; the next pass plans again", "err", err)
		err = nil
	}
	c.release(ctx, l, &cp, false)
	if err != nil {
		return fmt.Errorf("compactor: topic %s partition %d: %w", st.Topic.Name, l.Partition, err)
	}
	return nil
}

// release frees a lease, recording cp (the current checkpoint when nil).
func (c *Compactor) release(ctx context.Context, l catalog.PartitionLease, cp *catalog.PartitionCheckpoint, reclaimed bool) {
	if cp == nil {
		st, err := c.cat.CompactionState(ctx, l)
		if err != nil {
			c.log.Warn("release lease: read checkpoint", "topic_id", l.TopicID, "partition", l.Partition, "err", err)
			return
		}
		cp = &st.Checkpoint
	}
	if err := c.cat.ReleasePartition(ctx, l, *cp, reclaimed); err != nil && ctx.Err() == nil {
		c.log.Warn("release lease", "topic_id", l.TopicID, "partition", l.Partition, "err", err)
	}
}

// reclaim drops a deleted topic's partition's rows (settled ones; the rest at a later
// pass) and reports whether none remain.
func (c *Compactor) reclaim(ctx context.Context, l catalog.PartitionLease) (bool, error) {
	for range maxDropRounds {
		dropped, pending, err := c.cat.DropChunks(ctx, l)
		if err != nil {
			return false, err
		}
		c.m.rowsDropped.Add(float64(dropped))
		if pending == 0 {
			return true, nil
		}
		if dropped == 0 {
			return false, nil
		}
	}
	return false, nil
}

// work is one partition's pass: retention, row drops, then key compaction or merging.
func (c *Compactor) work(ctx context.Context, l catalog.PartitionLease, st catalog.CompactionState, cfg catalog.Config, cp *catalog.PartitionCheckpoint) error {
	if strings.Contains(cfg.CleanupPolicy, "delete") {
		moved, err := c.retention(ctx, l, st, cfg)
		if err != nil {
			return err
		}
		if moved {
			if st, err = c.cat.CompactionState(ctx, l); err != nil {
				return err
			}
		}
	}
	for range maxDropRounds {
		dropped, pending, err := c.cat.DropChunks(ctx, l)
		if err != nil {
			return err
		}
		c.m.rowsDropped.Add(float64(dropped))
		if dropped == 0 || pending == 0 {
			break
		}
	}
	target := cfg.SegmentBytes
	if c.cfg.TargetBytes > 0 {
		target = c.cfg.TargetBytes
	}
	p := &plan{c: c, l: l, st: st, cfg: cfg, target: target, budget: c.cfg.MaxRewriteBytes}
	if strings.Contains(cfg.CleanupPolicy, "compact") {
		ran, err := p.compact(ctx, cp)
		if err != nil || ran {
			return err
		}
	}
	return p.merge(ctx)
}

// retention advances the log start by retention.ms and retention.bytes; moved says
// whether it did.
func (c *Compactor) retention(ctx context.Context, l catalog.PartitionLease, st catalog.CompactionState, cfg catalog.Config) (bool, error) {
	part := st.Partition
	start := part.LogStartOffset
	if cfg.RetentionMs >= 0 {
		// Chunk granularity: every record of a chunk whose running maximum timestamp is
		// below the cutoff is older than retention.ms. CreateTime stamps are bounded by
		// message.timestamp.after.max.ms, so a clock ahead cannot pin data for ever.
		cutoff := st.Now.UnixMilli() - cfg.RetentionMs
		off, err := c.cat.OffsetForTime(ctx, l.TopicID, l.Partition, cutoff)
		if err != nil {
			return false, fmt.Errorf("retention.ms: %w", err)
		}
		start = max(start, off)
	}
	if cfg.RetentionBytes >= 0 && part.Bytes > cfg.RetentionBytes {
		// As Kafka: drop the oldest chunks while what remains is at least
		// retention.bytes.
		excess := part.Bytes - cfg.RetentionBytes
		from := part.LogStartOffset
	pages:
		for {
			rows, err := c.cat.CompactionChunks(ctx, l.TopicID, l.Partition, from, rowPage)
			if err != nil {
				return false, fmt.Errorf("retention.bytes: %w", err)
			}
			for _, r := range rows {
				if r.Len > excess || r.LastOffset >= part.HighWatermark {
					break pages
				}
				excess -= r.Len
				start = max(start, r.LastOffset+1)
				from = r.LastOffset + 1
			}
			if len(rows) < rowPage {
				break
			}
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
}

// settledRows returns the partition's rows from the one holding the log start, in
// offset order, up to the first row whose segment is not settled (Settle may still read
// it back) and while the bytes of rows not already full stay within maxBytes.
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
			if r.LastOffset >= p.st.Partition.HighWatermark || !r.SegmentCreated.Before(p.st.SettledBefore) {
				return out, nil
			}
			if r.Len < p.target {
				if small+r.Len > maxBytes && len(out) > 0 {
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
	logStart := p.st.Partition.LogStartOffset
	w := p.rewriter(2, false, func(off int64, key, value []byte, ts int64) bool { return off >= logStart })
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
	// count: they are gone whatever they say.
	logStart := p.st.Partition.LogStartOffset
	latest := map[string]int64{}
	for i, r := range rows {
		err := p.c.readRow(ctx, r.Chunk, func(off int64, key, _ []byte, _ int64) {
			if key != nil && off >= logStart {
				latest[string(key)] = off
			}
		})
		if err != nil {
			return false, err
		}
		if len(latest) > p.c.cfg.MaxCompactionKeys && i+1 < len(rows) {
			// Compact this much now; the rest is dirty for the next pass.
			rows = rows[:i+1]
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
	w := p.rewriter(1, true, keep)
	for _, r := range rows {
		if err := w.add(ctx, r.Chunk); err != nil {
			return true, err
		}
	}
	if err := w.finish(ctx); err != nil {
		return true, err
	}
	if w.kept != nil && w.kept.Value == nil {
		// The range's last record was an expired tombstone kept so that the range is
		// not empty; it goes at a later pass.
		if d := w.kept.Timestamp + p.cfg.DeleteRetentionMs; due == 0 || d < due {
			due = d
		}
	}
	p.c.m.recordsRemoved.Add(float64(removed))
	cp.CleanOffset = rows[len(rows)-1].LastOffset + 1
	cp.TombstoneDue = due
	cp.CompactedAt = p.st.Now
	p.c.log.Debug("key compaction", "topic_id", p.l.TopicID, "partition", p.l.Partition,
		"rows", len(rows), "keys", len(latest), "removed", removed, "clean_offset", cp.CleanOffset)
	return true, nil
}
