package catalog

// Connectors (docs/design.md "Connect"): what the connect runtime keeps in the catalog —
// connectors with their configs and target states, their task configs, the leases by
// which workers hold tasks, and the source offsets that a source task commits in the
// same transaction as its records. This file holds the shared domain: types, errors,
// validation and the interface both backends implement; connectcommit.go holds the
// rules a flush commit and a worker's heartbeat run.
//
// Fencing: a task is held under a generation, a number handed out from one sequence
// (never reused, across connectors and their re-creations). Every claim, restart, config
// change, stop and offsets edit gives the task a new generation, and every write a task
// makes — records with source offsets, offsets alone, its status — names the generation
// it runs under; the catalog refuses a stale one in the same transaction
// (ErrStaleGeneration). So a task instance that was paused past its lease and woke up
// after another worker took the task over can change nothing.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Connect is the connector part of the catalog, implemented by both backends and proved
// by catalogtest.RunConnect. Times are the database clock's.
type Connect interface {
	// PutConnector creates a connector (create: ErrConnectorExists if one of the name
	// exists) or replaces its config and task configs (upsert), answering whether it
	// created it. A task whose config changed, and every new task, gets a new
	// generation; tasks beyond len(spec.Tasks) are removed. An existing connector keeps
	// its target state; it runs as spec.Principal from now on, and when that changes
	// every task gets a new generation, so that no instance runs as the old one.
	// Like every administrative method, it writes the audit record ctx carries
	// (WithAudit) in its transaction, as do DeleteConnector, SetTargetState,
	// RestartTasks, ResetConnectorTopics and AlterConnectorOffsets.
	PutConnector(ctx context.Context, spec ConnectorSpec, upsert bool) (c Connector, created bool, err error)
	// Connector reads one connector with its tasks; ErrConnectorNotFound.
	Connector(ctx context.Context, name string) (Connector, error)
	// Connectors reads every connector with its tasks, ordered by name.
	Connectors(ctx context.Context) ([]Connector, error)
	// DeleteConnector removes a connector and its tasks (fencing every instance). Its
	// source offsets stay, as Kafka Connect keeps them: a connector re-created under
	// the name resumes; DELETE its offsets while STOPPED to start over.
	DeleteConnector(ctx context.Context, name string) error
	// SetTargetState pauses, resumes or stops a connector. Stopping releases its tasks
	// and gives each a new generation in the same transaction, so no instance of them
	// can commit again.
	SetTargetState(ctx context.Context, name, state string) error
	// RestartTasks gives the chosen tasks (task -1: all; onlyFailed: those whose last
	// reported state is FAILED) a new generation and the state RESTARTING; their
	// workers restart them. It answers the connector as it now is.
	RestartTasks(ctx context.Context, name string, task int32, onlyFailed bool) (Connector, error)
	// ReportTaskState records a task's state (and trace) as its instance at
	// fence.Generation saw it; ErrStaleGeneration when that is no longer the task's.
	ReportTaskState(ctx context.Context, fence TaskFence, worker, state, trace string) error
	// ReportTaskMetrics records what a task instance measures of the system it reads
	// or writes (a JSON object, at most MaxTaskMetrics bytes; "" clears them), shown in
	// the task's status; ErrStaleGeneration when fence is no longer the task's.
	ReportTaskMetrics(ctx context.Context, fence TaskFence, metrics string) error
	// AddConnectorTopics records topics a connector used (GET .../topics);
	// ResetConnectorTopics forgets them.
	AddConnectorTopics(ctx context.Context, name string, topics []string) error
	ResetConnectorTopics(ctx context.Context, name string) error

	// WorkerHeartbeat renews a worker's lease and its tasks', releases the tasks it
	// gives back, claims unheld ones up to its share (PlanWorkerBeat) and answers what
	// it holds now.
	WorkerHeartbeat(ctx context.Context, beat WorkerBeat) (WorkerAssignment, error)

	// SourceOffsets reads a connector's source offsets for a task instance: refused with
	// ErrStaleGeneration unless fence is current.
	SourceOffsets(ctx context.Context, fence TaskFence) ([]SourceOffset, error)
	// CommitSourceOffsets commits source offsets without records (a source task's
	// heartbeat: no segment, no object), checked as a flush checks them
	// (CheckFence).
	CommitSourceOffsets(ctx context.Context, c SourceCommit) error
	// ConnectorOffsets reads a connector's source offsets (administration: no fence),
	// ordered by partition.
	ConnectorOffsets(ctx context.Context, name string) ([]SourceOffset, error)
	// AlterConnectorOffsets edits a STOPPED connector's source offsets
	// (ErrConnectorNotStopped otherwise) in one transaction that also gives every task
	// of the connector a new generation: reset removes them all; otherwise each offset
	// is set, or removed when its Offset is "".
	AlterConnectorOffsets(ctx context.Context, name string, offsets []SourceOffset, reset bool) error
}

var (
	ErrConnectorNotFound = errors.New("connector not found")
	ErrConnectorExists   = errors.New("connector already exists")
	// ErrConnectorNotStopped: offsets are edited only while the connector is STOPPED.
	ErrConnectorNotStopped = errors.New("connector is not stopped")
	ErrTaskNotFound        = errors.New("connector task not found")
	// ErrStaleGeneration: a task instance wrote under a generation that is no longer its
	// task's (the task moved to another worker, restarted, was reconfigured or removed).
	// The instance must stop: its writes are refused.
	ErrStaleGeneration = errors.New("stale connector task generation")
	// ErrInvalidConnector: a malformed connector, task, state or offset; the message
	// says what to fix.
	ErrInvalidConnector = errors.New("invalid connector request")
)

// Connector types and target states.
const (
	ConnectorSource = "source"
	ConnectorSink   = "sink"

	StateRunning = "RUNNING"
	StatePaused  = "PAUSED"
	StateStopped = "STOPPED"
)

// Task states reported by workers (Kafka Connect's), beside RUNNING and PAUSED.
const (
	TaskUnassigned = "UNASSIGNED"
	TaskFailed     = "FAILED"
	TaskRestarting = "RESTARTING"
)

// Bounds of what a connector stores.
const (
	maxConnectorName = 249
	// MaxConnectorConfig bounds a connector's or a task's config, as JSON.
	MaxConnectorConfig = 1 << 20
	MaxConnectorTasks  = 1000
	// MaxSourcePartition and MaxSourceOffset bound one source offset's JSON.
	MaxSourcePartition = 4 << 10
	MaxSourceOffset    = 64 << 10
	// MaxTrace bounds a stored status trace (a longer one is cut).
	MaxTrace = 16 << 10
	// MaxTaskMetrics bounds a task's reported metrics (JSON).
	MaxTaskMetrics = 16 << 10
)

// ConnectorSpec is a connector as the runtime stores it.
type ConnectorSpec struct {
	Name   string
	Type   string // ConnectorSource or ConnectorSink
	Config map[string]string
	// Tasks holds each task's config, index = task id.
	Tasks []map[string]string
	// Principal is who stored the connector's config last: its tasks produce and
	// consume as it.
	Principal string
	// TargetState of a new connector: RUNNING (when empty), PAUSED or STOPPED.
	TargetState string
	// Worker is the worker that computed the task configs.
	Worker string
}

// Connector is a stored connector.
type Connector struct {
	Name        string
	Type        string
	Config      map[string]string
	Principal   string
	TargetState string
	Worker      string
	Topics      []string // topics its tasks used, sorted
	Tasks       []ConnectTask
	// Now is the database clock when it was read, to judge the task leases by.
	Now time.Time
}

// ConnectTask is one task of a connector.
type ConnectTask struct {
	Task       int32
	Config     map[string]string
	Generation int64
	Owner      string    // the worker holding it; "" when none
	LeaseUntil time.Time // the owner's lease
	// State, Trace and Worker are the last state reported (and by whom).
	State, Trace, Worker string
	// Metrics is the last ReportTaskMetrics of any of the task's instances ("": none).
	Metrics string
}

// Held reports whether a live owner holds the task at now.
func (t ConnectTask) Held(now time.Time) bool { return t.Owner != "" && t.LeaseUntil.After(now) }

// TaskID names a task.
type TaskID struct {
	Connector string
	Task      int32
}

// TaskFence names a task instance: a task at the generation it runs under.
type TaskFence struct {
	Connector  string
	Task       int32
	Generation int64
}

// ID is the task the fence is for.
func (f TaskFence) ID() TaskID { return TaskID{f.Connector, f.Task} }

// SourceOffset is a source partition and the position reached in it, each a JSON object
// (Kafka Connect's {"partition": {...}, "offset": {...}}), in the canonical text
// CanonicalJSONObject gives, so that equal partitions are equal strings.
type SourceOffset struct {
	Partition string
	Offset    string // "" only in AlterConnectorOffsets: remove the partition's offset
}

// SourceCommit is source offsets committed by a task instance: with a flush's records
// (Request.Source), or alone (Connect.CommitSourceOffsets).
type SourceCommit struct {
	Fence   TaskFence
	Offsets []SourceOffset
}

// WorkerBeat is one worker's heartbeat.
type WorkerBeat struct {
	Worker string
	// Lease is how long the worker and its tasks stay held without another beat.
	Lease time.Duration
	// Release lists tasks the worker has stopped and gives back.
	Release []TaskID
	// Leave gives every task back and ends the worker's lease (a clean shutdown).
	Leave bool
}

// WorkerAssignment answers a WorkerBeat.
type WorkerAssignment struct {
	Tasks []AssignedTask // the tasks the worker holds now, by (connector, task)
	// Excess lists tasks the worker holds beyond its share: it should stop them and
	// release them in its next beat, so that others can take them.
	Excess  []TaskID
	Workers int // live workers, this one included
	Now     time.Time
}

// AssignedTask is a task a worker holds, with what it needs to run it.
type AssignedTask struct {
	TaskFence
	Type            string
	Principal       string
	TargetState     string
	Config          map[string]string // the task's
	ConnectorConfig map[string]string
}

var connectorName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// ValidateConnectorName accepts what can name a consumer group too (connect-<name>, for
// sinks) and a path segment: 1 to 241 characters of [a-zA-Z0-9._-].
func ValidateConnectorName(name string) error {
	if !connectorName.MatchString(name) || len(name) > maxConnectorName-len("connect-") || name == "." || name == ".." {
		return fmt.Errorf("%w: connector name %q: use 1 to %d characters of [a-zA-Z0-9._-] (not \".\" or \"..\")",
			ErrInvalidConnector, TruncateName(name), maxConnectorName-len("connect-"))
	}
	return nil
}

// ValidateConnectorSpec checks a spec before any SQL.
func ValidateConnectorSpec(s ConnectorSpec) error {
	if err := ValidateConnectorName(s.Name); err != nil {
		return err
	}
	if s.Type != ConnectorSource && s.Type != ConnectorSink {
		return fmt.Errorf("%w: connector %s: type %q: want source or sink", ErrInvalidConnector, s.Name, s.Type)
	}
	switch s.TargetState {
	case "", StateRunning, StatePaused, StateStopped:
	default:
		return fmt.Errorf("%w: connector %s: initial state %q: want RUNNING, PAUSED or STOPPED", ErrInvalidConnector, s.Name, s.TargetState)
	}
	if len(s.Tasks) > MaxConnectorTasks {
		return fmt.Errorf("%w: connector %s: %d tasks: at most %d", ErrInvalidConnector, s.Name, len(s.Tasks), MaxConnectorTasks)
	}
	if n := configSize(s.Config); n > MaxConnectorConfig {
		return fmt.Errorf("%w: connector %s: config of %d bytes: at most %d", ErrInvalidConnector, s.Name, n, MaxConnectorConfig)
	}
	for i, t := range s.Tasks {
		if n := configSize(t); n > MaxConnectorConfig {
			return fmt.Errorf("%w: connector %s task %d: config of %d bytes: at most %d", ErrInvalidConnector, s.Name, i, n, MaxConnectorConfig)
		}
	}
	return nil
}

