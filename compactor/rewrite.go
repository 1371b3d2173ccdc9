package compactor

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// keepFunc decides whether a record survives a rewrite.
type keepFunc func(off int64, key, value []byte, ts int64) bool

// rowBatch is one decoded batch of a row and its size as stored.
type rowBatch struct {
	segment.DecodedBatch
	size int64
}

// decodeRow reads one chunk row's batches and decodes them, with every record's real
// offset. It checks the batches against the row the way the reader does: a writer
// chunk's batches take consecutive offsets from the row's base and end at its last
// offset; a compactor chunk's batches carry real, increasing offsets inside the row's
// range. Anything else is corrupt data, and nothing is rewritten from it.
func (c *Compactor) decodeRow(ctx context.Context, r catalog.Chunk) ([]rowBatch, error) {
	data, err := c.store.GetRange(ctx, r.SegmentKey, r.Pos, r.Len)
	if err != nil {
		return nil, fmt.Errorf("read chunk %s [%d,+%d): %w", r.SegmentKey, r.Pos, r.Len, err)
	}
	raws, err := segment.SplitBatches(data)
	if err != nil {
		return nil, fmt.Errorf("chunk %s [%d,+%d): %w", r.SegmentKey, r.Pos, r.Len, err)
	}
	out := make([]rowBatch, 0, len(raws))
	next := r.BaseOffset
	for _, raw := range raws {
		db, err := segment.DecodeBatch(raw)
		if err != nil {
			return nil, fmt.Errorf("chunk %s [%d,+%d): %w", r.SegmentKey, r.Pos, r.Len, err)
		}
		base := next
		if r.RealOffsets {
			if base = db.BaseOffset; base < next {
				return nil, fmt.Errorf("chunk %s [%d,+%d): batch base offset %d below %d: %w", r.SegmentKey, r.Pos, r.Len, base, next, segment.ErrCorrupt)
			}
		}
		shift := base - db.BaseOffset
		for i := range db.Records {
			db.Records[i].Offset += shift
		}
		db.BaseOffset = base
		out = append(out, rowBatch{db, int64(len(raw))})
		next = base + int64(db.LastOffsetDelta) + 1
	}
	if (r.RealOffsets && next-1 > r.LastOffset) || (!r.RealOffsets && next-1 != r.LastOffset) {
		return nil, fmt.Errorf("chunk %s [%d,+%d): batches end at offset %d, the row at %d: %w", r.SegmentKey, r.Pos, r.Len, next-1, r.LastOffset, segment.ErrCorrupt)
	}
	return out, nil
}

// abortedSet says which transactional batches belong to aborted transactions: by
// producer, the ranges [first offset, abort marker) of its aborted transactions, in
// order and disjoint (a producer has one transaction at a time).
type abortedSet map[int64][]catalog.AbortedTxn

func newAbortedSet(list []catalog.AbortedTxn) abortedSet {
	s := abortedSet{}
	for _, a := range list {
		s[a.ProducerID] = append(s[a.ProducerID], a)
	}
	return s
}

// has reports whether b is a batch of an aborted transaction.
func (s abortedSet) has(b segment.DecodedBatch) bool {
	if !b.Transactional {
		return false
	}
	rs := s[b.ProducerID]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].LastOffset > b.BaseOffset })
	return i < len(rs) && rs[i].FirstOffset <= b.BaseOffset
}

// abortedIn reads the aborted transactions whose records may lie in rows.
func (p *plan) abortedIn(ctx context.Context, rows []catalog.CompactionChunk) (abortedSet, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	list, err := p.c.cat.AbortedTxns(ctx, p.l.TopicID, p.l.Partition, rows[0].BaseOffset, rows[len(rows)-1].LastOffset)
	if err != nil {
		return nil, fmt.Errorf("aborted transactions: %w", err)
	}
	return newAbortedSet(list), nil
}

// readRow calls fn for every record of a row, with its real offset, but those of
// aborted transactions.
func (c *Compactor) readRow(ctx context.Context, r catalog.Chunk, aborted abortedSet, fn func(off int64, key, value []byte, ts int64)) error {
	batches, err := c.decodeRow(ctx, r)
	if err != nil {
		return err
	}
	for _, b := range batches {
		if aborted.has(b.DecodedBatch) {
			continue
		}
		for _, rec := range b.Records {
			fn(rec.Offset, rec.Key, rec.Value, rec.Timestamp)
		}
	}
	return nil
}

