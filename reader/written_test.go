package reader

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// An object this node's writer hands over (Written) while a long-poll waits is cached
// block by block exactly as the store holds it, so the woken fetch reads it without a
// GET: the tail path that issue 32 found waiting on a GET of every fresh object.
func TestWrittenServesWaitingFetchWithoutGet(t *testing.T) {
	l := newTestLog(t)
	l.flush(l.batch(0, 2, 0, segment.CompressionNone))
	r := newTestReader(t, l, Config{PollInterval: time.Hour, BlockSize: minBlockSize, NoPrefetch: true})
	done := startFetch(t.Context(), r, Fetch{TopicID: testTopic, Offset: 2, Wait: 20 * time.Second, MaxBytes: 1 << 20, MaxRecords: 1000})
	waitParked(t, r, l, 0, 0)

	// Several blocks' worth, handed over in uneven parts as the writer's encoder lays
	// them out.
	batches := []segment.Batch{l.batch(0, 30, 500, segment.CompressionNone), l.batch(1, 10, 300, segment.CompressionNone)}
	obj, _, err := segment.Encode(batches, segment.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(obj) < 3*minBlockSize {
		t.Fatalf("object of %d bytes: want several blocks", len(obj))
	}
	key := fmt.Sprintf("seg/%06d", l.objs+1) // the key l.flush gives it
	r.Written(key, [][]byte{obj[:7], obj[7 : minBlockSize+13], obj[minBlockSize+13:]})
	gets := l.store.gets.Load()
	l.flush(batches...)
	if stored := l.store.objects[key]; !bytes.Equal(stored, obj) {
		t.Fatal("the test's encoding differs from the stored object")
	}
	for idx := int64(0); idx*minBlockSize < int64(len(obj)); idx++ {
		lo := idx * minBlockSize
		hi := min(lo+minBlockSize, int64(len(obj)))
		b, ok := r.cache.items[blockKey{key, idx}]
		if !ok {
			t.Fatalf("block %d not cached", idx)
		}
		if !bytes.Equal(b.Value.(*cached).data, obj[lo:hi]) {
			t.Fatalf("block %d differs from the object's bytes [%d,%d)", idx, lo, hi)
		}
	}
	r.Notify(catalog.Watermark{TopicID: testTopic, Partition: 0, HighWatermark: 32})
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	checkRecords(t, 0, got.res.Records, span(2, 31))
	if n := l.store.gets.Load() - gets; n != 0 {
		t.Errorf("the woken fetch sent %d GETs for an object handed over by the writer", n)
	}
}

// With no long-poll for tailWindow, Written caches nothing: a node nobody tails keeps
// its cache for the fetches that use it.
func TestWrittenIdleCachesNothing(t *testing.T) {
	l := newTestLog(t)
	r := newTestReader(t, l, Config{BlockSize: minBlockSize, NoPrefetch: true})
	r.Written("seg/x", [][]byte{make([]byte, 3*minBlockSize)})
	if blocks, _ := r.cache.stats(); blocks != 0 {
		t.Errorf("%d blocks cached with nobody waiting", blocks)
	}
}