// ValidateTargetState accepts RUNNING, PAUSED and STOPPED.
func ValidateTargetState(state string) error {
	switch state {
	case StateRunning, StatePaused, StateStopped:
		return nil
	}
	return fmt.Errorf("%w: state %q: want RUNNING, PAUSED or STOPPED", ErrInvalidConnector, state)
}

// ValidateTaskState accepts the states a worker reports.
func ValidateTaskState(state string) error {
	switch state {
	case TaskUnassigned, StateRunning, StatePaused, TaskFailed, TaskRestarting:
		return nil
	}
	return fmt.Errorf("%w: task state %q", ErrInvalidConnector, state)
}

// ValidateWorkerBeat checks a beat's shape.
func ValidateWorkerBeat(b WorkerBeat) error {
	if err := validateMemberID(b.Worker); err != nil {
		return fmt.Errorf("%w: worker id: %v", ErrInvalidConnector, err)
	}
	if !b.Leave && (b.Lease < MinSessionTimeout || b.Lease > MaxSessionTimeout) {
		return fmt.Errorf("%w: worker lease %s: want between %s and %s", ErrInvalidConnector, b.Lease, MinSessionTimeout, MaxSessionTimeout)
	}
	return nil
}

func configSize(m map[string]string) int {
	n := 2
	for k, v := range m {
		n += len(k) + len(v) + 6
	}
	return n
}

// TruncateTrace cuts a trace to MaxTrace bytes.
func TruncateTrace(s string) string {
	if len(s) <= MaxTrace {
		return s
	}
	return s[:MaxTrace-3] + "..."
}

// EncodeConfig is a config as stored (JSON text).
func EncodeConfig(m map[string]string) string {
	if m == nil {
		m = map[string]string{}
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return string(b)
}

// DecodeConfig reads a stored config.
func DecodeConfig(s string) (map[string]string, error) {
	m := map[string]string{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("stored connector config: %w", err)
	}
	return m, nil
}

// CanonicalJSONObject returns the canonical text of a JSON object: compact, keys sorted
// at every level, numbers as written, no HTML escaping. Anything but one object is
// refused with ErrInvalidConnector.
func CanonicalJSONObject(b []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("%w: not JSON: %v", ErrInvalidConnector, err)
	}
	if d.More() {
		return "", fmt.Errorf("%w: more than one JSON value", ErrInvalidConnector)
	}
	if _, ok := v.(map[string]any); !ok {
		return "", fmt.Errorf("%w: want a JSON object", ErrInvalidConnector)
	}
	return MarshalCanonical(v), nil
}

