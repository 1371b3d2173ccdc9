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

func orNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

func joined(recs []streams.Record[string, string]) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s:%s @%d", r.Key, r.Value, r.Timestamp.UnixMilli())
	}
	return out
}

// joinTopology joins topics l and r, keyed alike, within 10s both ways with 5s grace.
func joinTopology(kind string, w window.JoinSpec) *streams.Builder {
	b := streams.NewBuilder("app")
	l := streams.From(b, "l", str, str)
	r := streams.From(b, "r", str, str)
	var out streams.Stream[string, string]
	switch kind {
	case "inner":
		out = streams.Join(l, r, "j", w, func(_ string, a, b string) string { return a + "+" + b })
	case "left":
		out = streams.LeftJoin(l, r, "j", w, func(_ string, a string, b *string) string { return a + "+" + orNull(b) })
	case "outer":
		out = streams.OuterJoin(l, r, "j", w, func(_ string, a, b *string) string { return orNull(a) + "+" + orNull(b) })
	}
	out.To("out", str, str)
	return b
}

// joinScript is the input every join kind is tested with (key k; l: upper case,
// r: lower case; time in ms). Window 10s each way, grace 5s: a left record at t joins
// right records from t-10000 to t+10000; a record whose window closed — stream time
// past t+10000+5000 — is late.
var joinScript = []struct {
	topic, value string
	ts           int64
}{
	{"l", "A", 0},      // no partner yet
	{"r", "a", 5_000},  // meets A
	{"l", "B", 12_000}, // meets a
	{"r", "b", 30_000}, // no partner in [20000, 40000]; stream time 30000
	{"l", "C", 14_000}, // late: 14000+10000+5000 < 30000 — dropped, though a@5000 is in its window
	{"l", "D", 16_000}, // out of order within grace: no partner yet
	{"r", "c", 20_000}, // meets B and D
	{"l", "E", 45_000}, // no partner; b's window closes at 45000 — not yet past
	{"l", "F", 45_001}, // no partner; stream time past 45000: b's window has closed
	{"r", "d", 61_000}, // E's (60000) and F's (60001) windows have closed
}

func runJoin(t *testing.T, kind string) (*streamstest.Driver, [][]string) {
	d := streamstest.New(t, joinTopology(kind, window.Join(10*time.Second, 5*time.Second)), streamstest.Config{})
	ins := map[string]*streamstest.Input[string, string]{"l": streamstest.NewInput(d, "l", str, str), "r": streamstest.NewInput(d, "r", str, str)}
	out := streamstest.NewOutput(d, "out", str, str)
	var steps [][]string
	for _, s := range joinScript {
		ins[s.topic].Pipe("k", s.value, time.UnixMilli(s.ts))
		steps = append(steps, joined(out.Read()))
	}
	return d, steps
}

func wantSteps(t *testing.T, got, want [][]string) {
	t.Helper()
	for i := range joinScript {
		if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("after %s:%s@%d: got %v, want %v", joinScript[i].topic, joinScript[i].value, joinScript[i].ts, got[i], want[i])
		}
	}
}

func TestStreamStreamInnerJoin(t *testing.T) {
	d, steps := runJoin(t, "inner")
	wantSteps(t, steps, [][]string{
		nil,
		{"k:A+a @5000"},
		{"k:B+a @12000"},
		nil,
		nil,
		nil,
		{"k:B+c @20000", "k:D+c @20000"},
		nil, nil, nil,
	})
	if m := d.Metrics(); m.LateRecordsDropped != 1 {
		t.Errorf("late records %d, want 1 (C)", m.LateRecordsDropped)
	}
}

// A left record without a partner is forwarded with null only once its window has
// closed (A never is: a arrives within it), so no spurious A+null precedes A+a.
func TestStreamStreamLeftJoin(t *testing.T) {
	_, steps := runJoin(t, "left")
	wantSteps(t, steps, [][]string{
		nil,
		{"k:A+a @5000"},
		{"k:B+a @12000"},
		nil, // a right record without a partner is never forwarded by a left join
		nil,
		nil, // D waits
		{"k:B+c @20000", "k:D+c @20000"},
		nil,
		nil,
		{"k:E+null @45000", "k:F+null @45001"},
	})
}

// Both sides' records without partners are forwarded with null once their windows
// close, in timestamp order: b (right) as soon as stream time passes 30000+10000+5000.
func TestStreamStreamOuterJoin(t *testing.T) {
	_, steps := runJoin(t, "outer")
	wantSteps(t, steps, [][]string{
		nil,
		{"k:A+a @5000"},
		{"k:B+a @12000"},
		nil,
		nil,
		nil,
		{"k:B+c @20000", "k:D+c @20000"},
		nil, // b's window closes at 45000: not past yet
		{"k:null+b @30000"},
		{"k:E+null @45000", "k:F+null @45001"},
	})
}

