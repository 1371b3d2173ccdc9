package streamstest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/streamstest"
	"github.com/strata-io/strata/streams/window"
)

func windowed(recs []streams.Record[string, window.Result[int64]]) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s[%d,%d)=%d", r.Key, r.Value.Window.Start, r.Value.Window.End, r.Value.Value)
	}
	return out
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func countTopology(spec window.Spec, emit streams.Emit) *streams.Builder {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.WindowedCount(streams.GroupByKey(in), "counts", spec, emit).To("out", str, serde64Result)
	return b
}

var serde64Result = jsonResult()

func TestTumblingBoundaries(t *testing.T) {
	d := streamstest.New(t, countTopology(window.Tumbling(time.Minute, 0), streams.EmitEveryUpdate), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	p.Pipe("k", "", time.UnixMilli(0))
	p.Pipe("k", "", time.UnixMilli(59_999))
	p.Pipe("k", "", time.UnixMilli(60_000))
	wantStrings(t, "tumbling", windowed(out.Read()), []string{"k[0,60000)=1", "k[0,60000)=2", "k[60000,120000)=1"})
}

func TestHoppingBoundaries(t *testing.T) {
	d := streamstest.New(t, countTopology(window.Hopping(30*time.Second, 10*time.Second, time.Hour), streams.EmitEveryUpdate), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	p.Pipe("k", "", time.UnixMilli(29_999))
	wantStrings(t, "in 3 windows", windowed(out.Read()), []string{"k[0,30000)=1", "k[10000,40000)=1", "k[20000,50000)=1"})
	p.Pipe("k", "", time.UnixMilli(30_000)) // leaves [0,30000)
	wantStrings(t, "on a boundary", windowed(out.Read()), []string{"k[10000,40000)=2", "k[20000,50000)=2", "k[30000,60000)=1"})
}

// Grace: a window [0,60s) with 10s grace closes when stream time reaches 70s. A record
// for it is counted while stream time is 69.999s, dropped (and counted as late) at 70s.
func TestGrace(t *testing.T) {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.WindowedCount(streams.GroupByKey(in), "counts", window.Tumbling(time.Minute, 10*time.Second), streams.EmitOnWindowClose).To("out", str, serde64Result)
	d := streamstest.New(t, b, streamstest.Config{LateRecordTopic: "late"})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	p.Pipe("k", "", time.UnixMilli(1_000))
	p.Pipe("other", "", time.UnixMilli(69_999)) // stream time end+grace-1ms
	p.Pipe("k", "", time.UnixMilli(30_000))     // still counted
	if v, ok := streamstest.GetWindow(d, "counts", str, i64, "k", time.UnixMilli(0)); !ok || v != 2 {
		t.Fatalf("window [0,60s) of k = %d %v before it closes, want 2", v, ok)
	}
	if got := out.Read(); len(got) != 0 {
		t.Fatalf("emitted before close: %v", windowed(got))
	}
	p.Pipe("other", "", time.UnixMilli(70_000)) // stream time end+grace: [0,60s) closes
	wantStrings(t, "closed once", windowed(out.Read()), []string{"k[0,60000)=2"})
	p.Pipe("k", "", time.UnixMilli(59_999)) // late: dropped, counted, sent to the late topic
	if got := out.Read(); len(got) != 0 {
		t.Errorf("late record emitted %v", windowed(got))
	}
	if m := d.Metrics(); m.LateRecordsDropped != 1 {
		t.Errorf("late records dropped = %d, want 1", m.LateRecordsDropped)
	}
	if late := d.Output("late"); len(late) != 1 || string(late[0].Key) != "k" || late[0].Timestamp.UnixMilli() != 59_999 {
		t.Errorf("late topic %v", late)
	}
	// The closed window is gone from the store (a tombstone in its changelog).
	if _, ok := streamstest.GetWindow(d, "counts", str, i64, "k", time.UnixMilli(0)); ok {
		t.Error("closed window still stored")
	}
	log := d.Changelog("counts")
	if last := log[len(log)-1]; last.Value != nil {
		t.Errorf("last changelog record %+v, want the closed window's tombstone", last)
	}
	// Stream time moving on never emits [0,60s) again.
	p.Pipe("k", "", time.UnixMilli(200_000))
	wantStrings(t, "next windows", windowed(out.Read()), []string{"other[60000,120000)=2"})
}

// Emit on close: exactly one result per window and key, however many records.
func TestEmitOnCloseOncePerWindow(t *testing.T) {
	d := streamstest.New(t, countTopology(window.Hopping(20*time.Second, 10*time.Second, 0), streams.EmitOnWindowClose), streamstest.Config{Partitions: map[string]int32{"in": 2}})
	p := streamstest.NewInput(d, "in", str, str)
	for i := range 50 {
		p.Pipe(fmt.Sprintf("k%d", i%2), "", time.UnixMilli(int64(i)*1000))
	}
	p.Pipe("k0", "", time.UnixMilli(1_000_000))
	p.Pipe("k1", "", time.UnixMilli(1_000_000))
	seen := map[string]int{}
	for _, r := range streamstest.NewOutput(d, "out", str, serde64Result).Read() {
		seen[fmt.Sprintf("%s/%d", r.Key, r.Value.Window.Start)]++
	}
	// Windows starting -10s..40s, for each of two keys: 6 windows each.
	if len(seen) != 12 {
		t.Errorf("%d windows emitted, want 12: %v", len(seen), seen)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("window %s emitted %d times", k, n)
		}
	}
}

func TestBadConfigurations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *streams.Builder)
		parts map[string]int32
		want  string
	}{
		{"window without grace", func(b *streams.Builder) {
			streams.WindowedCount(streams.GroupByKey(streams.From(b, "in", str, str)), "w", window.Spec{}, streams.EmitEveryUpdate)
		}, nil, "no window given"},
		{"negative grace", func(b *streams.Builder) {
			streams.WindowedCount(streams.GroupByKey(streams.From(b, "in", str, str)), "w", window.Tumbling(time.Minute, -time.Second), streams.EmitEveryUpdate)
		}, nil, "grace"},
		{"no name", func(b *streams.Builder) { streams.Count(streams.GroupByKey(streams.From(b, "in", str, str)), "") }, nil, "needs a name"},
		{"name twice", func(b *streams.Builder) {
			s := streams.From(b, "in", str, str)
			streams.Count(streams.GroupByKey(s), "n")
			streams.Count(streams.GroupByKey(s), "n")
		}, nil, "already used"},
		{"rekeyed join", func(b *streams.Builder) {
			s := streams.From(b, "in", str, str)
			tb := streams.Count(streams.GroupByKey(s), "n")
			streams.JoinTable(streams.Map(s, func(k, v string) (string, string) { return v, k }), tb, func(k, v string, n int64) int64 { return n })
		}, nil, "Repartition it first"},
		{"mapped without serdes", func(b *streams.Builder) {
			s := streams.Map(streams.From(b, "in", str, str), func(k, v string) (int64, string) { return 1, v })
			streams.Count(streams.GroupByKey(s), "n")
		}, nil, "serde is not known"},
		{"co-partitioning", func(b *streams.Builder) {
			streams.Merge(streams.From(b, "sales", str, str), streams.From(b, "shipments", str, str)).To("out", str, str)
		}, map[string]int32{"sales": 6, "shipments": 4}, "co-partitioned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.NewBuilder("app")
			tc.build(b)
			topo, err := b.Build()
			if err == nil {
				_, err = streams.NewDriver(topo, streams.DriverConfig{Partitions: tc.parts})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}
