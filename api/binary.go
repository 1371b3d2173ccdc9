package api

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/strata-io/strata/acl"
	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/segment"
)

// The binary record path (docs/design.md "Record encoding": a binary content type
// carrying Kafka v2 record batches serves clients that want no JSON at all). The same
// URLs as JSON produce and fetch, chosen by content type:
//
//	POST /v1/topics/{t}/records?partition=P     Content-Type: application/vnd.kafka.record-batch
//	     body: one or more v2 record batches for partition P, back to back
//	     → 200 {"partition":P,"base_offset":B,"last_offset":L} (JSON, like every answer)
//	GET  /v1/topics/{t}/partitions/{p}/records  Accept: application/vnd.kafka.record-batch
//	     → 200, the body the stored batches back to back, base offsets rewritten;
//	       Strata-Next-Offset, Strata-High-Watermark, Strata-Log-Start-Offset headers
//
// The core validates the batches and stores them as they came when it can
// (broker.ProduceBatches), under the rules of every produce; the same call serves the
// Kafka front end.

// RecordBatchContentType is the media type of a body of Kafka v2 record batches.
const RecordBatchContentType = v1.ContentTypeRecordBatch

// Response headers of a binary fetch: what the JSON answer carries beside the records.
const (
	HeaderNextOffset       = v1.HeaderNextOffset
	HeaderHighWatermark    = v1.HeaderHighWatermark
	HeaderLastStableOffset = v1.HeaderLastStableOffset
	HeaderLogStartOffset   = v1.HeaderLogStartOffset
)

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

// readRawBody reads the whole body into one pooled buffer sized from Content-Length
// when the client sent one (bodyLimitMiddleware has refused lengths over the limit),
// so a large body is not copied through a growing buffer (memory.go: readPooled).
func readRawBody(r *http.Request) ([]byte, *problem) { return readPooled(r) }

// produceBinary serves POST /v1/topics/{topic}/records with a record-batch body.
func (rs *recordsResource) produceBinary(w http.ResponseWriter, r *http.Request) *problem {
	a := rs.a
	name := topicParam(r)
	if p := a.authorize(r, acl.OpWrite, acl.Topic(name)); p != nil {
		return p
	}
	s := r.URL.Query().Get("partition")
	n, ok := parseDigits(s, 1<<31-1)
	if !ok {
		return newProblem(CodeInvalidPartition, "partition %q: a record-batch body is for one partition: name it with ?partition=N", truncate(s, 32)).with("parameter", "partition")
	}
	if p := a.admitQuota(r, false); p != nil {
		return p
	}
	body, p := readRawBody(r)
	if p != nil {
		return p
	}
	res, err := a.core.ProduceBatches(produceContext(r), principal(r), broker.BatchesRequest{
		Topic: name, Partition: int32(n), Batches: body, MaxRecords: a.cfg.MaxRecordsPerRequest,
	})
	if err != nil {
		return a.problemFor(r, err)
	}
	a.holdForQuota(r, false, len(body))
	out := make([]byte, 0, 96)
	out = append(out, `{"partition":`...)
	out = strconv.AppendInt(out, n, 10)
	out = append(out, `,"base_offset":`...)
	out = strconv.AppendInt(out, res.BaseOffset, 10)
	out = append(out, `,"last_offset":`...)
	out = strconv.AppendInt(out, res.LastOffset, 10)
	writeJSONBytes(w, http.StatusOK, appendDuplicate(out, res.Duplicate))
	return nil
}

// fetchBinary serves a fetch whose client accepts record batches: the core's stored
// batches, byte for byte as stored except for their base offsets, which carry the real
// offsets. The first batch may begin below the requested offset; a Kafka client skips
// those records itself. An empty body means no records (a long-poll that timed out).
func (a *API) fetchBinary(w http.ResponseWriter, r *http.Request, topic string, part int32, fp fetchParams) *problem {
	if err := a.core.Check(broker.CapFetchBatches); err != nil {
		return a.problemFor(r, err)
	}
	if p := a.admitQuota(r, true); p != nil {
		return p
	}
	offset, p := a.startOffset(r, topic, part, r.URL.Query().Get("offset"), "earliest", fp.isolation)
	if p != nil {
		return p
	}
	res, err := a.core.FetchBatches(r.Context(), principal(r), fp.request(r, topic, part, offset))
	if err != nil {
		return a.problemFor(r, err)
	}
	size := 0
	for _, b := range res.Batches {
		size += len(b)
	}
	a.holdForQuota(r, true, size)
	h := w.Header()
	h.Set("Content-Type", RecordBatchContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(size))
	h.Set(HeaderNextOffset, strconv.FormatInt(res.NextOffset, 10))
	h.Set(HeaderHighWatermark, strconv.FormatInt(res.HighWatermark, 10))
	h.Set(HeaderLastStableOffset, strconv.FormatInt(res.LastStableOffset, 10))
	h.Set(HeaderLogStartOffset, strconv.FormatInt(res.LogStartOffset, 10))
	w.WriteHeader(http.StatusOK)
	// Each batch as two writes, its real base offset and the rest as the cache holds
	// it: large ones go straight to the connection, small ones are gathered by the
	// server's buffer; nothing is copied into one body first.
	for i, b := range res.Batches {
		if err := segment.WriteServed(w, b, res.BaseOffsets[i]); err != nil {
			return nil // the client went away; nothing to tell it
		}
	}
	return nil
}
