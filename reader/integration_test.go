package reader

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/segment"
)

// observedCatalog lets the test see when the reader has looked up chunks and when
// its notification subscription is live.
type observedCatalog struct {
	*sqlite.Catalog
	served atomic.Int64
	notes  atomic.Int64
}

func (c *observedCatalog) Chunks(ctx context.Context, topicID int64, partition int32, offset, maxBytes int64) (catalog.ChunkList, error) {
	defer c.served.Add(1)
	return c.Catalog.Chunks(ctx, topicID, partition, offset, maxBytes)
}

func (c *observedCatalog) Listen(ctx context.Context, fn func(catalog.Watermark)) error {
	return c.Catalog.Listen(ctx, func(w catalog.Watermark) {
		c.notes.Add(1)
		fn(w)
	})
}

// flusher writes flushes as the writer does: one object (segment.Encode, Put to the
// filesystem store) and one catalog commit, one request per Batch given.
type flusher struct {
	t     *testing.T
	store *fs.Store
	cat   catalog.Catalog
	topic catalog.Topic
	next  map[int32]int64 // labels: offsets the records made are expected to get
}

func (f *flusher) batch(p int32, n, size int, c segment.Compression) segment.Batch {
	b := segment.Batch{TopicID: f.topic.ID, Partition: p, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Compression: c}
	for range n {
		o := f.next[p]
		f.next[p]++
		b.Records = append(b.Records, segment.Record{Key: []byte("k"), Value: value(p, o, size), Timestamp: 1_700_000_000_000 + o})
	}
	return b
}

