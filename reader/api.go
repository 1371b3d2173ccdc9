// Package reader is the read role: it serves fetches from segment objects through a
// block cache, with long-polls woken by commit notifications or polling.
package reader

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-io/strata/segment"
)

// Fetch asks for records of one partition from Offset.
type Fetch struct {
	TopicID    int64
	Partition  int32
	Offset     int64
	MaxRecords int           // 0: a default
	MaxBytes   int64         // 0: a default
	Wait       time.Duration // long-poll: wait up to this long for data at Offset
}

// Result answers a Fetch.
type Result struct {
	Records        []segment.DecodedRecord
	NextOffset     int64
	HighWatermark  int64
	LogStartOffset int64
}

// OutOfRangeError: Offset is below the log start or above the high watermark.
type OutOfRangeError struct {
	Offset, LogStartOffset, HighWatermark int64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("offset %d out of range [%d, %d]", e.Offset, e.LogStartOffset, e.HighWatermark)
}

// ErrOffsetOutOfRange matches *OutOfRangeError with errors.Is.
var ErrOffsetOutOfRange = errors.New("offset out of range")

func (e *OutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }
