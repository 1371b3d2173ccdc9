package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestDurabilitySettings reads back what the writer connection runs with: WAL,
// synchronous=FULL (a returned commit survives a machine crash, not only a process
// crash), the busy timeout and foreign keys.
func TestDurabilitySettings(t *testing.T) {
	c := openTest(t)
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"synchronous", "2"},
		{"busy_timeout", "10000"},
		{"foreign_keys", "1"},
	} {
		var got string
		if err := c.w.QueryRowContext(t.Context(), "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
		}
	}
	var qo string
	if err := c.r.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&qo); err != nil || qo != "1" {
		t.Errorf("read pool query_only = %q, %v", qo, err)
	}
}

func TestOpenAgainKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tp := catalogtest.SeedTopic(t, c, "keep", 1, nil)
	catalogtest.SeedRecords(t, c, tp.ID, 0, 3, 2)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	c, err = Open(t.Context(), path, catalog.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer c.Close()
	var versions int
	if err := c.r.QueryRowContext(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if versions != len(ms) {
		t.Fatalf("%d migrations recorded, %d embedded", versions, len(ms))
	}
	if p := catalogtest.Partition(t, c, tp.ID, 0); p.HighWatermark != 6 {
		t.Fatalf("after reopening: %+v", p)
	}
}

func TestOpenRefusesMemory(t *testing.T) {
	for _, p := range []string{"", ":memory:", "/tmp/a?mode=memory"} {
		if c, err := Open(t.Context(), p, catalog.Options{}); err == nil {
			c.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

// TestTwoCatalogsOneFile commits through two Catalogs on one file at once, as two
// processes would: the immediate transactions and the busy timeout serialise them,
// and offsets stay dense.
func TestTwoCatalogsOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	var cs [2]*Catalog
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range cs { // opening at once races the migrations too
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[i], errs[i] = Open(t.Context(), path, catalog.Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(func() { cs[i].Close() })
	}
	tp := catalogtest.SeedTopic(t, cs[0], "shared", 2, nil)
	for i := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				seg := catalogtest.Flush(catalogtest.NewKey(t),
					catalogtest.Req(catalogtest.B{TopicID: tp.ID, Partition: 0, Records: 2}, catalogtest.B{TopicID: tp.ID, Partition: 1, Records: 1}))
				if _, err := cs[i].Commit(t.Context(), seg); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("catalog %d: %v", i, err)
		}
	}
	for p, want := range []int64{400, 200} {
		catalogtest.CheckDense(t, cs[1], tp.ID, int32(p))
		if got := catalogtest.Partition(t, cs[1], tp.ID, int32(p)).HighWatermark; got != want {
			t.Fatalf("partition %d high watermark %d, want %d", p, got, want)
		}
	}
}

func TestListenEndsOnClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Listen(context.Background(), func(catalog.Watermark) {}) }()
	testwait.Until(t, 5*time.Second, "Listen to subscribe", func() bool { c.hub.mu.Lock(); defer c.hub.mu.Unlock(); return len(c.hub.subs) > 0 })
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, errClosed) {
			t.Fatalf("Listen after Close returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen did not end on Close")
	}
}

// TestSlowListenerNeverBlocksCommit: a listener that never returns from fn must not
// hold up commits; it misses notifications instead.
func TestSlowListenerNeverBlocksCommit(t *testing.T) {
	c := openTest(t)
	tp := catalogtest.SeedTopic(t, c, "slow", 1, nil)
	ctx, cancel := context.WithCancel(t.Context())
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Listen(ctx, func(catalog.Watermark) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		})
	}()
	defer func() { close(release); cancel(); <-done }()
	// Commit until the listener is stuck in fn, then more than its buffer holds.
	n := 0
	for stuck := false; !stuck; n++ {
		if n == 1000 {
			t.Fatal("the listener was never called")
		}
		catalogtest.SeedRecords(t, c, tp.ID, 0, 1, 1)
		select {
		case <-entered:
			stuck = true
		case <-time.After(time.Millisecond):
		}
	}
	catalogtest.SeedRecords(t, c, tp.ID, 0, listenBuffer+50, 1)
	n += listenBuffer + 50
	if got := catalogtest.Partition(t, c, tp.ID, 0).HighWatermark; got != int64(n) {
		t.Fatalf("high watermark %d", got)
	}
}

// TestLogStartOffset: once retention has moved a partition's log start (set here by
// hand; the compactor does it), offsets below it are out of range, the chunk holding it
// is still served, and a time lookup never answers below it.
func TestLogStartOffset(t *testing.T) {
	c := openTest(t)
	tp := catalogtest.SeedTopic(t, c, "retained", 1, nil)
	catalogtest.SeedRecords(t, c, tp.ID, 0, 5, 10) // chunks [0,9] ... [40,49]
	if _, err := c.w.ExecContext(t.Context(), `UPDATE partitions SET log_start_offset = 25 WHERE topic_id = ?`, tp.ID); err != nil {
		t.Fatal(err)
	}
	l, err := c.Chunks(t.Context(), tp.ID, 0, 24, 1<<20)
	if !errors.Is(err, catalog.ErrOffsetOutOfRange) || l.Partition.LogStartOffset != 25 || l.Partition.HighWatermark != 50 {
		t.Fatalf("Chunks(24) = %+v, %v; want out of range [25, 50]", l, err)
	}
	l, err = c.Chunks(t.Context(), tp.ID, 0, 25, 1<<20)
	if err != nil || len(l.Chunks) != 3 || l.Chunks[0].BaseOffset != 20 {
		t.Fatalf("Chunks(25) = %+v, %v; want chunks from 20", l, err)
	}
	if got, err := c.OffsetForTime(t.Context(), tp.ID, 0, 0); err != nil || got != 25 {
		t.Fatalf("OffsetForTime(0) = %d, %v; want the log start 25", got, err)
	}
}
