package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// rawBatch is one Kafka v2 record batch of a chunk as stored (read-only: it may be
// the cache's memory), with its real offsets; or, with nil data, a hole: offsets
// base..last that key compaction emptied at the end of a chunk.
type rawBatch struct {
	data       []byte
	base       int64 // real base offset
	last       int64 // real offset of the batch's last offset delta
	records    int32
	compressed bool
	end        int64 // byte position in the object just past the batch
	// producer is the batch's producer id, transactional its attribute; control marks
	// a rendered transaction marker (never in an object).
	producer      int64
	transactional bool
	control       bool
}

// own returns a private copy of the batch carrying its real base offset. Copying only
// the batches a fetch returns, rather than whole chunks, is what keeps a cached fetch
// cheap.
func (b rawBatch) own() []byte {
	raw := bytes.Clone(b.data)
	segment.SetBaseOffset(raw, b.base)
	return raw
}

// scan calls visit with the batches of list from the one holding f.Offset, in order,
// until visit says stop. Chunks are read only as visit reaches them, and a large
// chunk only as far as visit goes. The transaction markers of list come in their place
// (offsets no chunk's batches cover): rendered control batches with f.Markers, holes
// (nil data) otherwise; so does every batch of an aborted transaction when f reads
// committed without markers. Nothing at or past the fetch's limit (limit) comes.
//
// When visit stops it, scan hands the bytes a sequential reader will want next to the
// prefetcher: the rest of the chunk it stopped in, or the head of the next chunk.
func (r *Reader) scan(ctx context.Context, f Fetch, list catalog.ChunkList, visit func(rawBatch) (bool, error)) error {
	hw := list.Partition.HighWatermark
	end := limit(f, list.Partition)
	next := f.Offset
	a := acct{hold: f.Memory, wait: r.cfg.MemoryWait, topic: f.TopicID}
	markers := list.Markers
	// drain visits the markers below bound. stop: the fetch is done.
	drain := func(bound int64) (stop bool, err error) {
		for len(markers) > 0 && markers[0].Offset < bound {
			m := markers[0]
			markers = markers[1:]
			if m.Offset < next {
				continue
			}
			if m.Offset >= end {
				return true, nil
			}
			mb := rawBatch{base: m.Offset, last: m.Offset}
			if f.Markers {
				mb.data = segment.ControlBatch(m.Offset, m.ProducerID, m.ProducerEpoch, m.Commit, m.Timestamp)
				mb.records, mb.producer, mb.transactional, mb.control = 1, m.ProducerID, true, true
			}
			more, err := visit(mb)
			if err != nil || !more {
				return true, err
			}
			next = m.Offset + 1
		}
		return false, nil
	}
	// emit visits the markers before b, then b (a batch of an aborted transaction as a
	// hole when f filters them).
	emit := func(b rawBatch) (stop bool, err error) {
		if stop, err := drain(b.base); stop || err != nil {
			return true, err
		}
		if b.base >= end {
			return true, nil
		}
		if b.data != nil && b.transactional && !f.Markers && f.Isolation == ReadCommitted && abortedBatch(list.Aborted, b) {
			b = rawBatch{base: b.base, last: b.last, end: b.end}
		}
		more, err := visit(b)
		return err != nil || !more, err
	}
	for i, ch := range list.Chunks {
		if ch.LastOffset < next {
			continue
		}
		if ch.LastOffset >= hw {
			// The catalog never returns a chunk reaching the high watermark of the same
			// lookup; were it to, what lies there is not committed: never serve it.
			return nil
		}
		for next <= ch.LastOffset {
			batches, complete, err := r.chunkBatches(ctx, a, ch, next, f.MaxBytes, f.MaxRecords)
			if errors.Is(err, segment.ErrCorrupt) {
				// Objects are immutable and verified by CRC: a corrupt read is most
				// likely damage in transit. Drop the object's cached blocks (footer included)
				// and read once more.
				r.cache.evict(ch.SegmentKey, 0, ch.SegmentSize) // the footer too
				batches, complete, err = r.chunkBatches(ctx, a, ch, next, f.MaxBytes, f.MaxRecords)
			}
			if err != nil {
				return fmt.Errorf("chunk %s [%d,+%d) offsets %d-%d: %w", ch.SegmentKey, ch.Pos, ch.Len, ch.BaseOffset, ch.LastOffset, err)
			}
			from := next
			for _, b := range batches {
				if b.last < next {
					continue
				}
				stop, err := emit(b)
				if err != nil || stop {
					if err == nil {
						r.prefetchAfter(list.Chunks, i, b.end, hw)
					}
					return err
				}
				next = b.last + 1
			}
			if complete || next == from {
				break
			}
		}
		if next <= ch.LastOffset {
			// A hole key compaction left at the chunk's end: markers inside it come first.
			if stop, err := drain(ch.LastOffset + 1); stop || err != nil {
				return err
			}
			if next <= ch.LastOffset {
				if next >= end {
					return nil
				}
				more, err := visit(rawBatch{base: next, last: ch.LastOffset})
				if err != nil || !more {
					return err
				}
				next = ch.LastOffset + 1
			}
		}
	}
	// The markers after the last chunk, up to the end of the answer.
	_, err := drain(hw)
	return err
}

