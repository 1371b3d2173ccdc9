package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
)

// kafkaCodes maps each of the core's error codes to the Kafka error code a client acts
// on. The retriable refusals are chosen for what every client does with them:
// NOT_ENOUGH_REPLICAS (nothing was written, retry), REQUEST_TIMED_OUT (the outcome is
// unknown: retry, which an idempotent producer deduplicates), KAFKA_STORAGE_ERROR (the
// store or the catalog did not answer), NOT_LEADER_OR_FOLLOWER (this node is stopping:
// refresh the metadata, which soon no longer lists it, and go elsewhere).
var kafkaCodes = map[broker.Code]*kerr.Error{
	broker.CodeInvalidRequest:            kerr.InvalidRequest,
	broker.CodeRecordTooLarge:            kerr.MessageTooLarge,
	broker.CodeRequestTooLarge:           kerr.MessageTooLarge,
	broker.CodeEmptyBatch:                kerr.CorruptMessage,
	broker.CodeTooManyRecords:            kerr.RecordListTooLarge,
	broker.CodeInvalidRecord:             kerr.CorruptMessage, // but see kafkaError: a missing key
	broker.CodeTimestampOutOfRange:       kerr.InvalidTimestamp,
	broker.CodeInvalidTopicName:          kerr.InvalidTopicException,
	broker.CodeInvalidPartitionCount:     kerr.InvalidPartitions,
	broker.CodeInvalidConfig:             kerr.InvalidConfig,
	broker.CodeInvalidPartition:          kerr.UnknownTopicOrPartition,
	broker.CodeInvalidOffset:             kerr.OffsetOutOfRange,
	broker.CodeInvalidTimestamp:          kerr.InvalidRequest,
	broker.CodeInvalidParameter:          kerr.InvalidRequest,
	broker.CodeTopicNotFound:             kerr.UnknownTopicOrPartition,
	broker.CodePartitionOutOfRange:       kerr.UnknownTopicOrPartition,
	broker.CodeTopicExists:               kerr.TopicAlreadyExists,
	broker.CodeOffsetOutOfRange:          kerr.OffsetOutOfRange,
	broker.CodeBufferFull:                kerr.NotEnoughReplicas,
	broker.CodeStoreUnavailable:          kerr.KafkaStorageError,
	broker.CodeMemoryExhausted:           kerr.RequestTimedOut, // retriable: the node's memory budget is spent for now
	broker.CodeCommitFailed:              kerr.NotEnoughReplicas,
	broker.CodeCommitOutcomeUnknown:      kerr.RequestTimedOut,
	broker.CodeShuttingDown:              kerr.NotLeaderForPartition,
	broker.CodeCatalogUnavailable:        kerr.KafkaStorageError,
	broker.CodeRoleUnavailable:           kerr.NotLeaderForPartition,
	broker.CodeInternal:                  kerr.UnknownServerError,
	broker.CodeGroupNotFound:             kerr.GroupIDNotFound,
	broker.CodeInvalidGroupName:          kerr.InvalidGroupID,
	broker.CodeUnknownMember:             kerr.UnknownMemberID,
	broker.CodeStaleMemberEpoch:          kerr.IllegalGeneration,
	broker.CodeNotOwner:                  kerr.IllegalGeneration,
	broker.CodeGroupNotEmpty:             kerr.UnknownMemberID, // a commit from outside a group with members, as Kafka answers it
	broker.CodeProducerFenced:            kerr.InvalidProducerEpoch,
	broker.CodeStaleGeneration:           kerr.ProducerFenced, // only the connect runtime writes under a generation; a stale one is fenced
	broker.CodeOutOfOrderSequence:        kerr.OutOfOrderSequenceNumber,
	broker.CodeUnknownProducer:           kerr.UnknownProducerID,
	broker.CodeInvalidTransactionalID:    kerr.InvalidRequest,
	broker.CodeForbidden:                 kerr.TopicAuthorizationFailed, // by resource: see authorizationCodes
	broker.CodeKeyNotFound:               kerr.InvalidRequest,
	broker.CodeCredentialNotFound:        kerr.ResourceNotFound,
	broker.CodeInconsistentGroupProtocol: kerr.InconsistentGroupProtocol,
	broker.CodeIllegalGeneration:         kerr.IllegalGeneration,
	broker.CodeRebalanceInProgress:       kerr.RebalanceInProgress,
	broker.CodeFencedInstanceID:          kerr.FencedInstanceID,
	broker.CodeInvalidSessionTimeout:     kerr.InvalidSessionTimeout,
	broker.CodeGroupSubscribed:           kerr.GroupSubscribedToTopic,
	broker.CodeGroupTypeMismatch:         kerr.GroupIDNotFound, // as Kafka answers a group id of another type
	broker.CodeInvalidRecordState:        kerr.InvalidRecordState,
	broker.CodeAckOutOfRange:             kerr.InvalidRequest,
	broker.CodeAcquisitionNotHeld:        kerr.InvalidRecordState, // HTTP only: Kafka acknowledges what the member holds now
	broker.CodeInvalidTxnState:           kerr.InvalidTxnState,
	broker.CodeInvalidProducerIDMapping:  kerr.InvalidProducerIDMapping,
	broker.CodeInvalidTransactionTimeout: kerr.InvalidTransactionTimeout,
	// Connector administration is not Kafka's: the Kafka listener never calls it.
	broker.CodeConnectorNotFound:   kerr.ResourceNotFound,
	broker.CodeConnectorExists:     kerr.InvalidRequest,
	broker.CodeTaskNotFound:        kerr.ResourceNotFound,
	broker.CodeConnectorNotStopped: kerr.InvalidRequest,
	// Push subscriptions are not Kafka's: the Kafka listener never calls them.
	broker.CodePushNotFound:         kerr.ResourceNotFound,
	broker.CodePushTargetNotAllowed: kerr.InvalidRequest,
	// The registry's refusals reach Kafka clients only as validation's.
	broker.CodeSchemaNotFound:         kerr.InvalidRequest,
	broker.CodeInvalidSchema:          kerr.InvalidRequest,
	broker.CodeIncompatibleSchema:     kerr.InvalidRequest,
	broker.CodeSchemaValidationFailed: kerr.InvalidRecord,
	broker.CodeThrottled:              kerr.ThrottlingQuotaExceeded,
	broker.CodeQuotaExceeded:          kerr.PolicyViolation, // Kafka has no count caps: a broker policy refused the creation
}

