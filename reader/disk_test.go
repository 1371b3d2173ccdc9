package reader

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/segment"
)

// runReader runs r.Run until the test ends.
func runReader(t *testing.T, r *Reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testwait.Until(t, 10*time.Second, "Run to start", func() bool { return r.prefetch == nil || r.prefetch.running.Load() })
}

// readAll fetches partition 0 from offset 0 to hw, checking every record.
func readAll(t *testing.T, r *Reader, hw int64) {
	t.Helper()
	for off := int64(0); off < hw; {
		res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Offset: off, MaxBytes: 4 << 10})
		if err != nil {
			t.Fatalf("fetch at %d: %v", off, err)
		}
		checkRecords(t, 0, res.Records, span(off, res.NextOffset-1))
		off = res.NextOffset
	}
}

func TestDiskTierKeepsEvictedBlocks(t *testing.T) {
	l := newTestLog(t)
	// 8 objects of one 3-4 KiB chunk each; memory holds two 4 KiB blocks.
	for range 8 {
		l.flush(l.batch(0, 30, 100, segment.CompressionNone))
	}
	hw := l.hw[0]
	dir := t.TempDir()
	cfg := Config{BlockSize: testBlock, CacheBytes: 2 * testBlock, DiskCacheDir: dir, NoPrefetch: true}
	r := newTestReader(t, l, cfg)
	runReader(t, r)

	readAll(t, r, hw)
	if got := l.store.gets.Load(); got != 8 {
		t.Fatalf("first pass: %d GETs, want 8 (one per object)", got)
	}
	testwait.Until(t, 10*time.Second, "evicted blocks on disk", func() bool { n, _ := r.cache.disk.stats(); return n == 6 })

	// Second pass: what memory lost comes from disk, not from the store.
	readAll(t, r, hw)
	if got := l.store.gets.Load(); got != 8 {
		t.Errorf("second pass: %d GETs in all, want still 8", got)
	}
	if hits := testutil.ToFloat64(r.m.diskHits); hits < 6 {
		t.Errorf("%v disk hits, want at least 6", hits)
	}

	// A restarted node finds the blocks where it left them.
	l.store.gets.Store(0)
	r2 := newTestReader(t, l, cfg)
	if n, _ := r2.cache.disk.stats(); n < 6 {
		t.Fatalf("a new reader indexed %d blocks of the directory", n)
	}
	readAll(t, r2, hw)
	if got := l.store.gets.Load(); got > 2 {
		t.Errorf("after a restart: %d GETs, want at most the 2 blocks never evicted to disk", got)
	}
}

