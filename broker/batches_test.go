package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

func defaultTopic(id int64, partitions int32) *TopicInfo {
	return &TopicInfo{Topic: catalog.Topic{ID: id, Name: "t", Partitions: partitions}, Config: catalog.DefaultConfig()}
}

// BenchmarkDecodeBatches measures the validation and conversion of a body of batches
// decoded into records: 500 records of 1 KiB in one batch.
func BenchmarkDecodeBatches(b *testing.B) {
	recs := make([]batchtest.Record, 500)
	now := testNow.UnixMilli()
	for i := range recs {
		recs[i] = batchtest.Record{Key: []byte("key-" + strconv.Itoa(i%64)), Value: bytes.Repeat([]byte("x"), 1024), Ts: now}
	}
	body := batchtest.Batch(b, recs, 0, -1, -1, -1)
	ti := defaultTopic(1, 8)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, e := decodeBatches(body, ti, 0, limits{nowMs: now, maxRecords: 10000}); e != nil {
			b.Fatal(e)
		}
	}
}

// discardStore keeps nothing: the benchmark measures the node's CPU, not storage.
type discardStore struct{}

func (discardStore) PutParts(context.Context, string, [][]byte) error { return nil }

// countingCommitter assigns offsets as the catalog does, without checks.
type countingCommitter struct {
	mu sync.Mutex
	hw map[writer.TopicPartition]int64
}

func (c *countingCommitter) Commit(_ context.Context, seg catalog.Segment) ([]catalog.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := make([]catalog.Result, len(seg.Requests))
	for i, r := range seg.Requests {
		res[i].BaseOffsets = make([]int64, len(r.Batches))
		for j, b := range r.Batches {
			tp := writer.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
			res[i].BaseOffsets[j] = c.hw[tp]
			c.hw[tp] += int64(b.Records)
		}
	}
	return res, nil
}

func (c *countingCommitter) Settle(context.Context, catalog.Segment) ([]catalog.Result, error) {
	return nil, catalog.ErrCommitAborted
}

