package writer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
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

// sequencedCatalog checks one producer's sequence on partition (1, 0) the way the
// catalog does, and counts the commits each base sequence took part in.
type sequencedCatalog struct {
	mu   sync.Mutex
	next int32
	seen map[int32]int
	hw   int64
}

func (c *sequencedCatalog) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := make([]catalog.Result, len(seg.Requests))
	for i, r := range seg.Requests {
		b := r.Batches[0]
		c.seen[b.BaseSequence]++
		if b.BaseSequence != c.next {
			res[i].Err = fmt.Errorf("producer id 1 epoch 0: %w", &catalog.SequenceError{TopicID: 1, Expected: c.next, Got: b.BaseSequence})
			continue
		}
		c.next += b.Records
		res[i].BaseOffsets = []int64{c.hw}
		c.hw += int64(b.Records)
	}
	return res, nil
}

func (c *sequencedCatalog) Settle(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	return nil, catalog.ErrCommitAborted
}

// A request that reaches the writer ahead of the one it follows (they were sent at
// once) waits in the next flush instead of being refused; one behind (a stale
// sequence) is refused at once, and one whose predecessor never comes is refused
// after maxRequeues flushes.
func TestRequeueAheadOfSequence(t *testing.T) {
	cat := &sequencedCatalog{seen: map[int32]int{}}
	w := New(newMemStore(), cat, Config{Linger: never}, nil, nil)
	prod := &catalog.Producer{ID: 1}
	idem := func(seq int32) Request {
		return Request{Records: []Record{rec(1, 1, 0, "", "x"), rec(1, 1, 0, "", "y")}, Producer: prod,
			Sequences: map[TopicPartition]int32{{1, 0}: seq}}
	}
	produce := func(r Request) chan error {
		ch := make(chan error, 1)
		go func() { _, err := w.Produce(context.Background(), r); ch <- err }()
		return ch
	}
	ctx := context.Background()
	ahead := produce(idem(2))
	testwait.Until(t, 20*time.Second, "the request ahead buffered", func() bool { return w.bufferedRequests() == 1 })
	w.Flush(ctx) // refused as ahead: buffered again, not answered
	testwait.Until(t, 20*time.Second, "the request ahead buffered again", func() bool { return w.bufferedRequests() == 1 })
	first := produce(idem(0))
	testwait.Until(t, 20*time.Second, "both buffered", func() bool { return w.bufferedRequests() == 2 })
	w.Flush(ctx)
	for what, ch := range map[string]chan error{"first": first, "ahead": ahead} {
		if err := <-ch; err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if cat.seen[2] != 2 || cat.seen[0] != 1 {
		t.Fatalf("commits per sequence %v: want the request ahead twice, the first once", cat.seen)
	}
	// Behind the expected sequence: answered at once.
	stale := produce(idem(0))
	testwait.Until(t, 20*time.Second, "stale buffered", func() bool { return w.bufferedRequests() == 1 })
	w.Flush(ctx)
	var se *catalog.SequenceError
	if err := <-stale; !errors.As(err, &se) || se.Expected != 4 {
		t.Fatalf("stale request: %v, want the sequence error expecting 4", err)
	}
	// Ahead, and nothing ever fills the gap: refused after maxRequeues more flushes.
	lost := produce(idem(9))
	for i := 0; i <= maxRequeues; i++ {
		testwait.Until(t, 20*time.Second, "gap buffered", func() bool { return w.bufferedRequests() == 1 })
		w.Flush(ctx)
	}
	if err := <-lost; !errors.As(err, &se) || se.Expected != 4 || cat.seen[9] != maxRequeues+1 {
		t.Fatalf("request after a gap: %v after %d commits, want refused after %d", err, cat.seen[9], maxRequeues+1)
	}
}