// rewriter turns a run of chunk rows into new objects of at least the target size each
// (the last one smaller), one swap per object. The run steps over transaction markers'
// offsets (no row covers them; catalog.Swap), and the batches of aborted transactions
// are dropped whatever keep says.
type rewriter struct {
	p         *plan
	minRows   int  // a group of fewer rows is left as it is
	forceLast bool // never leave a group without records (key compaction)
	keep      keepFunc
	aborted   abortedSet

	rows    []catalog.Chunk
	batches []segment.Batch
	est     int64 // estimated bytes of the batches kept
	// The group's last record and its batch's header, for forceLast.
	lastRec     segment.Record
	lastBatch   segment.Batch
	hasLast     bool
	lastAborted bool // the last record is an aborted transaction's
	// droppedAborted counts the aborted records the group dropped; a group that
	// dropped any is never left as it is (it would be read again at every pass).
	droppedAborted int

	abortedRemoved int   // aborted records dropped by the swaps made
	keptAborted    int64 // the lowest offset of an aborted record kept (-1: none)

	kept    *segment.Record // the record the last group kept only to stay non-empty
	swaps   int
	swapped map[int64]bool // base offsets of the rows swapped out
}

func (p *plan) rewriter(minRows int, forceLast bool, aborted abortedSet, keep keepFunc) *rewriter {
	return &rewriter{p: p, minRows: minRows, forceLast: forceLast, aborted: aborted, keep: keep, keptAborted: -1}
}

// add appends a row to the current group (it must follow the previous row: the offsets
// between them are markers') and writes the group out once it reaches the target size.
func (w *rewriter) add(ctx context.Context, r catalog.Chunk) error {
	if n := len(w.rows); n > 0 && r.BaseOffset <= w.rows[n-1].LastOffset {
		return fmt.Errorf("chunk rows out of order: [%d, %d] after [%d, %d]", r.BaseOffset, r.LastOffset, w.rows[n-1].BaseOffset, w.rows[n-1].LastOffset)
	}
	if w.p.budget <= 0 {
		if err := w.finish(ctx); err != nil {
			return err
		}
		return errStop
	}
	decoded, err := w.p.c.decodeRow(ctx, r)
	if err != nil {
		return err
	}
	w.p.budget -= r.Len
	w.rows = append(w.rows, r)
	for _, db := range decoded {
		b := segment.Batch{
			TopicID: r.TopicID, Partition: r.Partition, BaseOffset: db.BaseOffset,
			ProducerID: db.ProducerID, ProducerEpoch: db.ProducerEpoch, BaseSequence: db.BaseSequence,
			Compression: db.Compression, LogAppendTime: db.LogAppendTime, Transactional: db.Transactional,
		}
		aborted := w.aborted.has(db.DecodedBatch)
		if aborted {
			w.droppedAborted += len(db.Records)
		}
		for _, rec := range db.Records {
			sr := segment.Record{Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp,
				OffsetDelta: int32(rec.Offset - db.BaseOffset)}
			if !aborted && w.keep(rec.Offset, rec.Key, rec.Value, rec.Timestamp) {
				b.Records = append(b.Records, sr)
			}
		}
		if n := len(db.Records); n > 0 {
			w.lastBatch, w.hasLast, w.lastAborted = b, true, aborted
			w.lastBatch.Records = nil
			r := db.Records[n-1]
			w.lastRec = segment.Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
				OffsetDelta: int32(r.Offset - db.BaseOffset)}
		}
		if len(b.Records) > 0 {
			w.batches = append(w.batches, b)
			// A batch kept whole re-encodes to its stored size (the same encoder, the
			// same records), so merged objects reach the target exactly and are not
			// merged again; a compacted one is estimated pro rata.
			w.est += db.size * int64(len(b.Records)) / int64(len(db.Records))
		}
	}
	if w.est >= w.p.target && len(w.rows) >= w.minRows {
		return w.emit(ctx, false)
	}
	return nil
}

