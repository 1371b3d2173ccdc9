package streamstest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/streamstest"
	"github.com/strata-io/strata/streams/window"
)

// Windows below are written as Kafka Streams writes them, [start, end] with both
// ends included; a window.Window ends 1ms later (half-open).
func incl(recs []streams.Record[string, window.Result[int64]]) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		rm := ""
		if r.Value.Removed {
			rm = " removed"
		}
		out[i] = fmt.Sprintf("%s[%d,%d]=%d%s @%d", r.Key, r.Value.Window.Start, r.Value.Window.End-1, r.Value.Value, rm, r.Timestamp.UnixMilli())
	}
	return out
}

func slidingCount(d, grace time.Duration, emit streams.Emit) *streams.Builder {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.WindowedCount(streams.GroupByKey(in), "counts", window.Sliding(d, grace), emit).To("out", str, serde64Result)
	return b
}

// Sliding windows (time difference 5s), by their definition: every record at t has a
// left window [t-5000, t]; a right window [t+1, t+5001] exists once a later record
// falls in it; each holds exactly the records it covers. Records at 8000, 9200 and
// 12400 make L(8000)=[3000,8000]{8000}, R(8000)=[8001,13001]{9200,12400},
// L(9200)=[4200,9200]{8000,9200}, R(9200)=[9201,14201]{12400},
// L(12400)=[7400,12400]{8000,9200,12400}. Every update is forwarded, timestamped with
// the latest record the window holds.
func TestSlidingWindowsInOrder(t *testing.T) {
	d := streamstest.New(t, slidingCount(5*time.Second, time.Minute, streams.EmitEveryUpdate), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	p.Pipe("k", "", time.UnixMilli(8000))
	wantStrings(t, "first record", incl(out.Read()), []string{"k[3000,8000]=1 @8000"})
	p.Pipe("k", "", time.UnixMilli(9200))
	wantStrings(t, "second record", incl(out.Read()), []string{"k[8001,13001]=1 @9200", "k[4200,9200]=2 @9200"})
	p.Pipe("k", "", time.UnixMilli(12400))
	wantStrings(t, "third record", incl(out.Read()), []string{"k[8001,13001]=2 @12400", "k[9201,14201]=1 @12400", "k[7400,12400]=3 @12400"})
	// Another key has windows of its own.
	p.Pipe("j", "", time.UnixMilli(12400))
	wantStrings(t, "another key", incl(out.Read()), []string{"j[7400,12400]=1 @12400"})
}

// An out-of-order record (within grace) at 6000 after 8000, 9200, 12400: it joins the
// windows covering it — L(8000)=[3000,8000] and L(9200)=[4200,9200] — and brings its
// own: L(6000)=[1000,6000]{6000} and R(6000)=[6001,11001]{8000,9200}, whose
// aggregate it derives from the stored windows (the latest one covering 6000 held
// exactly the records after it).
func TestSlidingWindowsOutOfOrder(t *testing.T) {
	d := streamstest.New(t, slidingCount(5*time.Second, time.Minute, streams.EmitEveryUpdate), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	for _, ts := range []int64{8000, 9200, 12400} {
		p.Pipe("k", "", time.UnixMilli(ts))
	}
	out.Read()
	p.Pipe("k", "", time.UnixMilli(6000))
	wantStrings(t, "out of order", incl(out.Read()), []string{
		"k[3000,8000]=2 @8000", "k[4200,9200]=3 @9200", "k[1000,6000]=1 @6000", "k[6001,11001]=2 @9200"})
	// Every window, checked against the definition: L(6000){6000}, R(6000){8000,9200},
	// L(8000){6000,8000}, R(8000){9200,12400}, L(9200){6000,8000,9200}, R(9200){12400},
	// L(12400){8000,9200,12400}.
	for start, want := range map[int64]int64{1000: 1, 6001: 2, 3000: 2, 8001: 2, 4200: 3, 9201: 1, 7400: 3} {
		if got := slidingStored(t, d, "k", start); got != want {
			t.Errorf("window starting %d holds %d, want %d", start, got, want)
		}
	}
}

func slidingStored(t *testing.T, d *streamstest.Driver, key string, start int64) int64 {
	t.Helper()
	v, ok := streamstest.GetSliding(d, "counts", str, i64, key, time.UnixMilli(start))
	if !ok {
		return -1
	}
	return v
}

// Grace 0, time difference 5s, stream time 12400: a record at 7000 is late — every
// window that could hold it ends by 12000 — dropped and counted; one at 7500 still
// joins L(12400)=[7400,12400], the one window covering it that is open, and creates
// nothing closed.
func TestSlidingWindowsGrace(t *testing.T) {
	d := streamstest.New(t, slidingCount(5*time.Second, 0, streams.EmitEveryUpdate), streamstest.Config{LateRecordTopic: "late"})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	for _, ts := range []int64{8000, 9200, 12400} {
		p.Pipe("k", "", time.UnixMilli(ts))
	}
	out.Read()
	p.Pipe("k", "", time.UnixMilli(7000))
	if got := out.Read(); len(got) != 0 {
		t.Errorf("late record forwarded %v", incl(got))
	}
	if m := d.Metrics(); m.LateRecordsDropped != 1 || len(d.Output("late")) != 1 {
		t.Errorf("late records %d, late topic %d", m.LateRecordsDropped, len(d.Output("late")))
	}
	p.Pipe("k", "", time.UnixMilli(7500))
	// [8001,13001] and [9201,14201] do not cover 7500; [7400,12400] does and is open
	// (ends at the close time 12400); L(7500) and R(7500) would end before it.
	wantStrings(t, "within grace", incl(out.Read()), []string{"k[7400,12400]=4 @12400", "k[7501,12501]=3 @12400"})
}

// Emit on close (time difference 5s, grace 1s): each sliding window once, when
// stream time passes its end plus grace, in window order, timestamped with its end.
func TestSlidingWindowsEmitOnClose(t *testing.T) {
	d := streamstest.New(t, slidingCount(5*time.Second, time.Second, streams.EmitOnWindowClose), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	p.Pipe("k", "", time.UnixMilli(8000))
	if got := out.Read(); len(got) != 0 {
		t.Fatalf("emitted before close: %v", incl(got))
	}
	p.Pipe("k", "", time.UnixMilli(9200)) // close time 8200: [3000,8000] closes
	wantStrings(t, "at 9200", incl(out.Read()), []string{"k[3000,8000]=1 @8000"})
	p.Pipe("k", "", time.UnixMilli(12400)) // close time 11400
	wantStrings(t, "at 12400", incl(out.Read()), []string{"k[4200,9200]=2 @9200"})
	// Stream time stays 12400: other's left window [5000,10000] is closed already —
	// the record is not late (later windows could hold it) but makes no window.
	p.Pipe("other", "", time.UnixMilli(10_000))
	if got := out.Read(); len(got) != 0 {
		t.Errorf("a window closed on creation was emitted: %v", incl(got))
	}
	p.Pipe("other", "", time.UnixMilli(14_201)) // close time 13201
	wantStrings(t, "at 14201", incl(out.Read()), []string{"k[7400,12400]=3 @12400", "k[8001,13001]=2 @13001"})
	p.Pipe("other", "", time.UnixMilli(100_000))
	wantStrings(t, "at 100000", incl(out.Read()), []string{"k[9201,14201]=1 @14201", "other[9201,14201]=1 @14201"})
}

func sessionCount(gap, grace time.Duration, emit streams.Emit) *streams.Builder {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	streams.SessionCount(streams.GroupByKey(in), "sessions", window.Session(gap, grace), emit).To("out", str, serde64Result)
	return b
}

// Session windows, gap 10s, grace 30s: records 10s apart or less share a session; a
// record that bridges two merges them (each merged-away session forwarded as
// removed, then the new one, timestamped with its last record); one too far starts
// another.
func TestSessionWindowsMerge(t *testing.T) {
	d := streamstest.New(t, sessionCount(10*time.Second, 30*time.Second, streams.EmitEveryUpdate), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	p.Pipe("k", "", time.UnixMilli(0))
	wantStrings(t, "new session", incl(out.Read()), []string{"k[0,0]=1 @0"})
	p.Pipe("k", "", time.UnixMilli(10_000)) // exactly the gap: same session
	wantStrings(t, "extended", incl(out.Read()), []string{"k[0,0]=1 removed @0", "k[0,10000]=2 @10000"})
	p.Pipe("k", "", time.UnixMilli(30_000)) // 20s after: a new session
	wantStrings(t, "apart", incl(out.Read()), []string{"k[30000,30000]=1 @30000"})
	p.Pipe("k", "", time.UnixMilli(5_000)) // inside [0,10000]: Kafka removes and re-puts it
	wantStrings(t, "inside", incl(out.Read()), []string{"k[0,10000]=2 removed @10000", "k[0,10000]=3 @10000"})
	p.Pipe("k", "", time.UnixMilli(20_000)) // 10s from both: bridges them
	wantStrings(t, "bridged", incl(out.Read()), []string{"k[0,10000]=3 removed @10000", "k[30000,30000]=1 removed @30000", "k[0,30000]=5 @30000"})
	p.Pipe("j", "", time.UnixMilli(20_000))
	wantStrings(t, "another key", incl(out.Read()), []string{"j[20000,20000]=1 @20000"})
	if v, ok := streamstest.GetSession(d, "sessions", str, i64, "k", time.UnixMilli(0), time.UnixMilli(30_000)); !ok || v != 5 {
		t.Errorf("stored session k[0,30000] = %d %v", v, ok)
	}
}

// Gap 10s, grace 5s: a session closes when stream time passes its end + 15s. At
// stream time 40000 the close time is 25000: a record at 14000 could only extend
// [0,4000], closed since stream time 19000: late. One at 16000 would be a session of
// its own ending before 25000: late too. One at 26000 starts a session.
func TestSessionWindowsGrace(t *testing.T) {
	d := streamstest.New(t, sessionCount(10*time.Second, 5*time.Second, streams.EmitEveryUpdate), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	p.Pipe("k", "", time.UnixMilli(0))
	p.Pipe("k", "", time.UnixMilli(4_000))
	p.Pipe("j", "", time.UnixMilli(40_000))
	out.Read()
	p.Pipe("k", "", time.UnixMilli(14_000))
	p.Pipe("k", "", time.UnixMilli(16_000))
	if got := out.Read(); len(got) != 0 {
		t.Errorf("late records forwarded: %v", incl(got))
	}
	if m := d.Metrics(); m.LateRecordsDropped != 2 {
		t.Errorf("late records dropped %d, want 2", m.LateRecordsDropped)
	}
	p.Pipe("k", "", time.UnixMilli(26_000))
	wantStrings(t, "within grace", incl(out.Read()), []string{"k[26000,26000]=1 @26000"})
	// The closed session is gone from the store.
	if _, ok := streamstest.GetSession(d, "sessions", str, i64, "k", time.UnixMilli(0), time.UnixMilli(4_000)); ok {
		t.Error("a closed session is still stored")
	}
}

// Emit on close: each session once, when stream time passes its end + gap + grace,
// never the intermediate states, never a merged-away session.
func TestSessionWindowsEmitOnClose(t *testing.T) {
	d := streamstest.New(t, sessionCount(10*time.Second, 0, streams.EmitOnWindowClose), streamstest.Config{})
	p := streamstest.NewInput(d, "in", str, str)
	out := streamstest.NewOutput(d, "out", str, serde64Result)
	for _, ts := range []int64{0, 8_000, 16_000, 40_000} {
		p.Pipe("k", "", time.UnixMilli(ts))
	}
	wantStrings(t, "first closes at 26000", incl(out.Read()), []string{"k[0,16000]=3 @16000"})
	p.Pipe("j", "", time.UnixMilli(49_999))
	if got := out.Read(); len(got) != 0 {
		t.Errorf("k[40000,40000] closed before 50000: %v", incl(got))
	}
	p.Pipe("j", "", time.UnixMilli(50_001))
	wantStrings(t, "second", incl(out.Read()), []string{"k[40000,40000]=1 @40000"})
}

// The property: over any input whose disorder stays within grace, a session
// aggregation's final sessions are those of the same input in timestamp order.
func TestSessionWindowsShuffledEqualsSorted(t *testing.T) {
	const jitter = 20_000
	finals := func(recs []sessRec) []string {
		b := streams.NewBuilder("app")
		in := streams.From(b, "in", str, i64)
		streams.SessionAggregate(streams.GroupByKey(in), "sessions", window.Session(5*time.Second, jitter*time.Millisecond),
			func() int64 { return 0 }, func(_ string, v, a int64) int64 { return a + v }, func(_ string, a, b int64) int64 { return a + b },
			i64, streams.EmitOnWindowClose).To("out", str, serde64Result)
		d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"in": 3, "out": 3}})
		p := streamstest.NewInput(d, "in", str, i64)
		for _, r := range recs {
			p.Pipe(r.key, r.v, time.UnixMilli(r.ts))
		}
		for _, k := range []string{"a", "b", "c", "d", "e", "f"} { // close everything
			p.Pipe(k, 0, time.UnixMilli(1_000_000_000))
		}
		if m := d.Metrics(); m.LateRecordsDropped != 0 {
			t.Fatalf("%d records late: the disorder exceeds grace", m.LateRecordsDropped)
		}
		var out []string
		for _, s := range incl(streamstest.NewOutput(d, "out", str, serde64Result).Read()) {
			if s[len(s)-11:] != "@1000000000" {
				out = append(out, s)
			}
		}
		sort.Strings(out)
		return out
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		var recs []sessRec
		ts := int64(0)
		for i := range 300 {
			ts += rng.Int64N(4_000) // gaps of 0-4s within sessions...
			if rng.IntN(10) == 0 {
				ts += 5_000 + rng.Int64N(10_000) // ...and now and then more than the gap
			}
			recs = append(recs, sessRec{key: string(rune('a' + rng.IntN(6))), v: int64(i + 1), ts: ts, arrive: ts + rng.Int64N(jitter)})
		}
		sorted := finals(recs)
		slices.SortStableFunc(recs, func(x, y sessRec) int { return int(x.arrive - y.arrive) })
		shuffled := finals(recs)
		if !slices.Equal(sorted, shuffled) {
			t.Fatalf("seed %d: shuffled input gave other sessions:\nsorted   %v\nshuffled %v", seed, sorted, shuffled)
		}
		if len(sorted) < 20 {
			t.Fatalf("seed %d: only %d sessions: the data proves little", seed, len(sorted))
		}
	}
}

type sessRec struct {
	key        string
	v          int64
	ts, arrive int64
}

var _ = serde.Int64
