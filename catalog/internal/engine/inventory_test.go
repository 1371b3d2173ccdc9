package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// TestInventoryPages: rows are grouped into segments whatever the page boundaries, pages
// are asked for after the last key of the one before, and the walk stops at a short page
// or at fn's error.
func TestInventoryPages(t *testing.T) {
	const n = 2*inventoryBatch + 3
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("seg-%05d", i))
	}
	var afters []string
	page := func(ctx context.Context, after string, limit int, row func(catalog.SegmentRecord, *catalog.Chunk)) error {
		afters = append(afters, after)
		i := sort.SearchStrings(keys, after)
		if i < len(keys) && keys[i] == after {
			i++
		}
		for _, k := range keys[i:min(i+limit, len(keys))] {
			s := catalog.SegmentRecord{Key: k, Size: 100}
			if k[len(k)-1] == '7' {
				row(s, nil) // a segment without rows
				continue
			}
			for p := range int32(3) {
				row(s, &catalog.Chunk{TopicID: 1, Partition: p, BaseOffset: 10})
			}
		}
		return nil
	}
	var got []catalog.SegmentRecord
	err := InventoryPages(context.Background(), page, func(s catalog.SegmentRecord) error { got = append(got, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", keys[inventoryBatch-1], keys[2*inventoryBatch-1]}; fmt.Sprint(afters) != fmt.Sprint(want) {
		t.Fatalf("pages after %q, want %q", afters, want)
	}
	if len(got) != n {
		t.Fatalf("%d segments, want %d", len(got), n)
	}
	for i, s := range got {
		want := 3
		if s.Key[len(s.Key)-1] == '7' {
			want = 0
		}
		if s.Key != keys[i] || len(s.Chunks) != want {
			t.Fatalf("segment %d: %s with %d chunks, want %s with %d", i, s.Key, len(s.Chunks), keys[i], want)
		}
		for j, c := range s.Chunks {
			if c.SegmentKey != s.Key || c.SegmentSize != 100 || c.Partition != int32(j) {
				t.Fatalf("segment %s chunk %d: %+v", s.Key, j, c)
			}
		}
	}

	stop := errors.New("stop")
	calls := 0
	if err := InventoryPages(context.Background(), page, func(catalog.SegmentRecord) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, calls)
	}
	broken := errors.New("query failed")
	if err := InventoryPages(context.Background(), func(context.Context, string, int, func(catalog.SegmentRecord, *catalog.Chunk)) error { return broken }, nil); err != broken {
		t.Fatalf("page's error: %v", err)
	}
}
