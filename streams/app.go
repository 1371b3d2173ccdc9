package streams

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/client"
)

// Commit limits: a commit is one request, which the server bounds (10,000 records and a
// 16 MiB body by default, and one flush of 8 MiB).
const (
	DefaultMaxCommitRecords = 5000
	DefaultMaxCommitBytes   = 4 << 20
)

// Guarantee is a processing guarantee.
type Guarantee int

const (
	// ExactlyOnce commits each task's outputs, changelog records and input offsets in
	// one request: a crash, a rebalance or a paused instance never duplicates or loses
	// an output. The default.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce produces outputs first and commits input offsets after: a crash in
	// between processes some inputs again, duplicating their outputs and state updates.
	AtLeastOnce
)

// Config configures an App. Zero values take the documented defaults.
type Config struct {
	// Client talks to Strata. Required.
	Client *client.Client
	// StateDir keeps each task's stores in Pebble under <StateDir>/<app>/<task>, so a
	// restart restores only the changelog after the stores' checkpoints. Default ""
	// keeps stores in memory: every assignment restores from the changelog's start.
	StateDir string
	// InstanceID is this instance's member id in the group <app>: keep it stable
	// across restarts so a restarted instance takes its place at once. Default: a
	// random id.
	InstanceID string
	// Guarantee: ExactlyOnce (default) or AtLeastOnce.
	Guarantee Guarantee
	// CommitInterval is how often each task commits. Default 100ms. A task commits
	// earlier when its open commit reaches half of MaxCommitRecords or MaxCommitBytes.
	CommitInterval time.Duration
	// MaxCommitRecords and MaxCommitBytes bound one commit request (outputs,
	// repartition and changelog records): keep them within the server's limits
	// (10,000 records, 16 MiB bodies, 8 MiB flushes by default). A single input record
	// whose results exceed them stops the task with an error. Defaults 5,000 and 4 MiB.
	MaxCommitRecords int
	MaxCommitBytes   int64
	// SessionTimeout is the member's lease. Default 10s.
	SessionTimeout time.Duration
	// FetchMaxRecords and FetchWait bound each fetch of an input partition. Defaults
	// 1,000 and 500ms.
	FetchMaxRecords int
	FetchWait       time.Duration
	// RequestTimeout bounds one HTTP call. Default 30s.
	RequestTimeout time.Duration
	// InputPositionHeader, when set, adds a header of this name to every output record
	// naming the input that caused it: "<topic>/<partition>/<offset>#<n>" (n counts
	// the input's outputs), or "punctuate/<task>/<time>#<n>". Default: none.
	InputPositionHeader string
	// DeadLetterTopic, when set, receives poison records (inputs the serdes refuse)
	// with the reason in a header; otherwise a poison record stops the application.
	// Created (1 partition) if missing.
	DeadLetterTopic string
	// LateRecordTopic, when set, receives records that arrive after every window they
	// belong to has closed (they are counted in Metrics either way). Created if
	// missing.
	LateRecordTopic string
	// ApplicationServer is the base URL at which this instance serves QueryHandler
	// (Kafka Streams' application.server), published with the tasks it runs in the
	// compacted topic <app>-instances so that any instance can route an interactive
	// query to the one holding a key. Default "": this instance answers queries of
	// its own tasks and routes others, but none are routed to it.
	ApplicationServer string
	// NumStandbyReplicas is how many other instances keep a warm copy of each
	// stateful task's stores (a standby task tailing its changelogs into their state
	// directory), so that a task moving there restores only the changelog's tail.
	// Needs StateDir. Default 0.
	NumStandbyReplicas int
	// Logger receives the runtime's log lines. Default: discarded.
	Logger *slog.Logger
	// Registerer, when set, receives the runtime's Prometheus metrics, per task
	// (labels app and task): strata_streams_records_processed_total,
	// _punctuations_total, _late_records_dropped_total, _commit_seconds,
	// _lag_records (+ topic), _restore_remaining_records and _restored_records_total
	// (+ store). Default: none.
	Registerer prometheus.Registerer
}

// App runs a topology as one member of the group named by the application id.
type App struct {
	topo    *Topology
	cfg     Config
	c       *client.Client
	log     *slog.Logger
	metrics Metrics
	prom    *promMetrics

	counts map[int]int32        // tasks per subtopology
	topics map[string]topicMeta // every topic read or written
	subs   []string             // the group subscription: every source topic

	mu       sync.Mutex
	epoch    int32
	assigned map[client.TopicPartition]bool
	statuses map[TaskID]string
	hbNow    chan chan struct{} // a commit asks for a heartbeat now; closed when answered
	running  atomic.Bool

	globals    *globalSet   // the global tables, once restored (nil: none)
	globalErrs <-chan error // a global table's tailer failed for good
	iq         *queries     // interactive queries
	sb         *standbys    // standby tasks
}

type topicMeta struct {
	partitions             int32
	keyFormat, valueFormat string
}

