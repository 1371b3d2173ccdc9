package writer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/ctxwait"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/segment"
)

// layout is a flush laid out as segment batches: one per (request, partition).
type layout struct {
	reqs    []*pending
	batches []segment.Batch
	spans   []span // per request
	nowMs   int64  // the stamp of LogAppendTime records
}

// span locates one request's batches and records.
type span struct {
	first, n int      // its batches are batches[first : first+n]
	locs     []recLoc // per record of the request; nil for raw
	// raw: the batches are a Raw request's, of one partition, committed as one catalog
	// batch of raw records, the i-th of which takes its base offset + i.
	raw int
}

// catalogBatches is how many batches the request's catalog.Request has.
func (sp span) catalogBatches() int {
	if sp.raw > 0 {
		return 1
	}
	return sp.n
}

// recLoc is where one record sits: its batch (relative to the request's first) and its
// index in that batch, which is its offset relative to the batch's base offset.
type recLoc struct {
	batch, index int32
}

// flush runs one flush to its end and sets every request's answer: encode, one PUT,
// then, after the previous flush is answered, one commit (settled if its outcome is
// unknown).
func (w *Writer) flush(f *flush) {
	// Answers go out in flush order, whatever happened to this flush, so that a
	// producer that pipelines sees them in order too.
	waitPrev := func() {
		if f.prevDone != nil {
			<-f.prevDone
		}
	}
	now := w.cfg.Now()
	start := time.Now()
	lay, obj, infos, err := w.encodeFlush(f, now)
	w.m.stage.WithLabelValues("encode").Observe(time.Since(start).Seconds())
	if err != nil {
		w.log.Error("encode segment", "requests", len(f.reqs), "err", err)
		waitPrev()
		failAll(lay.reqs, fmt.Errorf("%w: encode segment: %w", ErrStore, err))
		return
	}
	if len(lay.reqs) == 0 {
		waitPrev() // every request was refused by the encoder and has its answer
		return
	}
	w.m.flushBytes.Observe(float64(obj.size))

	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.PutTimeout)
	key, puts, err := w.put(ctx, now, obj)
	if errors.Is(err, objstore.ErrChecksum) {
		// The object's CRC is made from its raw batches' own (EncodeParts), and a batch's
		// bytes no longer match its CRC: changed in memory since it was accepted. Its
		// request is refused, as one the encoder refuses, and the rest stored (Encode
		// reads and checks each batch, as EncodeParts does not).
		w.log.Error("put segment: a batch changed since it was accepted", "key", key, "err", err)
		lay, obj, infos, err = w.encodeWithout(f, lay, now, err, func(bs []segment.Batch) error {
			_, _, err := segment.Encode(bs, segment.EncodeOptions{})
			return err
		})
		if err == nil && len(lay.reqs) == 0 {
			cancel()
			waitPrev() // every request was refused and has its answer
			return
		}
		if err == nil {
			var again int
			key, again, err = w.put(ctx, now, obj)
			puts += again
		}
	}
	cancel()
	w.m.stage.WithLabelValues("put").Observe(time.Since(start).Seconds())
	if err != nil {
		w.m.puts.WithLabelValues("error").Inc()
		w.log.Warn("put segment", "key", key, "bytes", obj.size, "requests", len(lay.reqs), "err", err)
		waitPrev()
		failAll(lay.reqs, fmt.Errorf("%w: put %s: %w", ErrStore, key, err))
		return
	}
	w.m.puts.WithLabelValues("ok").Inc()
	if w.cfg.Written != nil {
		w.cfg.Written(key, obj.parts)
	}

	seg := catalog.Segment{Key: key, Size: obj.size, Requests: make([]catalog.Request, len(lay.reqs))}
	for k, p := range lay.reqs {
		sp := lay.spans[k]
		cr := catalog.Request{Producer: p.req.Producer, GroupOffsets: p.req.GroupOffsets, Source: p.req.Source, Txn: p.req.Txn, ShareDLQ: p.req.ShareDLQ,
			Batches: make([]catalog.Batch, sp.catalogBatches())}
		for j := range sp.n {
			b, info := &lay.batches[sp.first+j], &infos[sp.first+j]
			cb := catalog.Batch{
				TopicID:      b.TopicID,
				Partition:    b.Partition,
				Pos:          info.Pos,
				Len:          info.Len,
				Records:      info.LastOffsetDelta + 1,
				MaxTimestamp: info.MaxTimestamp,
				BaseSequence: b.BaseSequence,
			}
			if sp.raw > 0 && j > 0 {
				// A raw request's batches lie back to back (Encode keeps a partition's
				// batches in the order given): one catalog batch covers them, as one
				// batch would have held their records, and its sequence is the first's.
				c := &cr.Batches[0]
				c.Len += cb.Len
				c.Records += cb.Records
				c.MaxTimestamp = max(c.MaxTimestamp, cb.MaxTimestamp)
				continue
			}
			cr.Batches[j] = cb
		}
		seg.Requests[k] = cr
	}

	// Commits run in flush order: this one starts only once the previous flush is
	// answered, so a producer's order survives overlapping uploads. The wait is its own
	// stage: a slow PUT holds up the flushes behind it (head-of-line), which shows here.
	start = time.Now()
	waitPrev()
	w.m.stage.WithLabelValues("wait").Observe(time.Since(start).Seconds())
	start = time.Now()
	results := w.commit(lay, seg)
	w.m.stage.WithLabelValues("commit").Observe(time.Since(start).Seconds())
	w.reportUsage(lay, seg, results, puts)
}