// limit is where a fetch stops: the last stable offset when it reads committed, else
// the high watermark.
func limit(f Fetch, p catalog.PartitionInfo) int64 {
	if f.Isolation == ReadCommitted {
		return p.LastStableOffset
	}
	return p.HighWatermark
}

// abortedBatch says whether b (a transactional batch) belongs to one of aborted: its
// producer's transaction that began at or before it and was aborted after it.
func abortedBatch(aborted []catalog.AbortedTxn, b rawBatch) bool {
	for _, a := range aborted {
		if a.ProducerID == b.producer && a.FirstOffset <= b.base && b.base < a.LastOffset {
			return true
		}
	}
	return false
}

// chunkBatches returns ch's batches from the one holding offset (earlier ones may be
// included) with their real offsets; complete says they run to the chunk's end.
//
// A large chunk is read through its object's footer, only as far as about maxBytes /
// maxRecords from offset. So is every chunk
// whose batches carry real offsets: a batch's base offset is not covered by its CRC,
// and the footer's copy (under the footer's CRC) is how a corrupt one is caught
// rather than served.
func (r *Reader) chunkBatches(ctx context.Context, a acct, ch catalog.Chunk, offset, maxBytes int64, maxRecords int) (batches []rawBatch, complete bool, err error) {
	if ch.RealOffsets || ch.Len > r.narrowAbove {
		return r.narrowBatches(ctx, a, ch, offset, maxBytes, maxRecords)
	}
	data, err := r.cache.readFor(ctx, a, ch.SegmentKey, ch.SegmentSize, ch.Pos, ch.Len)
	if err != nil {
		return nil, false, err
	}
	raws, err := segment.SplitBatches(data)
	if err != nil {
		return nil, false, err
	}
	// A writer chunk: each batch starts where the previous one ended.
	out := make([]rawBatch, 0, len(raws))
	next, end := ch.BaseOffset, ch.Pos
	for _, raw := range raws {
		h, err := segment.ParseBatchHeader(raw)
		if err != nil {
			return nil, false, err
		}
		end += int64(len(raw))
		out = append(out, rawBatch{data: raw, base: next, last: next + int64(h.LastOffsetDelta),
			records: h.NumRecords, compressed: h.Compression != segment.CompressionNone, end: end,
			producer: h.ProducerID, transactional: h.Transactional})
		next += int64(h.LastOffsetDelta) + 1
	}
	if err := checkSpan(ch, next); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// checkSpan checks that a chunk's batches, whose last offset is end-1, cover the
// offsets its catalog row claims: a disagreement means the offsets would be wrong.
func checkSpan(ch catalog.Chunk, end int64) error {
	if (ch.RealOffsets && end-1 <= ch.LastOffset) || end-1 == ch.LastOffset {
		return nil
	}
	return fmt.Errorf("batches end at offset %d, the catalog says %d: %w", end-1, ch.LastOffset, segment.ErrCorrupt)
}

// narrowBatches is chunkBatches through the object's footer: it tells where each batch
// lies, how many offsets it takes and (compacted objects) its base offset, so only the
// batches needed are read, and each is checked against its footer entry.
func (r *Reader) narrowBatches(ctx context.Context, a acct, ch catalog.Chunk, offset, maxBytes int64, maxRecords int) ([]rawBatch, bool, error) {
	ft, err := r.footer(ctx, a, ch.SegmentKey, ch.SegmentSize)
	if err != nil {
		return nil, false, err
	}
	i := sort.Search(len(ft.Batches), func(i int) bool { return ft.Batches[i].Pos >= ch.Pos })
	var infos []segment.BatchInfo
	bases := make([]int64, 0, 64)
	next, pos := ch.BaseOffset, ch.Pos
	for ; i < len(ft.Batches) && pos < ch.Pos+ch.Len; i++ {
		bi := ft.Batches[i]
		if bi.Pos != pos || bi.TopicID != ch.TopicID || bi.Partition != ch.Partition || bi.LastOffsetDelta < 0 {
			return nil, false, fmt.Errorf("footer batch %d (topic %d partition %d at %d): not the chunk's batch at %d: %w", i, bi.TopicID, bi.Partition, bi.Pos, pos, segment.ErrCorrupt)
		}
		base := next
		if ch.RealOffsets {
			if base = bi.BaseOffset; base < next {
				return nil, false, fmt.Errorf("footer batch %d at offset %d: below %d: %w", i, base, next, segment.ErrCorrupt)
			}
		}
		infos = append(infos, bi)
		bases = append(bases, base)
		next = base + int64(bi.LastOffsetDelta) + 1
		pos += bi.Len
	}
	if pos != ch.Pos+ch.Len {
		return nil, false, fmt.Errorf("footer batches end at byte %d, the chunk at %d: %w", pos, ch.Pos+ch.Len, segment.ErrCorrupt)
	}
	if err := checkSpan(ch, next); err != nil {
		return nil, false, err
	}

	// From the batch holding offset, as many batches as the limits want (at least one).
	s := sort.Search(len(infos), func(i int) bool { return bases[i]+int64(infos[i].LastOffsetDelta) >= offset })
	if s == len(infos) {
		return nil, true, nil
	}
	e := s
	var size, records int64
	for e < len(infos) && (e == s || size < maxBytes && records < int64(maxRecords)) {
		size += infos[e].Len
		records += int64(infos[e].Records)
		e++
	}
	start := infos[s].Pos
	data, err := r.cache.readFor(ctx, a, ch.SegmentKey, ch.SegmentSize, start, infos[e-1].Pos+infos[e-1].Len-start)
	if err != nil {
		return nil, false, err
	}
	raws, err := segment.SplitBatches(data)
	if err != nil {
		return nil, false, err
	}
	if len(raws) != e-s {
		return nil, false, fmt.Errorf("%d batches at [%d,+%d), the footer says %d: %w", len(raws), start, len(data), e-s, segment.ErrCorrupt)
	}
	out := make([]rawBatch, len(raws))
	for j, raw := range raws {
		bi := infos[s+j]
		h, err := segment.ParseBatchHeader(raw)
		if err != nil {
			return nil, false, err
		}
		if int64(len(raw)) != bi.Len || h.LastOffsetDelta != bi.LastOffsetDelta || h.NumRecords != bi.Records || h.CRC != bi.CRC {
			return nil, false, fmt.Errorf("batch at byte %d disagrees with the footer: %w", bi.Pos, segment.ErrCorrupt)
		}
		base := bases[s+j]
		if ch.RealOffsets && h.BaseOffset != base {
			return nil, false, fmt.Errorf("batch at byte %d: base offset %d, the footer says %d: %w", bi.Pos, h.BaseOffset, base, segment.ErrCorrupt)
		}
		out[j] = rawBatch{data: raw, base: base, last: base + int64(bi.LastOffsetDelta), records: h.NumRecords,
			compressed: h.Compression != segment.CompressionNone, end: bi.Pos + bi.Len,
			producer: h.ProducerID, transactional: h.Transactional}
	}
	return out, e == len(infos), nil
}

// footer returns an object's decoded footer, from the footer cache or read through
// the block cache.
func (r *Reader) footer(ctx context.Context, a acct, key string, size int64) (segment.Footer, error) {
	if ft, ok := r.footers.get(key); ok {
		return ft, nil
	}
	if size < segment.TrailerSize {
		return segment.Footer{}, fmt.Errorf("object %s of %d bytes: shorter than a trailer: %w", key, size, segment.ErrCorrupt)
	}
	tail, err := r.cache.readFor(ctx, a, key, size, size-segment.TrailerSize, segment.TrailerSize)
	if err != nil {
		return segment.Footer{}, err
	}
	n, err := segment.ParseTrailer(tail)
	if err != nil {
		return segment.Footer{}, fmt.Errorf("object %s: trailer: %w", key, err)
	}
	if n <= 0 || n > size-segment.TrailerSize {
		return segment.Footer{}, fmt.Errorf("object %s of %d bytes: footer of %d bytes: %w", key, size, n, segment.ErrCorrupt)
	}
	b, err := r.cache.readFor(ctx, a, key, size, size-segment.TrailerSize-n, n)
	if err != nil {
		return segment.Footer{}, err
	}
	ft, err := segment.DecodeFooter(b)
	if err != nil {
		return segment.Footer{}, fmt.Errorf("object %s: footer: %w", key, err)
	}
	r.footers.put(key, ft)
	return ft, nil
}
