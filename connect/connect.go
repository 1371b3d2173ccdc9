// Package connect is Strata's connector runtime (docs/design.md "Connect"): Kafka
// Connect's model — connectors split into tasks that move records between topics and
// other systems — run inside a node's `connect` role, with Kafka Connect's REST API
// (rest.go), configs, converters, single-message transforms with predicates, and error
// tolerance with a dead-letter topic at every stage.
//
// What differs is how it keeps its promises. A source task's records and its source
// offsets commit in one catalog transaction, through the broker core
// (broker.CommitSource), which also checks the task instance's (connector, task,
// generation): a task is held under a lease by one worker at a time, and every move,
// restart or reconfiguration gives it a new generation, so an instance paused past its
// lease (a zombie) can commit nothing once it wakes. A sink task is a member of the
// consumer group connect-<name>: it writes records downstream, and commits as group
// offsets only what its PreCommit says is durable there, fenced by its member epoch.
//
// The worker (worker.go) holds tasks through the catalog (catalog.Connect); the task
// runners are source.go and sink.go; the built-in connectors are filesource.go and
// filesink.go. The runtime calls the core as the principal that created the connector.
package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
)

// Record is one record on its way through the runtime: from a source task towards a
// topic, or from a topic towards a sink task. Key and Value are schemaless values as
// JSON decodes them (map[string]any, []any, string, json.Number, bool, nil), or []byte.
type Record struct {
	Topic string
	// Partition is the record's partition: chosen by the source task (-1: by key hash,
	// or sticky without a key), or where a sink task's record was read.
	Partition int32
	Key       any
	Value     any
	Headers   []Header
	Timestamp int64 // unix ms; -1: none
	// Offset is a sink record's offset in its partition.
	Offset int64
	// Err marks a record a source task could not read (its raw bytes in Value): the
	// runtime handles it by the connector's error tolerance, as a failure of the poll
	// stage, and the batch's offsets still move past it.
	Err error
}

// Header is a record header; its value is passed through as bytes.
type Header struct {
	Key   string
	Value []byte
}

// TopicPartition names a partition by topic name.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return tp.Topic + "/" + strconv.Itoa(int(tp.Partition)) }

// Offset is a source partition and the position reached in it (Kafka Connect's
// {"partition": {...}, "offset": {...}}).
type Offset struct {
	Partition map[string]any
	Offset    map[string]any
}

// SourceBatch is what one Poll returns. Its records and offsets commit in one
// transaction, all or nothing; a batch with offsets and no records (a heartbeat) moves
// the offsets alone.
type SourceBatch struct {
	Records []Record
	Offsets []Offset
}

// SourceContext is what a source task is given.
type SourceContext interface {
	// Offsets reads the connector's committed source offsets, fenced: it fails once
	// this instance is no longer its task's.
	Offsets(ctx context.Context) ([]Offset, error)
	// ReportMetrics records what the task measures of the system it reads (a JSON
	// object's fields), shown in the task's status as source_metrics.
	ReportMetrics(ctx context.Context, metrics map[string]any) error
	Logger() *slog.Logger
}

// SourceTask reads records from an external system.
type SourceTask interface {
	// Start prepares the task with its config (providers resolved).
	Start(ctx context.Context, cfg map[string]string, sc SourceContext) error
	// Poll blocks until it has a batch, a heartbeat is due, or ctx ends. The batch is
	// the transaction boundary.
	Poll(ctx context.Context) (SourceBatch, error)
	// Committed runs once b is durably committed, records and offsets; only here may
	// the task acknowledge upstream. Never called for a batch that did not commit.
	Committed(ctx context.Context, b SourceBatch) error
	Stop() error
}

// SinkContext is what a sink task is given.
type SinkContext interface {
	Logger() *slog.Logger
}

// SinkTask writes records to an external system.
type SinkTask interface {
	Start(ctx context.Context, cfg map[string]string, sc SinkContext) error
	// Open hands the task partitions with the offset each resumes at (the group's
	// committed offset): what the task wrote beyond it was never committed.
	Open(ctx context.Context, partitions map[TopicPartition]int64) error
	// Put hands over records in offset order per partition. A *BadRecordError for
	// records[i] means records[:i] were taken and records[i] could not be: the runtime
	// applies the error tolerance to it and puts the rest again.
	Put(ctx context.Context, records []Record) error
	// PreCommit returns, per partition, the next offset whose records are durable
	// downstream: the runtime commits these as the group's offsets.
	PreCommit(ctx context.Context) (map[TopicPartition]int64, error)
	// Close takes partitions away: drop their buffers, commit nothing.
	Close(ctx context.Context, partitions []TopicPartition) error
	Stop() error
}

// Connector is what every connector plugin does: it describes and validates a
// connector's config and splits it into tasks. A plugin is a SourceConnector or a
// SinkConnector, registered as one (Source, Sink).
type Connector interface {
	Class() string
	Version() string
	// Config describes the connector's own keys (the runtime adds the common ones).
	Config() []ConfigKey
	// ValidateConfig checks the config across its keys, beyond each key's type: per
	// key, why its value is refused (nil when nothing is).
	ValidateConfig(cfg map[string]string) map[string]string
	// TaskConfigs splits a connector's config into at most maxTasks task configs.
	TaskConfigs(cfg map[string]string, maxTasks int) ([]map[string]string, error)
}

// SourceConnector makes source tasks.
type SourceConnector interface {
	Connector
	// Topics says, from the config (references unresolved), which topics the tasks
	// write: they are checked when the config is stored rather than at the first
	// commit (nil: none known before the tasks run).
	Topics(cfg map[string]string) []string
	NewTask() SourceTask
}

// SinkConnector makes sink tasks.
type SinkConnector interface {
	Connector
	NewTask() SinkTask
}

// Plugin is a connector a runtime can run: a source or a sink, as it was registered,
// so the runtime never has to find out which.
type Plugin struct {
	Connector
	source SourceConnector // set for a source
	sink   SinkConnector   // set for a sink
}

// Source registers a source connector.
func Source(c SourceConnector) Plugin { return Plugin{Connector: c, source: c} }

// Sink registers a sink connector.
func Sink(c SinkConnector) Plugin { return Plugin{Connector: c, sink: c} }

// Type is "source" or "sink", as Kafka Connect names them.
func (p Plugin) Type() string {
	if p.sink != nil {
		return "sink"
	}
	return "source"
}

// RetriableError is a failure that may pass: the runtime retries within the
// connector's errors.retry.timeout, then handles it as a failure.
type RetriableError struct{ Err error }

func (e *RetriableError) Error() string { return "retriable: " + e.Err.Error() }
func (e *RetriableError) Unwrap() error { return e.Err }

// BadRecordError is a sink task's refusal of one record of a Put (Index into the
// records handed over).
type BadRecordError struct {
	Index int
	Err   error
}

func (e *BadRecordError) Error() string { return fmt.Sprintf("record %d: %v", e.Index, e.Err) }
func (e *BadRecordError) Unwrap() error { return e.Err }

// errFenced says the task instance is no longer its task's: it stops quietly (its
// new instance runs elsewhere or after a restart).
var errFenced = errors.New("connect: this task instance was fenced")
