// Package reader is the read role: it serves fetches from segment objects through a
// block cache, with long-polls woken by commit notifications or polling.
package reader

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
	"github.com/strata-io/strata/segment"
)

// Fetch asks for records of one partition from Offset.
//
// MaxRecords and MaxBytes bound the answer, except that a fetch returns at least one
// record (or, for FetchRaw, one batch) whenever one is available, as Kafka does, so a
// record larger than MaxBytes can still be consumed. Fetch counts a record's key,
// value and header bytes; FetchRaw counts whole batches. Values above the Config caps
// are clamped; negative values are ErrInvalidFetch.
type Fetch struct {
	TopicID    int64
	Partition  int32
	Offset     int64
	MaxRecords int           // 0: a default
	MaxBytes   int64         // 0: a default
	Wait       time.Duration // long-poll: wait up to this long for data at Offset
	// Memory, when set, is where the fetch reserves the bytes it allocates and returns
	// (against the node's budget): nothing while it waits; then each batch before it is
	// taken, the first waiting up to Config.MemoryWait (ErrMemoryExhausted after), a
	// later one ending the fetch early when there is no room. The caller releases the
	// hold once it has written the response: until then the bytes are in use, whether
	// the result's own or the cache's (an evicted block lives on while a result refers
	// to it).
	Memory *membudget.Hold
	// Isolation: ReadCommitted stops at the partition's last stable offset, where
	// ReadUncommitted (the zero value) reads to the high watermark.
	Isolation Isolation
	// Markers asks for the transaction markers as control batches (FetchRaw, for Kafka
	// clients, which drop aborted records themselves from RawResult.Aborted). Without
	// it a fetch has no control batches, and under ReadCommitted no batch of an
	// aborted transaction: their offsets are skipped.
	Markers bool
}

// Isolation is a fetch's isolation level (Kafka's isolation_level).
type Isolation int8

const (
	ReadUncommitted Isolation = 0
	ReadCommitted   Isolation = 1
)

// Result answers a Fetch. Records is empty when a long-poll's Wait elapsed without
// data; NextOffset is then the requested offset.
type Result struct {
	Records          []segment.DecodedRecord
	NextOffset       int64
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// RawResult answers FetchRaw: whole Kafka v2 record batches, byte for byte as stored
// except for their base offsets, which carry the real offsets. The first batch may
// start below the requested offset (Kafka clients skip those records themselves).
// Each batch is a private copy.
type RawResult struct {
	Batches          [][]byte
	NextOffset       int64
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Aborted lists, with Fetch.Markers, the aborted transactions whose records the
	// batches may hold (Kafka's AbortedTransactions), by abort marker offset.
	Aborted []catalog.AbortedTxn
}

// SharedRawResult answers FetchRawShared: RawResult's batches, shared with the cache
// (read-only), their first 8 bytes as stored; BaseOffsets[i] is Batches[i]'s real base
// offset.
type SharedRawResult struct {
	RawResult
	BaseOffsets []int64
}

// ErrInvalidFetch: a Fetch with a negative limit or wait.
var ErrInvalidFetch = errors.New("reader: invalid fetch")

// ErrMemoryExhausted (wrapped, with membudget.ErrExhausted or ErrTooLarge): the node's
// memory budget had no room for the fetch within Config.MemoryWait; retry later.
var ErrMemoryExhausted = errors.New("reader: memory budget exhausted")

// OutOfRangeError: Offset is below the log start or above the high watermark.
type OutOfRangeError struct {
	Offset, LogStartOffset, HighWatermark int64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("offset %d out of range [%d, %d]", e.Offset, e.LogStartOffset, e.HighWatermark)
}

// ErrOffsetOutOfRange matches *OutOfRangeError with errors.Is.
var ErrOffsetOutOfRange = errors.New("offset out of range")

// ErrStoreUnavailable and ErrCatalogUnavailable mark (wrapped) a fetch that failed
// because the object store or the catalog did not answer: nothing is wrong with the
// request, and a retry may succeed.
var (
	ErrStoreUnavailable   = errors.New("object store unavailable")
	ErrCatalogUnavailable = errors.New("catalog unavailable")
)

// Is matches ErrOffsetOutOfRange and the catalog's catalog.ErrOffsetOutOfRange, so a
// caller mapping errors to responses needs to know only one of them.
func (e *OutOfRangeError) Is(target error) bool {
	return target == ErrOffsetOutOfRange || target == catalog.ErrOffsetOutOfRange
}