// New checks the topology and the configuration. It does not contact the server.
func New(b *Builder, cfg Config) (*App, error) {
	topo, err := b.Build()
	if err != nil {
		return nil, err
	}
	var bad []error
	if cfg.Client == nil {
		bad = append(bad, errors.New("streams: Config.Client is required"))
	}
	if cfg.Guarantee != ExactlyOnce && cfg.Guarantee != AtLeastOnce {
		bad = append(bad, fmt.Errorf("streams: Config.Guarantee %d: use ExactlyOnce or AtLeastOnce", cfg.Guarantee))
	}
	if cfg.CommitInterval < 0 || cfg.SessionTimeout < 0 || cfg.FetchWait < 0 || cfg.MaxCommitRecords < 0 || cfg.MaxCommitBytes < 0 {
		bad = append(bad, errors.New("streams: durations and limits in Config must not be negative"))
	}
	if cfg.NumStandbyReplicas < 0 || cfg.NumStandbyReplicas > maxStandbyReplicas || cfg.NumStandbyReplicas > 0 && cfg.StateDir == "" {
		bad = append(bad, fmt.Errorf("streams: Config.NumStandbyReplicas %d: use 0 to %d, with a StateDir for the copies", cfg.NumStandbyReplicas, maxStandbyReplicas))
	}
	if cfg.MaxCommitRecords > 10_000 {
		bad = append(bad, fmt.Errorf("streams: MaxCommitRecords %d: the server takes at most 10,000 records per request", cfg.MaxCommitRecords))
	}
	if len(bad) > 0 {
		return nil, errors.Join(bad...)
	}
	setDefault(&cfg.CommitInterval, 100*time.Millisecond)
	setDefault(&cfg.SessionTimeout, 10*time.Second)
	setDefault(&cfg.FetchWait, 500*time.Millisecond)
	setDefault(&cfg.RequestTimeout, 30*time.Second)
	setDefault(&cfg.MaxCommitRecords, DefaultMaxCommitRecords)
	setDefault(&cfg.MaxCommitBytes, DefaultMaxCommitBytes)
	setDefault(&cfg.FetchMaxRecords, 1000)
	if cfg.InstanceID == "" {
		host, _ := os.Hostname()
		r := make([]byte, 4)
		_, _ = rand.Read(r)
		cfg.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(r))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &App{topo: topo, cfg: cfg, c: cfg.Client, prom: newPromMetrics(cfg.Registerer), log: log.With("component", "streams", "app", topo.App(), "instance", cfg.InstanceID),
		assigned: map[client.TopicPartition]bool{}, statuses: map[TaskID]string{}, hbNow: make(chan chan struct{}, 16), iq: newQueries(), sb: newStandbys()}, nil
}

func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// GlobalPositions returns, per partition of a global table's topic, the next offset
// this instance will apply: every record below it is in the table. Empty before the
// table is restored.
func (a *App) GlobalPositions(table string) map[int32]int64 {
	a.mu.Lock()
	g := a.globals
	a.mu.Unlock()
	if g == nil {
		return map[int32]int64{}
	}
	return g.positions(table)
}

// Topology is the checked topology the App runs.
func (a *App) Topology() *Topology { return a.topo }

// Metrics returns the App's counters.
func (a *App) Metrics() MetricsSnapshot { return a.metrics.Snapshot() }

// Task states, as TaskStates reports them.
const (
	TaskRestoring = "restoring"
	TaskRunning   = "running"
	TaskClosing   = "closing"
)

// TaskStates reports the state of each task this instance holds.
func (a *App) TaskStates() map[TaskID]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[TaskID]string, len(a.statuses))
	for k, v := range a.statuses {
		out[k] = v
	}
	return out
}

func (a *App) setStatus(id TaskID, s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s == "" {
		delete(a.statuses, id)
	} else {
		a.statuses[id] = s
	}
}

// group is the consumer group, and the prefix of the transactional ids.
func (a *App) group() string { return a.topo.App() }

// Run prepares the topics (checking inputs and co-partitioning, creating internal
// topics) and runs as a member of the group until ctx ends or a task fails. On ctx's
// end every task commits what it has processed and the member leaves the group.
func (a *App) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("streams: App.Run called twice")
	}
	if err := a.prepare(ctx); err != nil {
		return err
	}
	// Global tables are complete before any task starts, and stay up to date
	// outside the group until the member has left it.
	g, err := a.startGlobals(ctx)
	if err != nil {
		return err
	}
	a.globalErrs = g.failures()
	if g != nil {
		a.mu.Lock()
		a.globals = g.set
		a.mu.Unlock()
	}
	stopInstances := a.runInstances(ctx)
	sctx, stopStandbys := context.WithCancel(ctx)
	standbysDone := make(chan struct{})
	go func() {
		defer close(standbysDone)
		if a.cfg.StateDir != "" { // the group may ask for standbys though this instance did not
			a.runStandbys(sctx)
		}
	}()
	err = a.member(ctx)
	stopStandbys()
	<-standbysDone
	stopInstances()
	if cerr := g.close(); cerr != nil && err == nil {
		err = fmt.Errorf("streams: close the global tables: %w", cerr)
	}
	return err
}

