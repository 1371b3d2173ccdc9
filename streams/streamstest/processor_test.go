package streamstest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/streamstest"
)

// dedupe forwards a key's first record only, remembering keys in a store, and every
// 10s of stream time (and every minute of wall clock) forwards how many keys it has.
type dedupe struct {
	ctx  *streams.ProcessorContext[string, string]
	seen *streams.KeyValueStore[string, int64]
}

func (p *dedupe) Init(ctx *streams.ProcessorContext[string, string]) error {
	p.ctx = ctx
	var err error
	if p.seen, err = streams.KVStore(ctx, "seen", str, i64); err != nil {
		return err
	}
	count := func(kind string) func(now time.Time) error {
		return func(now time.Time) error {
			n := 0
			if err := p.seen.All(func(string, int64) bool { n++; return true }); err != nil {
				return err
			}
			ctx.Forward(streams.Record[string, string]{Key: kind, Value: fmt.Sprint(n), Timestamp: now})
			return nil
		}
	}
	if err := ctx.Schedule(10*time.Second, streams.StreamTime, count("stream-punctuation")); err != nil {
		return err
	}
	return ctx.Schedule(time.Minute, streams.WallClock, count("wall-punctuation"))
}

func (p *dedupe) Process(r streams.Record[string, string]) error {
	if r.Value == "boom" {
		return errors.New("boom")
	}
	if _, ok, err := p.seen.Get(r.Key); err != nil || ok {
		return err
	}
	if err := p.seen.Put(r.Key, 1); err != nil {
		return err
	}
	pos, _ := p.ctx.Input()
	r.Value = r.Value + "@" + pos.String()
	p.ctx.Forward(r)
	return nil
}

func (p *dedupe) Close() error { return nil }

func processorTopology() *streams.Builder {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.Process(in, "dedupe", func() streams.Processor[string, string, string, string] { return &dedupe{} }, "seen").To("out", str, str)
	return b
}

func TestProcessorStoresAndPunctuators(t *testing.T) {
	d := streamstest.New(t, processorTopology(), streamstest.Config{Start: time.UnixMilli(0)})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, str)
	p.Pipe("a", "1", time.UnixMilli(1_000)) // aligns the stream-time punctuator to 10s
	p.Pipe("a", "2", time.UnixMilli(2_000))
	p.Pipe("b", "3", time.UnixMilli(3_000))
	want(t, "deduped", pairs(out.Read()), []kv{{"a", "1@in/0/0"}, {"b", "3@in/0/2"}})
	p.Pipe("c", "4", time.UnixMilli(10_000))
	want(t, "stream-time punctuation", pairs(out.Read()), []kv{{"c", "4@in/0/3"}, {"stream-punctuation", "3"}})
	p.Pipe("d", "5", time.UnixMilli(15_000)) // not yet 20s
	want(t, "no punctuation before 20s", pairs(out.Read()), []kv{{"d", "5@in/0/4"}})
	if err := d.AdvanceWallClock(59 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := out.Read(); len(got) != 0 {
		t.Errorf("wall-clock punctuation before a minute: %v", got)
	}
	if err := d.AdvanceWallClock(time.Second); err != nil {
		t.Fatal(err)
	}
	want(t, "wall-clock punctuation", pairs(out.Read()), []kv{{"wall-punctuation", "4"}})
	if v, ok := streamstest.Get(d, "seen", str, i64, "c"); !ok || v != 1 {
		t.Errorf("store seen[c] = %d %v", v, ok)
	}
	// A processor error stops the task: the driver reports it, naming the processor.
	err := p.TryPipe("e", "boom", time.UnixMilli(16_000))
	if err == nil || !strings.Contains(err.Error(), "processor dedupe: boom") {
		t.Errorf("err %v", err)
	}
}

// A poison record stops the task unless a dead-letter topic is set; then it goes
// there with the reason and its position. Never a silent skip.
func TestPoisonRecords(t *testing.T) {
	build := func() *streams.Builder {
		b := streams.NewBuilder("app")
		streams.From(b, "in", str, i64).To("out", str, i64)
		return b
	}
	d := streamstest.New(t, build(), streamstest.Config{})
	err := streamstest.NewInput(d, "in", str, i64).PipeRaw([]byte("k"), []byte("not 8 bytes"), at(0))
	if err == nil || !strings.Contains(err.Error(), "poison record at in/0/0") {
		t.Errorf("err %v, want the task stopped on the poison record", err)
	}

	d = streamstest.New(t, build(), streamstest.Config{DeadLetterTopic: "dead"})
	in := streamstest.NewInput(d, "in", str, i64)
	if err := in.PipeRaw([]byte("k"), []byte("not 8 bytes"), at(0)); err != nil {
		t.Fatal(err)
	}
	in.Pipe("k", 7, at(1))
	dead := d.Output("dead")
	if len(dead) != 1 || string(dead[0].Value) != "not 8 bytes" {
		t.Fatalf("dead letters %v", dead)
	}
	hs := map[string]string{}
	for _, h := range dead[0].Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs["strata-source"] != "in/0/0" || !strings.Contains(hs["strata-error"], "int64 needs 8 bytes") {
		t.Errorf("dead letter headers %v", hs)
	}
	if got := pairs(streamstest.NewOutput(d, "out", str, i64).Read()); len(got) != 1 || got[0] != (kv{"k", "7"}) {
		t.Errorf("out %v", got)
	}
	if m := d.Metrics(); m.PoisonRecords != 1 {
		t.Errorf("poison records %d", m.PoisonRecords)
	}
}

// Every output carries the position of the input that caused it, numbered: unique
// even when one input causes several outputs.
func TestInputPositionHeader(t *testing.T) {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.FlatMapValues(in, func(_, v string) []string { return []string{v, v} }).To("out", str, str)
	d := streamstest.New(t, b, streamstest.Config{InputPositionHeader: "pos", Partitions: map[string]int32{"in": 2, "out": 2}})
	p := streamstest.NewInput(d, "in", str, str)
	p.Pipe("a", "x", at(0))
	p.Pipe("b", "y", at(1))
	seen := map[string]bool{}
	for _, r := range d.Output("out") {
		var pos string
		for _, h := range r.Headers {
			if h.Key == "pos" {
				pos = string(h.Value)
			}
		}
		if pos == "" || seen[pos] {
			t.Errorf("header %q missing or repeated", pos)
		}
		seen[pos] = true
	}
	if len(seen) != 4 {
		t.Errorf("%d distinct positions: %v", len(seen), seen)
	}
}

// Commits stay within the limits: a record whose effects would overflow the open
// commit starts the next one; a record whose effects alone exceed them stops the task.
func TestCommitLimits(t *testing.T) {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, i64)
	streams.FlatMapValues(in, func(_ string, n int64) []int64 { return make([]int64, n) }).To("out", str, i64)
	d := streamstest.New(t, b, streamstest.Config{MaxCommitRecords: 10})
	p := streamstest.NewInput(d, "in", str, i64)
	p.Pipe("a", 10, at(0)) // exactly the limit: one commit
	before := d.Metrics().Commits
	p.Pipe("a", 4, at(1))
	if got := len(d.Output("out")); got != 14 {
		t.Fatalf("%d outputs", got)
	}
	if d.Metrics().Commits != before+1 {
		t.Errorf("commits %d -> %d", before, d.Metrics().Commits)
	}
	err := p.TryPipe("a", 11, at(2))
	if err == nil || !strings.Contains(err.Error(), "one commit holds at most 10 records") {
		t.Errorf("err %v, want the task stopped: one record's output exceeds a commit", err)
	}
}
