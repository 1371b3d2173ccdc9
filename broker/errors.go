package broker

import (
	"errors"
	"fmt"
	"strings"

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
	// Kafka transactions' refusals: a call that does not fit the transaction's state,
	// a producer id that is not the transactional id's, a timeout out of range.
	CodeInvalidTxnState           Code = "invalid_txn_state"
	CodeInvalidProducerIDMapping  Code = "invalid_producer_id_mapping"
	CodeInvalidTransactionTimeout Code = "invalid_transaction_timeout"
	// CodeStaleGeneration: a connector task instance wrote under a generation that is no
	// longer its task's; it must stop (only the connect runtime meets it).
	CodeStaleGeneration Code = "stale_generation"
	// The connector administration's refusals (Kafka Connect's REST API).
	CodeConnectorNotFound   Code = "connector_not_found"
	CodeConnectorExists     Code = "connector_exists"
	CodeTaskNotFound        Code = "task_not_found"
	CodeConnectorNotStopped Code = "connector_not_stopped"
	// The schema registry's refusals (registry.go): a subject, version, schema or
	// setting it does not have; a request it refuses as it stands; a schema
	// incompatible with the subject's; and a record that fails its topic's schema
	// validation. Details["registry_code"] is Confluent's error_code for the first
	// three (40401, 42201, 409, ...), which the registry's REST API answers.
	CodeSchemaNotFound         Code = "schema_not_found"
	CodeInvalidSchema          Code = "invalid_schema"
	CodeIncompatibleSchema     Code = "incompatible_schema"
	CodeSchemaValidationFailed Code = "schema_validation_failed"
	CodeMemoryExhausted        Code = "memory_exhausted"
	CodeForbidden              Code = "forbidden"
	CodeKeyNotFound            Code = "key_not_found"
	// CodeCredentialNotFound: no SCRAM credential of that user and mechanism.
	CodeCredentialNotFound Code = "credential_not_found"
	// The classic (Kafka JoinGroup/SyncGroup) group protocol's refusals.
	CodeInconsistentGroupProtocol Code = "inconsistent_group_protocol"
	CodeIllegalGeneration         Code = "illegal_generation"
	CodeRebalanceInProgress       Code = "rebalance_in_progress"
	CodeFencedInstanceID          Code = "fenced_instance_id"
	CodeInvalidSessionTimeout     Code = "invalid_session_timeout"
	CodeGroupSubscribed           Code = "group_subscribed_to_topic"
	// Share groups (share.go).
	CodeGroupTypeMismatch  Code = "group_type_mismatch"
	CodeInvalidRecordState Code = "invalid_record_state"
	CodeAckOutOfRange      Code = "ack_out_of_range"
	// CodeAcquisitionNotHeld: an HTTP acknowledgement's acquisition no longer holds its
	// records (lock passed, delivered again, acknowledged already) or is another's.
	CodeAcquisitionNotHeld Code = "acquisition_not_held"
	// Quotas: a caller over its controller_mutation_rate (or, over HTTP, owing more
	// than the bounded delay for its byte rate) waits Details["retry_after_ms"]; a
	// creation past its principal's topic_count or connector_count is refused.
	CodeThrottled     Code = "throttling_quota_exceeded"
	CodeQuotaExceeded Code = "quota_exceeded"
	// Push subscriptions: a share group without one; a target the node's egress
	// policy (--push-allow, --push-allow-insecure) refuses.
	CodePushNotFound         Code = "push_subscription_not_found"
	CodePushTargetNotAllowed Code = "push_target_not_allowed"
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
	CodeMemoryExhausted:      true,
	CodeThrottled:            true,
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
		CodeOutOfOrderSequence, CodeUnknownProducer, CodeInvalidTransactionalID, CodeStaleGeneration,
		CodeMemoryExhausted, CodeForbidden, CodeKeyNotFound, CodeCredentialNotFound, CodeInconsistentGroupProtocol,
		CodeIllegalGeneration, CodeRebalanceInProgress, CodeFencedInstanceID, CodeInvalidSessionTimeout,
		CodeGroupSubscribed, CodeInvalidTxnState, CodeInvalidProducerIDMapping, CodeInvalidTransactionTimeout,
		CodeConnectorNotFound, CodeConnectorExists, CodeTaskNotFound, CodeConnectorNotStopped,
		CodeSchemaNotFound, CodeInvalidSchema, CodeIncompatibleSchema, CodeSchemaValidationFailed,
		CodeGroupTypeMismatch, CodeInvalidRecordState, CodeAckOutOfRange, CodeAcquisitionNotHeld,
		CodeThrottled, CodeQuotaExceeded, CodePushNotFound, CodePushTargetNotAllowed,
	}
}