// authorizationCodes are the refusals of CodeForbidden by the kind of resource refused.
var authorizationCodes = map[string]*kerr.Error{
	acl.TypeTopic.String():           kerr.TopicAuthorizationFailed,
	acl.TypeGroup.String():           kerr.GroupAuthorizationFailed,
	acl.TypeCluster.String():         kerr.ClusterAuthorizationFailed,
	acl.TypeTransactionalID.String(): kerr.TransactionalIDAuthorizationFailed,
}

// kafkaError maps an error of the core to a Kafka error code and a message for the
// responses that carry one: the one place the core's vocabulary becomes Kafka's. An
// error that is not the core's (a bug) is UNKNOWN_SERVER_ERROR. Failures the core marks
// unexpected are logged.
func (s *Server) kafkaError(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	var e *broker.Error
	if !errors.As(err, &e) {
		s.log.Error("kafka: unexpected error", "err", err)
		msg := "unexpected server error"
		return kerr.UnknownServerError.Code, &msg
	}
	if e.Unexpected {
		s.log.Warn("kafka: request failed", "op", e.Op, "err", e.Err, "code", e.Code)
	} else {
		s.log.Debug("kafka: refused", "code", e.Code, "msg", e.Message)
	}
	msg := e.Message
	ke, ok := kafkaCodes[e.Code]
	switch {
	case !ok:
		s.log.Error("kafka: core error code without a Kafka code", "code", e.Code, "msg", e.Message)
		ke = kerr.UnknownServerError
	case e.Code == broker.CodeForbidden:
		if typ, _ := e.Details["resource_type"].(string); authorizationCodes[typ] != nil {
			ke = authorizationCodes[typ]
		}
	case e.Code == broker.CodeInvalidRecord && e.Details["field"] == "key":
		// A record the topic's rules refuse (a compacted topic needs keys) is not
		// corrupt.
		ke = kerr.InvalidRecord
	}
	return ke.Code, &msg
}

// code is kafkaError without the message.
func (s *Server) code(err error) int16 {
	c, _ := s.kafkaError(err)
	return c
}

// refusedRecord names the record the core refused a partition's batches for (schema
// validation names one), as Kafka's ProduceResponse does since v8: its index among the
// request's records, with the reason.
func refusedRecord(err error, msg *string) []kmsg.ProduceResponseTopicPartitionErrorRecord {
	var e *broker.Error
	if !errors.As(err, &e) {
		return nil
	}
	i, ok := e.Details["record"].(int)
	if !ok {
		return nil
	}
	r := kmsg.NewProduceResponseTopicPartitionErrorRecord()
	r.RelativeOffset, r.ErrorMessage = int32(i), msg
	return []kmsg.ProduceResponseTopicPartitionErrorRecord{r}
}
