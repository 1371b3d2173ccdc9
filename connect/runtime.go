package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// Core is the broker core the runtime calls, in-process, as each connector's principal
// (*broker.Broker has it).
type Core interface {
	CommitSource(ctx context.Context, who broker.Principal, req broker.SourceRequest) (broker.ProduceResult, error)
	Produce(ctx context.Context, who broker.Principal, req broker.ProduceRequest) (broker.ProduceResult, error)
	Fetch(ctx context.Context, who broker.Principal, req broker.FetchRequest) (broker.FetchResult, error)
	ListOffset(ctx context.Context, who broker.Principal, topic string, partition int32, at int64) (int64, error)
	Heartbeat(ctx context.Context, who broker.Principal, hb catalog.Heartbeat) (catalog.HeartbeatResult, error)
	CommitOffsets(ctx context.Context, who broker.Principal, c catalog.OffsetCommit) error
	GroupOffsets(ctx context.Context, who broker.Principal, group string) ([]catalog.GroupOffset, error)
	LookupTopic(ctx context.Context, who broker.Principal, name string) (broker.TopicInfo, error)
	CreateTopic(ctx context.Context, who broker.Principal, req broker.CreateTopicRequest) (catalog.Topic, error)
}

var _ Core = (*broker.Broker)(nil)

// Store is the catalog the runtime's workers hold their tasks through (both backends);
// administration goes through the core (REST).
type Store interface {
	catalog.Connect
}

var _ Store = catalog.Backend(nil)

// sinkGroup is a sink connector's consumer group.
func sinkGroup(connector string) string { return broker.SinkGroup(connector) }

// taskEnv is what a task runner runs with: its instance's fence, its resolved config,
// and the pipeline the config builds (converters, transforms, error policy).
type taskEnv struct {
	fence     catalog.TaskFence
	who       broker.Principal
	worker    string
	cfg       map[string]string
	g         getter
	keyConv   Converter
	valConv   Converter
	keyClass  string
	valClass  string
	chain     chain
	policy    errorPolicy
	core      Core
	store     Store
	log       *slog.Logger
	fail      *failpoints
	control   *taskControl
	topicsMu  sync.Mutex
	topicSeen map[string]bool
	// resolved are what the config's provider references resolved to: kept out of the
	// task's status trace.
	resolved secrets
	refusals refusals // the task's goroutine's alone
}

// newTaskEnv builds a task's environment from its assignment: the connector's config
// overlaid with the task's, provider references resolved.
func newTaskEnv(at catalog.AssignedTask, w *Worker, control *taskControl) (*taskEnv, error) {
	raw := maps.Clone(at.ConnectorConfig)
	maps.Copy(raw, at.Config)
	cfg, errs, resolved := w.cfg.Providers.resolve(raw)
	for k, e := range errs {
		return nil, fmt.Errorf("config %s: %s", k, e)
	}
	g := newGetter(cfg, commonKeys(at.Type))
	ch, err := buildChain(cfg)
	if err != nil {
		return nil, err
	}
	log := w.log.With("connector", at.Connector, "task", at.Task, "generation", at.Generation)
	return &taskEnv{
		fence: at.TaskFence, who: broker.Principal{Name: at.Principal}, worker: w.id,
		cfg: cfg, g: g,
		keyConv: newConverter(g, cfgKeyConverter), valConv: newConverter(g, cfgValueConverter),
		keyClass: g.str(cfgKeyConverter), valClass: g.str(cfgValueConverter),
		chain:  ch,
		policy: newErrorPolicy(g, at.Connector, at.Task, log),
		core:   w.core, store: w.store, log: log, fail: w.fail, control: control,
		topicSeen: map[string]bool{}, resolved: resolved,
	}, nil
}

// report records the task's state, as its instance (a stale one is refused: ignored).
func (e *taskEnv) report(ctx context.Context, state, trace string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := e.store.ReportTaskState(ctx, e.fence, e.worker, state, trace); err != nil && !errors.Is(err, catalog.ErrStaleGeneration) {
		e.log.Warn("report task state", "state", state, "err", err)
	}
}

