package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
)

// Code is a stable, machine-readable error code carried in every problem body. Clients
// branch on the code, never on the title or detail text. Each code has exactly one HTTP
// status, so the table below is the whole contract (and openapi.json documents it).
type Code string

// The error codes of API v1: the HTTP API's own (about requests as HTTP carries them),
// then the broker core's, whose strings they are.
const (
	CodeInvalidJSON          Code = v1.CodeInvalidJSON
	CodeUnsupportedMediaType Code = v1.CodeUnsupportedMediaType
	CodeBodyTooLarge         Code = v1.CodeBodyTooLarge
	CodeRequestTimeout       Code = v1.CodeRequestTimeout
	CodeUnauthorized         Code = v1.CodeUnauthorized
	CodeNotFound             Code = v1.CodeNotFound
	CodeMethodNotAllowed     Code = v1.CodeMethodNotAllowed
	CodeStreamingUnsupported Code = v1.CodeStreamingUnsupported
	CodeNotReady             Code = v1.CodeNotReady
	CodeConcurrencyLimit     Code = v1.CodeConcurrencyLimit

	CodeInvalidRequest         = Code(broker.CodeInvalidRequest)
	CodeRecordTooLarge         = Code(broker.CodeRecordTooLarge)
	CodeRequestTooLarge        = Code(broker.CodeRequestTooLarge)
	CodeEmptyBatch             = Code(broker.CodeEmptyBatch)
	CodeTooManyRecords         = Code(broker.CodeTooManyRecords)
	CodeInvalidRecord          = Code(broker.CodeInvalidRecord)
	CodeTimestampOutOfRange    = Code(broker.CodeTimestampOutOfRange)
	CodeInvalidTopicName       = Code(broker.CodeInvalidTopicName)
	CodeInvalidPartitionCount  = Code(broker.CodeInvalidPartitionCount)
	CodeInvalidConfig          = Code(broker.CodeInvalidConfig)
	CodeInvalidPartition       = Code(broker.CodeInvalidPartition)
	CodeInvalidOffset          = Code(broker.CodeInvalidOffset)
	CodeInvalidTimestamp       = Code(broker.CodeInvalidTimestamp)
	CodeInvalidParameter       = Code(broker.CodeInvalidParameter)
	CodeTopicNotFound          = Code(broker.CodeTopicNotFound)
	CodePartitionOutOfRange    = Code(broker.CodePartitionOutOfRange)
	CodeTopicExists            = Code(broker.CodeTopicExists)
	CodeOffsetOutOfRange       = Code(broker.CodeOffsetOutOfRange)
	CodeBufferFull             = Code(broker.CodeBufferFull)
	CodeStoreUnavailable       = Code(broker.CodeStoreUnavailable)
	CodeCommitFailed           = Code(broker.CodeCommitFailed)
	CodeCommitOutcomeUnknown   = Code(broker.CodeCommitOutcomeUnknown)
	CodeShuttingDown           = Code(broker.CodeShuttingDown)
	CodeCatalogUnavailable     = Code(broker.CodeCatalogUnavailable)
	CodeRoleUnavailable        = Code(broker.CodeRoleUnavailable)
	CodeInternal               = Code(broker.CodeInternal)
	CodeGroupNotFound          = Code(broker.CodeGroupNotFound)
	CodeInvalidGroupName       = Code(broker.CodeInvalidGroupName)
	CodeUnknownMember          = Code(broker.CodeUnknownMember)
	CodeStaleMemberEpoch       = Code(broker.CodeStaleMemberEpoch)
	CodeNotOwner               = Code(broker.CodeNotOwner)
	CodeGroupNotEmpty          = Code(broker.CodeGroupNotEmpty)
	CodeProducerFenced         = Code(broker.CodeProducerFenced)
	CodeOutOfOrderSequence     = Code(broker.CodeOutOfOrderSequence)
	CodeUnknownProducer        = Code(broker.CodeUnknownProducer)
	CodeInvalidTransactionalID = Code(broker.CodeInvalidTransactionalID)
	CodeStaleGeneration        = Code(broker.CodeStaleGeneration)
	CodeMemoryExhausted        = Code(broker.CodeMemoryExhausted)
	CodeForbidden              = Code(broker.CodeForbidden)
	CodeKeyNotFound            = Code(broker.CodeKeyNotFound)
	CodeCredentialNotFound     = Code(broker.CodeCredentialNotFound)

	CodeInconsistentGroupProtocol = Code(broker.CodeInconsistentGroupProtocol)
	CodeIllegalGeneration         = Code(broker.CodeIllegalGeneration)
	CodeRebalanceInProgress       = Code(broker.CodeRebalanceInProgress)
	CodeFencedInstanceID          = Code(broker.CodeFencedInstanceID)
	CodeInvalidSessionTimeout     = Code(broker.CodeInvalidSessionTimeout)
	CodeGroupSubscribed           = Code(broker.CodeGroupSubscribed)
	CodeGroupTypeMismatch         = Code(broker.CodeGroupTypeMismatch)
	CodeInvalidRecordState        = Code(broker.CodeInvalidRecordState)
	CodeAckOutOfRange             = Code(broker.CodeAckOutOfRange)
	CodeAcquisitionNotHeld        = Code(broker.CodeAcquisitionNotHeld)
	CodeInvalidTxnState           = Code(broker.CodeInvalidTxnState)
	CodeInvalidProducerIDMapping  = Code(broker.CodeInvalidProducerIDMapping)
	CodeInvalidTransactionTimeout = Code(broker.CodeInvalidTransactionTimeout)

	CodeConnectorNotFound      = Code(broker.CodeConnectorNotFound)
	CodeConnectorExists        = Code(broker.CodeConnectorExists)
	CodeTaskNotFound           = Code(broker.CodeTaskNotFound)
	CodeConnectorNotStopped    = Code(broker.CodeConnectorNotStopped)
	CodeSchemaNotFound         = Code(broker.CodeSchemaNotFound)
	CodeInvalidSchema          = Code(broker.CodeInvalidSchema)
	CodeIncompatibleSchema     = Code(broker.CodeIncompatibleSchema)
	CodeSchemaValidationFailed = Code(broker.CodeSchemaValidationFailed)
	CodeThrottled              = Code(broker.CodeThrottled)
	CodeQuotaExceeded          = Code(broker.CodeQuotaExceeded)
	CodePushNotFound           = Code(broker.CodePushNotFound)
	CodePushTargetNotAllowed   = Code(broker.CodePushTargetNotAllowed)
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
// help (for the core's codes, what broker.Code.Retriable says: a test checks it). Keep
// openapi.json in step (a test checks it too).
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
	{CodeForbidden, http.StatusForbidden, "Forbidden", false},
	{CodeTopicNotFound, http.StatusNotFound, "Topic not found", false},
	{CodePartitionOutOfRange, http.StatusNotFound, "Partition out of range", false},
	{CodeNotFound, http.StatusNotFound, "Not found", false},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed", false},
	{CodeStreamingUnsupported, http.StatusNotAcceptable, "Streaming not supported here", false},
	{CodeTopicExists, http.StatusConflict, "Topic already exists", false},
	{CodeOffsetOutOfRange, http.StatusRequestedRangeNotSatisfiable, "Offset out of range", false},
	{CodeBufferFull, http.StatusTooManyRequests, "Writer buffer full", true},
	{CodeConcurrencyLimit, http.StatusTooManyRequests, "Too many concurrent reads", true},
	{CodeStoreUnavailable, http.StatusServiceUnavailable, "Object store unavailable", true},
	{CodeCommitFailed, http.StatusServiceUnavailable, "Commit failed", true},
	{CodeCommitOutcomeUnknown, http.StatusServiceUnavailable, "Commit outcome unknown", true},
	{CodeShuttingDown, http.StatusServiceUnavailable, "Node shutting down", true},
	{CodeCatalogUnavailable, http.StatusServiceUnavailable, "Catalog unavailable", true},
	{CodeRoleUnavailable, http.StatusServiceUnavailable, "Role not served by this node", true},
	{CodeNotReady, http.StatusServiceUnavailable, "Not ready", true},
	{CodeMemoryExhausted, http.StatusServiceUnavailable, "Memory budget exhausted", true},
	{CodeInternal, http.StatusInternalServerError, "Internal error", false},
	{CodeGroupNotFound, http.StatusNotFound, "Group not found", false},
	{CodeKeyNotFound, http.StatusNotFound, "API key not found", false},
	{CodeCredentialNotFound, http.StatusNotFound, "SCRAM credential not found", false},
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
	{CodeStaleGeneration, http.StatusConflict, "Stale connector task generation", false},
	{CodeInconsistentGroupProtocol, http.StatusConflict, "Group of another type or protocol", false},
	{CodeIllegalGeneration, http.StatusConflict, "Illegal group generation", false},
	{CodeRebalanceInProgress, http.StatusConflict, "Group rebalancing", false},
	{CodeFencedInstanceID, http.StatusConflict, "Static member fenced", false},
	{CodeInvalidSessionTimeout, http.StatusBadRequest, "Invalid session timeout", false},
	{CodeGroupSubscribed, http.StatusConflict, "Group subscribed to the topic", false},
	{CodeInvalidTxnState, http.StatusConflict, "Invalid transaction state", false},
	{CodeInvalidProducerIDMapping, http.StatusConflict, "Producer id not the transactional id's", false},
	{CodeInvalidTransactionTimeout, http.StatusBadRequest, "Invalid transaction timeout", false},
	{CodeConnectorNotFound, http.StatusNotFound, "Connector not found", false},
	{CodeConnectorExists, http.StatusConflict, "Connector already exists", false},
	{CodeTaskNotFound, http.StatusNotFound, "Connector task not found", false},
	{CodeConnectorNotStopped, http.StatusConflict, "Connector not stopped", false},
	{CodeSchemaNotFound, http.StatusNotFound, "Schema registry: not found", false},
	{CodeInvalidSchema, http.StatusUnprocessableEntity, "Schema registry: refused", false},
	{CodeIncompatibleSchema, http.StatusConflict, "Incompatible schema", false},
	{CodeSchemaValidationFailed, http.StatusUnprocessableEntity, "Schema validation failed", false},
	{CodeGroupTypeMismatch, http.StatusConflict, "Group id of another group type", false},
	{CodeInvalidRecordState, http.StatusConflict, "Record not held by this member", false},
	{CodeAckOutOfRange, http.StatusBadRequest, "Acknowledged offsets never acquired", false},
	{CodeAcquisitionNotHeld, http.StatusConflict, "Acquisition no longer holds the records", false},
	{CodeThrottled, http.StatusTooManyRequests, "Quota exceeded: retry later", true},
	{CodeQuotaExceeded, http.StatusForbidden, "Quota cap reached", false},
	{CodePushNotFound, http.StatusNotFound, "Push subscription not found", false},
	{CodePushTargetNotAllowed, http.StatusUnprocessableEntity, "Push target not allowed", false},
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

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *problem) {
	info := codeIndex[p.code]
	h := w.Header()
	h.Set("Content-Type", v1.ContentTypeProblem)
	h.Set("Cache-Control", "no-store")
	if info.Retry {
		secs := int64(retryAfterSeconds)
		if ms, ok := p.extras["retry_after_ms"].(int64); ok {
			secs = max((ms+999)/1000, 1) // a quota's own wait, rounded up
		}
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(info.Status)
	_, _ = w.Write(append(problemBody(r, p), '\n'))
}

// problemBody is p's JSON: v1.Problem's members and the problem's extension members
// (an extension never replaces a member of v1.Problem), in one object whose keys are
// sorted, as the README shows it.
func problemBody(r *http.Request, p *problem) []byte {
	info := codeIndex[p.code]
	members := v1.Problem{
		Type:      v1.ProblemTypePrefix + string(p.code),
		Title:     info.Title,
		Status:    info.Status,
		Detail:    p.detail,
		Code:      string(p.code),
		RequestID: requestID(r.Context()),
	}
	if h, ok := p.extras["hint"].(string); ok {
		members.Hint = h
	}
	b, err := json.Marshal(members)
	body := make(map[string]any, 8+len(p.extras))
	if err == nil {
		err = json.Unmarshal(b, &body)
	}
	for k, v := range p.extras {
		if _, member := body[k]; !member {
			body[k] = v
		}
	}
	if err == nil {
		b, err = json.Marshal(body)
	}
	if err != nil {
		panic("api: encode problem: " + err.Error()) // extras are plain values
	}
	return b
}

// problemFor answers an error of the core as a problem: its code is the core's, its
// detail the core's message (what was wrong, in the caller's terms), its hint and
// extension members the core's. The chain of errors below it goes to the log with the
// request id the answer carries: a failure the core marks unexpected as an error, a
// refusal at debug level.
func (a *API) problemFor(r *http.Request, err error) *problem {
	e := broker.AsError("api", err)
	switch {
	case e.Unexpected:
		a.logUnexpected(r, e.Op, e.Err)
	case e.Err != nil:
		a.log.Debug("refused", "code", e.Code, "err", e.Err, "method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()))
	}
	return problemOf(e)
}

// problemOf is problemFor without the log: for refusals made before the catalog is
// asked, which have no chain.
func problemOf(e *broker.Error) *problem {
	p := newProblem(Code(e.Code), "%s", e.Message)
	if len(e.Details) > 0 {
		p.extras = make(map[string]any, len(e.Details)+1)
		for k, v := range e.Details {
			p.extras[k] = v
		}
	}
	if e.Hint != "" {
		p = p.with("hint", e.Hint)
	}
	return p
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
