// Package catalogtest is the conformance suite every catalog.Catalog passes (SQLite and
// Postgres), and helpers for tests that need a catalog with data in it.
//
//	func TestConformance(t *testing.T) {
//		catalogtest.Run(t, func(t *testing.T, s catalogtest.Store, opts catalog.Options) catalog.Backend {
//			return openOn(t, storeFor(t, s), opts)
//		})
//	}
//
// Run is the one entry point: it runs every suite (run.go), so a backend cannot miss one
// and a new suite reaches both backends by being listed there.
//
// The suite asserts the documented behaviour of catalog.Catalog with known answers:
// offsets and byte ranges worked out by hand, not by the code under test.
package catalogtest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// Options size the suite.
type Options struct {
	// Committers × CommitsEach flushes run at once over Partitions partitions in the
	// concurrency test.
	Committers, CommitsEach int
	Partitions              int32
}

// DefaultOptions is the full suite: 8 committers × 1,000 commits over 16 partitions.
func DefaultOptions() Options { return Options{Committers: 8, CommitsEach: 1000, Partitions: 16} }

// ShortOptions is the suite under -short: 8 × 100.
func ShortOptions() Options { return Options{Committers: 8, CommitsEach: 100, Partitions: 16} }

// runCatalog runs the suite of catalog.Catalog, sized by o. open returns a catalog for
// one subtest; it may be fresh or shared between subtests: the suite names its topics
// uniquely and assumes nothing about other topics.
func runCatalog(t *testing.T, open func(t *testing.T) catalog.Catalog, o Options) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c catalog.Catalog)
	}{
		{"topics/create_and_describe", testCreateAndDescribe},
		{"topics/exists", testTopicExists},
		{"topics/invalid_names", testInvalidNames},
		{"topics/invalid_partitions", testInvalidPartitions},
		{"topics/invalid_configs", testInvalidConfigs},
		{"topics/unknown", testUnknownTopic},
		{"topics/list_ordered", testTopicsOrdered},
		{"topics/delete_and_recreate", testDeleteAndRecreate},
		{"topics/grow_and_configure", testGrowAndConfigure},
		{"commit/dense_from_zero", testDenseFromZero},
		{"commit/multi_partition_multi_request", testMultiPartitionMultiRequest},
		{"commit/failing_requests_fail_alone", testFailingRequestsFailAlone},
		{"commit/refused_request_splits_run", testRefusedRequestSplitsRun},
		{"commit/every_request_refused", testEveryRequestRefused},
		{"commit/too_late", testTooLate},
		{"commit/invalid_segment", testInvalidSegment},
		{"commit/log_append_time", testLogAppendTime},
		{"commit/same_key_again", testCommitSameKeyAgain},
		{"settle/after_commit", testSettleAfterCommit},
		{"settle/never_committed", testSettleNeverCommitted},
		{"settle/races_commit", testSettleRacesCommit},
		{"chunks/budget_and_boundaries", testChunksBudget},
		{"chunks/out_of_range", testChunksOutOfRange},
		{"chunks/unknown", testChunksUnknown},
		{"offset_for_time", testOffsetForTime},
		{"listen", testListen},
		{"now", testNow},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
	t.Run("concurrent_commits", func(t *testing.T) { testConcurrentCommits(t, open(t), o) })
}

// NewKey returns a new segment key stamped now.
func NewKey(t testing.TB) string { return KeyAt(t, time.Now()) }

// KeyAt returns a new segment key stamped at.
func KeyAt(t testing.TB, at time.Time) string {
	t.Helper()
	return segment.NewKey(at)
}

// Name returns a topic name unique to this run: prefix and random hex.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

// B describes one batch of a flush for Flush.
type B struct {
	TopicID      int64
	Partition    int32
	Records      int32
	Len          int64 // 0: 100 bytes per record
	MaxTimestamp int64
}

// FooterLen is what Flush adds to a flush's size for the footer, so Size is never the
// end of the last batch.
const FooterLen = 64

// Flush lays out a flush as the segment encoder does — batches grouped by (topic,
// partition) ascending, in request order within a partition, back to back from
// position 0 — and returns it as a Segment: requests[i] becomes Requests[i], with its
// batches in the order given.
func Flush(key string, requests ...[]B) catalog.Segment {
	type ref struct{ r, b int }
	var refs []ref
	for ri, bs := range requests {
		for bi := range bs {
			refs = append(refs, ref{ri, bi})
		}
	}
	slices.SortStableFunc(refs, func(x, y ref) int {
		a, b := requests[x.r][x.b], requests[y.r][y.b]
		if a.TopicID != b.TopicID {
			return compare(a.TopicID, b.TopicID)
		}
		return compare(a.Partition, b.Partition)
	})
	seg := catalog.Segment{Key: key, Requests: make([]catalog.Request, len(requests))}
	for ri, bs := range requests {
		seg.Requests[ri].Batches = make([]catalog.Batch, len(bs))
	}
	var pos int64
	for _, rf := range refs {
		b := requests[rf.r][rf.b]
		n := b.Len
		if n == 0 {
			n = 100 * int64(b.Records)
		}
		seg.Requests[rf.r].Batches[rf.b] = catalog.Batch{
			TopicID: b.TopicID, Partition: b.Partition, Pos: pos, Len: n,
			Records: b.Records, MaxTimestamp: b.MaxTimestamp, BaseSequence: -1,
		}
		pos += n
	}
	seg.Size = pos + FooterLen
	return seg
}