// Error is every error the core's calls return: a refusal of the request, or a failure
// of what serves it.
type Error struct {
	Code Code
	// Message says what was wrong, for people, in the terms they used: topic and group
	// names, partitions, offsets and the range allowed, once. Never the catalog's
	// backend, its ids or the layers an error went through: those are in Err.
	Message string
	// Hint, when set, says how to fix it in the HTTP API's terms (member_epoch, a
	// producer id to initialise again): a front end that speaks other terms (the CLI,
	// Kafka) leaves it out.
	Hint string
	// Details name what the message is about, for programs: "record" (an index),
	// "field", "config", "partitions", "expected_sequence", ... The HTTP API adds them to
	// its problem bodies.
	Details map[string]any
	// Unexpected marks a failure the front end should log (an outage or a bug), with Op
	// (what was being done) and Err (the cause): the caller is told only that it
	// failed.
	Unexpected bool
	Op         string
	// Err is the cause as the layers below reported it, for the node's log: on a
	// refusal too (the catalog's own words, with what each layer was doing).
	Err error
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

// hint sets the API-level advice.
func (e *Error) hint(format string, args ...any) *Error {
	e.Hint = fmt.Sprintf(format, args...)
	return e
}

// cause keeps the error a refusal was made from, for the log.
func (e *Error) cause(err error) *Error {
	e.Err = err
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

// subject is what a call was about, as its caller named it: the words a refusal needs
// that the catalog, which works with ids, may not have.
type subject struct {
	topic        string
	partition    int32
	hasPartition bool
	group        string
	member       string
}

func onTopic(name string) subject { return subject{topic: name} }

func onPartition(name string, p int32) subject {
	return subject{topic: name, partition: p, hasPartition: true}
}

func onGroup(group, member string) subject { return subject{group: group, member: member} }

func subjectOf(about []subject) subject {
	if len(about) > 0 {
		return about[0]
	}
	return subject{}
}

// topicWords names s's topic for a message: `topic "orders"`, or "the topic".
func (s subject) topicWords() string {
	if s.topic == "" {
		return "the topic"
	}
	return fmt.Sprintf("topic %q", s.topic)
}

// ruleText is what the catalog said where it checked the rule it refuses by: the error
// that wraps the sentinel directly, written fmt.Errorf("%w: detail", ErrX) by the
// catalog's convention, without what outer layers added for their logs ("sqlite:
// delete topic ..."). "" when the refusal came without words of its own, or with more
// than one cause.
func ruleText(err, sentinel error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) != sentinel {
			continue
		}
		msg := e.Error()
		if rest, ok := strings.CutPrefix(msg, sentinel.Error()+": "); ok && rest != "" {
			return msg
		}
		return ""
	}
	return ""
}

// say is the rule's own words when it has them, else the core's.
func say(err, sentinel error, format string, args ...any) string {
	if t := ruleText(err, sentinel); t != "" {
		return t
	}
	return fmt.Sprintf(format, args...)
}

