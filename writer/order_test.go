package writer

import (
	"math"
	"slices"
	"testing"

	"github.com/strata-io/strata/catalog"
)

func TestSeqBefore(t *testing.T) {
	for _, tc := range []struct {
		a, b int32
		want bool
	}{
		{0, 1, true},
		{1, 0, false},
		{5, 5, false},
		{math.MaxInt32, 0, true}, // wrapped
		{math.MaxInt32 - 10, 20, true},
		{20, math.MaxInt32 - 10, false},
		{0, 1 << 30, false}, // half the space away: not ahead
	} {
		if got := seqBefore(tc.a, tc.b); got != tc.want {
			t.Errorf("seqBefore(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestOrderBySequence(t *testing.T) {
	p1 := &catalog.Producer{ID: 1}
	p2 := &catalog.Producer{ID: 2}
	mk := func(name string, prod *catalog.Producer, seqs map[TopicPartition]int32) *pending {
		return &pending{req: Request{Producer: prod, Sequences: seqs, Records: []Record{{TopicID: int64(len(name))}}}, unkeyed: []int64{int64(name[0])}}
	}
	names := map[*pending]string{}
	req := func(name string, prod *catalog.Producer, seqs map[TopicPartition]int32) *pending {
		p := mk(name, prod, seqs)
		names[p] = name
		return p
	}
	tp := func(p int32) TopicPartition { return TopicPartition{1, p} }
	for _, tc := range []struct {
		name string
		in   []*pending
		want []string
	}{
		{"overtaken requests are put back in sequence order, in their own slots", []*pending{
			req("a3", p1, map[TopicPartition]int32{tp(0): 20, tp(1): 5}),
			req("plain", nil, nil),
			req("a1", p1, map[TopicPartition]int32{tp(0): 0}),
			req("b1", p2, map[TopicPartition]int32{tp(0): 0}),
			req("a2", p1, map[TopicPartition]int32{tp(0): 10, tp(1): 0}),
		}, []string{"a1", "plain", "a2", "b1", "a3"}},
		{"no partition in common: arrival order", []*pending{
			req("x", p1, map[TopicPartition]int32{tp(1): 9}),
			req("y", p1, map[TopicPartition]int32{tp(0): 0}),
		}, []string{"x", "y"}},
		{"a retry beside its original: arrival order", []*pending{
			req("r", p1, map[TopicPartition]int32{tp(0): 4}),
			req("o", p1, map[TopicPartition]int32{tp(0): 4}),
		}, []string{"r", "o"}},
		{"another epoch is another producer", []*pending{
			req("new", &catalog.Producer{ID: 1, Epoch: 1}, map[TopicPartition]int32{tp(0): 3}),
			req("old", p1, map[TopicPartition]int32{tp(0): 0}),
		}, []string{"new", "old"}},
		{"wrapped sequences", []*pending{
			req("after", p1, map[TopicPartition]int32{tp(0): 2}),
			req("before", p1, map[TopicPartition]int32{tp(0): math.MaxInt32 - 1}),
		}, []string{"before", "after"}},
		{"contradictory sequences stay as they came", []*pending{
			req("c1", p1, map[TopicPartition]int32{tp(0): 5, tp(1): 0}),
			req("c2", p1, map[TopicPartition]int32{tp(0): 0, tp(1): 5}),
		}, []string{"c1", "c2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := slices.Clone(tc.in)
			orderBySequence(reqs)
			var got []string
			for _, p := range reqs {
				got = append(got, names[p])
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
		})
	}
}