// prepare reads the topics' metadata, checks co-partitioning and creates the internal
// topics (or checks the ones found).
func (a *App) prepare(ctx context.Context) error {
	a.topics = map[string]topicMeta{}
	read := func(topic string) (int32, error) {
		if m, ok := a.topics[topic]; ok {
			return m.partitions, nil
		}
		t, err := a.c.Topic(ctx, topic)
		if err != nil {
			if client.HasCode(err, "topic_not_found") {
				return 0, fmt.Errorf("topic %s does not exist: create it before starting the application", topic)
			}
			return 0, err
		}
		a.topics[topic] = metaOf(t)
		return t.Partitions, nil
	}
	for _, s := range a.topo.subs {
		for _, src := range s.sources {
			if !src.internal {
				if _, err := read(src.topic); err != nil {
					return fmt.Errorf("streams: input %w", err)
				}
			}
		}
	}
	for _, g := range a.topo.b.globals {
		if _, err := read(g.topic); err != nil {
			return fmt.Errorf("streams: global table %w", err)
		}
	}
	counts, err := a.topo.taskCounts(read)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.counts = counts
	a.mu.Unlock()
	for topic := range a.topo.b.sinks {
		if _, err := read(topic); err != nil {
			return fmt.Errorf("streams: output %w", err)
		}
	}
	for _, s := range a.topo.subs {
		for _, w := range s.writes {
			if err := a.ensureTopic(ctx, w, counts[a.topo.sizer[w].index], nil); err != nil {
				return err
			}
		}
		for _, sd := range s.stores {
			// Timed stores (sliding, session, join) delete what they no longer need,
			// tombstones compaction removes: compacted alone, so that no retention by
			// event time (old data reprocessed) can take a live entry away.
			configs := map[string]string{"cleanup.policy": "compact"}
			if sd.kind == windowStore {
				configs = map[string]string{"cleanup.policy": "compact,delete", "retention.ms": strconv.FormatInt(sd.retentionMs, 10)}
			}
			if err := a.ensureTopic(ctx, a.topo.b.changelogTopic(sd.name), counts[s.index], configs); err != nil {
				return err
			}
		}
		for _, src := range s.sources {
			a.subs = append(a.subs, src.topic)
		}
	}
	// The interactive queries' routing table: the latest record per instance.
	if err := a.ensureTopic(ctx, a.instancesTopic(), 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		return err
	}
	for _, t := range []string{a.cfg.DeadLetterTopic, a.cfg.LateRecordTopic} {
		if t == "" {
			continue
		}
		if _, err := read(t); err != nil {
			if err := a.ensureTopic(ctx, t, 1, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func metaOf(t client.Topic) topicMeta {
	m := topicMeta{partitions: t.Partitions, keyFormat: t.Configs["key.format"], valueFormat: t.Configs["value.format"]}
	if e := t.EffectiveConfigs; e != nil {
		m.keyFormat, m.valueFormat = e["key.format"], e["value.format"]
	}
	if m.keyFormat == "" {
		m.keyFormat = "string"
	}
	if m.valueFormat == "" {
		m.valueFormat = "json"
	}
	return m
}

// ensureTopic creates an internal topic (binary keys and values) or checks that the
// one found has the partitions the topology needs.
func (a *App) ensureTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	all := map[string]string{"key.format": "binary", "value.format": "binary"}
	for k, v := range configs {
		all[k] = v
	}
	t, err := a.c.CreateTopic(ctx, name, partitions, all)
	if err != nil && (client.HasCode(err, "topic_exists") || client.StatusOf(err) == 409) {
		t, err = a.c.Topic(ctx, name)
		if err == nil && t.Partitions != partitions {
			return fmt.Errorf("streams: internal topic %s has %d partitions, the topology needs %d (the inputs' count changed?): delete it, or reset the application", name, t.Partitions, partitions)
		}
	}
	if err != nil {
		return fmt.Errorf("streams: internal topic %s: %w", name, err)
	}
	a.topics[name] = metaOf(t)
	return nil
}

// partitions is the partition count of a topic the topology writes.
func (a *App) partitions(topic string) (int32, error) {
	m, ok := a.topics[topic]
	if !ok {
		return 0, fmt.Errorf("topic %s is not one the topology writes", topic)
	}
	return m.partitions, nil
}

// field renders stored bytes as a JSON API field under a topic format.
func field(b []byte, format, topic, what string) (json.RawMessage, error) {
	if b == nil {
		return nil, nil
	}
	switch format {
	case "binary":
		return client.Binary(b), nil
	case "json":
		if !json.Valid(b) {
			return nil, fmt.Errorf("the %s for %s (%s.format json) is not JSON: use a JSON serde, or a string or binary topic", what, topic, what)
		}
		return json.RawMessage(b), nil
	default:
		s := string(b)
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("the %s for %s (%s.format string) is not UTF-8: use a binary topic", what, topic, what)
		}
		return client.String(s), nil
	}
}