// flush commits batches, batch i as request i, and checks the offsets assigned are
// the ones their labels expect.
func (f *flusher) flush(batches ...segment.Batch) {
	f.t.Helper()
	ctx := f.t.Context()
	want := make([]int64, len(batches)) // the first label of each batch
	for i, b := range batches {
		var first int64
		if _, err := fmt.Sscanf(string(b.Records[0].Value), "p%d-%d.", new(int32), &first); err != nil {
			f.t.Fatal(err)
		}
		want[i] = first
	}
	obj, infos, err := segment.Encode(batches, segment.EncodeOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	key := segment.NewKey(time.Now())
	if err := f.store.Put(ctx, key, obj); err != nil {
		f.t.Fatal(err)
	}
	seg := catalog.Segment{Key: key, Size: int64(len(obj))}
	for _, bi := range infos {
		seg.Requests = append(seg.Requests, catalog.Request{Batches: []catalog.Batch{{
			TopicID: bi.TopicID, Partition: bi.Partition, Pos: bi.Pos, Len: bi.Len,
			Records: bi.LastOffsetDelta + 1, MaxTimestamp: bi.MaxTimestamp, BaseSequence: -1,
		}}})
	}
	results, err := f.cat.Commit(ctx, seg)
	if err != nil {
		f.t.Fatalf("commit: %v", err)
	}
	for i, res := range results {
		if res.Err != nil || len(res.BaseOffsets) != 1 || res.BaseOffsets[0] != want[i] {
			f.t.Fatalf("commit: request %d: %+v, want base offset %d", i, res, want[i])
		}
	}
}

// TestIntegrationFSSQLite commits segments through the SQLite catalog and the
// filesystem store exactly as the writer does, and reads them back through the reader.
func TestIntegrationFSSQLite(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	sq, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	cat := &observedCatalog{Catalog: sq}
	topic, err := cat.CreateTopic(ctx, "events", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &flusher{t: t, store: store, cat: cat, topic: topic, next: map[int32]int64{}}

	// Small blocks, so chunks straddle blocks and the footer path is taken for large
	// ones; no polling, so only notifications end a long-poll.
	r := New(store, cat, Config{BlockSize: 4 << 10, CacheBytes: 64 << 10, PollInterval: time.Hour}, nil, nil)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.Run(runCtx); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })

	// Several flushes, each with several requests and partitions, mixed codecs.
	codecs := []segment.Compression{segment.CompressionNone, segment.CompressionGzip, segment.CompressionSnappy, segment.CompressionLZ4, segment.CompressionZstd}
	for i := range 6 {
		c := codecs[i%len(codecs)]
		f.flush(f.batch(0, 7, 300, c), f.batch(1, 3, 50, segment.CompressionNone), f.batch(0, 5, 300, c), f.batch(2, 1, 10, c))
	}
	// One large flush for partition 0: a chunk of ~100 KiB, read through the footer.
	var big []segment.Batch
	for range 40 {
		big = append(big, f.batch(0, 10, 250, segment.CompressionNone))
	}
	f.flush(big...)

	t.Run("fetch everything", func(t *testing.T) {
		for p, hw := range map[int32]int64{0: 6*12 + 400, 1: 18, 2: 6} {
			var got []segment.DecodedRecord
			for next := int64(0); next < hw; {
				res, err := r.Fetch(ctx, Fetch{TopicID: topic.ID, Partition: p, Offset: next, MaxRecords: 25})
				if err != nil {
					t.Fatalf("partition %d at %d: %v", p, next, err)
				}
				if res.HighWatermark != hw || res.NextOffset <= next {
					t.Fatalf("partition %d at %d: next %d hw %d, want hw %d", p, next, res.NextOffset, res.HighWatermark, hw)
				}
				got = append(got, res.Records...)
				next = res.NextOffset
			}
			checkRecords(t, p, got, span(0, hw-1))
		}
	})
	t.Run("middle of the large chunk", func(t *testing.T) {
		res, err := r.Fetch(ctx, Fetch{TopicID: topic.ID, Offset: 72 + 205, MaxRecords: 30})
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, 0, res.Records, span(277, 306))
	})
	t.Run("raw", func(t *testing.T) {
		res, err := r.FetchRaw(ctx, Fetch{TopicID: topic.ID, Offset: 8, MaxRecords: 20})
		if err != nil {
			t.Fatal(err)
		}
		var bases []int64
		for _, raw := range res.Batches {
			db, err := segment.DecodeBatch(raw)
			if err != nil {
				t.Fatal(err)
			}
			bases = append(bases, db.BaseOffset)
		}
		if fmt.Sprint(bases) != fmt.Sprint([]int64{7, 12, 19, 24}) || res.NextOffset != 31 {
			t.Errorf("base offsets %v next %d, want [7 12 19 24] 31", bases, res.NextOffset)
		}
	})
	t.Run("out of range", func(t *testing.T) {
		_, err := r.Fetch(ctx, Fetch{TopicID: topic.ID, Partition: 2, Offset: 7})
		var oor *OutOfRangeError
		if !errors.As(err, &oor) || oor.HighWatermark != 6 || oor.LogStartOffset != 0 {
			t.Errorf("err %v, want out of range [0, 6]", err)
		}
		if _, err := r.Fetch(ctx, Fetch{TopicID: topic.ID, Partition: 3}); !errors.Is(err, catalog.ErrPartitionOutOfRange) {
			t.Errorf("partition 3 of 3: err %v, want ErrPartitionOutOfRange", err)
		}
	})
	t.Run("long-poll woken by the catalog's notification", func(t *testing.T) {
		// Notifications reach only subscribers: wait until Run's is live.
		for cat.notes.Load() == 0 {
			f.flush(f.batch(2, 1, 10, segment.CompressionNone))
			time.Sleep(10 * time.Millisecond)
		}
		hw := f.next[2]
		served := cat.served.Load()
		done := startFetch(ctx, r, Fetch{TopicID: topic.ID, Partition: 2, Offset: hw, Wait: 20 * time.Second})
		testwait.Until(t, 10*time.Second, "the fetch to wait", func() bool {
			select {
			case got := <-done:
				t.Fatalf("the fetch at the high watermark %d returned: %+v", hw, got)
			default:
			}
			return cat.served.Load() > served && r.waiting(topic.ID, 2) == 1
		})
		f.flush(f.batch(2, 2, 10, segment.CompressionZstd))
		got := <-done
		if got.err != nil {
			t.Fatal(got.err)
		}
		checkRecords(t, 2, got.res.Records, span(hw, hw+1))
		if n := testutil.ToFloat64(r.m.wakeupsNotify); n != 1 || got.elapsed > 10*time.Second {
			t.Errorf("notify wakeups %v after %s, want 1 well before the wait", n, got.elapsed)
		}
	})
}
