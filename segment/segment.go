// Package segment owns the object format: immutable objects holding runs of Kafka v2
// record batches for many partitions, followed by a versioned footer that makes every
// object self-describing. It is pure: no I/O, no catalog, no object store.
//
// Layout of an object:
//
//	batch 0 | batch 1 | ... | batch n-1 | footer | trailer
//
// Batches are grouped by (TopicID, Partition), ascending, keeping the caller's order
// within a partition, so one partition's batches of one flush form one contiguous chunk.
// Writer objects carry base offset 0 in every batch (offsets are unknown at upload
// time); the reader rewrites them from the catalog's chunk rows. Compactor objects carry
// real offsets and a sparse offset index.
//
// The footer lists every batch (BatchInfo) and the index, and ends in a CRC-32C; the
// trailer (TrailerSize bytes) gives the footer's length, so a reader can GET the last
// TrailerSize bytes, then the footer by range (ParseTrailer, DecodeFooter), or decode
// both from a whole object (ReadFooter; Verify also checks every batch against it).
// A reader serving a chunk splits its byte range into batches (SplitBatches, which
// checks each CRC), rewrites their base offsets (ParseBatchHeader, SetBaseOffset) and
// serves them raw, or decodes the records (DecodeBatch, DecodeBatches).
//
// A batch that arrives already encoded, as a Kafka client laid it out, is validated by
// ScanBatch (ScanBatches) without decoding its records and, when it is laid out as
// Encode would lay it out (BatchSummary.Canonical), stored as it came (Batch.Raw)
// rather than re-encoded.
//
// Every decoder treats its input as hostile: corrupt or truncated input is an error
// wrapping ErrCorrupt, and decompression is bounded by MaxBatchBytes.
package segment

import (
	"errors"
)

// Compression is the Kafka attributes codec (bits 0-2).
type Compression int8

const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// Header is one record header. Kafka header values may be null (nil).
type Header struct {
	Key   string
	Value []byte
}

// Record is one record as produced. A nil Key is a null key; a nil Value is a
// tombstone; both are kept distinct from empty slices.
type Record struct {
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp int64 // unix milliseconds
	// OffsetDelta is the record's offset relative to its batch's base offset. When every
	// record of a batch has OffsetDelta 0, Encode assigns 0..n-1; otherwise the deltas
	// are used as given (key-compacted batches have gaps) and must strictly increase.
	OffsetDelta int32
}

// Batch is one Kafka v2 record batch to encode: one (request, partition) of a flush.
type Batch struct {
	TopicID       int64
	Partition     int32
	BaseOffset    int64 // 0 for writer objects; the real offset in compactor objects
	ProducerID    int64 // -1 when not idempotent
	ProducerEpoch int16 // -1 when not idempotent
	BaseSequence  int32 // -1 when not idempotent
	Compression   Compression
	LogAppendTime bool // timestamp type bit: the writer stamped every record
	Transactional bool // a transactional producer's batch (Kafka's attribute bit 4)
	Records       []Record
	// Raw, instead of Records, is the batch already encoded: exactly one Kafka v2
	// batch, which Encode copies, writing BaseOffset and a partition leader epoch of -1
	// into the copy (neither is under the CRC), and whose footer entry it reads from
	// the header. Encode checks the header and the CRC, and that ProducerID,
	// ProducerEpoch, BaseSequence, Compression, LogAppendTime and Transactional are the
	// header's; it
	// does not walk the records again (ScanBatch does). A batch ScanBatch found
	// Canonical gives, footer entry included, what encoding its records gives (the
	// bytes of a compressed batch aside).
	Raw []byte
}

// BatchInfo is the footer's entry for one batch.
type BatchInfo struct {
	TopicID         int64
	Partition       int32
	Pos             int64 // byte offset of the batch in the object
	Len             int64 // byte length of the batch
	Records         int32 // number of records
	BaseOffset      int64 // as stored in the object (0 for writer objects)
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	CRC             uint32 // the batch's CRC-32C, as in its header
}

// IndexEntry maps an offset to the byte position of the batch that holds it, in
// compactor objects whose batches carry real offsets.
type IndexEntry struct {
	Offset int64
	Pos    int64
}

// Footer describes a whole object.
type Footer struct {
	Version uint16
	Batches []BatchInfo  // in object order
	Index   []IndexEntry // sparse offset index; empty for writer objects
}

// DecodedRecord is a record read back with its absolute offset.
type DecodedRecord struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []Header
}

// DecodedBatch is a record batch read back.
type DecodedBatch struct {
	BaseOffset      int64
	LastOffsetDelta int32
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	Compression     Compression
	LogAppendTime   bool
	Transactional   bool
	FirstTimestamp  int64
	MaxTimestamp    int64
	Records         []DecodedRecord
}

// Errors a decoder returns; every corrupt or truncated input maps to ErrCorrupt (wrapped
// with detail), never to wrong data or a panic.
var (
	ErrCorrupt = errors.New("segment: corrupt data")
	ErrInvalid = errors.New("segment: invalid input")
)