func compare[T int32 | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Req is one request's batches, for Flush.
func Req(bs ...B) []B { return bs }

// SeedTopic creates a topic named uniquely after prefix, failing the test on error.
func SeedTopic(t testing.TB, c catalog.Catalog, prefix string, partitions int32, configs map[string]string) catalog.Topic {
	t.Helper()
	tp, err := c.CreateTopic(t.Context(), Name(t, prefix), partitions, configs)
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	return tp
}

// MustCommit commits seg and fails the test on a flush error or any request's error.
func MustCommit(t testing.TB, c catalog.Catalog, seg catalog.Segment) []catalog.Result {
	t.Helper()
	res, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatalf("commit %s: %v", seg.Key, err)
	}
	if len(res) != len(seg.Requests) {
		t.Fatalf("commit %s: %d results for %d requests", seg.Key, len(res), len(seg.Requests))
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("commit %s: request %d: %v", seg.Key, i, r.Err)
		}
		if len(r.BaseOffsets) != len(seg.Requests[i].Batches) {
			t.Fatalf("commit %s: request %d: %d offsets for %d batches", seg.Key, i, len(r.BaseOffsets), len(seg.Requests[i].Batches))
		}
	}
	return res
}

// SeedRecords commits n flushes of one batch of records records each to one partition
// and returns the flushes.
func SeedRecords(t testing.TB, c catalog.Catalog, topicID int64, partition int32, n int, records int32) []catalog.Segment {
	t.Helper()
	segs := make([]catalog.Segment, n)
	for i := range segs {
		segs[i] = Flush(NewKey(t), Req(B{TopicID: topicID, Partition: partition, Records: records}))
		MustCommit(t, c, segs[i])
	}
	return segs
}

// Partition returns one partition's state, failing the test on error.
func Partition(t testing.TB, c catalog.Catalog, topicID int64, partition int32) catalog.PartitionInfo {
	t.Helper()
	ps, err := c.Partitions(t.Context(), topicID)
	if err != nil {
		t.Fatalf("partitions of topic %d: %v", topicID, err)
	}
	for _, p := range ps {
		if p.Partition == partition {
			return p
		}
	}
	t.Fatalf("topic %d has no partition %d (%d partitions)", topicID, partition, len(ps))
	return catalog.PartitionInfo{}
}

// CheckDense walks a partition's chunks from its log start to its high watermark and
// fails the test unless they are contiguous — each chunk's base offset the previous
// one's last offset plus one, the last ending at the watermark — and their lengths add
// up to the partition's Bytes. It returns the chunks.
func CheckDense(t testing.TB, c catalog.Catalog, topicID int64, partition int32) []catalog.Chunk {
	t.Helper()
	var (
		all   []catalog.Chunk
		bytes int64
		info  = Partition(t, c, topicID, partition)
		off   = info.LogStartOffset
	)
	for {
		l, err := c.Chunks(t.Context(), topicID, partition, off, 1<<20)
		if err != nil {
			t.Fatalf("chunks of topic %d partition %d at %d: %v", topicID, partition, off, err)
		}
		info = l.Partition
		if len(l.Chunks) == 0 {
			if off != info.HighWatermark {
				t.Fatalf("topic %d partition %d: no chunks at %d below the high watermark %d", topicID, partition, off, info.HighWatermark)
			}
			break
		}
		for _, ch := range l.Chunks {
			if ch.BaseOffset > off || ch.LastOffset < off || (len(all) > 0 && ch.BaseOffset != off) {
				t.Fatalf("topic %d partition %d: chunk [%d, %d] where offset %d was expected", topicID, partition, ch.BaseOffset, ch.LastOffset, off)
			}
			if ch.LastOffset >= info.HighWatermark {
				t.Fatalf("topic %d partition %d: chunk [%d, %d] reaches the high watermark %d", topicID, partition, ch.BaseOffset, ch.LastOffset, info.HighWatermark)
			}
			off = ch.LastOffset + 1
			bytes += ch.Len
			all = append(all, ch)
		}
	}
	if bytes != info.Bytes {
		t.Fatalf("topic %d partition %d: chunks hold %d bytes, partition says %d", topicID, partition, bytes, info.Bytes)
	}
	return all
}

// wantErr fails the test unless err wraps target.
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}
