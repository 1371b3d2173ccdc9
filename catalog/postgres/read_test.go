package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

func TestChunksAndOffsetForTime(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	tp := mustTopic(t, c, "t", 2, nil)
	other := mustTopic(t, c, "gone", 1, nil)
	if err := c.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	// Four flushes, one chunk each: offsets [0,2] [3,4] [5,9] [10,10], running max
	// timestamps 1000 1000 3000 3000.
	keys := make([]string, 4)
	for i, f := range []struct {
		records int32
		len     int64
		maxTS   int64
	}{{3, 100, 1000}, {2, 50, 500}, {5, 200, 3000}, {1, 10, 2000}} {
		seg := makeSegment(testKey(time.Now()), f.len, []flushBatch{{tp.ID, 0, f.records, f.maxTS}})
		keys[i] = seg.Key
		if _, err := c.Commit(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		offset, maxBytes int64
		want             []int64 // base offsets of the chunks
	}{
		{0, 1, []int64{0}}, // the first chunk always
		{0, 149, []int64{0}},
		{0, 150, []int64{0, 3}}, // total Len within the budget
		{2, 1 << 20, []int64{0, 3, 5, 10}},
		{4, 250, []int64{3, 5}},
		{10, 0, []int64{10}},
		{11, 1 << 20, nil}, // at the high watermark: nothing yet
	} {
		list, err := c.Chunks(ctx, tp.ID, 0, tc.offset, tc.maxBytes)
		if err != nil {
			t.Errorf("chunks(%d, %d): %v", tc.offset, tc.maxBytes, err)
			continue
		}
		var got []int64
		for _, ch := range list.Chunks {
			got = append(got, ch.BaseOffset)
		}
		if !equalInt64s(got, tc.want) {
			t.Errorf("chunks(%d, %d): base offsets %v, want %v", tc.offset, tc.maxBytes, got, tc.want)
		}
		if p := list.Partition; p.HighWatermark != 11 || p.LogStartOffset != 0 || p.Bytes != 360 || p.TopicID != tp.ID {
			t.Errorf("chunks(%d, %d): partition %+v, want hwm 11, bytes 360", tc.offset, tc.maxBytes, p)
		}
	}
	list, err := c.Chunks(ctx, tp.ID, 0, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := catalog.Chunk{TopicID: tp.ID, Partition: 0, BaseOffset: 5, LastOffset: 9, SegmentKey: keys[2],
		SegmentSize: 300, Pos: 0, Len: 200, MaxTimestamp: 3000}
	if len(list.Chunks) != 1 || list.Chunks[0] != want {
		t.Errorf("chunks(5): %+v, want [%+v]", list.Chunks, want)
	}

	for _, tc := range []struct {
		topic     int64
		partition int32
		offset    int64
		want      error
	}{
		{tp.ID, 0, 12, catalog.ErrOffsetOutOfRange},
		{tp.ID, 0, -1, catalog.ErrOffsetOutOfRange},
		{tp.ID, 1, 1, catalog.ErrOffsetOutOfRange},
		{tp.ID, 2, 0, catalog.ErrPartitionOutOfRange},
		{tp.ID, -1, 0, catalog.ErrPartitionOutOfRange},
		{other.ID, 0, 0, catalog.ErrTopicNotFound},
		{12345, 0, 0, catalog.ErrTopicNotFound},
	} {
		list, err := c.Chunks(ctx, tc.topic, tc.partition, tc.offset, 100)
		if !errors.Is(err, tc.want) {
			t.Errorf("chunks(topic %d, partition %d, %d): %v, want %v", tc.topic, tc.partition, tc.offset, err, tc.want)
		}
		if tc.want == catalog.ErrOffsetOutOfRange && tc.partition == 0 && list.Partition.HighWatermark != 11 {
			t.Errorf("chunks(%d): out of range without the partition's state: %+v", tc.offset, list.Partition)
		}
	}

	for _, tc := range []struct {
		ts, want int64
	}{{-5, 0}, {0, 0}, {1000, 0}, {1001, 5}, {2000, 5}, {3000, 5}, {3001, 11}} {
		got, err := c.OffsetForTime(ctx, tp.ID, 0, tc.ts)
		if err != nil || got != tc.want {
			t.Errorf("offset for time %d: %d, %v; want %d", tc.ts, got, err, tc.want)
		}
	}
	if got, err := c.OffsetForTime(ctx, tp.ID, 1, 0); err != nil || got != 0 {
		t.Errorf("offset for time in an empty partition: %d, %v; want 0", got, err)
	}
	if _, err := c.OffsetForTime(ctx, tp.ID, 3, 0); !errors.Is(err, catalog.ErrPartitionOutOfRange) {
		t.Errorf("offset for time, partition 3: %v, want ErrPartitionOutOfRange", err)
	}
	if _, err := c.OffsetForTime(ctx, other.ID, 0, 0); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Errorf("offset for time, deleted topic: %v, want ErrTopicNotFound", err)
	}

	// Retention moved the log start into the third chunk: below it is out of range, and
	// OffsetForTime answers no lower than the log start.
	if _, err := c.pool.Exec(ctx, `UPDATE partitions SET log_start_offset = 7 WHERE topic_id = $1 AND partition = 0`, tp.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := c.Chunks(ctx, tp.ID, 0, 6, 100); !errors.Is(err, catalog.ErrOffsetOutOfRange) || list.Partition.LogStartOffset != 7 {
		t.Errorf("chunks below the log start: %v, %+v", err, list.Partition)
	}
	if list, err := c.Chunks(ctx, tp.ID, 0, 7, 1); err != nil || len(list.Chunks) != 1 || list.Chunks[0].BaseOffset != 5 {
		t.Errorf("chunks at the log start: %+v, %v; want the chunk [5, 9]", list.Chunks, err)
	}
	for _, tc := range []struct{ ts, want int64 }{{0, 7}, {1500, 7}, {3000, 7}, {3001, 11}} {
		if got, err := c.OffsetForTime(ctx, tp.ID, 0, tc.ts); err != nil || got != tc.want {
			t.Errorf("offset for time %d after retention: %d, %v; want %d", tc.ts, got, err, tc.want)
		}
	}
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
