package streamstest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/client"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/streamstest"
	"github.com/strata-io/strata/streams/window"
)

// windowedCounter counts records per key and 10s window in a window store, and keeps
// per key the sessions (gap 5s) in a session store, merging them by hand; on a
// record with value "report" it forwards what both stores hold for its key.
type windowedCounter struct {
	ctx  *streams.ProcessorContext[string, string]
	wins *streams.WindowStore[string, int64]
	sess *streams.SessionStore[string, int64]
}

func (p *windowedCounter) Init(ctx *streams.ProcessorContext[string, string]) error {
	p.ctx = ctx
	var err error
	if p.wins, err = streams.WindowStoreOf(ctx, "wins", str, i64); err != nil {
		return err
	}
	if _, err := streams.WindowStoreOf(ctx, "sess", str, i64); !errors.Is(err, streams.ErrNoStore) {
		return fmt.Errorf("a session store opened as a window store: %v", err)
	}
	p.sess, err = streams.SessionStoreOf(ctx, "sess", str, i64)
	return err
}

func (p *windowedCounter) Process(r streams.Record[string, string]) error {
	if r.Value == "report" {
		var out string
		if err := p.wins.Fetch(r.Key, time.UnixMilli(0), r.Timestamp, func(start time.Time, n int64) bool {
			out += fmt.Sprintf("w%d=%d ", start.UnixMilli(), n)
			return true
		}); err != nil {
			return err
		}
		if err := p.sess.FindSessions(r.Key, time.UnixMilli(0), r.Timestamp, func(w window.Window, n int64) bool {
			out += fmt.Sprintf("s[%d,%d]=%d ", w.Start, w.End-1, n)
			return true
		}); err != nil {
			return err
		}
		p.ctx.Forward(streams.Record[string, string]{Key: r.Key, Value: out, Timestamp: r.Timestamp})
		return nil
	}
	ts := r.Timestamp.UnixMilli()
	start := time.UnixMilli(ts - ts%10_000)
	n, _, err := p.wins.Get(r.Key, start)
	if err != nil {
		return err
	}
	if err := p.wins.Put(r.Key, start, n+1); err != nil {
		return err
	}
	merged, count := window.Window{Start: ts, End: ts + 1}, int64(1)
	var found []window.Window
	if err := p.sess.FindSessions(r.Key, time.UnixMilli(ts-5_000), time.UnixMilli(ts+5_000), func(w window.Window, n int64) bool {
		found = append(found, w)
		merged.Start, merged.End = min(merged.Start, w.Start), max(merged.End, w.End)
		count += n
		return true
	}); err != nil {
		return err
	}
	for _, w := range found {
		if err := p.sess.Remove(r.Key, w); err != nil {
			return err
		}
	}
	return p.sess.Put(r.Key, merged, count)
}

func (p *windowedCounter) Close() error { return nil }

// Window and session stores in the Processor API: values by key and window, sessions
// found by range and merged by hand, other keys apart, entries past retention gone,
// every change in the stores' changelogs.
func TestProcessorWindowAndSessionStores(t *testing.T) {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.ProcessWithStores(in, "counter", func() streams.Processor[string, string, string, string] { return &windowedCounter{} },
		streams.WindowStoreSpec("wins", 30*time.Second), streams.SessionStoreSpec("sess", 30*time.Second)).To("out", str, str)
	d := streamstest.New(t, b, streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, str)
	for _, ts := range []int64{1_000, 4_000, 12_000, 30_000} {
		p.Pipe("k", "", time.UnixMilli(ts))
	}
	p.Pipe("k", "report", time.UnixMilli(30_000))
	want(t, "stores", pairs(out.Read()), []kv{{"k", "w0=2 w10000=1 w30000=1 s[1000,4000]=2 s[12000,12000]=1 s[30000,30000]=1 "}})
	// Stream time 31000 (another key's record): the window starting at 0 is more than
	// 30s behind; the session ending at 4000 is not.
	p.Pipe("j", "", time.UnixMilli(31_000))
	p.Pipe("k", "report", time.UnixMilli(31_000))
	want(t, "retention", pairs(out.Read()), []kv{{"k", "w10000=1 w30000=1 s[1000,4000]=2 s[12000,12000]=1 s[30000,30000]=1 "}})
	// Stream time 70000: windows starting before 40000 and sessions ending before
	// 40000 are past the 30s retention.
	p.Pipe("k", "", time.UnixMilli(70_000))
	p.Pipe("k", "report", time.UnixMilli(70_000))
	want(t, "after retention", pairs(out.Read()), []kv{{"k", "w70000=1 s[70000,70000]=1 "}})
	if len(d.Changelog("wins")) == 0 || len(d.Changelog("sess")) == 0 {
		t.Error("the stores have no changelog records")
	}
}

// The per-task Prometheus metrics: records processed, late records, punctuations.
func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.WindowedCount(streams.GroupByKey(in), "counts", window.Tumbling(time.Second, 0), streams.EmitEveryUpdate).To("out", str, serde64Result)
	streams.Process(in, "dedupe", func() streams.Processor[string, string, string, string] { return &dedupe{} }, "seen")
	d := streamstest.New(t, b, streamstest.Config{Registerer: reg, Partitions: map[string]int32{"in": 2}})
	p := streamstest.NewInput(d, "in", str, str)
	p.Pipe("a", "", time.UnixMilli(5_000))
	p.Pipe("a", "", time.UnixMilli(25_000)) // the stream-time punctuator fires (every 10s)
	p.Pipe("a", "", time.UnixMilli(1_000))  // late
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	task := fmt.Sprintf("0_%d", client.KeyPartition([]byte("a"), 2))
	for name, want := range map[string]float64{
		"strata_streams_records_processed_total{app=app,task=" + task + "}":    3,
		"strata_streams_late_records_dropped_total{app=app,task=" + task + "}": 1,
		"strata_streams_punctuations_total{app=app,task=" + task + "}":         1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
}
