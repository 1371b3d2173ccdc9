package jepsen

import (
	"fmt"
	"testing"
	"time"
)

// hist builds small histories for the checker's table test.
type hist struct{ h *History }

func newHist() *hist { return &hist{NewHistory("t", 2)} }

func (b *hist) send(value string, p int32, out Outcome, off int64) *hist {
	b.h.AddSends(Send{Producer: "p", Topic: "t", Partition: p, Value: value, Outcome: out, Offset: off})
	return b
}

func (b *hist) isend(value string, p int32, out Outcome, off int64) *hist {
	b.h.AddSends(Send{Producer: "i", Idempotent: true, Topic: "t", Partition: p, Value: value, Outcome: out, Offset: off})
	return b
}

// read records a poll of partition p from `from` returning values at consecutive
// offsets from first.
func (b *hist) read(mode string, p int32, from, first int64, values ...string) *hist {
	rd := Read{Consumer: "c", Mode: mode, Topic: "t", Partition: p, From: from, At: time.Now()}
	for i, v := range values {
		rd.Records = append(rd.Records, ReadRecord{Offset: first + int64(i), Value: v})
	}
	rd.Next = first + int64(len(values))
	if len(values) == 0 {
		rd.Next = from
	}
	b.h.AddRead(rd)
	return b
}

func (b *hist) raw(rd Read) *hist { b.h.AddRead(rd); return b }

// final records a complete final read of p with the values at offsets 0...
func (b *hist) final(p int32, values ...string) *hist {
	b.read(ReadFinal, p, 0, 0, values...)
	b.h.AddFinal(FinalState{Topic: "t", Partition: p, HWM: int64(len(values)), Complete: true})
	return b
}

func (b *hist) group(g string, final bool, offs map[int32]int64) *hist {
	b.h.AddGroupOffsets(GroupOffsets{Group: g, Topic: "t", Offsets: offs, Final: final, At: time.Now()})
	time.Sleep(time.Microsecond) // observations are ordered by time
	return b
}

func (b *hist) gread(g string, p int32, first int64, values ...string) *hist {
	rd := Read{Consumer: "m", Mode: ReadGroup, Group: g, Topic: "t", Partition: p, From: -1, At: time.Now()}
	for i, v := range values {
		rd.Records = append(rd.Records, ReadRecord{Offset: first + int64(i), Value: v})
	}
	rd.Next = first + int64(len(values))
	b.h.AddRead(rd)
	return b
}