// finish writes out what remains of the group.
func (w *rewriter) finish(ctx context.Context) error {
	if len(w.rows) == 0 {
		return nil
	}
	if len(w.rows) < w.minRows {
		w.reset()
		return nil
	}
	return w.emit(ctx, true)
}

func (w *rewriter) reset() {
	w.rows, w.batches, w.est, w.hasLast, w.droppedAborted = nil, nil, 0, false, 0
}

// emit writes the group's object and swaps it in for the group's rows.
func (w *rewriter) emit(ctx context.Context, final bool) error {
	defer w.reset()
	p, c := w.p, w.p.c
	if len(w.batches) == 0 {
		if !w.hasLast || (!w.forceLast && w.droppedAborted == 0) {
			return nil // nothing survives and nothing must: leave the rows as they are
		}
		// Rows must cover every offset below the high watermark, so a range is never
		// emptied: its last record stays (a tombstone, a superseded value or an aborted
		// transaction's record, which its abort marker keeps from read_committed
		// readers; harmless to consumers; a later pass removes it once something
		// follows it).
		b := w.lastBatch
		b.Records = []segment.Record{w.lastRec}
		w.batches = []segment.Batch{b}
		if w.lastAborted {
			w.droppedAborted--
			if off := b.BaseOffset + int64(w.lastRec.OffsetDelta); w.keptAborted < 0 || off < w.keptAborted {
				w.keptAborted = off
			}
		}
		if final {
			kept := w.lastRec
			w.kept = &kept
		}
	}
	obj, infos, err := segment.Encode(w.batches, segment.EncodeOptions{IndexInterval: c.cfg.IndexInterval})
	if err != nil {
		return fmt.Errorf("encode merged object: %w", err)
	}
	row := catalog.ChunkRow{
		TopicID: p.l.TopicID, Partition: p.l.Partition,
		BaseOffset: w.rows[0].BaseOffset, LastOffset: w.rows[len(w.rows)-1].LastOffset,
		Pos: infos[0].Pos, MaxTimestamp: catalog.NoTimestamp,
	}
	end := int64(0)
	for _, bi := range infos {
		row.Pos = min(row.Pos, bi.Pos)
		end = max(end, bi.Pos+bi.Len)
		row.MaxTimestamp = max(row.MaxTimestamp, bi.MaxTimestamp)
	}
	row.Len = end - row.Pos

	now, err := c.cat.Now(ctx)
	if err != nil {
		return err
	}
	key := segment.NewKey(now)
	if err := c.store.Put(ctx, key, obj); err != nil {
		return fmt.Errorf("put merged object %s: %w", key, err)
	}
	var oldBytes int64
	for _, r := range w.rows {
		oldBytes += r.Len
	}
	err = c.cat.SwapChunks(ctx, catalog.Swap{
		Lease: p.l, LogStart: p.st.Partition.LogStartOffset,
		Old: w.rows, Key: key, Size: int64(len(obj)), New: []catalog.ChunkRow{row},
	})
	if err != nil {
		if errors.Is(err, catalog.ErrCompactionConflict) || errors.Is(err, catalog.ErrCommitTooLate) || errors.Is(err, catalog.ErrInvalidSegment) {
			// Definitely not swapped in: nothing refers to the object.
			c.m.conflicts.Inc()
			if derr := c.store.Delete(ctx, key); derr != nil {
				c.log.Warn("abandon merged object (the orphan sweep will remove it)", "key", key, "err", derr)
			}
			return fmt.Errorf("%w: %w", errStop, err)
		}
		// The outcome is unknown: the object may be referenced now. The orphan sweep
		// removes it if it is not.
		return fmt.Errorf("swap in %s: %w", key, err)
	}
	w.swaps++
	w.abortedRemoved += w.droppedAborted
	if w.swapped == nil {
		w.swapped = map[int64]bool{}
	}
	for _, r := range w.rows {
		w.swapped[r.BaseOffset] = true
	}
	c.m.merges.Inc()
	c.m.bytesRewritten.Add(float64(oldBytes))
	c.m.bytesWritten.Add(float64(len(obj)))
	c.log.Debug("swapped in merged object", "key", key, "topic_id", p.l.TopicID, "partition", p.l.Partition,
		"rows", len(w.rows), "from", row.BaseOffset, "to", row.LastOffset, "bytes", len(obj))
	return nil
}
