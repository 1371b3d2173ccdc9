package security_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/node"
)

// The connectors the Connect tests run: a source that writes what the test releases, and
// a sink that keeps what it reads (and refuses what it is told to, quoting it, as a
// careless plugin would). They touch no file, so what they prove is the core's
// authorization and the runtime's, not the file connectors'.

const (
	genSourceClass = "test.GenSource"
	memSinkClass   = "test.MemSink"
)

// gates are the test's hands on its sources: a source configured with gate NAME writes
// one record for each value sent on gate(NAME).
var gates sync.Map // string → chan string

func gate(name string) chan string {
	ch, _ := gates.LoadOrStore(name, make(chan string, 100))
	return ch.(chan string)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

type genSource struct{}

func (genSource) Class() string                                      { return genSourceClass }
func (genSource) Version() string                                    { return "1.0" }
func (genSource) ValidateConfig(map[string]string) map[string]string { return nil }
func (genSource) Config() []connect.ConfigKey {
	return []connect.ConfigKey{
		{Name: "topic", Type: connect.TypeList, NoDefault: true, Doc: "Topics to write, in turn."},
		{Name: "count", Type: connect.TypeInt, Default: "0", Doc: "Records written at the start."},
		{Name: "value", Type: connect.TypeString, Default: "v", Doc: "Their value."},
		{Name: "gate", Type: connect.TypeString, Default: "", Doc: "A gate whose values are written as they come."},
	}
}
func (genSource) TaskConfigs(cfg map[string]string, _ int) ([]map[string]string, error) {
	return []map[string]string{{}}, nil
}
func (genSource) Topics(cfg map[string]string) []string { return split(cfg["topic"]) }
func (genSource) NewTask() connect.SourceTask           { return &genTask{} }

var _ connect.SourceConnector = genSource{}

type genTask struct {
	topics  []string
	pending []string
	gate    chan string
	n       int
}

func (t *genTask) Start(_ context.Context, cfg map[string]string, _ connect.SourceContext) error {
	t.topics = split(cfg["topic"])
	n, _ := strconv.Atoi(cfg["count"])
	v := cfg["value"]
	if v == "" {
		v = "v"
	}
	for range n {
		t.pending = append(t.pending, v)
	}
	if cfg["gate"] != "" {
		t.gate = gate(cfg["gate"])
	}
	return nil
}

func (t *genTask) Poll(ctx context.Context) (connect.SourceBatch, error) {
	if len(t.pending) == 0 {
		select {
		case <-ctx.Done():
			return connect.SourceBatch{}, ctx.Err()
		case v := <-t.gate:
			t.pending = append(t.pending, v)
		}
	}
	var b connect.SourceBatch
	for _, v := range t.pending {
		b.Records = append(b.Records, connect.Record{Topic: t.topics[t.n%len(t.topics)], Partition: 0, Value: v, Timestamp: -1, Offset: -1})
		t.n++
	}
	t.pending = nil
	b.Offsets = []connect.Offset{{Partition: map[string]any{"gen": "x"}, Offset: map[string]any{"n": t.n}}}
	return b, nil
}

func (t *genTask) Committed(context.Context, connect.SourceBatch) error { return nil }
func (t *genTask) Stop() error                                          { return nil }

type memSink struct{}

func (memSink) Class() string                                      { return memSinkClass }
func (memSink) Version() string                                    { return "1.0" }
func (memSink) ValidateConfig(map[string]string) map[string]string { return nil }
func (memSink) Config() []connect.ConfigKey {
	return []connect.ConfigKey{{Name: "reject", Type: connect.TypeString, Default: "", Doc: "Refuse records whose value contains this."}}
}
func (memSink) TaskConfigs(cfg map[string]string, _ int) ([]map[string]string, error) {
	return []map[string]string{{}}, nil
}
func (memSink) NewTask() connect.SinkTask { return &memTask{next: map[connect.TopicPartition]int64{}} }

type memTask struct {
	reject string
	next   map[connect.TopicPartition]int64
}

func (t *memTask) Start(_ context.Context, cfg map[string]string, _ connect.SinkContext) error {
	t.reject = cfg["reject"]
	return nil
}

func (t *memTask) Open(_ context.Context, ps map[connect.TopicPartition]int64) error {
	for tp, off := range ps {
		t.next[tp] = off
	}
	return nil
}

func (t *memTask) Put(_ context.Context, rs []connect.Record) error {
	for i, r := range rs {
		if s, _ := r.Value.(string); t.reject != "" && strings.Contains(s, t.reject) {
			// A careless plugin quotes the record it refuses.
			return &connect.BadRecordError{Index: i, Err: fmt.Errorf("memsink refuses the record %q (it contains %s)", s, t.reject)}
		}
		t.next[connect.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
	}
	return nil
}

func (t *memTask) PreCommit(context.Context) (map[connect.TopicPartition]int64, error) {
	out := make(map[connect.TopicPartition]int64, len(t.next))
	for tp, off := range t.next {
		out[tp] = off
	}
	return out, nil
}

func (t *memTask) Close(_ context.Context, tps []connect.TopicPartition) error {
	for _, tp := range tps {
		delete(t.next, tp)
	}
	return nil
}
func (t *memTask) Stop() error { return nil }

// startConnectStack starts a stack with the connect role running the test connectors;
// prov, when given, are its config providers.
func startConnectStack(t *testing.T, prov ...connect.Providers) *stack {
	t.Helper()
	wc := connect.WorkerConfig{Lease: 2 * time.Second, Plugins: connect.NewPlugins(connect.Source(genSource{}), connect.Sink(memSink{}))}
	if len(prov) > 0 {
		wc.Providers = prov[0]
	}
	return startStackWith(t, 0, func(c *node.Config) { c.Connect, c.ConnectConfig = true, wc })
}
