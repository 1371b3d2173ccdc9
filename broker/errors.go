package broker

import (
	"errors"
	"fmt"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// Code is a stable, machine-readable error code. Front ends map it to their own
// vocabulary: the HTTP API uses the same strings as its problem codes (each with one HTTP
// status); the Kafka front end maps each to a Kafka error code.
type Code string

// The core's error codes.
const (
	CodeInvalidRequest         Code = "invalid_request"
	CodeRecordTooLarge         Code = "record_too_large"
	CodeRequestTooLarge        Code = "request_too_large"
	CodeEmptyBatch             Code = "empty_batch"
	CodeTooManyRecords         Code = "too_many_records"
	CodeInvalidRecord          Code = "invalid_record"
	CodeTimestampOutOfRange    Code = "timestamp_out_of_range"
	CodeInvalidTopicName       Code = "invalid_topic_name"
	CodeInvalidPartitionCount  Code = "invalid_partition_count"
	CodeInvalidConfig          Code = "invalid_config"
	CodeInvalidPartition       Code = "invalid_partition"
	CodeInvalidOffset          Code = "invalid_offset"
	CodeInvalidTimestamp       Code = "invalid_timestamp"
	CodeInvalidParameter       Code = "invalid_parameter"
	CodeTopicNotFound          Code = "topic_not_found"
	CodePartitionOutOfRange    Code = "partition_out_of_range"
	CodeTopicExists            Code = "topic_exists"
	CodeOffsetOutOfRange       Code = "offset_out_of_range"
	CodeBufferFull             Code = "buffer_full"
	CodeStoreUnavailable       Code = "store_unavailable"
	CodeCommitFailed           Code = "commit_failed"
	CodeCommitOutcomeUnknown   Code = "commit_outcome_unknown"
	CodeShuttingDown           Code = "shutting_down"
	CodeCatalogUnavailable     Code = "catalog_unavailable"
	CodeRoleUnavailable        Code = "role_unavailable"
	CodeInternal               Code = "internal_error"
	CodeGroupNotFound          Code = "group_not_found"
	CodeInvalidGroupName       Code = "invalid_group_name"
	CodeUnknownMember          Code = "unknown_member"
	CodeStaleMemberEpoch       Code = "stale_member_epoch"
	CodeNotOwner               Code = "not_owner"
	CodeGroupNotEmpty          Code = "group_not_empty"
	CodeProducerFenced         Code = "producer_fenced"
	CodeOutOfOrderSequence     Code = "out_of_order_sequence"
	CodeUnknownProducer        Code = "unknown_producer_id"
	CodeInvalidTransactionalID Code = "invalid_transactional_id"
	// The classic (Kafka JoinGroup/SyncGroup) group protocol's refusals.
	CodeInconsistentGroupProtocol Code = "inconsistent_group_protocol"
	CodeIllegalGeneration         Code = "illegal_generation"
	CodeRebalanceInProgress       Code = "rebalance_in_progress"
	CodeFencedInstanceID          Code = "fenced_instance_id"
	CodeInvalidSessionTimeout     Code = "invalid_session_timeout"
	CodeGroupSubscribed           Code = "group_subscribed_to_topic"
)

// retriable lists the codes whose request may succeed later unchanged: the node was
// busy, stopping, or could not reach the store or the catalog. Every other code is a
// refusal of the request as it stands.
var retriable = map[Code]bool{
	CodeBufferFull:           true,
	CodeStoreUnavailable:     true,
	CodeCommitFailed:         true,
	CodeCommitOutcomeUnknown: true,
	CodeShuttingDown:         true,
	CodeCatalogUnavailable:   true,
	CodeRoleUnavailable:      true,
}

// Retriable reports whether a request refused with c may succeed later unchanged.
// (CodeCommitOutcomeUnknown is retriable, but blindly only for idempotent requests: the
// first attempt may have landed.)
func (c Code) Retriable() bool { return retriable[c] }

// Codes lists every code the core answers with.
func Codes() []Code {
	return []Code{
		CodeInvalidRequest, CodeRecordTooLarge, CodeRequestTooLarge, CodeEmptyBatch, CodeTooManyRecords,
		CodeInvalidRecord, CodeTimestampOutOfRange, CodeInvalidTopicName, CodeInvalidPartitionCount,
		CodeInvalidConfig, CodeInvalidPartition, CodeInvalidOffset, CodeInvalidTimestamp, CodeInvalidParameter,
		CodeTopicNotFound, CodePartitionOutOfRange, CodeTopicExists, CodeOffsetOutOfRange, CodeBufferFull,
		CodeStoreUnavailable, CodeCommitFailed, CodeCommitOutcomeUnknown, CodeShuttingDown,
		CodeCatalogUnavailable, CodeRoleUnavailable, CodeInternal, CodeGroupNotFound, CodeInvalidGroupName,
		CodeUnknownMember, CodeStaleMemberEpoch, CodeNotOwner, CodeGroupNotEmpty, CodeProducerFenced,
		CodeOutOfOrderSequence, CodeUnknownProducer, CodeInvalidTransactionalID, CodeInconsistentGroupProtocol,
		CodeIllegalGeneration, CodeRebalanceInProgress, CodeFencedInstanceID, CodeInvalidSessionTimeout,
		CodeGroupSubscribed,
	}
}

// Error is every error the core's calls return: a refusal of the request, or a failure
// of what serves it.
type Error struct {
	Code Code
	// Message says what is wrong and how to fix it, for people.
	Message string
	// Details name what the message is about, for programs: "record" (an index),
	// "field", "config", "partitions", "expected_sequence", ... The HTTP API adds them to
	// its problem bodies.
	Details map[string]any
	// Unexpected marks a failure the front end should log (an outage or a bug), with Op
	// (what was being done) and Err (the cause): the caller is told only that it
	// failed.
	Unexpected bool
	Op         string
	Err        error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the cause, when the error came from below the core.
func (e *Error) Unwrap() error { return e.Err }

// Retriable reports whether the same request may succeed later unchanged.
func (e *Error) Retriable() bool { return e.Code.Retriable() }

func newError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// with adds a detail.
func (e *Error) with(key string, v any) *Error {
	if e.Details == nil {
		e.Details = make(map[string]any, 2)
	}
	e.Details[key] = v
	return e
}

// unexpected marks e as a failure to log.
func (e *Error) unexpected(op string, cause error) *Error {
	e.Unexpected, e.Op, e.Err = true, op, cause
	return e
}

// AsError returns err as the core's *Error: itself when it is one, else an internal
// error carrying it (Unexpected).
func AsError(op string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return newError(CodeInternal, "%s: unexpected error", op).unexpected(op, err)
}

// catalogError maps a catalog error; unknown errors (the database is down, a bug)
// become CodeCatalogUnavailable, to be logged.
func catalogError(op string, err error) *Error {
	var e *Error
	var ce *catalog.ConfigError
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, catalog.ErrTopicNotFound):
		return newError(CodeTopicNotFound, "%s", err.Error())
	case errors.Is(err, catalog.ErrTopicExists):
		return newError(CodeTopicExists, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidTopicName):
		return newError(CodeInvalidTopicName, "%s", err.Error())
	case errors.Is(err, catalog.ErrInvalidPartitions):
		return newError(CodeInvalidPartitionCount, "%s", err.Error())
	case errors.As(err, &ce):
		return newError(CodeInvalidConfig, "%s", ce.Error()).with("config", ce.Key)
	case errors.Is(err, catalog.ErrInvalidConfig):
		return newError(CodeInvalidConfig, "%s", err.Error())
	case errors.Is(err, catalog.ErrPartitionOutOfRange):
		return newError(CodePartitionOutOfRange, "%s", err.Error())
	case errors.Is(err, catalog.ErrOffsetOutOfRange):
		return newError(CodeOffsetOutOfRange, "%s", err.Error())
	}
	return newError(CodeCatalogUnavailable, "%s: the catalog did not answer; retry", op).unexpected(op, err)
}

