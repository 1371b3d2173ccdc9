package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// Code is a stable, machine-readable error code carried in every problem body. Clients
// branch on the code, never on the title or detail text. Each code has exactly one HTTP
// status, so the table below is the whole contract (and openapi.json documents it).
type Code string

// The error codes of API v1.
const (
	CodeInvalidJSON           Code = "invalid_json"
	CodeInvalidRequest        Code = "invalid_request"
	CodeUnsupportedMediaType  Code = "unsupported_media_type"
	CodeBodyTooLarge          Code = "body_too_large"
	CodeRequestTimeout        Code = "request_timeout"
	CodeRecordTooLarge        Code = "record_too_large"
	CodeRequestTooLarge       Code = "request_too_large"
	CodeEmptyBatch            Code = "empty_batch"
	CodeTooManyRecords        Code = "too_many_records"
	CodeInvalidRecord         Code = "invalid_record"
	CodeTimestampOutOfRange   Code = "timestamp_out_of_range"
	CodeInvalidTopicName      Code = "invalid_topic_name"
	CodeInvalidPartitionCount Code = "invalid_partition_count"
	CodeInvalidConfig         Code = "invalid_config"
	CodeInvalidPartition      Code = "invalid_partition"
	CodeInvalidOffset         Code = "invalid_offset"
	CodeInvalidTimestamp      Code = "invalid_timestamp"
	CodeInvalidParameter      Code = "invalid_parameter"
	CodeUnauthorized          Code = "unauthorized"
	CodeTopicNotFound         Code = "topic_not_found"
	CodePartitionOutOfRange   Code = "partition_out_of_range"
	CodeNotFound              Code = "not_found"
	CodeMethodNotAllowed      Code = "method_not_allowed"
	CodeStreamingUnsupported  Code = "streaming_unsupported"
	CodeTopicExists           Code = "topic_exists"
	CodeOffsetOutOfRange      Code = "offset_out_of_range"
	CodeBufferFull            Code = "buffer_full"
	CodeStoreUnavailable      Code = "store_unavailable"
	CodeCommitFailed          Code = "commit_failed"
	CodeCommitOutcomeUnknown  Code = "commit_outcome_unknown"
	CodeShuttingDown          Code = "shutting_down"
	CodeCatalogUnavailable    Code = "catalog_unavailable"
	CodeRoleUnavailable       Code = "role_unavailable"
	CodeNotReady              Code = "not_ready"
	CodeInternal              Code = "internal_error"
)

// CodeInfo is one row of the error table.
type CodeInfo struct {
	Code   Code
	Status int
	Title  string
	// Retry says whether the same request may succeed later unchanged; retryable
	// problems carry a Retry-After header.
	Retry bool
}

