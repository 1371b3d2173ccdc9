package writer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/murmur2"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/s3"
	"github.com/strata-io/strata/segment"
)

// The real store and catalog have what the writer needs.
var (
	_ segmentStore = objstore.Store(nil)
	_ committer    = catalog.Catalog(nil)
)

// The write path end to end: the writer over a real object store and a real catalog,
// read back through the catalog's chunk rows and the objects.
func TestIntegration(t *testing.T) {
	t.Run("fs+sqlite", func(t *testing.T) {
		store, err := fs.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cat, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		runIntegration(t, store, cat)
	})
	t.Run("minio+postgres", func(t *testing.T) {
		store := newBucket(t)
		cat, err := postgres.Open(t.Context(), testsvc.PostgresDSN(t), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		runIntegration(t, store, cat)
	})
}

// newBucket returns a store on the test bucket under a prefix of its own.
func newBucket(tb testing.TB) *s3.Store {
	tb.Helper()
	m := testsvc.MinIO(tb)
	var b [6]byte
	rand.Read(b[:])
	s, err := s3.New(context.Background(), s3.Config{
		Bucket:    "strata-writer-test",
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

// lossyCommitter loses the answer of the next commits on cue: landed ones commit and
// then fail, as a connection lost after COMMIT; others fail without reaching the
// catalog, as a connection lost before it.
type lossyCommitter struct {
	committer
	landed, lost atomic.Int32
}

func (c *lossyCommitter) Commit(ctx context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	if c.lost.Add(-1) >= 0 {
		return nil, errLost
	}
	res, err := c.committer.Commit(ctx, seg)
	if c.landed.Add(-1) >= 0 && err == nil {
		return nil, errLost
	}
	return res, err
}

// where is a record's place in the log.
type where struct {
	topic     int64
	partition int32
	offset    int64
}

func runIntegration(t *testing.T, inner objstore.Store, cat catalog.Catalog) {
	ctx := t.Context()
	orders, err := cat.CreateTopic(ctx, "orders", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	events, err := cat.CreateTopic(ctx, "events", 2, map[string]string{"message.timestamp.type": "LogAppendTime"})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := cat.CreateTopic(ctx, "gone", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	store := fault.New(inner)
	lossy := &lossyCommitter{committer: cat}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	w := New(store, lossy, Config{Linger: 5 * time.Millisecond, MaxFlushBytes: 32 << 10, MaxInflight: 3}, log, reg)
	runCtx, stop := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(runCtx) }()
	defer stop()

	in := &integration{t: t, w: w, acked: make(map[where]string), keys: make(map[where]string), stamps: make(map[where]int64)}
	t0 := time.Now().UnixMilli()
	in.produceConcurrently(orders.ID, events.ID, t0)
	in.produceIdempotentRaw(cat, orders.ID, t0)
	t1 := time.Now().UnixMilli()

	// Phase 2: failures, one flush each.
	one := func(part int32, value string) Request { return req(rec(orders.ID, 4, part, "", value)) }
	store.FailNext(fault.Put, 1, errBoom)
	if _, err := w.Produce(ctx, one(0, "put fails")); !errors.Is(err, ErrStore) || !errors.Is(err, errBoom) {
		t.Errorf("produce with the put failing: %v, want ErrStore", err)
	}
	lossy.landed.Store(1)
	r := one(1, "commit landed, answer lost")
	if resp, err := w.Produce(ctx, r); err != nil {
		t.Errorf("produce with the commit answer lost: %v, want the settled offsets", err)
	} else {
		in.record(r, resp)
	}
	lossy.lost.Store(1)
	if _, err := w.Produce(ctx, one(2, "commit never landed")); !errors.Is(err, ErrCommit) || !errors.Is(err, catalog.ErrCommitAborted) {
		t.Errorf("produce with the commit lost: %v, want ErrCommit after fencing", err)
	}
	if _, err := w.Produce(ctx, req(rec(gone.ID, 1, 0, "", "deleted topic"))); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Errorf("produce to a deleted topic: %v, want ErrTopicNotFound", err)
	}
	if _, err := w.Produce(ctx, one(9, "no such partition")); !errors.Is(err, catalog.ErrPartitionOutOfRange) {
		t.Errorf("produce to partition 9 of 4: %v, want ErrPartitionOutOfRange", err)
	}

	// Phase 3: shutdown.
	stop()
	if err := <-runDone; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if _, err := w.Produce(ctx, one(0, "late")); !errors.Is(err, ErrClosed) {
		t.Errorf("produce after shutdown: %v, want ErrClosed", err)
	}

	// Read everything back: every acknowledged record is where its answer said, with
	// its value; every committed offset was acknowledged (dense, nothing extra).
	got, logAppend := readLog(t, cat, inner, orders, events)
	if want := 6*20*5 + 6*5*4 + 5 + 1; len(in.acked) != want {
		t.Errorf("%d records acknowledged, want %d", len(in.acked), want)
	}
	if len(got) != len(in.acked) {
		t.Errorf("%d records in the log, %d acknowledged: want the same", len(got), len(in.acked))
	}
	for at, v := range in.acked {
		dr, ok := got[at]
		switch {
		case !ok:
			t.Errorf("acknowledged record %q at %+v is not in the log", v, at)
		case string(dr.Value) != v:
			t.Errorf("at %+v: %q, acknowledged %q", at, dr.Value, v)
		case in.keys[at] != "" && murmur2.Partition([]byte(in.keys[at]), 4) != at.partition:
			t.Errorf("key %q in partition %d, Kafka would use %d", in.keys[at], at.partition, murmur2.Partition([]byte(in.keys[at]), 4))
		case at.topic == events.ID && (!logAppend[at] || dr.Timestamp < t0 || dr.Timestamp > t1):
			t.Errorf("LogAppendTime record at %+v: timestamp %d (flag %v), want the writer's clock in [%d, %d]", at, dr.Timestamp, logAppend[at], t0, t1)
		case at.topic == events.ID && dr.Timestamp != in.stamps[at]:
			t.Errorf("LogAppendTime record at %+v: stamped %d, its answer said %d", at, dr.Timestamp, in.stamps[at])
		}
	}
	checkCostModel(t, inner, w)
}

// integration is what runIntegration's phases share: the writer, and every record
// acknowledged, by where the answer said it landed.
type integration struct {
	t     *testing.T
	w     *Writer
	mu    sync.Mutex
	acked map[where]string
	keys  map[where]string
	// stamps: the LogAppendTime each LogAppendTime record's answer said it got.
	stamps map[where]int64
}

func (in *integration) record(req Request, resp Response) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, rr := range resp.Records {
		at := where{req.Records[i].TopicID, rr.Partition, rr.Offset}
		if _, dup := in.acked[at]; dup {
			in.t.Errorf("offset %+v acknowledged twice", at)
		}
		in.acked[at] = string(req.Records[i].Value)
		if req.Records[i].LogAppendTime {
			in.stamps[at] = resp.LogAppendTime
		}
		if req.Records[i].Key != nil {
			in.keys[at] = string(req.Records[i].Key)
		}
	}
}

func (in *integration) recordRaw(topic int64, recs []segment.Record, resp Response) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if resp.LogAppendTime != 0 {
		in.t.Errorf("a raw request of CreateTime batches answered LogAppendTime %d, want 0", resp.LogAppendTime)
	}
	for i, rr := range resp.Records {
		at := where{topic, rr.Partition, rr.Offset}
		if _, dup := in.acked[at]; dup {
			in.t.Errorf("offset %+v acknowledged twice", at)
		}
		in.acked[at] = string(recs[i].Value)
	}
}

// produceConcurrently is phase 1: concurrent producers over keyed, sticky and explicit
// partitions of two topics, one of them stamped with LogAppendTime, with raw requests
// among them.
func (in *integration) produceConcurrently(orders, events int64, t0 int64) {
	t, ctx := in.t, in.t.Context()
	// Raw requests, as the binary API sends them: two batches (plain, lz4), stored as
	// they are beside the records the writer encodes.
	type rawCase struct {
		req  Request
		recs []segment.Record
	}
	raws := map[[2]int]rawCase{}
	for g := range 6 {
		for i := 1; i < 20; i += 4 {
			var recs []segment.Record
			for j := range 4 {
				recs = append(recs, segment.Record{Value: fmt.Appendf(nil, "g%d-i%d-raw%d", g, i, j), Timestamp: t0})
			}
			raws[[2]int{g, i}] = rawCase{rawReq(t, orders, int32(g%4),
				clientBatch(t, recs[:2], segment.CompressionNone, -1, -1, -1),
				clientBatch(t, recs[2:], segment.CompressionLZ4, -1, -1, -1)), recs}
		}
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 20 {
				if rc, ok := raws[[2]int{g, i}]; ok {
					resp, err := in.w.Produce(ctx, rc.req)
					if err != nil {
						t.Errorf("produce raw batches: %v", err)
						return
					}
					in.recordRaw(orders, rc.recs, resp)
				}
				v := func(j int) string { return fmt.Sprintf("g%d-i%d-r%d", g, i, j) }
				req := Request{Records: []Record{
					rec(orders, 4, -1, fmt.Sprintf("user-%d", (g*20+i)%7), v(0)),
					rec(orders, 4, -1, "", v(1)),
					rec(orders, 4, int32(i%4), "", v(2)),
					rec(orders, 4, -1, "", v(3)),
					{TopicID: events, Partitions: 2, Partition: -1, LogAppendTime: true, Record: segment.Record{Value: []byte(v(4))}},
				}}
				if i%5 == 0 {
					req.Compression = segment.CompressionZstd
				}
				resp, err := in.w.Produce(ctx, req)
				if err != nil {
					t.Errorf("produce: %v", err)
					return
				}
				in.record(req, resp)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// produceIdempotentRaw: an idempotent raw request commits once: its retry answers the
// same offsets.
func (in *integration) produceIdempotentRaw(cat catalog.Catalog, orders int64, t0 int64) {
	t, ctx := in.t, in.t.Context()
	producers, ok := cat.(interface {
		InitProducer(ctx context.Context, transactionalID string, current *catalog.Producer, owner string) (catalog.Producer, error)
	})
	if !ok {
		t.Fatalf("catalog %T cannot init producers", cat)
	}
	prod, err := producers.InitProducer(ctx, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var idemRecs []segment.Record
	for j := range 5 {
		idemRecs = append(idemRecs, segment.Record{Value: fmt.Appendf(nil, "idempotent-raw%d", j), Timestamp: t0})
	}
	idem := rawReq(t, orders, 3,
		clientBatch(t, idemRecs[:3], segment.CompressionNone, prod.ID, prod.Epoch, 0),
		clientBatch(t, idemRecs[3:], segment.CompressionNone, prod.ID, prod.Epoch, 3))
	idem.Producer = &catalog.Producer{ID: prod.ID, Epoch: prod.Epoch}
	idem.Sequences = map[TopicPartition]int32{{orders, 3}: 0}
	first, err := in.w.Produce(ctx, idem)
	if err != nil {
		t.Fatalf("idempotent raw request: %v", err)
	}
	in.recordRaw(orders, idemRecs, first)
	again, err := in.w.Produce(ctx, idem)
	if err != nil || !again.Duplicate || len(again.Records) != 5 || again.Records[0] != first.Records[0] || again.Records[4] != first.Records[4] {
		t.Fatalf("idempotent raw request again: %+v, %v; want a duplicate at %+v", again, err, first.Records)
	}
}

// readLog reads every committed record of topics back from the objects their chunk rows
// point at, and whether its batch is stamped with LogAppendTime.
func readLog(t *testing.T, cat catalog.Catalog, inner objstore.Store, topics ...catalog.Topic) (map[where]segment.DecodedRecord, map[where]bool) {
	ctx := t.Context()
	got := make(map[where]segment.DecodedRecord)
	logAppend := make(map[where]bool)
	for _, topic := range topics {
		parts, err := cat.Partitions(ctx, topic.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, pi := range parts {
			for off := int64(0); off < pi.HighWatermark; {
				list, err := cat.Chunks(ctx, topic.ID, pi.Partition, off, 1<<20)
				if err != nil {
					t.Fatalf("chunks of %s/%d at %d: %v", topic.Name, pi.Partition, off, err)
				}
				for _, ch := range list.Chunks {
					data, err := inner.GetRange(ctx, ch.SegmentKey, ch.Pos, ch.Len)
					if err != nil {
						t.Fatal(err)
					}
					raws, err := segment.SplitBatches(data)
					if err != nil {
						t.Fatalf("chunk %+v: %v", ch, err)
					}
					next := ch.BaseOffset
					for _, raw := range raws {
						segment.SetBaseOffset(raw, next)
						b, err := segment.DecodeBatch(raw)
						if err != nil {
							t.Fatalf("chunk %+v: %v", ch, err)
						}
						for _, dr := range b.Records {
							at := where{topic.ID, pi.Partition, dr.Offset}
							got[at] = dr
							logAppend[at] = b.LogAppendTime
						}
						next += int64(b.LastOffsetDelta) + 1
					}
					if next != ch.LastOffset+1 {
						t.Errorf("chunk %+v holds offsets up to %d", ch, next-1)
					}
					off = ch.LastOffset + 1
				}
			}
		}
	}
	return got, logAppend
}

// checkCostModel: one PUT per flush and one commit per stored object.
func checkCostModel(t *testing.T, inner objstore.Store, w *Writer) {
	var objects int
	if err := inner.List(t.Context(), "segments/", func(objstore.Info) error { objects++; return nil }); err != nil {
		t.Fatal(err)
	}
	flushes := metricValue(t, w.m.flushes)
	putsOK, putsErr := metricValue(t, w.m.puts.WithLabelValues("ok")), metricValue(t, w.m.puts.WithLabelValues("error"))
	commits := metricValue(t, w.m.commits.WithLabelValues("ok")) + metricValue(t, w.m.commits.WithLabelValues("unknown"))
	if putsOK+putsErr != flushes || float64(objects) != putsOK || commits != putsOK || putsErr != 1 {
		t.Errorf("%v flushes, %v+%v puts, %d objects, %v commits: want one put per flush, one object and one commit per put", flushes, putsOK, putsErr, objects, commits)
	}
	if flushes >= 6*20 {
		t.Errorf("%v flushes for %d requests: no batching", flushes, 6*20+6*5+7)
	}
}