// catalogError maps a catalog error, worded for what the call was about; unknown
// errors (the database is down, a bug) become CodeCatalogUnavailable, to be logged.
func catalogError(op string, err error, about ...subject) *Error {
	s := subjectOf(about)
	var e *Error
	var ce *catalog.ConfigError
	var re *catalog.OffsetRangeError
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, catalog.ErrTopicNotFound):
		return newError(CodeTopicNotFound, "%s does not exist", s.topicWords()).cause(err)
	case errors.Is(err, catalog.ErrTopicExists):
		return newError(CodeTopicExists, "%s already exists", s.topicWords()).cause(err)
	case errors.Is(err, catalog.ErrInvalidTopicName):
		return newError(CodeInvalidTopicName, "%s", say(err, catalog.ErrInvalidTopicName, "the topic name is not valid")).cause(err)
	case errors.Is(err, catalog.ErrInvalidPartitions):
		return newError(CodeInvalidPartitionCount, "%s", say(err, catalog.ErrInvalidPartitions, "the partition count of %s is not valid", s.topicWords())).cause(err)
	case errors.As(err, &ce):
		return newError(CodeInvalidConfig, "%s", ce.Error()).with("config", ce.Key).cause(err)
	case errors.Is(err, catalog.ErrInvalidConfig):
		return newError(CodeInvalidConfig, "%s", say(err, catalog.ErrInvalidConfig, "a config of %s is not valid", s.topicWords())).cause(err)
	case errors.Is(err, catalog.ErrPartitionOutOfRange):
		if s.hasPartition {
			return newError(CodePartitionOutOfRange, "%s has no partition %d", s.topicWords(), s.partition).cause(err)
		}
		return newError(CodePartitionOutOfRange, "%s has no such partition", s.topicWords()).cause(err)
	case errors.As(err, &re):
		return offsetRange(s, re.Offset, re.LogStartOffset, re.LogStartOffset, re.HighWatermark).cause(err)
	case errors.Is(err, catalog.ErrOffsetOutOfRange):
		return newError(CodeOffsetOutOfRange, "the offset is outside what %s holds", s.partitionWords()).cause(err)
	}
	return newError(CodeCatalogUnavailable, "%s: the catalog did not answer; retry", op).unexpected(op, err)
}

// partitionWords names s's partition: `partition 2 of topic "orders"`.
func (s subject) partitionWords() string {
	if !s.hasPartition {
		return s.topicWords()
	}
	return fmt.Sprintf("partition %d of %s", s.partition, s.topicWords())
}

// offsetRange says where offset is against what a partition holds, and the offsets
// the call takes: from low (the log start for a fetch, 0 for a delete) to hw.
func offsetRange(s subject, offset, low, logStart, hw int64) *Error {
	where, bound := "beyond the high watermark", hw
	if offset < logStart {
		where, bound = "below the log start offset", logStart
	}
	return newError(CodeOffsetOutOfRange, "offset %d is %s %d of %s: use an offset from %d to %d",
		offset, where, bound, s.partitionWords(), low, hw).
		with("log_start_offset", logStart).with("high_watermark", hw)
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

// groupError maps a group error, worded for the group and member the call named. The
// catalog's rule text is kept where it names what was wrong (an epoch, a partition);
// what to do about it in API terms goes to the hint.
func groupError(op string, err error, about ...subject) *Error {
	s := subjectOf(about)
	group := fmt.Sprintf("group %q", s.group)
	if s.group == "" {
		group = "the group"
	}
	switch {
	case errors.Is(err, catalog.ErrGroupNotFound):
		return newError(CodeGroupNotFound, "%s does not exist", group).cause(err)
	case errors.Is(err, catalog.ErrGroupNotEmpty):
		e := newError(CodeGroupNotEmpty, "%s has live members: stop its consumers first", group).cause(err)
		if op == "commit offsets" || op == "produce" {
			e = newError(CodeGroupNotEmpty, "%s has live members", group).cause(err).
				hint("commit as a member, with member_id and member_epoch")
		}
		return e
	case errors.Is(err, catalog.ErrUnknownMember):
		if s.member == "" {
			return newError(CodeUnknownMember, "the member is not a live member of %s (its session may have expired)", group).cause(err)
		}
		return newError(CodeUnknownMember, "%q is not a live member of %s (its session may have expired)", s.member, group).cause(err).
			hint("join again with member_epoch 0")
	}
	for _, g := range groupCodes {
		if errors.Is(err, g.err) {
			return newError(g.code, "%s", say(err, g.err, "%s", g.err.Error())).cause(err)
		}
	}
	return catalogError(op, err, s)
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
		e := newError(CodeOutOfOrderSequence, "partition %d: sequence %d, expected %d", se.Partition, se.Got, se.Expected).cause(err).
			with("expected_sequence", se.Expected).with("sequence", se.Got).with("partition", se.Partition)
		if name, ok := names[se.TopicID]; ok {
			e.Message = fmt.Sprintf("partition %d of topic %q: sequence %d, expected %d", se.Partition, name, se.Got, se.Expected)
			e = e.with("topic", name)
		}
		return e, true
	case errors.Is(err, catalog.ErrProducerFenced):
		return newError(CodeProducerFenced, "a newer instance with this transactional id has initialised: this producer is fenced").cause(err).
			hint("stop this instance"), true
	case errors.Is(err, catalog.ErrUnknownProducer):
		return newError(CodeUnknownProducer, "the producer id was never handed out or has expired").cause(err).
			hint("initialise the producer again (POST /v1/producers)"), true
	case errors.Is(err, catalog.ErrInvalidTransactionalID):
		return newError(CodeInvalidTransactionalID, "%s", say(err, catalog.ErrInvalidTransactionalID, "the transactional id is not valid")).cause(err), true
	case errors.Is(err, catalog.ErrInvalidTxnState):
		return newError(CodeInvalidTxnState, "%s", say(err, catalog.ErrInvalidTxnState, "the request does not fit the transaction's state")).cause(err), true
	case errors.Is(err, catalog.ErrInvalidProducerIDMapping):
		return newError(CodeInvalidProducerIDMapping, "%s", say(err, catalog.ErrInvalidProducerIDMapping, "the producer id is not the transactional id's")).cause(err).
			hint("initialise the transactional producer again"), true
	case errors.Is(err, catalog.ErrInvalidTxnTimeout):
		return newError(CodeInvalidTransactionTimeout, "%s", say(err, catalog.ErrInvalidTxnTimeout, "the transaction timeout is out of range")).cause(err), true
	}
	return nil, false
}