// BenchmarkProduceBatches measures the node's CPU on the batch produce path from a body
// in memory to the segment object handed to the store (a stub, as is the catalog):
// requests of 500 records of 1 KiB (half random, half zeros), one batch each, laid out
// as a Kafka client lays it out, from 16 producers per core waiting for their answers
// as HTTP handlers do. path=reencode is the path every body took before batches could
// be stored as they came: decoded into records, re-encoded at flush; path=raw validates
// them and stores them as they came. cpu-ns/op is CPU per request, MB/cpu-s body bytes
// per second of CPU: both hold on a shared machine, where ns/op (wall time, linger
// included) does not. Run it with -cpu 1: with more Ps the scheduler's spinning while
// producers wait counts as CPU too.
//
//	go test ./broker -run '^$' -bench '^BenchmarkProduceBatches$' -benchtime 3s -count 3 -cpu 1
func BenchmarkProduceBatches(b *testing.B) {
	for _, codec := range []int16{0, 3} {
		for _, path := range []string{"reencode", "raw"} {
			b.Run(fmt.Sprintf("codec=%s/path=%s", map[int16]string{0: "none", 3: "lz4"}[codec], path), func(b *testing.B) {
				const records, size = 500, 1024
				now := time.Now().UnixMilli()
				recs := make([]batchtest.Record, records)
				for i := range recs {
					value := make([]byte, size)
					rand.Read(value[:size/2])
					recs[i] = batchtest.Record{Key: []byte("key-" + strconv.Itoa(i)), Value: value, Ts: now}
				}
				body := batchtest.Batch(b, recs, codec, -1, -1, -1)
				ti := defaultTopic(1, 16)
				request := batchesRequest
				if path == "reencode" {
					request = decodedBatchesRequest
				}
				if req, _, e := request(body, ti, 0, limits{nowMs: now, maxRecords: 1000}); e != nil || (req.Raw != nil) != (path == "raw") {
					b.Fatalf("path %s: error %v, raw %v", path, e, req.Raw != nil)
				}
				w := writer.New(discardStore{}, &countingCommitter{hw: map[writer.TopicPartition]int64{}}, writer.Config{Linger: 2 * time.Millisecond}, nil, nil)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- w.Run(ctx) }()
				defer func() { cancel(); <-done }()

				var part atomic.Int32
				b.SetBytes(int64(len(body)))
				b.SetParallelism(16)
				b.ResetTimer()
				cpu0 := cputime.Self()
				b.RunParallel(func(pb *testing.PB) {
					p := part.Add(1) % ti.Partitions
					for pb.Next() {
						req, _, e := request(body, ti, p, limits{nowMs: now, maxRecords: 1000})
						if e != nil {
							b.Error(e)
							return
						}
						if _, err := w.Produce(context.Background(), req); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				if cpu := cputime.Self() - cpu0; cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
					b.ReportMetric(float64(b.N)*float64(len(body))/1e6/cpu.Seconds(), "MB/cpu-s")
				}
			})
		}
	}
}

// FuzzDecodeBatches: any body is refused with an error or turned into exactly the
// records the segment decoder reads from it, never a panic; and a body the raw path
// takes as it is, the decoding path accepts too, with the same records, producer and
// sequence, so storing it as it came changes nothing but the cost.
func FuzzDecodeBatches(f *testing.F) {
	now := testNow.UnixMilli()
	f.Add(batchtest.Batch(f, batchtest.Some(3, now), 0, -1, -1, -1))
	f.Add(batchtest.Batch(f, batchtest.Some(2, now), 3, -1, -1, -1))
	f.Add(append(batchtest.Batch(f, batchtest.Some(2, now), 0, 5, 0, 0), batchtest.Batch(f, batchtest.Some(1, now), 0, 5, 0, 2)...))
	f.Add(batchtest.BatchAt(f, batchtest.Some(2, now), 0, -1, -1, -1, now-1))
	f.Add(batchtest.Batch(f, []batchtest.Record{{Value: []byte("x"), Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}, Ts: now}}, 1, -1, -1, -1))
	f.Add([]byte{})
	ti := defaultTopic(1, 4)
	f.Fuzz(func(t *testing.T, body []byte) {
		// Either max.message.bytes rule, by the body's length.
		lim := limits{nowMs: now, maxRecords: 1000, perBatch: len(body)%2 == 1}
		req, n, raw := rawBatches(body, ti, 2, lim)
		db, e := decodeBatches(body, ti, 2, lim)
		if e != nil {
			if db.records != nil {
				t.Fatal("records beside an error")
			}
			if raw {
				t.Fatalf("the raw path took a body the decoding path refuses: %s", e.Message)
			}
			if e.Code.Retriable() || e.Unexpected {
				t.Fatalf("a body refused with %s", e.Code)
			}
			return
		}
		dec, err := segment.DecodeBatches(body)
		if err != nil {
			t.Fatalf("accepted a body the decoder refuses: %v", err)
		}
		total := 0
		for _, b := range dec {
			total += len(b.Records)
		}
		if total != len(db.records) || total == 0 {
			t.Fatalf("%d records accepted, the decoder reads %d", len(db.records), total)
		}
		for _, r := range db.records {
			if r.Partition != 2 || r.TopicID != 1 {
				t.Fatalf("record placed at topic %d partition %d", r.TopicID, r.Partition)
			}
		}
		if !raw {
			return
		}
		rb := req.Raw
		if n != total || rb.TopicID != 1 || rb.Partition != 2 || !bytes.Equal(bytes.Join(rb.Batches, nil), body) || len(rb.Summaries) != len(rb.Batches) {
			t.Fatalf("raw request of %d records, topic %d partition %d, %d batches: not the body's %d records for topic 1 partition 2", n, rb.TopicID, rb.Partition, len(rb.Batches), total)
		}
		for i, s := range rb.Summaries {
			if !s.Canonical || s.Header.LogAppendTime || s.Header.Compression != db.compression {
				t.Fatalf("raw batch %d: summary %+v; the decoding path's codec %d", i, s, db.compression)
			}
		}
		if (req.Producer == nil) != (db.producer == nil) || req.Producer != nil && (*req.Producer != *db.producer ||
			req.Sequences[writer.TopicPartition{TopicID: 1, Partition: 2}] != db.sequence || len(req.Sequences) != 1) {
			t.Fatalf("raw request producer %v sequences %v; the decoding path's %v and %d", req.Producer, req.Sequences, db.producer, db.sequence)
		}
	})
}