// reportUsage tells Config.Usage what the flush carried per (topic, principal): work
// per batch — an integer add, and a map lookup only where the topic changes within a
// request — never per record. results is nil when nothing committed; puts is the
// PUT requests the object took.
func (w *Writer) reportUsage(lay layout, seg catalog.Segment, results []catalog.Result, puts int) {
	if w.cfg.Usage == nil {
		return
	}
	var (
		out   []TopicUsage
		all   []int64 // per entry of out: its bytes in the object, committed or not
		total int64
		// Entries by principal, then topic: the principal (a string) is hashed once
		// per request, a topic (an integer) where it changes within a request.
		byWho = make(map[string]map[int64]int, 4)
	)
	for k, r := range seg.Requests {
		ok := results != nil && results[k].Err == nil && !results[k].Duplicate
		who := lay.reqs[k].req.Principal
		idx := byWho[who]
		if idx == nil {
			idx = make(map[int64]int, 8)
			byWho[who] = idx
		}
		i, topic := -1, int64(0)
		for _, b := range r.Batches {
			if i < 0 || b.TopicID != topic {
				topic = b.TopicID
				var seen bool
				if i, seen = idx[topic]; !seen {
					i = len(out)
					idx[topic] = i
					out = append(out, TopicUsage{TopicID: topic, Principal: who, Puts: puts})
					all = append(all, 0)
				}
			}
			n := int64(b.Len)
			all[i] += n
			total += n
			if ok {
				out[i].Bytes += n
				out[i].Records += int64(b.Records)
			}
		}
	}
	if total <= 0 {
		return
	}
	for i := range out {
		out[i].Share = float64(all[i]) / float64(total)
	}
	w.cfg.Usage(out)
}

// object is an encoded flush: its parts laid end to end, size bytes, whose CRC-32C is
// crc (segment.EncodeParts).
type object struct {
	parts [][]byte
	size  int64
	crc   uint32
}

// encodeFlush lays out and encodes f. A request the encoder refuses on its own gets
// ErrInvalid and is left out; the others go on. The returned layout holds only the
// requests still to commit; on error, those to fail.
func (w *Writer) encodeFlush(f *flush, now time.Time) (layout, object, []segment.BatchInfo, error) {
	lay := w.layout(f, f.reqs, now)
	var obj object
	var infos []segment.BatchInfo
	var err error
	obj.parts, obj.size, obj.crc, infos, err = w.encode(lay.batches, segment.EncodeOptions{})
	if err == nil {
		err = checkInfos(lay, infos)
	}
	if err == nil {
		return lay, obj, infos, nil
	}
	return w.encodeWithout(f, lay, now, err, func(bs []segment.Batch) error {
		_, _, _, _, err := w.encode(bs, segment.EncodeOptions{})
		return err
	})
}

