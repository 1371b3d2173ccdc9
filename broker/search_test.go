package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-io/strata/segment"
)

// TestSearch: a fetch with a filter over real roles. A key or a text finds exactly the
// records that hold it, across reads of the scan; the scan budget stops a call early
// and NextOffset resumes it; the end offset bounds the range; matches are capped; a
// search without a filter, a negative end or an offset past the end is refused.
func TestSearch(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	if _, err := b.CreateTopic(ctx, Anonymous, CreateTopicRequest{Name: "s", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// 3 produces of 1000 records, so the scan crosses stored segments.
	for batch := range 3 {
		var recs []Record
		for i := range 1000 {
			n := batch*1000 + i
			r := Record{Topic: "s", Partition: 0, Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, `{"n":%d,"city":"%s"}`, n, []string{"oslo", "rome", "lima"}[n%3]), Timestamp: -1}
			if n%500 == 7 {
				r.Headers = []segment.Header{{Key: "tag", Value: []byte("needle")}}
			}
			recs = append(recs, r)
		}
		if _, err := b.Produce(ctx, Anonymous, ProduceRequest{Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	base := SearchRequest{FetchRequest: FetchRequest{Topic: "s", Partition: 0}}
	offsets := func(res SearchResult) []int64 {
		var out []int64
		for _, r := range res.Records {
			out = append(out, r.Offset)
		}
		return out
	}

	req := base
	req.Key = []byte("k2345")
	res, err := b.Search(ctx, Anonymous, req)
	if err != nil || !slices.Equal(offsets(res), []int64{2345}) || res.NextOffset != 3000 || res.Scanned != 3000 || res.HighWatermark != 3000 {
		t.Fatalf("by key: %v %v next %d scanned %d", err, offsets(res), res.NextOffset, res.Scanned)
	}
	req = base
	req.Contains = []byte("needle") // in headers only
	res, err = b.Search(ctx, Anonymous, req)
	if want := []int64{7, 507, 1007, 1507, 2007, 2507}; err != nil || !slices.Equal(offsets(res), want) {
		t.Fatalf("by header text: %v %v, want %v", err, offsets(res), want)
	}
	req = base
	req.Contains, req.MaxRecords = []byte(`"lima"`), 4
	res, err = b.Search(ctx, Anonymous, req)
	if want := []int64{2, 5, 8, 11}; err != nil || !slices.Equal(offsets(res), want) || res.NextOffset != 12 {
		t.Fatalf("capped matches: %v %v next %d, want %v next 12", err, offsets(res), res.NextOffset, want)
	}
	// The budget stops the scan; searching on from NextOffset finds the rest.
	req = base
	req.Key, req.MaxScanBytes = []byte("k2999"), 1000
	var found []int64
	calls := 0
	for {
		res, err = b.Search(ctx, Anonymous, req)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		found = append(found, offsets(res)...)
		if res.NextOffset >= res.HighWatermark {
			break
		}
		if res.NextOffset <= req.Offset {
			t.Fatalf("no progress from %d", req.Offset)
		}
		req.Offset = res.NextOffset
	}
	if !slices.Equal(found, []int64{2999}) || calls < 10 {
		t.Fatalf("budgeted search: found %v in %d calls", found, calls)
	}
	// An end offset bounds the range.
	req = base
	req.Contains, req.Offset, req.End = []byte("needle"), 100, 1500
	res, err = b.Search(ctx, Anonymous, req)
	if err != nil || !slices.Equal(offsets(res), []int64{507, 1007}) || res.NextOffset != 1500 {
		t.Fatalf("bounded: %v %v next %d", err, offsets(res), res.NextOffset)
	}
	req = base
	req.End, req.Offset, req.MaxRecords = 13, 10, 100
	res, err = b.Search(ctx, Anonymous, req)
	if err != nil || !slices.Equal(offsets(res), []int64{10, 11, 12}) || res.NextOffset != 13 {
		t.Fatalf("a range without a filter: %v %v next %d", err, offsets(res), res.NextOffset)
	}
	wantCode(t, second(b.Search(ctx, Anonymous, base)), CodeInvalidParameter)
	req = base
	req.End = -1
	wantCode(t, second(b.Search(ctx, Anonymous, req)), CodeInvalidOffset)
	req = base
	req.Key, req.Offset = []byte("k1"), 5000
	wantCode(t, second(b.Search(ctx, Anonymous, req)), CodeOffsetOutOfRange)
}
