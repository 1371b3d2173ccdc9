package api

import v1 "github.com/strata-io/strata/api/v1"

// The wire types, under the names the API's tests knew them by before they moved to
// package v1.
type (
	topicJSON           = v1.Topic
	partitionJSON       = v1.Partition
	topicPartitionsJSON = v1.TopicPartitions
	offsetJSON          = v1.CommitOffset
	groupJSON           = v1.Group
	groupSummaryJSON    = v1.GroupSummary
	produceRequest      = v1.ProduceRequest
)

const problemTypePrefix = v1.ProblemTypePrefix