// codeTable is the single list of error codes: status, title and whether a retry can
// help. Keep openapi.json in step (a test checks it).
var codeTable = []CodeInfo{
	{CodeInvalidJSON, http.StatusBadRequest, "Malformed JSON", false},
	{CodeInvalidRequest, http.StatusBadRequest, "Invalid request", false},
	{CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, "Unsupported media type", false},
	{CodeBodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large", false},
	{CodeRecordTooLarge, http.StatusRequestEntityTooLarge, "Record too large", false},
	{CodeRequestTooLarge, http.StatusRequestEntityTooLarge, "Request too large for one flush", false},
	{CodeEmptyBatch, http.StatusBadRequest, "No records", false},
	{CodeTooManyRecords, http.StatusBadRequest, "Too many records", false},
	{CodeInvalidRecord, http.StatusBadRequest, "Invalid record", false},
	{CodeTimestampOutOfRange, http.StatusBadRequest, "Record timestamp out of range", false},
	{CodeInvalidTopicName, http.StatusBadRequest, "Invalid topic name", false},
	{CodeInvalidPartitionCount, http.StatusBadRequest, "Invalid partition count", false},
	{CodeInvalidConfig, http.StatusBadRequest, "Invalid topic config", false},
	{CodeInvalidPartition, http.StatusBadRequest, "Invalid partition", false},
	{CodeInvalidOffset, http.StatusBadRequest, "Invalid offset", false},
	{CodeInvalidTimestamp, http.StatusBadRequest, "Invalid timestamp", false},
	{CodeInvalidParameter, http.StatusBadRequest, "Invalid query parameter", false},
	{CodeUnauthorized, http.StatusUnauthorized, "API key missing or invalid", false},
	{CodeTopicNotFound, http.StatusNotFound, "Topic not found", false},
	{CodePartitionOutOfRange, http.StatusNotFound, "Partition out of range", false},
	{CodeNotFound, http.StatusNotFound, "Not found", false},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed", false},
	{CodeStreamingUnsupported, http.StatusNotAcceptable, "Streaming not supported here", false},
	{CodeTopicExists, http.StatusConflict, "Topic already exists", false},
	{CodeOffsetOutOfRange, http.StatusRequestedRangeNotSatisfiable, "Offset out of range", false},
	{CodeBufferFull, http.StatusTooManyRequests, "Writer buffer full", true},
	{CodeStoreUnavailable, http.StatusServiceUnavailable, "Object store unavailable", true},
	{CodeCommitFailed, http.StatusServiceUnavailable, "Commit failed", true},
	{CodeCommitOutcomeUnknown, http.StatusServiceUnavailable, "Commit outcome unknown", true},
	{CodeShuttingDown, http.StatusServiceUnavailable, "Node shutting down", true},
	{CodeCatalogUnavailable, http.StatusServiceUnavailable, "Catalog unavailable", true},
	{CodeRoleUnavailable, http.StatusServiceUnavailable, "Role not served by this node", true},
	{CodeNotReady, http.StatusServiceUnavailable, "Not ready", true},
	{CodeInternal, http.StatusInternalServerError, "Internal error", false},
	{CodeGroupNotFound, http.StatusNotFound, "Group not found", false},
	{CodeInvalidGroupName, http.StatusBadRequest, "Invalid group name", false},
	{CodeUnknownMember, http.StatusConflict, "Unknown group member", false},
	{CodeStaleMemberEpoch, http.StatusConflict, "Stale member epoch", false},
	{CodeNotOwner, http.StatusConflict, "Partition not owned by member", false},
	{CodeGroupNotEmpty, http.StatusConflict, "Group has live members", false},
	{CodeProducerFenced, http.StatusConflict, "Producer fenced", false},
	{CodeOutOfOrderSequence, http.StatusConflict, "Out of order sequence", false},
	{CodeUnknownProducer, http.StatusConflict, "Unknown producer id", false},
	{CodeInvalidTransactionalID, http.StatusBadRequest, "Invalid transactional id", false},
	{CodeRequestTimeout, http.StatusRequestTimeout, "Request body timed out", false},
}

var codeIndex = func() map[Code]CodeInfo {
	m := make(map[Code]CodeInfo, len(codeTable))
	for _, c := range codeTable {
		if _, dup := m[c.Code]; dup {
			panic("api: duplicate error code " + string(c.Code))
		}
		m[c.Code] = c
	}
	return m
}()

// Codes returns the error table, in documentation order.
func Codes() []CodeInfo { return append([]CodeInfo(nil), codeTable...) }

// retryAfterSeconds is what retryable problems advertise: long enough for a writer's
// buffer to drain one flush (linger is at most a few hundred ms), short enough not to
// stall producers.
const retryAfterSeconds = 1

// problem is an RFC 9457 problem detail. It is an error so that helpers can return it
// through ordinary error paths.
type problem struct {
	code   Code
	detail string
	extras map[string]any
}

func (p *problem) Error() string { return string(p.code) + ": " + p.detail }

func newProblem(code Code, format string, args ...any) *problem {
	if _, ok := codeIndex[code]; !ok {
		panic("api: unknown error code " + string(code))
	}
	return &problem{code: code, detail: fmt.Sprintf(format, args...)}
}

// with adds an extension member to the problem body.
func (p *problem) with(key string, v any) *problem {
	if p.extras == nil {
		p.extras = make(map[string]any, 2)
	}
	p.extras[key] = v
	return p
}

// problemTypePrefix makes the "type" member a stable URI per code that does not pretend
// to resolve anywhere.
const problemTypePrefix = "urn:strata:problem:"

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *problem) {
	info := codeIndex[p.code]
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if info.Retry {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	w.WriteHeader(info.Status)
	_, _ = w.Write(append(problemBody(r, p), '\n'))
}

// problemBody is p's JSON: the RFC 9457 members, the code, the request id and the
// problem's extension members.
func problemBody(r *http.Request, p *problem) []byte {
	info := codeIndex[p.code]
	body := make(map[string]any, 6+len(p.extras))
	for k, v := range p.extras {
		body[k] = v
	}
	body["type"] = problemTypePrefix + string(p.code)
	body["title"] = info.Title
	body["status"] = info.Status
	body["detail"] = p.detail
	body["code"] = p.code
	if id := requestID(r.Context()); id != "" {
		body["request_id"] = id
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic("api: encode problem: " + err.Error()) // extras are plain values
	}
	return b
}

// catalogProblem maps a catalog error to a problem; unknown errors (the database is
// down, a bug) become catalog_unavailable and are logged.
func (a *API) catalogProblem(r *http.Request, op string, err error) *problem {
	var p *problem
	var ce *catalog.ConfigError
	switch {
	case errors.As(err, &p):
		return p
	case errors.Is(err, catalog.ErrTopicNotFound):
		return newProblem(CodeTopicNotFound, "%s", err.Error())
	case errors.Is(err, catalog.ErrTopicExists):
		return newProblem(CodeTopicExists, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidTopicName):
		return newProblem(CodeInvalidTopicName, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidPartitions):
		return newProblem(CodeInvalidPartitionCount, "%s", err.Error())
	case errors.As(err, &ce):
		return newProblem(CodeInvalidConfig, "%s", ce.Error()).with("config", ce.Key)
	case errors.Is(err, catalog.ErrInvalidConfig):
		return newProblem(CodeInvalidConfig, "%s", err.Error())
	case errors.Is(err, catalog.ErrPartitionOutOfRange):
		return newProblem(CodePartitionOutOfRange, "%s", err.Error())
	case errors.Is(err, catalog.ErrOffsetOutOfRange):
		return newProblem(CodeOffsetOutOfRange, "%s", err.Error())
	}
	a.logUnexpected(r, op, err)
	return newProblem(CodeCatalogUnavailable, "%s: the catalog did not answer; retry", op)
}

// writerProblem maps a writer.Produce error. Catalog refusals come back wrapped from
// the commit (a topic deleted since it was cached, a partition beyond the count).
func (a *API) writerProblem(r *http.Request, err error) *problem {
	switch {
	case errors.Is(err, catalog.ErrTopicNotFound),
		errors.Is(err, catalog.ErrPartitionOutOfRange):
		return a.catalogProblem(r, "produce", err)
	case errors.Is(err, writer.ErrBufferFull):
		return newProblem(CodeBufferFull, "the writer's buffer is full; retry after a short wait")
	case errors.Is(err, writer.ErrClosed):
		return newProblem(CodeShuttingDown, "the writer is shutting down; retry on another node")
	case errors.Is(err, writer.ErrStore):
		return newProblem(CodeStoreUnavailable, "the object store did not accept the segment; nothing was written; retry")
	case errors.Is(err, writer.ErrOutcomeUnknown):
		// Checked before ErrCommit, which it accompanies: here a blind retry may
		// write the records twice.
		return newProblem(CodeCommitOutcomeUnknown, "the catalog could not be reached to settle the commit: the records may or may not have been written; retrying may duplicate them")
	case errors.Is(err, writer.ErrCommit):
		return newProblem(CodeCommitFailed, "the catalog commit failed; nothing was written; retry")
	case errors.Is(err, writer.ErrTooLarge):
		return newProblem(CodeRequestTooLarge, "the request is larger than one flush; split it")
	case errors.Is(err, writer.ErrInvalid):
		// The API validates first; this is the writer's own check, and its message
		// says what to fix.
		return newProblem(CodeInvalidRequest, "%s", err.Error())
	}
	a.logUnexpected(r, "produce", err)
	return newProblem(CodeInternal, "produce: unexpected error")
}

// readerProblem maps a reader.Fetch error.
func (a *API) readerProblem(r *http.Request, err error) *problem {
	var oor *reader.OutOfRangeError
	switch {
	case errors.As(err, &oor):
		return newProblem(CodeOffsetOutOfRange, "offset %d is outside [%d, %d]", oor.Offset, oor.LogStartOffset, oor.HighWatermark).
			with("log_start_offset", oor.LogStartOffset).
			with("high_watermark", oor.HighWatermark)
	case errors.Is(err, reader.ErrOffsetOutOfRange):
		return newProblem(CodeOffsetOutOfRange, "%s", err.Error())
	case errors.Is(err, reader.ErrInvalidFetch):
		return newProblem(CodeInvalidParameter, "%s", err.Error())
	case errors.Is(err, catalog.ErrTopicNotFound),
		errors.Is(err, catalog.ErrPartitionOutOfRange),
		errors.Is(err, catalog.ErrOffsetOutOfRange):
		return a.catalogProblem(r, "fetch", err)
	case errors.Is(err, reader.ErrStoreUnavailable):
		a.logUnexpected(r, "fetch", err)
		return newProblem(CodeStoreUnavailable, "fetch: the object store did not answer; retry")
	case errors.Is(err, segment.ErrCorrupt):
		// The reader has already dropped the bad bytes and read them again once: a read
		// corrupted in transit is cured by a retry, a damaged object is not, and the
		// error line (naming the object) is how an operator learns which.
		a.logUnexpected(r, "fetch", err)
		return newProblem(CodeStoreUnavailable, "fetch: the object store returned data that fails its checksums; retry (if it persists, the object is damaged: see the node's log)")
	case errors.Is(err, reader.ErrCatalogUnavailable):
		a.logUnexpected(r, "fetch", err)
		return newProblem(CodeCatalogUnavailable, "fetch: the catalog did not answer; retry")
	}
	a.logUnexpected(r, "fetch", err)
	return newProblem(CodeInternal, "fetch: unexpected error")
}

// logUnexpected logs an error the API has no mapping for; a request whose client went
// away is not worth an error line.
func (a *API) logUnexpected(r *http.Request, op string, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		a.log.Debug("request cancelled", "op", op, "err", err, "request_id", requestID(r.Context()))
		return
	}
	a.log.Error("unexpected error", "op", op, "err", err, "method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()))
}
