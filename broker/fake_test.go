package broker

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/writer"
)

// testNow is the node clock of every test: CreateTime bounds are checked against it.
var testNow = time.UnixMilli(1_700_000_000_000)

// fakeCatalog keeps topics in memory: the rules under test need nothing else of a
// catalog (the SQLite tests run the core over a real one).
type fakeCatalog struct {
	mu     sync.Mutex
	nextID int64
	topics map[string]catalog.Topic
	reads  int // Topic calls
}

var _ Catalog = (*fakeCatalog)(nil)

func (c *fakeCatalog) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; ok {
		return catalog.Topic{}, fmt.Errorf("create topic %s: %w", name, catalog.ErrTopicExists)
	}
	if _, err := catalog.ParseConfig(configs); err != nil {
		return catalog.Topic{}, err
	}
	c.nextID++
	t := catalog.Topic{ID: c.nextID, Name: name, Partitions: partitions, Configs: maps.Clone(configs), CreatedAt: testNow}
	if c.topics == nil {
		c.topics = map[string]catalog.Topic{}
	}
	c.topics[name] = t
	return t, nil
}

func (c *fakeCatalog) Topic(ctx context.Context, name string) (catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	t, ok := c.topics[name]
	if !ok {
		return catalog.Topic{}, fmt.Errorf("topic %s: %w", name, catalog.ErrTopicNotFound)
	}
	return t, nil
}

func (c *fakeCatalog) Topics(ctx context.Context) ([]catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []catalog.Topic
	for _, t := range c.topics {
		out = append(out, t)
	}
	return out, nil
}

func (c *fakeCatalog) DeleteTopic(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; !ok {
		return fmt.Errorf("delete topic %s: %w", name, catalog.ErrTopicNotFound)
	}
	delete(c.topics, name)
	return nil
}

func (c *fakeCatalog) UpdateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (catalog.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return catalog.Topic{}, fmt.Errorf("update topic %s: %w", name, catalog.ErrTopicNotFound)
	}
	merged, _, err := catalog.UpdateConfigs(t.Configs, configs)
	if err != nil {
		return catalog.Topic{}, err
	}
	if partitions != 0 {
		t.Partitions = partitions
	}
	t.Configs = merged
	c.topics[name] = t
	return t, nil
}

func (c *fakeCatalog) Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.topics {
		if t.ID == topicID {
			var out []catalog.PartitionInfo
			for p := t.Partitions - 1; p >= 0; p-- { // reverse: the core must sort
				out = append(out, catalog.PartitionInfo{TopicID: t.ID, Partition: p, LogStartOffset: 1, HighWatermark: 10})
			}
			return out, nil
		}
	}
	return nil, catalog.ErrTopicNotFound
}

func (c *fakeCatalog) OffsetForTime(ctx context.Context, topicID int64, partition int32, ts int64) (int64, error) {
	return ts % 7, nil
}

// captureWriter keeps every request it is handed and answers offsets counted per
// partition (a request for partition -1 lands on 0), or err.
type captureWriter struct {
	mu   sync.Mutex
	reqs []writer.Request
	next map[writer.TopicPartition]int64
	err  error
	dup  bool
}

func (w *captureWriter) Produce(ctx context.Context, req writer.Request) (writer.Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = append(w.reqs, req)
	if w.err != nil {
		return writer.Response{}, w.err
	}
	if w.next == nil {
		w.next = map[writer.TopicPartition]int64{}
	}
	var resp writer.Response
	place := func(topic int64, part int32) {
		tp := writer.TopicPartition{TopicID: topic, Partition: max(part, 0)}
		resp.Records = append(resp.Records, writer.RecordResult{Partition: tp.Partition, Offset: w.next[tp]})
		w.next[tp]++
	}
	for _, r := range req.Records {
		place(r.TopicID, r.Partition)
	}
	if rb := req.Raw; rb != nil {
		for _, s := range rb.Summaries {
			for range s.Header.NumRecords {
				place(rb.TopicID, rb.Partition)
			}
		}
	}
	resp.Duplicate = w.dup
	return resp, nil
}

func (w *captureWriter) calls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.reqs)
}

// env is a core over the fakes, with topics of every kind of config.
type env struct {
	t   *testing.T
	b   *Broker
	cat *fakeCatalog
	w   *captureWriter
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, cat: &fakeCatalog{}, w: &captureWriter{}}
	e.b = New(Config{}, Deps{Catalog: e.cat, Writer: e.w, Now: func() time.Time { return testNow }})
	for name, cfg := range map[string]map[string]string{
		"plain":   nil,
		"bounded": {"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "1000", "max.message.bytes": "10"},
		"stamped": {"message.timestamp.type": "LogAppendTime"},
		"compact": {"cleanup.policy": "compact"},
		"both":    {"cleanup.policy": "compact,delete"},
	} {
		if _, err := e.cat.CreateTopic(context.Background(), name, 2, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// wantCode fails unless err is the core's *Error with code.
func wantCode(t *testing.T, err error, code Code) *Error {
	t.Helper()
	e, ok := err.(*Error)
	if !ok || e == nil {
		t.Fatalf("error %v (%T), want a *broker.Error %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("code %s (%s), want %s", e.Code, e.Message, code)
	}
	return e
}
