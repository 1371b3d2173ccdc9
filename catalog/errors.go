package catalog

import (
	"errors"
	"fmt"
)

var (
	ErrTopicExists         = errors.New("topic already exists")
	ErrTopicNotFound       = errors.New("topic not found")
	ErrPartitionOutOfRange = errors.New("partition out of range")
	ErrInvalidTopicName    = errors.New("invalid topic name")
	ErrInvalidPartitions   = errors.New("invalid partition count")
	ErrInvalidConfig       = errors.New("invalid topic config")
	// ErrOffsetOutOfRange: an offset below the log start or above the high watermark.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrCommitTooLate: the segment's key time is older than the commit timeout by the
	// database clock; the sweep may already own the object, so the commit is refused.
	ErrCommitTooLate = errors.New("commit refused: segment older than commit timeout")
	// ErrCommitAborted: the fencing insert won; the segment can never commit.
	ErrCommitAborted = errors.New("commit aborted by fencing")
	// ErrCommitFailed: the commit definitely did not happen (the request never reached
	// the database, or the database refused it and rolled back): nothing was written,
	// and no settling is needed.
	ErrCommitFailed = errors.New("commit failed: nothing was written")
	// ErrSettleExpired: Settle found the segment committed, but too long ago (past
	// SettleAge) for its chunk rows to tell each request's outcome — the compactor may
	// have rewritten them — and some request had none. The outcome of those requests is
	// unknown, not refused.
	ErrSettleExpired = errors.New("settle: the segment committed longer ago than the settle age; its requests' outcomes are unknown")
	// ErrTimestampOutOfRange: a LogAppendTime flush stamped ahead of the database clock.
	ErrTimestampOutOfRange = errors.New("timestamp out of range")
	// ErrInvalidSegment: the Segment handed to Commit or Settle is malformed — a caller
	// bug, not a condition to retry. Nothing was written.
	ErrInvalidSegment = errors.New("invalid segment")
)

// ConfigError says which config key is wrong and how to fix it.
type ConfigError struct {
	Key, Value, Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid topic config %s=%q: %s", e.Key, e.Value, e.Reason)
}

func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// OffsetRangeError is ErrOffsetOutOfRange with the numbers a caller needs to say so in
// its own terms (the catalog knows the partition by its topic id, the caller by name).
type OffsetRangeError struct {
	Offset, LogStartOffset, HighWatermark int64
}

func (e *OffsetRangeError) Error() string {
	return fmt.Sprintf("%v: offset %d outside [%d, %d]", ErrOffsetOutOfRange, e.Offset, e.LogStartOffset, e.HighWatermark)
}

func (e *OffsetRangeError) Unwrap() error { return ErrOffsetOutOfRange }
