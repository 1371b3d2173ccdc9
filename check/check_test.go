package check

import (
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// The footer comparison: known answers for hand-built rows.
func TestChunkAgrees(t *testing.T) {
	batches := []segment.BatchInfo{
		{TopicID: 1, Partition: 0, Pos: 0, Len: 100, LastOffsetDelta: 2, MaxTimestamp: 10},
		{TopicID: 1, Partition: 0, Pos: 100, Len: 50, LastOffsetDelta: 0, MaxTimestamp: 20},
		{TopicID: 1, Partition: 1, Pos: 150, Len: 70, LastOffsetDelta: 4, MaxTimestamp: 5},
	}
	for _, tc := range []struct {
		name  string
		chunk catalog.Chunk
		ok    bool
	}{
		{"both batches of partition 0", catalog.Chunk{TopicID: 1, Partition: 0, BaseOffset: 7, LastOffset: 10, Pos: 0, Len: 150, MaxTimestamp: 20}, true},
		{"partition 1", catalog.Chunk{TopicID: 1, Partition: 1, BaseOffset: 0, LastOffset: 4, Pos: 150, Len: 70, MaxTimestamp: 5}, true},
		{"too many offsets", catalog.Chunk{TopicID: 1, Partition: 0, BaseOffset: 7, LastOffset: 11, Pos: 0, Len: 150, MaxTimestamp: 20}, false},
		{"wrong partition", catalog.Chunk{TopicID: 1, Partition: 2, BaseOffset: 0, LastOffset: 4, Pos: 150, Len: 70, MaxTimestamp: 5}, false},
		{"range cuts a batch", catalog.Chunk{TopicID: 1, Partition: 0, BaseOffset: 7, LastOffset: 9, Pos: 0, Len: 120, MaxTimestamp: 10}, false},
		{"range starts inside a batch", catalog.Chunk{TopicID: 1, Partition: 0, BaseOffset: 7, LastOffset: 9, Pos: 10, Len: 90, MaxTimestamp: 10}, false},
		{"timestamp", catalog.Chunk{TopicID: 1, Partition: 1, BaseOffset: 0, LastOffset: 4, Pos: 150, Len: 70, MaxTimestamp: 6}, false},
	} {
		msg := chunkAgrees(tc.chunk, batches)
		if (msg == "") != tc.ok {
			t.Errorf("%s: %q, want ok=%v", tc.name, msg, tc.ok)
		}
	}
}

func TestOverlaps(t *testing.T) {
	spans := map[partKey][]span{
		{1, 0}: {{10, 19, "b"}, {0, 9, "a"}, {20, 29, "c"}}, // tiles: fine
		{1, 1}: {{0, 9, "a"}, {5, 12, "b"}, {13, 13, "c"}},  // b overlaps a
		{2, 0}: {{0, 0, "a"}, {0, 0, "b"}},                  // one offset twice
	}
	got := overlaps(spans)
	if len(got) != 2 {
		t.Fatalf("%d overlaps, want 2: %v", len(got), got)
	}
	for _, p := range got {
		if p.Kind != ChunkOverlap || p.Key != "b" {
			t.Errorf("unexpected %v", p)
		}
	}
}
