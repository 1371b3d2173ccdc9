package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// The binary record path (DESIGN.md "Record encoding": a binary content type carrying
// Kafka v2 record batches serves clients that want no JSON at all). The same URLs as
// JSON produce and fetch, chosen by content type:
//
//	POST /v1/topics/{t}/records?partition=P     Content-Type: application/vnd.kafka.record-batch
//	     body: one or more v2 record batches for partition P, back to back
//	     → 200 {"partition":P,"base_offset":B,"last_offset":L} (JSON, like every answer)
//	GET  /v1/topics/{t}/partitions/{p}/records  Accept: application/vnd.kafka.record-batch
//	     → 200, the body the stored batches back to back, base offsets rewritten;
//	       Strata-Next-Offset, Strata-High-Watermark, Strata-Log-Start-Offset headers
//
// A request's batches are validated as the segment decoder reads them (length, magic,
// CRC-32C, every record's framing), under the rules of a JSON produce, and committed
// as one request, offsets contiguous. Batches laid out as Strata's encoder would lay
// out their records — as Kafka clients lay them out: offset deltas 0..n-1, timestamps
// measured from the first record's, the header's maximum timestamp right, -1 in the
// producer fields unless idempotent — are stored as they came, compressed bytes and
// all (the writer writes only their base offsets, which the CRC does not cover), and
// come back byte for byte, base offset aside: the node validates them without decoding
// them into records and never re-encodes them. Anything else (a topic with
// LogAppendTime, whose records the writer stamps; another layout) is decoded and
// re-encoded with the records and the codec it came with, several batches as one.
// Validating costs a fraction of what JSON does, and it is what lets the node refuse a
// corrupt batch rather than store it.

// RecordBatchContentType is the media type of a body of Kafka v2 record batches.
const RecordBatchContentType = "application/vnd.kafka.record-batch"

// Response headers of a binary fetch: what the JSON answer carries beside the records.
const (
	HeaderNextOffset     = "Strata-Next-Offset"
	HeaderHighWatermark  = "Strata-High-Watermark"
	HeaderLogStartOffset = "Strata-Log-Start-Offset"
)

// rawReader is the part of the reader the binary fetch uses; the API's Reader need not
// have it (a node whose reader cannot serve batches answers role_unavailable).
// FetchRawShared hands out the cache's own bytes, which are written out with the real
// base offsets in front of them rather than copied first.
type rawReader interface {
	FetchRawShared(ctx context.Context, f reader.Fetch) (reader.SharedRawResult, error)
}

var _ rawReader = (*reader.Reader)(nil)

// isRecordBatchBody reports whether the request body is declared as record batches.
func isRecordBatchBody(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == RecordBatchContentType
}

// wantsRecordBatches reports whether the client accepts record batches. Only an
// explicit media type counts: "*/*" keeps the JSON answer.
func wantsRecordBatches(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == RecordBatchContentType {
				return true
			}
		}
	}
	return false
}

// readRawBody reads the whole body into one buffer sized from Content-Length when the
// client sent one (bodyLimitMiddleware has refused lengths over the limit), so a large
// body is not copied through a growing buffer.
func readRawBody(r *http.Request) ([]byte, *problem) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= maxPresize {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants room for its last, empty read
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyTooLarge(mbe.Limit)
		}
		if errors.Is(err, errBodyTimeout) {
			return nil, newProblem(CodeRequestTimeout, "%v; nothing was written", err)
		}
		return nil, newProblem(CodeInvalidRequest, "reading the request body: %v", err)
	}
	return buf.Bytes(), nil
}

// maxPresize bounds the buffer a declared length reserves before any byte arrives.
const maxPresize = 256 << 20

// binaryProduce is a decoded binary produce body.
type binaryProduce struct {
	records     []writer.Record
	compression segment.Compression
	producer    *catalog.Producer // nil unless the batches carry a producer id
	sequence    int32             // the first batch's base sequence, with producer
}

