// Package writer is the write role: it buffers produce requests across all partitions
// and requests, flushes them as one segment object (one PUT) and one catalog commit (one
// transaction), and answers every request with its offsets or its own error.
package writer

import (
	"errors"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// Record is one record to produce. Partition -1 lets the partitioner choose: murmur2
// of the key bytes when Key is not nil, else sticky per flush.
type Record struct {
	TopicID    int64
	Partitions int32 // the topic's partition count, as the caller resolved it
	Partition  int32
	// LogAppendTime makes the writer stamp the record with its clock at flush time
	// (topic config message.timestamp.type=LogAppendTime).
	LogAppendTime bool
	segment.Record
}

// Request is one produce request. It commits atomically: all records or none.
type Request struct {
	Records     []Record
	Compression segment.Compression
	// Producer and Sequences make the request idempotent (exactly-once issue).
	Producer *catalog.Producer
	// Sequences holds the base sequence per (topic, partition) for idempotent produce.
	Sequences map[TopicPartition]int32
	// GroupOffsets, when set, commits consumer-group offsets in the same catalog
	// transaction as the records: both or neither (catalog.Request.GroupOffsets).
	GroupOffsets *catalog.OffsetCommit
}

// TopicPartition names a partition.
type TopicPartition struct {
	TopicID   int64
	Partition int32
}

// RecordResult is where one record landed.
type RecordResult struct {
	Partition int32
	Offset    int64
}

// Response answers a Request: Records[i] is for Request.Records[i].
type Response struct {
	Records []RecordResult
	// Duplicate: the request is an idempotent retry of one committed before; Records
	// hold the original offsets and nothing new was written.
	Duplicate bool
}

var (
	// ErrBufferFull: the buffer is at its cap; retry after a short wait (back-pressure).
	ErrBufferFull = errors.New("writer: buffer full")
	// ErrClosed: the writer is shutting down.
	ErrClosed = errors.New("writer: closed")
	// ErrStore: the segment could not be stored; nothing was committed; retryable.
	ErrStore = errors.New("writer: object store unavailable")
	// ErrCommit: the commit failed or was aborted; nothing was committed; retryable.
	// When the error also matches ErrOutcomeUnknown, the commit could not be settled in
	// time and may have landed: retry only idempotent requests blindly.
	ErrCommit = errors.New("writer: commit failed")
	// ErrTooLarge: one request exceeds the flush size.
	ErrTooLarge = errors.New("writer: request too large")
	// ErrInvalid: the request is malformed (no records, a bad partition, a missing
	// sequence, ...); the wrapped message says what to fix. Not retryable.
	ErrInvalid = errors.New("writer: invalid request")
	// ErrOutcomeUnknown accompanies ErrCommit when a commit's outcome stayed unknown:
	// the catalog could not be reached to settle it within Config.SettleTimeout.
	ErrOutcomeUnknown = errors.New("writer: commit outcome unknown")
)