// encodeWithout answers the requests of lay that alone fails (err being why the whole
// failed) with ErrInvalid, and lays out and encodes the rest again: one bad request
// must not fail a whole flush. When alone fails none, it returns err.
func (w *Writer) encodeWithout(f *flush, lay layout, now time.Time, err error, alone func([]segment.Batch) error) (layout, object, []segment.BatchInfo, error) {
	var keep []*pending
	for k, p := range lay.reqs {
		sp := lay.spans[k]
		if e := alone(lay.batches[sp.first : sp.first+sp.n]); e != nil {
			p.err = fmt.Errorf("%w: encode: %w", ErrInvalid, e)
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) == len(lay.reqs) {
		return lay, object{}, nil, err
	}
	w.log.Warn("encode segment: requests refused", "refused", len(lay.reqs)-len(keep), "err", err)
	lay = w.layout(f, keep, now)
	if len(keep) == 0 {
		return lay, object{}, nil, nil
	}
	var obj object
	var infos []segment.BatchInfo
	obj.parts, obj.size, obj.crc, infos, err = w.encode(lay.batches, segment.EncodeOptions{})
	if err == nil {
		err = checkInfos(lay, infos)
	}
	return lay, obj, infos, err
}

// checkInfos guards the commit against an encoder that does not describe the batches it
// was given: wrong byte ranges in the catalog would serve other records. It also checks
// that a raw batch's records take dense offsets (what answer assumes) and that the
// batches of each raw request lie back to back (what its one catalog batch claims).
func checkInfos(lay layout, infos []segment.BatchInfo) error {
	batches := lay.batches
	if len(infos) != len(batches) {
		return fmt.Errorf("encoder described %d batches of %d", len(infos), len(batches))
	}
	for i := range batches {
		b, info := &batches[i], &infos[i]
		n := int32(len(b.Records))
		if b.Raw != nil {
			h, err := segment.ParseBatchHeader(b.Raw)
			if err != nil {
				return fmt.Errorf("raw batch %d: %w", i, err)
			}
			n = h.NumRecords
		}
		if info.TopicID != b.TopicID || info.Partition != b.Partition || info.LastOffsetDelta+1 != n || info.Records != n {
			return fmt.Errorf("encoder info %d is for topic %d partition %d with %d records (offset delta %d); the batch is topic %d partition %d with %d",
				i, info.TopicID, info.Partition, info.Records, info.LastOffsetDelta, b.TopicID, b.Partition, n)
		}
	}
	for k, sp := range lay.spans {
		if sp.raw == 0 {
			continue
		}
		for j := 1; j < sp.n; j++ {
			if prev, info := &infos[sp.first+j-1], &infos[sp.first+j]; info.Pos != prev.Pos+prev.Len {
				return fmt.Errorf("request %d: raw batch %d at byte %d, not right after batch %d ending at %d", k, j, info.Pos, j-1, prev.Pos+prev.Len)
			}
		}
	}
	return nil
}

// layout builds one batch per (request, partition), keeping each request's record order
// within a partition. Sticky records take their topic's partition for f; LogAppendTime
// records are stamped with now.
func (w *Writer) layout(f *flush, reqs []*pending, now time.Time) layout {
	nowMs := now.UnixMilli()
	lay := layout{reqs: reqs, spans: make([]span, len(reqs)), nowMs: nowMs}
	idx := make(map[TopicPartition]int)
	for k, p := range reqs {
		if rb := p.req.Raw; rb != nil {
			// Stored as they came. The producer fields are what this loop gives records
			// (prepareRaw checked the batches carry them, and Encode refuses a batch
			// that does not), each batch's sequence following on from the one before.
			first := len(lay.batches)
			pid, epoch, seq := int64(-1), int16(-1), int32(-1)
			if pr := p.req.Producer; pr != nil {
				pid, epoch, seq = pr.ID, pr.Epoch, p.req.Sequences[TopicPartition{rb.TopicID, rb.Partition}]
			}
			for i, raw := range rb.Batches {
				h := &rb.Summaries[i].Header
				lay.batches = append(lay.batches, segment.Batch{
					TopicID:       rb.TopicID,
					Partition:     rb.Partition,
					ProducerID:    pid,
					ProducerEpoch: epoch,
					BaseSequence:  seq,
					Compression:   h.Compression,
					Transactional: h.Transactional,
					Raw:           raw,
				})
				if pid >= 0 {
					seq += h.NumRecords
				}
			}
			lay.spans[k] = span{first: first, n: len(rb.Batches), raw: p.records}
			continue
		}
		clear(idx)
		first := len(lay.batches)
		comp := p.req.Compression
		if comp == segment.CompressionNone {
			comp = w.cfg.Compression
		}
		locs := make([]recLoc, len(p.req.Records))
		for i := range p.req.Records {
			r := &p.req.Records[i]
			part := p.parts[i]
			if part < 0 {
				part = int32(f.sticky[r.TopicID] % uint64(r.Partitions))
			}
			tp := TopicPartition{r.TopicID, part}
			j, ok := idx[tp]
			if !ok {
				j = len(lay.batches) - first
				idx[tp] = j
				b := segment.Batch{
					TopicID:       r.TopicID,
					Partition:     part,
					ProducerID:    -1,
					ProducerEpoch: -1,
					BaseSequence:  -1,
					Compression:   comp,
					LogAppendTime: r.LogAppendTime,
					Transactional: p.req.Txn != nil,
				}
				if pr := p.req.Producer; pr != nil {
					b.ProducerID, b.ProducerEpoch, b.BaseSequence = pr.ID, pr.Epoch, p.req.Sequences[tp]
				}
				lay.batches = append(lay.batches, b)
			}
			rec := r.Record
			rec.OffsetDelta = 0 // the writer owns offsets: Encode numbers them 0..n-1
			if r.LogAppendTime {
				rec.Timestamp = nowMs
			}
			b := &lay.batches[first+j]
			locs[i] = recLoc{batch: int32(j), index: int32(len(b.Records))}
			b.Records = append(b.Records, rec)
		}
		lay.spans[k] = span{first: first, n: len(lay.batches) - first, locs: locs}
	}
	return lay
}

// commit commits seg, settles an unknown outcome, and sets every request's answer. It
// answers the results the requests were answered from; nil when nothing committed.
func (w *Writer) commit(lay layout, seg catalog.Segment) []catalog.Result {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.CommitTimeout)
	results, err := w.cat.Commit(ctx, seg)
	cancel()
	if err == nil && len(results) != len(seg.Requests) {
		err = fmt.Errorf("catalog answered %d results for %d requests", len(results), len(seg.Requests))
	}
	switch {
	case err == nil:
		w.m.commits.WithLabelValues("ok").Inc()
		w.committed(seg, results)
		w.answer(lay, results, false)
		return results
	case errors.Is(err, catalog.ErrCommitTooLate):
		w.m.commits.WithLabelValues("too_late").Inc()
		w.log.Warn("commit segment refused as too late", "key", seg.Key, "err", err)
		failAll(lay.reqs, fmt.Errorf("%w: commit %s: %w", ErrCommit, seg.Key, err))
		return nil
	case errors.Is(err, catalog.ErrCommitAborted):
		w.m.commits.WithLabelValues("aborted").Inc()
		w.log.Warn("commit segment aborted", "key", seg.Key, "err", err)
		failAll(lay.reqs, fmt.Errorf("%w: commit %s: %w", ErrCommit, seg.Key, err))
		return nil
	case errors.Is(err, catalog.ErrCommitFailed):
		// Definitely not written (the catalog was unreachable or refused the whole
		// transaction): answer at once instead of settling for SettleTimeout.
		w.m.commits.WithLabelValues("failed").Inc()
		w.log.Warn("commit segment failed", "key", seg.Key, "err", err)
		failAll(lay.reqs, fmt.Errorf("%w: commit %s: %w", ErrCommit, seg.Key, err))
		return nil
	case errors.Is(err, catalog.ErrInvalidSegment):
		// A writer bug, not the requests' fault: nothing was written, and each request
		// may well commit in another flush.
		w.m.commits.WithLabelValues("invalid").Inc()
		w.log.Error("commit segment refused as malformed", "key", seg.Key, "err", err)
		failAll(lay.reqs, fmt.Errorf("%w: commit %s: %w", ErrCommit, seg.Key, err))
		return nil
	}
	w.m.commits.WithLabelValues("unknown").Inc()
	w.log.Warn("commit segment: outcome unknown, settling", "key", seg.Key, "err", err)
	results, serr := w.settle(seg)
	if serr != nil {
		failAll(lay.reqs, fmt.Errorf("%w: commit %s: %v; %w", ErrCommit, seg.Key, err, serr))
		return nil
	}
	w.committed(seg, results)
	w.answer(lay, results, true)
	return results
}