// produceBinary serves POST /v1/topics/{topic}/records with a record-batch body.
func (rs *recordsResource) produceBinary(w http.ResponseWriter, r *http.Request) {
	a := rs.a
	if a.wr == nil {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node does not run the writer role; send produce requests to a writer node"))
		return
	}
	if !a.needCatalog(w, r) {
		return
	}
	name, p := topicParam(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	s := r.URL.Query().Get("partition")
	n, ok := parseDigits(s, 1<<31-1)
	if !ok {
		writeProblem(w, r, newProblem(CodeInvalidPartition, "partition %q: a record-batch body is for one partition: name it with ?partition=N", truncate(s, 32)).with("parameter", "partition"))
		return
	}
	part := int32(n)
	body, p := readRawBody(r)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	if len(body) == 0 {
		writeProblem(w, r, newProblem(CodeEmptyBatch, "the body holds no record batch"))
		return
	}
	ti, err := a.topics.get(r.Context(), name)
	if err == nil && part >= ti.topic.Partitions {
		ti, err = a.topics.refresh(r.Context(), name) // the topic may have just grown
	}
	if err != nil {
		writeProblem(w, r, a.catalogProblem(r, "get topic", err))
		return
	}
	if part >= ti.topic.Partitions {
		writeProblem(w, r, partitionOutOfRange(name, part, ti.topic.Partitions))
		return
	}
	wreq, count, p := binaryRequest(body, ti, part, a.now().UnixMilli(), a.cfg.MaxRecordsPerRequest)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	resp, err := a.wr.Produce(r.Context(), wreq)
	if err != nil {
		p := a.producerProblem(r, "produce", err, map[int64]string{ti.topic.ID: ti.topic.Name})
		if p.code == CodeTopicNotFound || p.code == CodePartitionOutOfRange {
			a.topics.invalidate(name) // the cached entry is stale
		}
		writeProblem(w, r, p)
		return
	}
	// One request's records of one partition are one batch of one flush: their offsets
	// are contiguous. Anything else is a writer bug, not an answer to pass on.
	recs := resp.Records
	if len(recs) != count || recs[0].Partition != part || recs[len(recs)-1].Offset-recs[0].Offset != int64(len(recs)-1) {
		a.logUnexpected(r, "produce", fmt.Errorf("writer answered %d records for %d, not one contiguous run of partition %d", len(recs), count, part))
		writeProblem(w, r, newProblem(CodeInternal, "produce: the writer answered for the wrong records"))
		return
	}
	out := make([]byte, 0, 96)
	out = append(out, `{"partition":`...)
	out = strconv.AppendInt(out, int64(part), 10)
	out = append(out, `,"base_offset":`...)
	out = strconv.AppendInt(out, recs[0].Offset, 10)
	out = append(out, `,"last_offset":`...)
	out = strconv.AppendInt(out, recs[len(recs)-1].Offset, 10)
	writeJSONBytes(w, http.StatusOK, appendDuplicate(out, resp.Duplicate))
}

// binaryRequest turns a body of record batches for one partition of ti into a writer
// request and the number of records it holds: the batches as they are when the writer
// can store them so (rawBinaryProduce), else their records (decodeBinaryProduce), which
// also gives every refusal its problem.
func binaryRequest(body []byte, ti topicInfo, part int32, nowMs int64, maxRecords int) (writer.Request, int, *problem) {
	if req, n, ok := rawBinaryProduce(body, ti, part, nowMs, maxRecords); ok {
		return req, n, nil
	}
	return decodedBinaryRequest(body, ti, part, nowMs, maxRecords)
}

// decodedBinaryRequest is binaryRequest by decodeBinaryProduce alone: the records,
// re-encoded by the writer at flush.
func decodedBinaryRequest(body []byte, ti topicInfo, part int32, nowMs int64, maxRecords int) (writer.Request, int, *problem) {
	bp, p := decodeBinaryProduce(body, ti, part, nowMs, maxRecords)
	if p != nil {
		return writer.Request{}, 0, p
	}
	req := writer.Request{Records: bp.records, Compression: bp.compression}
	if bp.producer != nil {
		req.Producer = bp.producer
		req.Sequences = map[writer.TopicPartition]int32{{TopicID: ti.topic.ID, Partition: part}: bp.sequence}
	}
	return req, len(bp.records), nil
}

// rawBinaryProduce accepts a body whose batches can be stored as they came: each one
// valid (segment.ScanBatches checks exactly what the decoder checks, allocating nothing
// per record) and laid out as the writer would lay out its records, under the rules
// decodeBinaryProduce applies — a CreateTime topic, the timestamp bounds and
// max.message.bytes (through each batch's extremes), the request's record limit, one
// codec, one producer with sequences following on, or none (-1 in all three fields).
// It refuses nothing itself: ok false sends the body down decodeBinaryProduce, which
// accepts it re-encoded or refuses it with its problem, exactly as before the raw path
// existed. The batches alias body.
func rawBinaryProduce(body []byte, ti topicInfo, part int32, nowMs int64, maxRecords int) (req writer.Request, n int, ok bool) {
	cfg := &ti.cfg
	if cfg.TimestampType == "LogAppendTime" {
		return req, 0, false // the writer stamps these records at flush
	}
	var (
		raws [][]byte
		sums []segment.BatchSummary
	)
	ok = true
	err := segment.ScanBatches(body, func(raw []byte, s segment.BatchSummary) bool {
		h, first := &s.Header, &s.Header
		if len(sums) > 0 {
			first = &sums[0].Header
		}
		n += int(h.NumRecords)
		switch {
		case !s.Canonical,
			n > maxRecords, // stop before decompressing more of an oversized request
			h.LogAppendTime,
			h.Compression != first.Compression,
			s.MinTimestamp < 0,
			nowMs-s.MinTimestamp > cfg.TimestampBeforeMaxMs,
			s.MaxTimestamp-nowMs > cfg.TimestampAfterMaxMs,
			s.MaxRecordDataBytes > cfg.MaxMessageBytes:
			ok = false
		case h.ProducerID == -1:
			// The writer would write -1 in all three.
			ok = h.ProducerEpoch == -1 && h.BaseSequence == -1 && first.ProducerID == -1
		default:
			ok = h.ProducerID >= 0 && h.ProducerEpoch >= 0 && h.BaseSequence >= 0 &&
				h.ProducerID == first.ProducerID && h.ProducerEpoch == first.ProducerEpoch
			if prev := len(sums) - 1; ok && prev >= 0 {
				p := &sums[prev].Header
				ok = int64(h.BaseSequence) == int64(p.BaseSequence)+int64(p.NumRecords)
			}
		}
		raws, sums = append(raws, raw), append(sums, s)
		return ok
	})
	if err != nil || !ok {
		return writer.Request{}, 0, false
	}
	req.Raw = &writer.RawBatches{TopicID: ti.topic.ID, Partition: part, Batches: raws, Summaries: sums}
	if h := &sums[0].Header; h.ProducerID >= 0 {
		req.Producer = &catalog.Producer{ID: h.ProducerID, Epoch: h.ProducerEpoch}
		req.Sequences = map[writer.TopicPartition]int32{{TopicID: ti.topic.ID, Partition: part}: h.BaseSequence}
	}
	return req, n, true
}

// decodeBinaryProduce validates a body of record batches for one partition of ti and
// turns it into writer records, under the same rules as a JSON produce: the topic's
// timestamp type and bounds, max.message.bytes per record, the request's record limit.
// Keys, values and headers alias body (or a batch's decompressed buffer).
//
// The batches' producer fields make the request idempotent, as they do in Kafka: a
// producer id of -1 means none; otherwise every batch carries the same id and epoch and
// sequences that follow on from the first batch's.
func decodeBinaryProduce(body []byte, ti topicInfo, part int32, nowMs int64, maxRecords int) (binaryProduce, *problem) {
	var bp binaryProduce
	bad := func(format string, args ...any) *problem {
		return newProblem(CodeInvalidRecord, "record batches: "+format, args...)
	}
	raws, err := segment.SplitBatches(body)
	if err != nil {
		return bp, bad("%s", trimSegmentErr(err))
	}
	cfg := &ti.cfg
	logAppend := cfg.TimestampType == "LogAppendTime"
	batches := make([]segment.DecodedBatch, len(raws))
	total := 0
	for i, raw := range raws {
		db, err := segment.DecodeBatch(raw)
		if err != nil {
			return bp, bad("batch %d: %s", i, trimSegmentErr(err)).with("batch", i)
		}
		batches[i] = db
		total += len(db.Records)
		if total > maxRecords {
			return bp, newProblem(CodeTooManyRecords, "more than %d records in one request", maxRecords).with("max_records", maxRecords)
		}
		first := &batches[0]
		switch {
		case db.LogAppendTime && !logAppend:
			return bp, bad("batch %d has the LogAppendTime timestamp type; the topic's message.timestamp.type is CreateTime: send CreateTime batches", i).with("batch", i)
		case i > 0 && db.Compression != first.Compression:
			return bp, bad("batch %d is compressed with codec %d, batch 0 with %d: use one codec per request", i, db.Compression, first.Compression).with("batch", i)
		case db.ProducerID != first.ProducerID || (db.ProducerID >= 0 && db.ProducerEpoch != first.ProducerEpoch):
			return bp, bad("batch %d has producer %d epoch %d, batch 0 producer %d epoch %d: one producer per request", i, db.ProducerID, db.ProducerEpoch, first.ProducerID, first.ProducerEpoch).with("batch", i)
		case db.ProducerID < -1:
			return bp, bad("batch %d: producer id %d: use -1 for none", i, db.ProducerID).with("batch", i)
		case db.ProducerID >= 0 && (db.ProducerEpoch < 0 || db.BaseSequence < 0):
			return bp, bad("batch %d: producer %d with epoch %d and base sequence %d: an idempotent batch has both non-negative", i, db.ProducerID, db.ProducerEpoch, db.BaseSequence).with("batch", i)
		case i > 0 && db.ProducerID >= 0 && int64(db.BaseSequence) != int64(batches[i-1].BaseSequence)+int64(len(batches[i-1].Records)):
			return bp, bad("batch %d: base sequence %d does not follow on from batch %d's %d + %d records", i, db.BaseSequence, i-1, batches[i-1].BaseSequence, len(batches[i-1].Records)).with("batch", i)
		}
	}
	if first := &batches[0]; first.ProducerID >= 0 {
		bp.producer = &catalog.Producer{ID: first.ProducerID, Epoch: first.ProducerEpoch}
		bp.sequence = first.BaseSequence
	}
	bp.compression = batches[0].Compression
	bp.records = make([]writer.Record, 0, total)
	for i := range batches {
		for j := range batches[i].Records {
			dr := &batches[i].Records[j]
			k := len(bp.records)
			rec := writer.Record{
				TopicID:       ti.topic.ID,
				Partitions:    ti.topic.Partitions,
				Partition:     part,
				LogAppendTime: logAppend,
				Record:        segment.Record{Key: dr.Key, Value: dr.Value, Headers: dr.Headers, Timestamp: dr.Timestamp},
			}
			if !logAppend {
				ts := dr.Timestamp
				if ts < 0 {
					return binaryProduce{}, newProblem(CodeInvalidRecord, "record %d (batch %d): timestamp %d: a CreateTime record carries unix milliseconds", k, i, ts).with("record", k)
				}
				if nowMs-ts > cfg.TimestampBeforeMaxMs || ts-nowMs > cfg.TimestampAfterMaxMs {
					return binaryProduce{}, newProblem(CodeTimestampOutOfRange,
						"record %d (batch %d): timestamp %d is outside [now-%d ms, now+%d ms] (message.timestamp.before.max.ms, message.timestamp.after.max.ms)",
						k, i, ts, cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs).
						with("record", k).with("timestamp", ts).with("now", nowMs)
				}
			}
			if size := recordSize(&rec.Record); size > cfg.MaxMessageBytes {
				return binaryProduce{}, newProblem(CodeRecordTooLarge, "record %d (batch %d) is %d bytes (key, value and headers); the topic's max.message.bytes is %d",
					k, i, size, cfg.MaxMessageBytes).
					with("record", k).with("size", size).with("max_message_bytes", cfg.MaxMessageBytes)
			}
			bp.records = append(bp.records, rec)
		}
	}
	return bp, nil
}

// trimSegmentErr drops the "segment: " prefixes and the trailing sentinel text from a
// decoder error: the rest says what is wrong where.
func trimSegmentErr(err error) string {
	s := err.Error()
	s = strings.TrimSuffix(s, ": "+segment.ErrCorrupt.Error())
	return strings.ReplaceAll(s, "segment: ", "")
}

// fetchBinary serves a fetch whose client accepts record batches: the reader's raw
// batches, byte for byte as stored except for their base offsets, which carry the real
// offsets. The first batch may begin below the requested offset; a Kafka client skips
// those records itself. An empty body means no records (a long-poll that timed out).
func (a *API) fetchBinary(w http.ResponseWriter, r *http.Request, ti topicInfo, part int32, fp fetchParams) {
	rr, ok := a.rd.(rawReader)
	if !ok {
		writeProblem(w, r, newProblem(CodeRoleUnavailable, "this node's reader does not serve record batches; ask for application/json"))
		return
	}
	offset, p := a.startOffset(r, ti, part, r.URL.Query().Get("offset"), "earliest")
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	res, err := rr.FetchRawShared(r.Context(), reader.Fetch{
		TopicID:    ti.topic.ID,
		Partition:  part,
		Offset:     offset,
		MaxRecords: fp.maxRecords,
		MaxBytes:   fp.maxBytes,
		Wait:       fp.wait,
	})
	if err != nil {
		writeProblem(w, r, a.readerProblem(r, err))
		return
	}
	size := 0
	for _, b := range res.Batches {
		size += len(b)
	}
	h := w.Header()
	h.Set("Content-Type", RecordBatchContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(size))
	h.Set(HeaderNextOffset, strconv.FormatInt(res.NextOffset, 10))
	h.Set(HeaderHighWatermark, strconv.FormatInt(res.HighWatermark, 10))
	h.Set(HeaderLogStartOffset, strconv.FormatInt(res.LogStartOffset, 10))
	w.WriteHeader(http.StatusOK)
	// Each batch as two writes, its real base offset and the rest as the cache holds
	// it: large ones go straight to the connection, small ones are gathered by the
	// server's buffer; nothing is copied into one body first.
	var base [8]byte
	for i, b := range res.Batches {
		binary.BigEndian.PutUint64(base[:], uint64(res.BaseOffsets[i]))
		if _, err := w.Write(base[:]); err != nil {
			return // the client went away; nothing to tell it
		}
		if _, err := w.Write(b[8:]); err != nil {
			return
		}
	}
}