// groupCodes are the group rules' refusals and their codes.
var groupCodes = []struct {
	err  error
	code Code
}{
	{catalog.ErrGroupNotFound, CodeGroupNotFound},
	{catalog.ErrInvalidGroupName, CodeInvalidGroupName},
	{catalog.ErrUnknownMember, CodeUnknownMember},
	{catalog.ErrStaleMemberEpoch, CodeStaleMemberEpoch},
	{catalog.ErrNotOwner, CodeNotOwner},
	{catalog.ErrGroupNotEmpty, CodeGroupNotEmpty},
	{catalog.ErrInvalidOffset, CodeInvalidOffset},
	{catalog.ErrInvalidGroupRequest, CodeInvalidRequest},
	{catalog.ErrInconsistentGroupProtocol, CodeInconsistentGroupProtocol},
	{catalog.ErrIllegalGeneration, CodeIllegalGeneration},
	{catalog.ErrRebalanceInProgress, CodeRebalanceInProgress},
	{catalog.ErrFencedInstance, CodeFencedInstanceID},
	{catalog.ErrInvalidSessionTimeout, CodeInvalidSessionTimeout},
	{catalog.ErrGroupSubscribed, CodeGroupSubscribed},
}

// groupError maps a group error; the rest goes to catalogError.
func groupError(op string, err error) *Error {
	for _, g := range groupCodes {
		if errors.Is(err, g.err) {
			return newError(g.code, "%s", err.Error())
		}
	}
	return catalogError(op, err)
}

// isGroupError reports a refusal by the group rules.
func isGroupError(err error) bool {
	for _, g := range groupCodes {
		if errors.Is(err, g.err) {
			return true
		}
	}
	return false
}