func TestDiskTierDropsDamagedBlocks(t *testing.T) {
	l := newTestLog(t)
	for range 4 {
		l.flush(l.batch(0, 30, 100, segment.CompressionNone))
	}
	dir := t.TempDir()
	r := newTestReader(t, l, Config{BlockSize: testBlock, CacheBytes: testBlock, DiskCacheDir: dir, NoPrefetch: true})
	runReader(t, r)
	readAll(t, r, l.hw[0])
	testwait.Until(t, 10*time.Second, "blocks on disk", func() bool { n, _ := r.cache.disk.stats(); return n == 3 })
	// Damage every block file: a flipped bit inside a record.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[200] ^= 0x40
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gets := l.store.gets.Load()
	readAll(t, r, l.hw[0]) // checks every record: damaged bytes are never served
	if got := l.store.gets.Load() - gets; got != 3 {
		t.Errorf("%d GETs after damage, want 3: each damaged block read again from the store", got)
	}
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestDiskTierBoundedAndNamed(t *testing.T) {
	for _, k := range []blockKey{{"seg/000001", 0}, {"a/b.c/%41", 12}, {"x.y", 3}} {
		got, ok := parseBlockName(blockName(k))
		if !ok || got != k {
			t.Errorf("block name %q reads back as %+v, %v", blockName(k), got, ok)
		}
		if strings.Contains(blockName(k), "/") {
			t.Errorf("block name %q is not one path element", blockName(k))
		}
	}
	for _, bad := range []string{"x.blk", "o.-1.blk", "%zz.1.blk", ".3.blk"} {
		if _, ok := parseBlockName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}

	dir := t.TempDir()
	m := newMetrics(nil)
	d, err := openDiskTier(dir, 3*testBlock, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := d.write(cached{key: blockKey{"o", int64(i)}, data: patterned(testBlock)}, false); err != nil {
			t.Fatal(err)
		}
	}
	if n, size := d.stats(); n != 3 || size != 3*testBlock {
		t.Errorf("%d blocks, %d bytes held; want the 3 most recent", n, size)
	}
	if got := len(mustReadDir(t, dir)); got != 3 {
		t.Errorf("%d files in the directory, want 3", got)
	}
	if _, ok := d.get(blockKey{"o", 0}); ok {
		t.Error("the oldest block was not evicted from disk")
	}
	if b, ok := d.get(blockKey{"o", 4}); !ok || len(b) != testBlock {
		t.Error("the newest block is not on disk")
	}
	// Leftovers of an interrupted write and foreign files: the former removed, the
	// latter left alone.
	os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644)
	d2, err := openDiskTier(dir, 2*testBlock, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := d2.stats(); n != 2 {
		t.Errorf("reopened with room for 2 blocks: %d indexed", n)
	}
	names := strings.Join(mustReadDir(t, dir), " ")
	if strings.Contains(names, ".tmp-") || !strings.Contains(names, "README") {
		t.Errorf("directory after reopening: %s", names)
	}
}

func TestPrefetchNextChunk(t *testing.T) {
	l := newTestLog(t)
	// Six objects, each holding one chunk of partition 0 and one of partition 1.
	for range 6 {
		l.flush(l.batch(0, 20, 100, segment.CompressionNone), l.batch(1, 20, 100, segment.CompressionNone))
	}
	r := newTestReader(t, l, Config{BlockSize: 64 << 10, CacheBytes: 1 << 20})
	runReader(t, r)
	ok := func() float64 { return testutil.ToFloat64(r.m.prefetches.WithLabelValues("ok")) }
	// A consumer reading one chunk per fetch: after each fetch, the next object is
	// loaded in the background, so the next fetch finds it cached.
	var off int64
	for i := range 6 {
		if i > 0 {
			list, err := l.cat.Chunks(t.Context(), testTopic, 0, off, 1)
			if err != nil {
				t.Fatal(err)
			}
			ch := list.Chunks[0]
			if !r.cache.cached(ch.SegmentKey, ch.Pos, ch.Len) {
				t.Errorf("fetch %d: its chunk was not prefetched", i)
			}
		}
		res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Offset: off, MaxRecords: 20})
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, 0, res.Records, span(off, off+19))
		off = res.NextOffset
		if i < 5 {
			testwait.Until(t, 10*time.Second, "the prefetch of the next object", func() bool { return ok() == float64(i+1) })
		}
		if got, want := l.store.gets.Load(), int64(min(i+2, 6)); got != want {
			t.Errorf("after fetch %d: %d GETs, want %d (one per object read or read ahead)", i, got, want)
		}
	}
	// Nothing beyond the high watermark, and one GET per object in all: reading
	// ahead costs no GET a sequential reader would not have sent. (An absence: a
	// prefetch beyond would start at once after the last fetch; 200 ms is generous.)
	time.Sleep(200 * time.Millisecond)
	if got := l.store.gets.Load(); got != 6 {
		t.Errorf("%d GETs for 6 objects", got)
	}
	if ok() != 5 {
		t.Errorf("%v prefetches, want 5", ok())
	}
	// A second reader of the same data: no GET at all.
	l.store.gets.Store(0)
	for off := int64(0); off < 120; {
		res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Partition: 1, Offset: off, MaxRecords: 20})
		if err != nil {
			t.Fatal(err)
		}
		off = res.NextOffset
	}
	if got := l.store.gets.Load(); got != 0 {
		t.Errorf("partition 1 read after partition 0 (same objects): %d GETs", got)
	}
}

func TestPrefetchWithinLargeChunk(t *testing.T) {
	l := newTestLog(t)
	var bs []segment.Batch
	for range 40 {
		bs = append(bs, l.batch(0, 10, 1000, segment.CompressionNone))
	}
	l.flush(bs...) // one 400 KiB chunk, read through the footer in 16 KiB blocks
	r := newTestReader(t, l, Config{BlockSize: 16 << 10, CacheBytes: 4 << 20})
	runReader(t, r)
	ok := func() float64 { return testutil.ToFloat64(r.m.prefetches.WithLabelValues("ok")) }
	var off int64
	for i := range 10 {
		res, err := r.Fetch(t.Context(), Fetch{TopicID: testTopic, Offset: off, MaxBytes: 8 << 10})
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, 0, res.Records, span(off, res.NextOffset-1))
		off = res.NextOffset
		testwait.Until(t, 10*time.Second, "a prefetch", func() bool { return ok() >= 1 || i == 0 })
	}
	if ok() < 1 {
		t.Errorf("no prefetch within a large chunk")
	}
}