// checkCases are TestCheck's: a history, and the anomalies and outcomes Check must
// count in it.
var checkCases = []struct {
	name string
	h    *hist
	want map[Kind]int
	ok   [3]int // records ok, failed, unknown
}{
	{
		name: "clean run",
		h: newHist().send("a", 0, OK, 0).send("b", 0, OK, 1).send("c", 1, OK, 0).send("d", 1, Failed, 0).send("e", 1, Unknown, 0).
			read(ReadAssign, 0, 0, 0, "a").read(ReadAssign, 0, 1, 1, "b").read(ReadAssign, 1, 0, 0, "c", "e").
			final(0, "a", "b").final(1, "c", "e"),
		want: map[Kind]int{},
		ok:   [3]int{3, 1, 1},
	},
	{
		name: "acknowledged, never read",
		h:    newHist().send("a", 0, OK, 0).send("b", 0, OK, 1).final(0, "a"),
		want: map[Kind]int{Lost: 1, Unseen: 1},
		ok:   [3]int{2, 0, 0},
	},
	{
		name: "read during the run, gone from the final read",
		h: newHist().send("a", 0, OK, 0).send("b", 0, Unknown, 0).
			read(ReadAssign, 0, 0, 0, "a", "b").final(0, "a"),
		want: map[Kind]int{Unseen: 1},
		ok:   [3]int{1, 0, 1},
	},
	{
		name: "two reads disagree on an offset",
		h: newHist().send("a", 0, Unknown, 0).send("b", 0, Unknown, 0).
			read(ReadAssign, 0, 0, 0, "a").read(ReadAssign, 0, 0, 0, "b").final(0, "b"),
		want: map[Kind]int{Inconsistent: 1, Unseen: 1},
		ok:   [3]int{0, 0, 2},
	},
	{
		name: "acknowledged at an offset holding another value (ack before commit)",
		h:    newHist().send("a", 0, OK, 0).send("b", 0, OK, 0).final(0, "b"),
		want: map[Kind]int{Inconsistent: 2, Lost: 1, Unseen: 1},
		ok:   [3]int{2, 0, 0},
	},
	{
		name: "acknowledged at one offset, read at another",
		h:    newHist().send("a", 0, OK, 5).final(0, "a"),
		want: map[Kind]int{Inconsistent: 1},
		ok:   [3]int{1, 0, 0},
	},
	{
		name: "duplicate of an idempotent producer",
		h:    newHist().isend("a", 0, OK, 0).final(0, "a", "a"),
		want: map[Kind]int{Duplicate: 1},
		ok:   [3]int{1, 0, 0},
	},
	{
		name: "refused but visible",
		h:    newHist().send("a", 1, Failed, 0).final(1, "a"),
		want: map[Kind]int{RefusedVisible: 1},
		ok:   [3]int{0, 1, 0},
	},
	{
		name: "a value nobody sent",
		h:    newHist().final(0, "zz"),
		want: map[Kind]int{Phantom: 1},
	},
	{
		name: "poll starting after the offset asked for",
		h: newHist().send("a", 0, OK, 0).send("b", 0, OK, 1).
			read(ReadAssign, 0, 0, 1, "b").final(0, "a", "b"),
		want: map[Kind]int{Skipping: 1},
		ok:   [3]int{2, 0, 0},
	},
	{
		name: "gap and reversal inside a poll, next offset beyond the last record",
		h: newHist().send("a", 0, OK, 0).send("b", 0, OK, 1).send("c", 0, OK, 2).
			raw(Read{Consumer: "c", Mode: ReadAssign, Partition: 0, From: 0, Next: 3,
				Records: []ReadRecord{{0, "a"}, {2, "c"}, {1, "b"}}}).
			raw(Read{Consumer: "c", Mode: ReadAssign, Partition: 0, From: 0, Next: 9,
				Records: []ReadRecord{{0, "a"}}}).
			final(0, "a", "b", "c"),
		want: map[Kind]int{Skipping: 2, Nonmonotonic: 1},
		ok:   [3]int{3, 0, 0},
	},
	{
		name: "final read incomplete",
		h: func() *hist {
			b := newHist().send("a", 0, OK, 0)
			b.h.AddFinal(FinalState{Partition: 0, HWM: 1, Err: "timeout"})
			return b
		}(),
		want: map[Kind]int{FinalIncomplete: 1, Lost: 1},
		ok:   [3]int{1, 0, 0},
	},
	{
		name: "group offsets: fine",
		h: newHist().send("a", 0, OK, 0).send("b", 0, OK, 1).
			gread("g", 0, 0, "a").group("g", false, map[int32]int64{0: 1}).gread("g", 0, 1, "b").
			final(0, "a", "b").group("g", true, map[int32]int64{0: 2}),
		want: map[Kind]int{},
		ok:   [3]int{2, 0, 0},
	},
	{
		name: "group offsets: regressed, beyond the watermark, skipped",
		h: newHist().send("a", 0, OK, 0).send("b", 0, OK, 1).
			gread("g", 0, 1, "b").group("g", false, map[int32]int64{0: 2}).group("g", false, map[int32]int64{0: 1}).
			final(0, "a", "b").group("g", true, map[int32]int64{0: 3}),
		want: map[Kind]int{GroupRegressed: 1, GroupBeyondHWM: 1, GroupSkipped: 1},
		ok:   [3]int{2, 0, 0},
	},
}

func TestCheck(t *testing.T) {
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h.h)
			for _, k := range Kinds {
				if r.Counts[k] != tc.want[k] {
					t.Errorf("%s = %d, want %d", k, r.Counts[k], tc.want[k])
				}
			}
			if got := [3]int{r.OK, r.Failed, r.Unknown}; got != tc.ok {
				t.Errorf("ok/failed/unknown = %v, want %v", got, tc.ok)
			}
			if r.Valid() != (len(tc.want) == 0) {
				t.Errorf("Valid() = %v", r.Valid())
			}
			if t.Failed() {
				for _, a := range r.Anomalies() {
					t.Log(a)
				}
			}
		})
	}
}

// TestHealOrder: processes are restarted after Postgres and the store are healed,
// otherwise in reverse start order.
func TestHealOrder(t *testing.T) {
	kill, kill2 := &KillFault{}, &KillFault{}
	pause, pg, cut := &PauseFault{}, &PGRestartFault{}, &PGCutFault{}
	got := HealOrder([]Fault{kill, pause, pg, cut, kill2})
	want := []Fault{cut, pg, pause, kill2, kill}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("heal order %v, want %v", names(got), names(want))
		}
	}
}

func names(fs []Fault) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s@%p", f.Name(), f))
	}
	return out
}