// producerError maps the producer refusals (of a produce, or of InitProducer); names
// resolves topic ids for an out-of-order answer. ok is false for anything else.
func producerError(err error, names map[int64]string) (_ *Error, ok bool) {
	var se *catalog.SequenceError
	switch {
	case errors.As(err, &se):
		e := newError(CodeOutOfOrderSequence, "%s", err.Error()).
			with("expected_sequence", se.Expected).with("sequence", se.Got).with("partition", se.Partition)
		if name, ok := names[se.TopicID]; ok {
			e = e.with("topic", name)
		}
		return e, true
	case errors.Is(err, catalog.ErrProducerFenced):
		return newError(CodeProducerFenced, "%s: a newer instance with this transactional id has initialised; stop this one", err.Error()), true
	case errors.Is(err, catalog.ErrUnknownProducer):
		return newError(CodeUnknownProducer, "%s", err.Error()), true
	case errors.Is(err, catalog.ErrInvalidTransactionalID):
		return newError(CodeInvalidTransactionalID, "%s", err.Error()), true
	}
	return nil, false
}

// produceError maps a writer.Produce error: the catalog's refusals of the request
// (producer, group offsets, a topic deleted or a partition beyond the count since it
// was cached), then the writer's own.
func produceError(err error, names map[int64]string) *Error {
	if e, ok := producerError(err, names); ok {
		return e
	}
	switch {
	case isGroupError(err):
		return groupError("produce", err)
	case errors.Is(err, catalog.ErrTopicNotFound),
		errors.Is(err, catalog.ErrPartitionOutOfRange):
		return catalogError("produce", err)
	case errors.Is(err, writer.ErrBufferFull):
		return newError(CodeBufferFull, "the writer's buffer is full; retry after a short wait")
	case errors.Is(err, writer.ErrClosed):
		return newError(CodeShuttingDown, "the writer is shutting down; retry on another node")
	case errors.Is(err, writer.ErrStore):
		return newError(CodeStoreUnavailable, "the object store did not accept the segment; nothing was written; retry")
	case errors.Is(err, writer.ErrOutcomeUnknown):
		// Checked before ErrCommit, which it accompanies: here a blind retry may
		// write the records twice.
		return newError(CodeCommitOutcomeUnknown, "the catalog could not be reached to settle the commit: the records may or may not have been written; retrying may duplicate them")
	case errors.Is(err, writer.ErrCommit):
		return newError(CodeCommitFailed, "the catalog commit failed; nothing was written; retry")
	case errors.Is(err, writer.ErrTooLarge):
		return newError(CodeRequestTooLarge, "the request is larger than one flush; split it")
	case errors.Is(err, writer.ErrInvalid):
		// The core validates first; this is the writer's own check, and its message
		// says what to fix.
		return newError(CodeInvalidRequest, "%s", err.Error())
	}
	return newError(CodeInternal, "produce: unexpected error").unexpected("produce", err)
}

// fetchError maps a reader error.
func fetchError(err error) *Error {
	var oor *reader.OutOfRangeError
	switch {
	case errors.As(err, &oor):
		return newError(CodeOffsetOutOfRange, "offset %d is outside [%d, %d]", oor.Offset, oor.LogStartOffset, oor.HighWatermark).
			with("log_start_offset", oor.LogStartOffset).
			with("high_watermark", oor.HighWatermark)
	case errors.Is(err, reader.ErrOffsetOutOfRange):
		return newError(CodeOffsetOutOfRange, "%s", err.Error())
	case errors.Is(err, reader.ErrInvalidFetch):
		return newError(CodeInvalidParameter, "%s", err.Error())
	case errors.Is(err, catalog.ErrTopicNotFound),
		errors.Is(err, catalog.ErrPartitionOutOfRange),
		errors.Is(err, catalog.ErrOffsetOutOfRange):
		return catalogError("fetch", err)
	case errors.Is(err, reader.ErrStoreUnavailable):
		return newError(CodeStoreUnavailable, "fetch: the object store did not answer; retry").unexpected("fetch", err)
	case errors.Is(err, segment.ErrCorrupt):
		// The reader has already dropped the bad bytes and read them again once: a read
		// corrupted in transit is cured by a retry, a damaged object is not, and the
		// error line (naming the object) is how an operator learns which.
		return newError(CodeStoreUnavailable, "fetch: the object store returned data that fails its checksums; retry (if it persists, the object is damaged: see the node's log)").unexpected("fetch", err)
	case errors.Is(err, reader.ErrCatalogUnavailable):
		return newError(CodeCatalogUnavailable, "fetch: the catalog did not answer; retry").unexpected("fetch", err)
	}
	return newError(CodeInternal, "fetch: unexpected error").unexpected("fetch", err)
}
