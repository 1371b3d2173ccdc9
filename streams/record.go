package streams

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/client"
)

// Record is a typed record flowing through a topology.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Headers   []client.Header
}

// Change is a table update: the value before (nil: the key was absent) and after (nil:
// deleted).
type Change[V any] struct {
	Old *V `json:"old"`
	New *V `json:"new"`
}

// KeyValue is a key and a value, for FlatMap.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// TaskID names a task: partition Partition of subtopology Subtopology. Its string form
// "<sub>_<partition>" appears in the task's transactional id "<app>/<task>" and state
// directory.
type TaskID struct {
	Subtopology int
	Partition   int32
}

func (id TaskID) String() string { return fmt.Sprintf("%d_%d", id.Subtopology, id.Partition) }

// Position is an input record's place: what the input-position header names.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

func (p Position) String() string { return fmt.Sprintf("%s/%d/%d", p.Topic, p.Partition, p.Offset) }

// PunctuationType says which clock drives a punctuator.
type PunctuationType int

const (
	// StreamTime punctuators fire as records advance the task's stream time:
	// deterministic, and silent while no records arrive.
	StreamTime PunctuationType = iota
	// WallClock punctuators fire on the system clock, records or not.
	WallClock
)

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time { return time.UnixMilli(v) }