// produceError maps a writer.Produce error: the catalog's refusals of the request
// (producer, group offsets, a topic deleted or a partition beyond the count since it
// was cached), then the writer's own.
func produceError(err error, names map[int64]string, about ...subject) *Error {
	if e, ok := producerError(err, names); ok {
		return e
	}
	if e, ok := connectError(err); ok {
		return e
	}
	switch {
	case isGroupError(err):
		return groupError("produce", err, about...)
	case errors.Is(err, catalog.ErrTopicNotFound),
		errors.Is(err, catalog.ErrPartitionOutOfRange):
		return catalogError("produce", err, about...)
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
		return newError(CodeInvalidRequest, "%s", say(err, writer.ErrInvalid, "the request is not valid")).cause(err)
	}
	return newError(CodeInternal, "produce: unexpected error").unexpected("produce", err)
}

// fetchError maps a reader error of a fetch from the partition the call named.
func fetchError(err error, about ...subject) *Error {
	s := subjectOf(about)
	var oor *reader.OutOfRangeError
	switch {
	case errors.As(err, &oor):
		return offsetRange(s, oor.Offset, oor.LogStartOffset, oor.LogStartOffset, oor.HighWatermark).cause(err)
	case errors.Is(err, reader.ErrOffsetOutOfRange):
		return catalogError("fetch", err, s)
	case errors.Is(err, reader.ErrInvalidFetch):
		// The reader's own words name it ("reader: ..."); the limits are the caller's.
		return newError(CodeInvalidParameter, "max_records, max_bytes and wait_ms must not be negative").cause(err)
	case errors.Is(err, catalog.ErrTopicNotFound),
		errors.Is(err, catalog.ErrPartitionOutOfRange),
		errors.Is(err, catalog.ErrOffsetOutOfRange):
		return catalogError("fetch", err, s)
	case errors.Is(err, reader.ErrStoreUnavailable):
		return newError(CodeStoreUnavailable, "fetch: the object store did not answer; retry").unexpected("fetch", err)
	case errors.Is(err, segment.ErrCorrupt):
		// The reader has already dropped the bad bytes and read them again once: a read
		// corrupted in transit is cured by a retry, a damaged object is not, and the
		// error line (naming the object) is how an operator learns which.
		return newError(CodeStoreUnavailable, "fetch: the object store returned data that fails its checksums; retry (if it persists, the object is damaged: see the node's log)").unexpected("fetch", err)
	case errors.Is(err, reader.ErrCatalogUnavailable):
		return newError(CodeCatalogUnavailable, "fetch: the catalog did not answer; retry").unexpected("fetch", err)
	case errors.Is(err, reader.ErrMemoryExhausted):
		return newError(CodeMemoryExhausted, "fetch: this node's memory budget is spent on answers still being sent; retry after a short wait, or on another node")
	}
	return newError(CodeInternal, "fetch: unexpected error").unexpected("fetch", err)
}