// Asymmetric windows: before 0, after 10s — a left record at t takes right records
// from t to t+10000; a right record at t takes left ones from t-10000 to t, and is
// late once stream time passes t+0+grace.
func TestStreamStreamJoinAsymmetric(t *testing.T) {
	d := streamstest.New(t, joinTopology("inner", window.JoinBeforeAfter(0, 10*time.Second, 0)), streamstest.Config{})
	l, r := streamstest.NewInput(d, "l", str, str), streamstest.NewInput(d, "r", str, str)
	out := streamstest.NewOutput(d, "out", str, str)
	r.Pipe("k", "a", time.UnixMilli(5_000))
	l.Pipe("k", "A", time.UnixMilli(10_000)) // a is before A: outside [10000, 20000]
	r.Pipe("k", "b", time.UnixMilli(15_000)) // A is in [5000, 15000]
	r.Pipe("k", "c", time.UnixMilli(9_000))  // late: 9000+0+0 < 15000
	l.Pipe("k", "B", time.UnixMilli(12_000)) // 12000+10000 >= 15000: b is in [12000, 22000]
	wantStrings(t, "asymmetric", joined(out.Read()), []string{"k:A+b @15000", "k:B+b @15000"})
	if m := d.Metrics(); m.LateRecordsDropped != 1 {
		t.Errorf("late records %d, want 1", m.LateRecordsDropped)
	}
}

// Keys join only their own key; duplicates at one time are all kept and all joined.
func TestStreamStreamJoinKeysAndDuplicates(t *testing.T) {
	d := streamstest.New(t, joinTopology("inner", window.Join(time.Second, 0)), streamstest.Config{Partitions: map[string]int32{"l": 3, "r": 3, "out": 3}})
	l, r := streamstest.NewInput(d, "l", str, str), streamstest.NewInput(d, "r", str, str)
	out := streamstest.NewOutput(d, "out", str, str)
	l.Pipe("x", "X1", time.UnixMilli(100))
	l.Pipe("x", "X2", time.UnixMilli(100))
	l.Pipe("y", "Y", time.UnixMilli(100))
	r.Pipe("x", "p", time.UnixMilli(100))
	wantStrings(t, "both duplicates, only x", joined(out.Read()), []string{"x:X1+p @100", "x:X2+p @100"})
}

// The inputs of a join must be co-partitioned; a re-keyed input is repartitioned
// through <app>-<name>-left-repartition first.
func TestStreamStreamJoinPartitioning(t *testing.T) {
	b := joinTopology("inner", window.Join(time.Second, 0))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streams.NewDriver(topo, streams.DriverConfig{Partitions: map[string]int32{"l": 4, "r": 3}}); err == nil || !strings.Contains(err.Error(), "co-partitioned") {
		t.Errorf("err %v, want the co-partitioning refusal", err)
	}
	b = streams.NewBuilder("app")
	l := streams.Map(streams.From(b, "l", str, str), func(k, v string) (string, string) { return v, k }) // keyed by value now
	r := streams.From(b, "r", str, str)
	streams.Join(l, r, "j", window.Join(time.Second, 0), func(_ string, a, b string) string { return a + "+" + b }, streams.JoinedWith(str, str, str)).To("out", str, str)
	topo, err = b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if desc := topo.Describe(); !strings.Contains(desc, "writes app-j-left-repartition") || !strings.Contains(desc, "source app-j-left-repartition") {
		t.Errorf("no repartition inserted:\n%s", desc)
	}
	d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"l": 4, "r": 4, "out": 4}})
	streamstest.NewInput(d, "l", str, str).Pipe("orig", "x", time.UnixMilli(10))
	streamstest.NewInput(d, "r", str, str).Pipe("x", "R", time.UnixMilli(20))
	wantStrings(t, "after repartition", joined(streamstest.NewOutput(d, "out", str, str).Read()), []string{"x:orig+R @20"})
	// Without the serdes of a mapped stream, the topology says what is missing.
	b = streams.NewBuilder("app")
	m := streams.MapValues(streams.From(b, "l", str, str), func(v string) int { return len(v) })
	streams.Join(m, streams.From(b, "r", str, str), "j", window.Join(time.Second, 0), func(_ string, a int, b string) string { return b })
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "JoinedWith") {
		t.Errorf("err %v, want one naming JoinedWith", err)
	}
}
