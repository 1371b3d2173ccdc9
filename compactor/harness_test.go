package compactor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/s3"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// The real store and catalogs have what the compactor needs.
var (
	_ objectStore       = objstore.Store(nil)
	_ compactionCatalog = (*sqlite.Catalog)(nil)
	_ compactionCatalog = (*postgres.Catalog)(nil)
)

// testCommitTimeout is the catalogs' commit timeout in these tests: chunk rows settle
// (and orphans become sweepable) twice this after their commit.
const testCommitTimeout = 1500 * time.Millisecond

// fullCatalog is both faces of a catalog.
type fullCatalog interface {
	catalog.Catalog
	catalog.Compaction
}

// env is one store, one catalog, a writer and a reader over them.
type env struct {
	t     testing.TB
	ctx   context.Context
	name  string
	store objstore.Store
	cat   fullCatalog
	w     *writer.Writer
	r     *reader.Reader
}

// backends runs fn against the embedded mode (filesystem + SQLite) and production
// (MinIO + Postgres).
func backends(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Run("fs+sqlite", func(t *testing.T) { fn(t, newEnv(t, "sqlite")) })
	t.Run("minio+postgres", func(t *testing.T) { fn(t, newEnv(t, "postgres")) })
}

func newEnv(t testing.TB, backend string) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), name: backend}
	// Topics here may allow any future timestamp, as an operator may
	// (catalog.CheckConfigLimits).
	opts := catalog.Options{CommitTimeout: testCommitTimeout, MaxTimestampAfterMs: -1}
	switch backend {
	case "sqlite":
		st, err := fs.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		e.store = st
		c, err := sqlite.Open(e.ctx, filepath.Join(t.TempDir(), "catalog.db"), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		e.cat = c
	case "postgres":
		e.store = newBucket(t)
		c, err := postgres.Open(e.ctx, testsvc.PostgresDSN(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		e.cat = c
	default:
		t.Fatalf("unknown backend %s", backend)
	}
	e.w = writer.New(e.store, e.cat, writer.Config{Linger: 5 * time.Millisecond, CommitTimeout: testCommitTimeout / 2}, nil, nil)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.r = reader.New(e.store, e.cat, reader.Config{CacheBytes: 32 << 20, BlockSize: 64 << 10}, nil, nil)
	return e
}

// newBucket returns a store on the test bucket under a prefix of its own.
func newBucket(tb testing.TB) *s3.Store {
	tb.Helper()
	m := testsvc.MinIO(tb)
	var b [6]byte
	rand.Read(b[:])
	s, err := s3.New(context.Background(), s3.Config{
		Bucket:    "strata-compactor-test",
		Prefix:    "t-" + hex.EncodeToString(b[:]),
		Endpoint:  m.Endpoint,
		Region:    m.Region,
		PathStyle: true,
		AccessKey: m.AccessKey,
		SecretKey: m.SecretKey,
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.EnsureBucket(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}

// testGracePeriod outlasts waitSettled plus a slow pass, so a test can check that
// objects are still there within the grace period even on a loaded machine.
const testGracePeriod = 6 * time.Second

// compactor returns a compactor over e with test timings.
func (e *env) compactor(cfg Config) *Compactor {
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = testGracePeriod
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Millisecond
	}
	if cfg.MinCleanableRatio == 0 {
		cfg.MinCleanableRatio = -1
	}
	return New(e.store, e.cat, cfg, nil, nil)
}

func (e *env) topic(name string, partitions int32, configs map[string]string) catalog.Topic {
	e.t.Helper()
	tp, err := e.cat.CreateTopic(e.ctx, name, partitions, configs)
	if err != nil {
		e.t.Fatal(err)
	}
	return tp
}

// rec is a record as produced, with where it landed.
type rec struct {
	partition int32
	offset    int64
	segment.Record
}

// gen makes reproducible records: keys from a set of nkeys (nil now and then when
// nullKeys), values of 100-1,100 bytes (a tombstone now and then when tombstones),
// headers on some, timestamps from ts0 one millisecond apart.
type gen struct {
	rnd        *mrand.Rand
	nkeys      int
	nullKeys   bool
	tombstones bool
	ts         int64
	n          int
	// queue, when not empty, is what record returns next (timestamps and the counter
	// are still filled in).
	queue []segment.Record
}

func newGen(seed uint64, nkeys int, ts0 int64) *gen {
	return &gen{rnd: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nkeys: nkeys, ts: ts0}
}

func (g *gen) record() segment.Record {
	g.n++
	if len(g.queue) > 0 {
		r := g.queue[0]
		g.queue = g.queue[1:]
		r.Timestamp = g.ts
		g.ts++
		return r
	}
	r := segment.Record{Timestamp: g.ts}
	g.ts++
	if !(g.nullKeys && g.rnd.IntN(10) == 0) {
		r.Key = fmt.Appendf(nil, "key-%05d", g.rnd.IntN(g.nkeys))
	}
	if g.tombstones && g.rnd.IntN(8) == 0 {
		r.Value = nil
	} else {
		r.Value = make([]byte, 100+g.rnd.IntN(1000))
		for i := range r.Value {
			r.Value[i] = byte('a' + g.rnd.IntN(26))
		}
		copy(r.Value, fmt.Sprintf("#%d#", g.n))
	}
	switch g.rnd.IntN(4) {
	case 0:
		r.Headers = []segment.Header{{Key: "h", Value: []byte("v")}}
	case 1:
		r.Headers = []segment.Header{{Key: "trace", Value: fmt.Appendf(nil, "%d", g.n)}, {Key: "null", Value: nil}}
	}
	return r
}

var compressions = []segment.Compression{segment.CompressionNone, segment.CompressionZstd, segment.CompressionGzip,
	segment.CompressionLZ4, segment.CompressionSnappy}

// produce writes n records spread over the topic's partitions, in requests of up to 50
// records sent by several producers at once, so that flushes hold many partitions. It
// returns the records with their offsets.
func (e *env) produce(tp catalog.Topic, g *gen, n int) []rec {
	e.t.Helper()
	const per = 50
	var (
		mu  sync.Mutex
		out []rec
		wg  sync.WaitGroup
		sem = make(chan struct{}, 8)
		bad error
	)
	for start := 0; start < n; start += per {
		cnt := min(per, n-start)
		part := int32(g.rnd.IntN(int(tp.Partitions)))
		req := writer.Request{Compression: compressions[g.rnd.IntN(len(compressions))]}
		for range cnt {
			req.Records = append(req.Records, writer.Record{TopicID: tp.ID, Partitions: tp.Partitions, Partition: part, Record: g.record()})
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var resp writer.Response
			var err error
			for attempt := 0; attempt < 20; attempt++ {
				resp, err = e.w.Produce(e.ctx, req)
				// Both mean nothing was written: a retry cannot duplicate. ErrCommit comes
				// when a commit slowed past its timeout on a loaded machine was fenced.
				retry := errors.Is(err, writer.ErrBufferFull) ||
					(errors.Is(err, writer.ErrCommit) && !errors.Is(err, writer.ErrOutcomeUnknown))
				if !retry {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				bad = err
				return
			}
			for i, rr := range resp.Records {
				out = append(out, rec{partition: rr.Partition, offset: rr.Offset, Record: req.Records[i].Record})
			}
		}()
	}
	wg.Wait()
	if bad != nil {
		e.t.Fatalf("produce: %v", bad)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].partition != out[j].partition {
			return out[i].partition < out[j].partition
		}
		return out[i].offset < out[j].offset
	})
	return out
}

// readAll fetches a partition from its log start to its high watermark.
func (e *env) readAll(topicID int64, partition int32) []segment.DecodedRecord {
	e.t.Helper()
	recs, err := e.tryReadAll(topicID, partition, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

func (e *env) tryReadAll(topicID int64, partition int32, from int64) ([]segment.DecodedRecord, error) {
	var out []segment.DecodedRecord
	off := from
	if off < 0 {
		info := e.partition(topicID, partition)
		off = info.LogStartOffset
	}
	for {
		res, err := e.r.Fetch(e.ctx, reader.Fetch{TopicID: topicID, Partition: partition, Offset: off, MaxRecords: 5000, MaxBytes: 4 << 20})
		if err != nil {
			return out, err
		}
		out = append(out, res.Records...)
		if res.NextOffset >= res.HighWatermark {
			return out, nil
		}
		if res.NextOffset == off {
			return out, fmt.Errorf("fetch at %d made no progress (high watermark %d)", off, res.HighWatermark)
		}
		off = res.NextOffset
	}
}

func (e *env) partition(topicID int64, partition int32) catalog.PartitionInfo {
	e.t.Helper()
	ps, err := e.cat.Partitions(e.ctx, topicID)
	if err != nil {
		e.t.Fatal(err)
	}
	return ps[partition]
}

// rows returns every chunk row of a partition, below the log start too.
func (e *env) rows(topicID int64, partition int32) []catalog.CompactionChunk {
	e.t.Helper()
	rows, err := e.cat.CompactionChunks(e.ctx, topicID, partition, 0, 1<<30)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

// objectsOf counts the distinct objects a partition's rows at or above the log start
// refer to.
func (e *env) objectsOf(topicID int64, partition int32) (objects, rows int) {
	info := e.partition(topicID, partition)
	keys := map[string]bool{}
	for _, r := range e.rows(topicID, partition) {
		if r.LastOffset >= info.LogStartOffset {
			keys[r.SegmentKey] = true
			rows++
		}
	}
	return len(keys), rows
}

// storeKeys lists the segment objects in the store.
func (e *env) storeKeys() map[string]bool {
	e.t.Helper()
	keys := map[string]bool{}
	if err := e.store.List(e.ctx, "segments/", func(i objstore.Info) error { keys[i.Key] = true; return nil }); err != nil {
		e.t.Fatal(err)
	}
	return keys
}

// waitSettled waits until every row committed so far is settled.
func waitSettled() { time.Sleep(catalog.SettleAge(testCommitTimeout) + 300*time.Millisecond) }

// passUntilQuiet runs passes until one swaps nothing in, and returns how many ran.
func (e *env) passUntilQuiet(c *Compactor) int {
	e.t.Helper()
	var quietSince time.Time
	for i := 1; i <= 40; i++ {
		before := testutil.ToFloat64(c.m.merges)
		if err := c.Pass(e.ctx); err != nil {
			e.t.Fatalf("pass %d: %v", i, err)
		}
		// Quiet passes, with nothing left due, for longer than rows take to settle: on a
		// loaded machine a pass may find rows not settled yet — the partition is then due
		// only once they are, which the backlog does not count until then — or a lease
		// still held (a release that failed leaves it until its TTL), and merge nothing
		// although work remains.
		if testutil.ToFloat64(c.m.merges) == before && testutil.ToFloat64(c.m.due) == 0 {
			if quietSince.IsZero() {
				quietSince = time.Now()
			} else if time.Since(quietSince) > catalog.SettleAge(testCommitTimeout) {
				return i
			}
			time.Sleep(500 * time.Millisecond)
		} else {
			quietSince = time.Time{}
		}
	}
	e.t.Fatal("compaction never went quiet after 40 passes")
	return 0
}

// sameRecord compares a record read back with the one produced, byte for byte,
// telling nil from empty.
func sameRecord(got segment.DecodedRecord, want rec) error {
	eq := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	switch {
	case got.Offset != want.offset:
		return fmt.Errorf("offset %d, want %d", got.Offset, want.offset)
	case !eq(got.Key, want.Key):
		return fmt.Errorf("offset %d: key %q, want %q", got.Offset, got.Key, want.Key)
	case !eq(got.Value, want.Value):
		return fmt.Errorf("offset %d: value differs (%d bytes, want %d; nil %v, want nil %v)", got.Offset, len(got.Value), len(want.Value), got.Value == nil, want.Value == nil)
	case got.Timestamp != want.Timestamp:
		return fmt.Errorf("offset %d: timestamp %d, want %d", got.Offset, got.Timestamp, want.Timestamp)
	case len(got.Headers) != len(want.Headers):
		return fmt.Errorf("offset %d: %d headers, want %d", got.Offset, len(got.Headers), len(want.Headers))
	}
	for i := range got.Headers {
		if got.Headers[i].Key != want.Headers[i].Key || !eq(got.Headers[i].Value, want.Headers[i].Value) {
			return fmt.Errorf("offset %d: header %d is %q=%q, want %q=%q", got.Offset, i, got.Headers[i].Key, got.Headers[i].Value, want.Headers[i].Key, want.Headers[i].Value)
		}
	}
	return nil
}

// checkPartition reads a partition back and compares it with want (ascending offsets).
func (e *env) checkPartition(topicID int64, partition int32, want []rec) {
	e.t.Helper()
	got := e.readAll(topicID, partition)
	if len(got) != len(want) {
		e.t.Fatalf("partition %d: read %d records, want %d", partition, len(got), len(want))
	}
	for i := range got {
		if err := sameRecord(got[i], want[i]); err != nil {
			e.t.Fatalf("partition %d: %v", partition, err)
		}
	}
}

// byPartition groups produced records by partition.
func byPartition(recs []rec) map[int32][]rec {
	out := map[int32][]rec{}
	for _, r := range recs {
		out[r.partition] = append(out[r.partition], r)
	}
	return out
}