// sawTopics records topics the task used, once each (GET .../topics).
func (e *taskEnv) sawTopics(ctx context.Context, topics ...string) {
	e.topicsMu.Lock()
	var fresh []string
	for _, t := range topics {
		if !e.topicSeen[t] {
			e.topicSeen[t] = true
			fresh = append(fresh, t)
		}
	}
	e.topicsMu.Unlock()
	if len(fresh) == 0 {
		return
	}
	if err := e.store.AddConnectorTopics(ctx, e.fence.Connector, fresh); err != nil && ctx.Err() == nil {
		e.log.Warn("record connector topics", "topics", fresh, "err", err)
	}
}

// ensureDLQ creates the dead-letter topic when it is missing.
func (e *taskEnv) ensureDLQ(ctx context.Context) error {
	topic := e.policy.dlq
	if topic == "" {
		return nil
	}
	_, err := e.core.LookupTopic(ctx, e.who, topic)
	var be *broker.Error
	if errors.As(err, &be) && be.Code == broker.CodeTopicNotFound {
		_, err = e.core.CreateTopic(ctx, e.who, broker.CreateTopicRequest{Name: topic, Partitions: 1})
		if errors.As(err, &be) && be.Code == broker.CodeTopicExists {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("dead-letter topic %s: %w", topic, err)
	}
	return nil
}

// encodeOffset turns a task's offset into the catalog's canonical JSON.
func encodeOffset(o Offset) (catalog.SourceOffset, error) {
	p, err := catalog.CanonicalJSONObject([]byte(catalog.MarshalCanonical(o.Partition)))
	if err != nil {
		return catalog.SourceOffset{}, fmt.Errorf("source partition %v: %w", o.Partition, err)
	}
	off, err := catalog.CanonicalJSONObject([]byte(catalog.MarshalCanonical(o.Offset)))
	if err != nil {
		return catalog.SourceOffset{}, fmt.Errorf("source offset %v: %w", o.Offset, err)
	}
	return catalog.SourceOffset{Partition: p, Offset: off}, nil
}

// decodeOffset reads a stored offset back.
func decodeOffset(o catalog.SourceOffset) (Offset, error) {
	var out Offset
	if err := decodeJSON(o.Partition, &out.Partition); err != nil {
		return out, err
	}
	return out, decodeJSON(o.Offset, &out.Offset)
}

func decodeJSON(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	return d.Decode(v)
}

func toSegmentHeaders(hs []Header) []segment.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]segment.Header, len(hs))
	for i, h := range hs {
		out[i] = segment.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func fromSegmentHeaders(hs []segment.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// taskControl carries the worker's wishes to a running task: pause or run.
type taskControl struct {
	mu      sync.Mutex
	paused  bool
	changed chan struct{} // closed and replaced on every change
}

func newTaskControl(paused bool) *taskControl {
	return &taskControl{paused: paused, changed: make(chan struct{})}
}

func (c *taskControl) set(paused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused != paused {
		c.paused = paused
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

func (c *taskControl) state() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused, c.changed
}

// untilPaused returns a context that ends with ctx or when the task is paused, so that a
// task blocked waiting for data notices a pause.
func (c *taskControl) untilPaused(ctx context.Context) (context.Context, context.CancelFunc) {
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			paused, changed := c.state()
			if paused {
				cancel()
				return
			}
			select {
			case <-pctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return pctx, cancel
}

// waitRunning blocks while the task is paused (reporting PAUSED, then RUNNING again),
// answering false when ctx ends; idle, when given, runs every tick while paused (a sink
// keeps its group membership).
func (e *taskEnv) waitRunning(ctx context.Context, idle func()) bool {
	paused, changed := e.control.state()
	if !paused {
		return ctx.Err() == nil
	}
	e.report(ctx, catalog.StatePaused, "")
	for paused {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		case <-afterIdle(idle):
			idle()
		}
		paused, changed = e.control.state()
	}
	e.report(ctx, catalog.StateRunning, "")
	return true
}
