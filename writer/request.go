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
	Records []Record
	// Raw, instead of Records, holds the request's records as Kafka v2 record batches
	// for one partition, stored as they are rather than re-encoded (see RawBatches).
	Raw *RawBatches
	// Compression applies to Records; CompressionNone means Config.Compression. A Raw
	// request leaves it at CompressionNone: each batch carries its own codec.
	Compression segment.Compression
	// Producer and Sequences make the request idempotent (exactly-once issue).
	Producer *catalog.Producer
	// Sequences holds the base sequence per (topic, partition) for idempotent produce.
	Sequences map[TopicPartition]int32
	// GroupOffsets, when set, commits consumer-group offsets in the same catalog
	// transaction as the records: both or neither (catalog.Request.GroupOffsets).
	GroupOffsets *catalog.OffsetCommit
	// Source, when set, commits a connector task's source offsets in the same catalog
	// transaction as the records, checked against the task's generation: both or
	// neither (catalog.Request.Source).
	Source *catalog.SourceCommit
	// Txn, when set, makes the request a transactional producer's (Kafka's
	// transactional batches, catalog.Request.Txn): it needs Producer, and its batches
	// carry the transactional attribute (a Raw request's must already).
	Txn *catalog.TxnWrite
	// ShareDLQ, when set, makes the records dead-letter copies of a share-partition's
	// pending records: the catalog archives those in the same transaction, or refuses
	// the request (catalog.Request.ShareDLQ). It carries nothing else.
	ShareDLQ *catalog.ShareDLQCommit
	// Principal names who sent the request, for per-topic usage (Config.Usage);
	// nothing else reads it.
	Principal string
}

// TopicUsage is one (topic, principal)'s part of a flush (Config.Usage).
type TopicUsage struct {
	TopicID   int64
	Principal string
	// Share is the part of the flush's object — and so of its PUT and its commit —
	// that was this topic's and principal's batches, by bytes: a flush's shares sum to 1.
	Share float64
	// Bytes and Records are the batch bytes and records that committed (duplicates of
	// an idempotent producer's earlier requests and refused requests excluded).
	Bytes, Records int64
	// Puts is the PUT requests the flush's object took: 1, or 2 when it was hedged
	// (both are billed). A topic's part of them is Share × Puts.
	Puts int
}

// Counts is u as the usage counters count it: its bytes and records in, and its share
// of the flush's PUT requests and of its catalog commit.
func (u TopicUsage) Counts() catalog.UsageCounts {
	return catalog.UsageCounts{BytesIn: u.Bytes, RecordsIn: u.Records, PutRequests: u.Share * float64(u.Puts), Commits: u.Share}
}

// RawBatches is one partition's records already laid out as Kafka v2 record batches,
// as a Kafka client sends them. The writer copies the batches into the segment object
// back to back, in order, as one (request, partition) run under one catalog batch,
// writing only their base offsets (0) and partition leader epochs (-1), which the CRC
// does not cover; the reader, the compactor and the footer see what encoding their
// records would have given (the compressed bytes of a compressed batch aside).
//
// So every batch must be one the writer would have written for its records: the
// caller validates each with segment.ScanBatch and passes only batches it found
// Canonical, with CreateTime (the writer stamps LogAppendTime records itself, so those
// go as Records), and with producer fields that are the request's: -1, -1, -1 without
// Producer; otherwise Producer's id and epoch, the first batch's base sequence the
// partition's entry in Sequences and each next one following on from the records
// before it. The writer re-checks the headers and refuses anything else with
// ErrInvalid; it does not walk the records again. When Config.Compression is set and a
// batch is uncompressed, the writer decodes the batches and encodes their records with
// that codec, as it would have encoded them had they come as Records.
type RawBatches struct {
	TopicID   int64
	Partition int32
	Batches   [][]byte               // each exactly one batch
	Summaries []segment.BatchSummary // Summaries[i] is what segment.ScanBatch said of Batches[i]
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

// Response answers a Request: Records[i] is for Request.Records[i] (a Raw request: for
// the i-th record of its batches, in order).
type Response struct {
	Records []RecordResult
	// Duplicate: the request is an idempotent retry of one committed before; Records
	// hold the original offsets and nothing new was written.
	Duplicate bool
	// LogAppendTime is the time (unix ms) the writer stamped on the request's
	// LogAppendTime records: every one of a flush gets the same. 0 when the request has
	// none, and for a Duplicate (the original's flush stamped them).
	LogAppendTime int64
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