// MarshalCanonical encodes a value decoded from JSON (maps, slices, json.Number,
// strings, booleans, nil) canonically: Go's encoder sorts map keys.
func MarshalCanonical(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// ValidateSourceOffset checks one offset: the partition a canonical JSON object, the
// offset one too (or "" when removal is allowed), both within their bounds.
func ValidateSourceOffset(o SourceOffset, allowRemove bool) error {
	if len(o.Partition) > MaxSourcePartition {
		return fmt.Errorf("%w: source partition of %d bytes: at most %d", ErrInvalidConnector, len(o.Partition), MaxSourcePartition)
	}
	if c, err := CanonicalJSONObject([]byte(o.Partition)); err != nil || c != o.Partition {
		return fmt.Errorf("%w: source partition %.100q is not a JSON object in canonical form (catalog.CanonicalJSONObject)", ErrInvalidConnector, o.Partition)
	}
	if o.Offset == "" && allowRemove {
		return nil
	}
	if len(o.Offset) > MaxSourceOffset {
		return fmt.Errorf("%w: source offset of %d bytes: at most %d", ErrInvalidConnector, len(o.Offset), MaxSourceOffset)
	}
	if _, err := CanonicalJSONObject([]byte(o.Offset)); err != nil {
		return fmt.Errorf("%w: source offset %.100q: %v", ErrInvalidConnector, o.Offset, err)
	}
	return nil
}

// ValidateSourceCommit checks a commit's shape before any SQL: a valid task, at least
// one offset, each valid, no partition twice.
func ValidateSourceCommit(c SourceCommit) error {
	if err := ValidateFence(c.Fence); err != nil {
		return err
	}
	if len(c.Offsets) == 0 {
		return fmt.Errorf("%w: source offsets: none given", ErrInvalidConnector)
	}
	seen := make(map[string]bool, len(c.Offsets))
	for _, o := range c.Offsets {
		if err := ValidateSourceOffset(o, false); err != nil {
			return err
		}
		if seen[o.Partition] {
			return fmt.Errorf("%w: source partition %.100s appears twice", ErrInvalidConnector, o.Partition)
		}
		seen[o.Partition] = true
	}
	return nil
}

// ValidateFence checks a fence's shape.
func ValidateFence(f TaskFence) error {
	if err := ValidateConnectorName(f.Connector); err != nil {
		return err
	}
	if f.Task < 0 || f.Task >= MaxConnectorTasks {
		return fmt.Errorf("%w: task %d", ErrInvalidConnector, f.Task)
	}
	if f.Generation <= 0 {
		return fmt.Errorf("%w: generation %d: use the one the worker's heartbeat answered", ErrInvalidConnector, f.Generation)
	}
	return nil
}

// PlanTaskConfigs compares a connector's stored tasks with its new task configs: the
// tasks to write — new ones, and those whose config changed (all of them when
// newPrincipal: the connector runs as another principal now), each of which gets a new
// generation (its running instance is fenced and its worker restarts it) — and the tasks
// to remove, those beyond the new count.
func PlanTaskConfigs(old []ConnectTask, configs []map[string]string, newPrincipal bool) (write, remove []int32) {
	byID := make(map[int32]ConnectTask, len(old))
	for _, t := range old {
		byID[t.Task] = t
		if int(t.Task) >= len(configs) {
			remove = append(remove, t.Task)
		}
	}
	for i, cfg := range configs {
		t, ok := byID[int32(i)]
		if !ok || newPrincipal || EncodeConfig(t.Config) != EncodeConfig(cfg) {
			write = append(write, int32(i))
		}
	}
	return write, remove
}

// WorkerForgetAfter is how long after its lease ended a worker's row is removed.
const WorkerForgetAfter = time.Hour

// RestartChoice picks the tasks RestartTasks restarts: task (or every task, for -1),
// only those whose last reported state is FAILED when onlyFailed. ErrTaskNotFound for a
// task the connector does not have.
func RestartChoice(c Connector, task int32, onlyFailed bool) ([]int32, error) {
	var ids []int32
	found := false
	for _, t := range c.Tasks {
		if task >= 0 && t.Task != task {
			continue
		}
		found = true
		if onlyFailed && t.State != TaskFailed {
			continue
		}
		ids = append(ids, t.Task)
	}
	if task >= 0 && !found {
		return nil, fmt.Errorf("%w: connector %s has no task %d", ErrTaskNotFound, c.Name, task)
	}
	return ids, nil
}

// ValidateOffsetEdit checks the offsets of AlterConnectorOffsets before any SQL: with
// reset, none; otherwise at least one, each valid (Offset "" removes), no partition
// twice.
func ValidateOffsetEdit(offsets []SourceOffset, reset bool) error {
	if reset {
		if len(offsets) > 0 {
			return fmt.Errorf("%w: a reset takes no offsets", ErrInvalidConnector)
		}
		return nil
	}
	if len(offsets) == 0 {
		return fmt.Errorf("%w: offsets: none given", ErrInvalidConnector)
	}
	seen := make(map[string]bool, len(offsets))
	for _, o := range offsets {
		if err := ValidateSourceOffset(o, true); err != nil {
			return err
		}
		if seen[o.Partition] {
			return fmt.Errorf("%w: source partition %.100s appears twice", ErrInvalidConnector, o.Partition)
		}
		seen[o.Partition] = true
	}
	return nil
}

// CheckOffsetEdit refuses to edit the offsets of a connector that is not STOPPED.
func CheckOffsetEdit(c Connector) error {
	if c.TargetState != StateStopped {
		return fmt.Errorf("%w: connector %s is %s: connectors must be in the STOPPED state before their offsets can be modified (PUT /connectors/%s/stop)",
			ErrConnectorNotStopped, c.Name, c.TargetState, c.Name)
	}
	return nil
}