// committed tells Config.Committed the high watermarks seg's new batches moved, before
// the requests are answered: a reader on this node may then see a record no later
// than its producer sees the answer.
func (w *Writer) committed(seg catalog.Segment, results []catalog.Result) {
	if w.cfg.Committed == nil {
		return
	}
	var hw []catalog.Watermark
	at := map[catalog.TopicPartition]int{}
	for k, r := range seg.Requests {
		res := results[k]
		if res.Err != nil || res.Duplicate || len(res.BaseOffsets) != len(r.Batches) {
			continue
		}
		for i, b := range r.Batches {
			end := res.BaseOffsets[i] + int64(b.Records)
			tp := catalog.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
			if j, ok := at[tp]; ok {
				hw[j].HighWatermark = max(hw[j].HighWatermark, end)
				continue
			}
			at[tp] = len(hw)
			hw = append(hw, catalog.Watermark{TopicID: b.TopicID, Partition: b.Partition, HighWatermark: end})
		}
	}
	if len(hw) > 0 {
		w.cfg.Committed(hw)
	}
}

// settle retries Settle with backoff until it gives a definite answer (results, or
// catalog.ErrCommitAborted) or SettleTimeout passes.
func (w *Writer) settle(seg catalog.Segment) ([]catalog.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.SettleTimeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		results, err := w.cat.Settle(ctx, seg)
		if err == nil && len(results) != len(seg.Requests) {
			err = fmt.Errorf("catalog settled %d results for %d requests", len(results), len(seg.Requests))
		}
		switch {
		case err == nil:
			w.m.settles.WithLabelValues("committed").Inc()
			w.log.Info("settled commit: found", "key", seg.Key, "attempts", attempt)
			return results, nil
		case errors.Is(err, catalog.ErrCommitAborted):
			w.m.settles.WithLabelValues("aborted").Inc()
			w.log.Info("settled commit: aborted", "key", seg.Key, "attempts", attempt)
			return nil, fmt.Errorf("settle: %w", err)
		case errors.Is(err, catalog.ErrSettleExpired):
			// Committed, but too long ago to tell which requests: asking again will
			// not tell either.
			w.m.settles.WithLabelValues("unknown").Inc()
			w.log.Error("settle commit: outcome unknown", "key", seg.Key, "attempts", attempt, "err", err)
			return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		w.log.Warn("settle commit", "key", seg.Key, "attempt", attempt, "err", err)
		// Full jitter keeps writers that lost the catalog together from retrying in step.
		if ctxwait.Sleep(ctx, backoff/2+rand.N(backoff/2+1)) != nil {
			w.m.settles.WithLabelValues("unknown").Inc()
			w.log.Error("settle commit: gave up, outcome unknown", "key", seg.Key, "attempts", attempt, "err", err)
			return nil, fmt.Errorf("%w: settle gave up after %s and %d attempts: %w", ErrOutcomeUnknown, w.cfg.SettleTimeout, attempt, err)
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// answer sets each request's answer from its result. Settled results without rows are
// retryable (ErrCommit): the request may have been refused for its own reason, which a
// retry will tell.
func (w *Writer) answer(lay layout, results []catalog.Result, settled bool) {
	for k, p := range lay.reqs {
		res, sp := results[k], lay.spans[k]
		switch {
		case res.Err != nil && settled:
			p.err = fmt.Errorf("%w: not found in the settled commit: %w", ErrCommit, res.Err)
		case res.Err != nil:
			p.err = fmt.Errorf("writer: the catalog refused the request: %w", res.Err)
			var se *catalog.SequenceError
			if errors.As(res.Err, &se) && seqBefore(se.Expected, se.Got) && p.requeues < maxRequeues {
				// Ahead of its producer's sequence: the request it follows was sent at
				// the same time and has not reached this writer's flushes yet (or went
				// to another node). Wait a flush for it rather than send the client
				// round a retry.
				p.requeue = true
				p.requeues++
			}
		case len(res.BaseOffsets) != sp.catalogBatches():
			// A catalog bug: better a retryable error than offsets that may be wrong.
			p.err = fmt.Errorf("%w: catalog answered %d base offsets for %d batches", ErrCommit, len(res.BaseOffsets), sp.catalogBatches())
			w.log.Error("commit answer does not match the request", "err", p.err)
		case sp.raw > 0:
			resp := Response{Records: make([]RecordResult, sp.raw), Duplicate: res.Duplicate}
			part := lay.batches[sp.first].Partition
			for i := range resp.Records {
				resp.Records[i] = RecordResult{Partition: part, Offset: res.BaseOffsets[0] + int64(i)}
			}
			p.resp = resp
		default:
			resp := Response{Records: make([]RecordResult, len(sp.locs)), Duplicate: res.Duplicate}
			for i, loc := range sp.locs {
				resp.Records[i] = RecordResult{
					Partition: lay.batches[sp.first+int(loc.batch)].Partition,
					Offset:    res.BaseOffsets[loc.batch] + int64(loc.index),
				}
			}
			// A duplicate's records were stamped at the original's flush, which the
			// catalog does not keep.
			if !res.Duplicate && slices.ContainsFunc(lay.batches[sp.first:sp.first+sp.n], func(b segment.Batch) bool { return b.LogAppendTime }) {
				resp.LogAppendTime = lay.nowMs
			}
			p.resp = resp
		}
	}
}

// maxRequeues bounds how many flushes a request ahead of its producer's sequence waits
// for the request before it, before the refusal is answered.
const maxRequeues = 4

func failAll(reqs []*pending, err error) {
	for _, p := range reqs {
		p.err = err
	}
}
