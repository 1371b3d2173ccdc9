package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// ProducerCatalog is a catalog with idempotent producers and consumer groups (the
// transactional tests commit group offsets inside produce requests).
type ProducerCatalog interface {
	catalog.Catalog
	catalog.Producers
	catalog.Groups
}

// runProducers runs the idempotent-producer and single-request-transaction conformance
// suite. open returns a catalog opened with opts (the suite sets ProducerExpiry for the
// expiry test, and leaves the rest zero) and arranges its Close with t.Cleanup; calls
// within one subtest must return catalogs on the same database. Every subtest names its
// topics, groups and transactional ids uniquely.
func runProducers(t *testing.T, open func(t *testing.T, opts catalog.Options) ProducerCatalog) {
	def := func(t *testing.T) ProducerCatalog { return open(t, catalog.Options{}) }
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c ProducerCatalog)
	}{
		{"init/ids_and_epochs", testInitProducer},
		{"init/invalid_transactional_id", testInitInvalid},
		{"sequence/in_order_and_duplicates", testSequencesAndDuplicates},
		{"sequence/gap_answers_expected", testSequenceGap},
		{"sequence/last_five_batches_kept", testLastFiveKept},
		{"sequence/request_atomic_across_partitions", testIdempotentAtomic},
		{"sequence/duplicate_within_one_flush", testDuplicateInFlush},
		{"fencing/older_instance_fenced", testFencing},
		{"fencing/unknown_producer", testUnknownProducer},
		{"bump/epoch_one_ahead_at_sequence_zero", testEpochBump},
		{"bump/within_one_flush", testEpochBumpInFlush},
		{"bump/init_from_current_identity", testInitIdempotentBump},
		{"flush/duplicate_fenced_and_valid_in_one_partition", testDupFencedValidOneFlush},
		{"flush/same_key_again_and_settle", testIdempotentSameKeyAgain},
		{"transactions/offsets_commit_with_records", testTransactionCommits},
		{"transactions/refused_requests_write_nothing", testTransactionRefusals},
		{"transactions/duplicate_keeps_later_offsets", testTransactionDuplicate},
		{"transactions/commit_without_member", testTransactionWithoutMember},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, def(t)) })
	}
	t.Run("expiry", func(t *testing.T) { testProducerExpiry(t, open) })
	t.Run("concurrent_producers", func(t *testing.T) { testConcurrentProducers(t, open) })
	t.Run("bump/concurrent_on_two_nodes", func(t *testing.T) { testConcurrentBumps(t, open) })
}

// Idempotent makes request ri of seg idempotent: producer p, and base sequences seqs,
// one per batch in the request's order.
func Idempotent(seg *catalog.Segment, ri int, p catalog.Producer, seqs ...int32) {
	r := &seg.Requests[ri]
	r.Producer = &catalog.Producer{ID: p.ID, Epoch: p.Epoch}
	if len(seqs) != len(r.Batches) {
		panic(fmt.Sprintf("Idempotent: %d sequences for %d batches", len(seqs), len(r.Batches)))
	}
	for i := range r.Batches {
		r.Batches[i].BaseSequence = seqs[i]
	}
}

// MustInit initialises a producer, failing the test on error.
func MustInit(t testing.TB, c catalog.Producers, transactionalID string) catalog.Producer {
	t.Helper()
	p, err := c.InitProducer(t.Context(), transactionalID, nil, "")
	if err != nil {
		t.Fatalf("init producer %q: %v", transactionalID, err)
	}
	return p
}

// commitOne commits seg and returns its results, failing on a flush error.
func commitOne(t testing.TB, c catalog.Catalog, seg catalog.Segment) []catalog.Result {
	t.Helper()
	res, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatalf("commit %s: %v", seg.Key, err)
	}
	if len(res) != len(seg.Requests) {
		t.Fatalf("commit %s: %d results for %d requests", seg.Key, len(res), len(seg.Requests))
	}
	return res
}

func wantResult(t testing.TB, what string, r catalog.Result, offsets []int64, dup bool) {
	t.Helper()
	if r.Err != nil || !slices.Equal(r.BaseOffsets, offsets) || r.Duplicate != dup {
		t.Fatalf("%s: offsets %v duplicate %v err %v; want offsets %v duplicate %v", what, r.BaseOffsets, r.Duplicate, r.Err, offsets, dup)
	}
}

func wantSequenceError(t testing.TB, what string, err error, expected int32) {
	t.Helper()
	var se *catalog.SequenceError
	if !errors.As(err, &se) || !errors.Is(err, catalog.ErrOutOfOrderSequence) || se.Expected != expected {
		t.Fatalf("%s: error %v, want ErrOutOfOrderSequence expecting %d", what, err, expected)
	}
	if engine.RequestErrorCode(err) != engine.CodeOutOfOrderSequence {
		t.Fatalf("%s: code %q", what, engine.RequestErrorCode(err))
	}
}

// idem builds a one-request flush of one batch: producer p, partition, records, seq.
func idem(t testing.TB, topic int64, part int32, recs int32, p catalog.Producer, seq int32) catalog.Segment {
	seg := Flush(NewKey(t), Req(B{TopicID: topic, Partition: part, Records: recs}))
	Idempotent(&seg, 0, p, seq)
	return seg
}

func testInitProducer(t *testing.T, c ProducerCatalog) {
	a, b := MustInit(t, c, ""), MustInit(t, c, "")
	if a.ID == b.ID || a.Epoch != 0 || b.Epoch != 0 || a.ID < 0 || b.ID < 0 {
		t.Fatalf("two plain producers: %+v and %+v, want distinct ids at epoch 0", a, b)
	}
	tid := Name(t, "txn")
	p0 := MustInit(t, c, tid)
	if p0.Epoch != 0 || p0.ID == a.ID || p0.ID == b.ID {
		t.Fatalf("new transactional id: %+v, want a new id at epoch 0", p0)
	}
	for want := int16(1); want <= 3; want++ {
		p := MustInit(t, c, tid)
		if p.ID != p0.ID || p.Epoch != want {
			t.Fatalf("init %q again: %+v, want id %d epoch %d", tid, p, p0.ID, want)
		}
	}
	other := MustInit(t, c, Name(t, "txn"))
	if other.ID == p0.ID {
		t.Fatalf("two transactional ids share producer id %d", other.ID)
	}

	// Bumping one's own epoch: only from the id's current identity.
	cur := catalog.Producer{ID: p0.ID, Epoch: 3}
	bumped, err := c.InitProducer(t.Context(), tid, &cur, "")
	if err != nil || bumped.ID != p0.ID || bumped.Epoch != 4 {
		t.Fatalf("bump from the current identity: %+v %v, want epoch 4", bumped, err)
	}
	if _, err := c.InitProducer(t.Context(), tid, &cur, ""); !errors.Is(err, catalog.ErrProducerFenced) {
		t.Fatalf("bump from an older identity: %v, want ErrProducerFenced", err)
	}
	if _, err := c.InitProducer(t.Context(), Name(t, "txn"), &cur, ""); !errors.Is(err, catalog.ErrUnknownProducer) {
		t.Fatalf("bump of an unknown transactional id: %v, want ErrUnknownProducer", err)
	}
	if again := MustInit(t, c, tid); again.Epoch != 5 {
		t.Fatalf("after the refused bumps: epoch %d, want 5", again.Epoch)
	}
}

func testInitInvalid(t *testing.T, c ProducerCatalog) {
	for _, id := range []string{"bad\x00id", string(make([]byte, 300))} {
		if _, err := c.InitProducer(t.Context(), id, nil, ""); !errors.Is(err, catalog.ErrInvalidTransactionalID) {
			t.Fatalf("init %q: %v, want ErrInvalidTransactionalID", id, err)
		}
	}
}

func testSequencesAndDuplicates(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "idem", 2, nil)
	SeedRecords(t, c, tp.ID, 1, 1, 4) // partition 1 starts at 4
	p := MustInit(t, c, "")
	first := idem(t, tp.ID, 1, 3, p, 0)
	wantResult(t, "seq 0", commitOne(t, c, first)[0], []int64{4}, false)
	second := idem(t, tp.ID, 1, 2, p, 3)
	wantResult(t, "seq 3", commitOne(t, c, second)[0], []int64{7}, false)

	// Retries of both, in new flushes (new keys): their original offsets, nothing new.
	for i, r := range []struct {
		seg  catalog.Segment
		base int64
	}{{first, 4}, {second, 7}, {second, 7}, {first, 4}} {
		retry := r.seg
		retry.Key = NewKey(t)
		wantResult(t, fmt.Sprintf("retry %d", i), commitOne(t, c, retry)[0], []int64{r.base}, true)
	}
	wantWatermarks(t, c, tp.ID, 0, 9)
	CheckDense(t, c, tp.ID, 1)
}

func testSequenceGap(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "gap", 1, nil)
	p := MustInit(t, c, "")
	res := commitOne(t, c, idem(t, tp.ID, 0, 1, p, 1))
	wantSequenceError(t, "first batch at 1", res[0].Err, 0)
	wantResult(t, "seq 0", commitOne(t, c, idem(t, tp.ID, 0, 5, p, 0))[0], []int64{0}, false)
	res = commitOne(t, c, idem(t, tp.ID, 0, 1, p, 7))
	wantSequenceError(t, "gap after 0..4", res[0].Err, 5)
	// Same first sequence as the committed batch, but a different length: not a retry.
	res = commitOne(t, c, idem(t, tp.ID, 0, 4, p, 0))
	wantSequenceError(t, "resend with another length", res[0].Err, 5)
	wantWatermarks(t, c, tp.ID, 5)
	CheckDense(t, c, tp.ID, 0)
}

func testLastFiveKept(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "five", 1, nil)
	p := MustInit(t, c, "")
	var segs []catalog.Segment
	for i := range int32(6) {
		s := idem(t, tp.ID, 0, 2, p, 2*i)
		wantResult(t, fmt.Sprintf("batch %d", i), commitOne(t, c, s)[0], []int64{int64(2 * i)}, false)
		segs = append(segs, s)
	}
	// The first batch has been forgotten (six committed since... five kept): its retry
	// is a gap; the second is still recognised.
	old := segs[0]
	old.Key = NewKey(t)
	wantSequenceError(t, "retry of the sixth-latest batch", commitOne(t, c, old)[0].Err, 12)
	kept := segs[1]
	kept.Key = NewKey(t)
	wantResult(t, "retry of the fifth-latest batch", commitOne(t, c, kept)[0], []int64{2}, true)
	wantWatermarks(t, c, tp.ID, 12)
}

func testIdempotentAtomic(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "atomic", 2, nil)
	p := MustInit(t, c, "")
	seg := Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 2}, B{TopicID: tp.ID, Partition: 1, Records: 2}))
	Idempotent(&seg, 0, p, 0, 4) // partition 1 expects 0
	res := commitOne(t, c, seg)
	wantSequenceError(t, "partition 1 gap", res[0].Err, 0)
	wantWatermarks(t, c, tp.ID, 0, 0)
	// Partition 0's state did not advance: it still expects 0.
	seg = Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 2}, B{TopicID: tp.ID, Partition: 1, Records: 3}))
	Idempotent(&seg, 0, p, 0, 0)
	wantResult(t, "both from 0", commitOne(t, c, seg)[0], []int64{0, 0}, false)
	wantWatermarks(t, c, tp.ID, 2, 3)
}

func testDuplicateInFlush(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "dupflush", 1, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 10)
	p := MustInit(t, c, "")
	// A request, its retry (sent while the first was still buffered), and the next.
	seg := Flush(NewKey(t),
		Req(B{TopicID: tp.ID, Partition: 0, Records: 3}),
		Req(B{TopicID: tp.ID, Partition: 0, Records: 3}),
		Req(B{TopicID: tp.ID, Partition: 0, Records: 1}),
	)
	Idempotent(&seg, 0, p, 0)
	Idempotent(&seg, 1, p, 0)
	Idempotent(&seg, 2, p, 3)
	res := commitOne(t, c, seg)
	wantResult(t, "original", res[0], []int64{10}, false)
	wantResult(t, "retry in the same flush", res[1], []int64{10}, true)
	wantResult(t, "next", res[2], []int64{13}, false)
	wantWatermarks(t, c, tp.ID, 14)
	chunks := CheckDense(t, c, tp.ID, 0)
	// The duplicate's bytes (request 1, 300..600 of the object) are never served.
	last := chunks[len(chunks)-2:]
	if last[0].Pos != 0 || last[0].Len != 300 || last[1].Pos != 600 || last[1].Len != 100 {
		t.Fatalf("chunks %+v, want [0,+300) and [600,+100): the duplicate's bytes skipped", last)
	}
}

func testFencing(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "fence", 1, nil)
	tid := Name(t, "txn")
	old := MustInit(t, c, tid)
	wantResult(t, "old instance", commitOne(t, c, idem(t, tp.ID, 0, 2, old, 0))[0], []int64{0}, false)
	cur := MustInit(t, c, tid)
	if cur.ID != old.ID || cur.Epoch != old.Epoch+1 {
		t.Fatalf("second instance %+v, want id %d epoch %d", cur, old.ID, old.Epoch+1)
	}
	res := commitOne(t, c, idem(t, tp.ID, 0, 1, old, 2))
	if !errors.Is(res[0].Err, catalog.ErrProducerFenced) || engine.RequestErrorCode(res[0].Err) != engine.CodeProducerFenced {
		t.Fatalf("old instance after fencing: %v, want ErrProducerFenced", res[0].Err)
	}
	// The new epoch starts its sequences again.
	wantSequenceError(t, "new epoch continuing the old sequence", commitOne(t, c, idem(t, tp.ID, 0, 1, cur, 2))[0].Err, 0)
	wantResult(t, "new instance", commitOne(t, c, idem(t, tp.ID, 0, 1, cur, 0))[0], []int64{2}, false)
	// The old instance stays fenced, whatever sequence it tries.
	for _, seq := range []int32{0, 1, 3} {
		res := commitOne(t, c, idem(t, tp.ID, 0, 1, old, seq))
		if !errors.Is(res[0].Err, catalog.ErrProducerFenced) {
			t.Fatalf("old instance seq %d: %v, want ErrProducerFenced", seq, res[0].Err)
		}
	}
	wantWatermarks(t, c, tp.ID, 3)
	CheckDense(t, c, tp.ID, 0)
}

func testUnknownProducer(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "unknown", 1, nil)
	p := MustInit(t, c, "")
	// (An epoch ahead of the producer's is a bump: testEpochBump.)
	for _, bogus := range []catalog.Producer{{ID: p.ID + 1_000_000, Epoch: 0}, {ID: p.ID + 1_000_001, Epoch: 3}} {
		res := commitOne(t, c, idem(t, tp.ID, 0, 1, bogus, 0))
		if !errors.Is(res[0].Err, catalog.ErrUnknownProducer) || engine.RequestErrorCode(res[0].Err) != engine.CodeUnknownProducer {
			t.Fatalf("producer %+v: %v, want ErrUnknownProducer", bogus, res[0].Err)
		}
	}
	wantWatermarks(t, c, tp.ID, 0)
}

// testDupFencedValidOneFlush is the issue's "one flush in which a duplicate, a fenced
// and a valid request hit the same partition".
func testDupFencedValidOneFlush(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "mixed", 1, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 5) // offsets 0..4 from a plain producer
	a := MustInit(t, c, "")
	tid := Name(t, "txn")
	zombie := MustInit(t, c, tid)
	wantResult(t, "a's first", commitOne(t, c, idem(t, tp.ID, 0, 3, a, 0))[0], []int64{5}, false)
	if cur := MustInit(t, c, tid); cur.Epoch != zombie.Epoch+1 {
		t.Fatalf("fencing init: %+v", cur)
	}

	seg := Flush(NewKey(t),
		Req(B{TopicID: tp.ID, Partition: 0, Records: 3}), // a's first again: duplicate
		Req(B{TopicID: tp.ID, Partition: 0, Records: 4}), // the zombie: fenced
		Req(B{TopicID: tp.ID, Partition: 0, Records: 2}), // a's next: valid
	)
	Idempotent(&seg, 0, a, 0)
	Idempotent(&seg, 1, zombie, 0)
	Idempotent(&seg, 2, a, 3)
	res := commitOne(t, c, seg)
	wantResult(t, "duplicate", res[0], []int64{5}, true)
	if !errors.Is(res[1].Err, catalog.ErrProducerFenced) {
		t.Fatalf("zombie: %v, want ErrProducerFenced", res[1].Err)
	}
	wantResult(t, "valid", res[2], []int64{8}, false)
	wantWatermarks(t, c, tp.ID, 10)
	chunks := CheckDense(t, c, tp.ID, 0)
	last := chunks[len(chunks)-1]
	// Only the valid request's bytes (after 300 of the duplicate and 400 of the zombie).
	if last.SegmentKey != seg.Key || last.BaseOffset != 8 || last.LastOffset != 9 || last.Pos != 700 || last.Len != 200 {
		t.Fatalf("last chunk %+v, want offsets [8, 9] at [700, +200) of %s", last, seg.Key)
	}
}

func testIdempotentSameKeyAgain(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "again", 1, nil)
	p := MustInit(t, c, "")
	first := idem(t, tp.ID, 0, 2, p, 0)
	commitOne(t, c, first)
	seg := Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 2}), Req(B{TopicID: tp.ID, Partition: 0, Records: 1}))
	Idempotent(&seg, 0, p, 0) // a duplicate of first
	Idempotent(&seg, 1, p, 2)
	res := commitOne(t, c, seg)
	wantResult(t, "duplicate", res[0], []int64{0}, true)
	wantResult(t, "next", res[1], []int64{2}, false)
	// Committing or settling the same key again answers from its chunk rows: the
	// duplicate has none, so it gets the retryable ErrCommitAborted (its retry will say
	// duplicate again), and nothing is written twice.
	for what, f := range map[string]func(context.Context, catalog.Segment) ([]catalog.Result, error){"commit": c.Commit, "settle": c.Settle} {
		again, err := f(t.Context(), seg)
		if err != nil {
			t.Fatalf("%s again: %v", what, err)
		}
		if !errors.Is(again[0].Err, catalog.ErrCommitAborted) {
			t.Fatalf("%s again: duplicate request: %v, want ErrCommitAborted", what, again[0].Err)
		}
		wantResult(t, what+" again: next", again[1], []int64{2}, false)
	}
	wantWatermarks(t, c, tp.ID, 3)
}

// groupMember joins group over topic and heartbeats until it owns every partition.
func joinAndOwn(t *testing.T, c catalog.Groups, group, id, topic string) int32 {
	t.Helper()
	ctx := t.Context()
	hb := catalog.Heartbeat{Group: group, MemberID: id, Topics: []string{topic}, SessionTimeout: time.Minute}
	for range 5 {
		res, err := c.Heartbeat(ctx, hb)
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		hb.MemberEpoch, hb.Owned, hb.Topics = res.MemberEpoch, res.Assignment, nil
		if len(res.Assignment) > 0 {
			return res.MemberEpoch
		}
	}
	t.Fatalf("member %s of %s was assigned nothing", id, group)
	return 0
}

func committedOffsets(t *testing.T, c catalog.Groups, group string) map[int32]int64 {
	t.Helper()
	offs, err := c.GroupOffsets(t.Context(), group)
	if err != nil {
		t.Fatalf("offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for _, o := range offs {
		out[o.Partition] = o.Offset
	}
	return out
}

// txnSetup creates an input topic with records to consume, an output topic, a group
// whose one member owns the input, and a transactional producer.
type txnSetup struct {
	in, out catalog.Topic
	group   string
	member  string
	epoch   int32
	tid     string
	prod    catalog.Producer
}

func newTxnSetup(t *testing.T, c ProducerCatalog) txnSetup {
	s := txnSetup{
		in:     SeedTopic(t, c, "txn-in", 2, nil),
		out:    SeedTopic(t, c, "txn-out", 2, nil),
		group:  Name(t, "g"),
		member: "worker-1",
	}
	SeedRecords(t, c, s.in.ID, 0, 1, 10)
	SeedRecords(t, c, s.in.ID, 1, 1, 10)
	s.epoch = joinAndOwn(t, c, s.group, s.member, s.in.Name)
	s.tid = Name(t, "txn")
	s.prod = MustInit(t, c, s.tid)
	return s
}

func (s txnSetup) offsets(epoch int32, offs ...int64) *catalog.OffsetCommit {
	oc := &catalog.OffsetCommit{Group: s.group, MemberID: s.member, MemberEpoch: epoch}
	for p, o := range offs {
		oc.Offsets = append(oc.Offsets, catalog.CommitOffset{Topic: s.in.Name, Partition: int32(p), Offset: o, Metadata: fmt.Sprintf("m%d", o)})
	}
	return oc
}

func testTransactionCommits(t *testing.T, c ProducerCatalog) {
	s := newTxnSetup(t, c)
	seg := Flush(NewKey(t), Req(B{TopicID: s.out.ID, Partition: 0, Records: 2}, B{TopicID: s.out.ID, Partition: 1, Records: 1}))
	Idempotent(&seg, 0, s.prod, 0, 0)
	seg.Requests[0].GroupOffsets = s.offsets(s.epoch, 4, 6)
	wantResult(t, "transaction", commitOne(t, c, seg)[0], []int64{0, 0}, false)
	if got := committedOffsets(t, c, s.group); got[0] != 4 || got[1] != 6 {
		t.Fatalf("group offsets %v, want 0:4 1:6", got)
	}
	offs, err := c.GroupOffsets(t.Context(), s.group)
	if err != nil || len(offs) != 2 || offs[0].Metadata != "m4" {
		t.Fatalf("group offsets %+v %v, want metadata kept", offs, err)
	}
	wantWatermarks(t, c, s.out.ID, 2, 1)
}

// testTransactionRefusals: a transactional request refused for any reason leaves no
// records and moves no offsets, while the flush's other requests commit.
func testTransactionRefusals(t *testing.T, c ProducerCatalog) {
	s := newTxnSetup(t, c)
	ok := Flush(NewKey(t), Req(B{TopicID: s.out.ID, Partition: 0, Records: 1}))
	Idempotent(&ok, 0, s.prod, 0)
	ok.Requests[0].GroupOffsets = s.offsets(s.epoch, 2, 2)
	commitOne(t, c, ok)

	// refuse commits one transactional request beside a plain one and checks that only
	// the plain one landed.
	refuse := func(name string, batches []B, p catalog.Producer, seqs []int32, oc *catalog.OffsetCommit, want error) {
		t.Helper()
		seg := Flush(NewKey(t), batches, Req(B{TopicID: s.out.ID, Partition: 1, Records: 1}))
		Idempotent(&seg, 0, p, seqs...)
		seg.Requests[0].GroupOffsets = oc
		before := Partition(t, c, s.out.ID, 0).HighWatermark
		res := commitOne(t, c, seg)
		if !errors.Is(res[0].Err, want) {
			t.Fatalf("%s: %v, want %v", name, res[0].Err, want)
		}
		if res[1].Err != nil {
			t.Fatalf("%s: the plain request beside it: %v", name, res[1].Err)
		}
		if hw := Partition(t, c, s.out.ID, 0).HighWatermark; hw != before {
			t.Fatalf("%s: partition 0 moved from %d to %d", name, before, hw)
		}
		if got := committedOffsets(t, c, s.group); got[0] != 2 || got[1] != 2 {
			t.Fatalf("%s: group offsets moved to %v", name, got)
		}
	}
	one := Req(B{TopicID: s.out.ID, Partition: 0, Records: 1})
	refuse("bad partition", Req(B{TopicID: s.out.ID, Partition: 0, Records: 1}, B{TopicID: s.out.ID, Partition: 7, Records: 1}),
		s.prod, []int32{1, 0}, s.offsets(s.epoch, 5, 5), catalog.ErrPartitionOutOfRange)
	refuse("stale member epoch", one, s.prod, []int32{1}, s.offsets(s.epoch-1, 5, 5), catalog.ErrStaleMemberEpoch)
	nobody := s.offsets(s.epoch, 5, 5)
	nobody.MemberID = "nobody"
	refuse("unknown member", one, s.prod, []int32{1}, nobody, catalog.ErrUnknownMember)
	refuse("offset beyond the high watermark", one, s.prod, []int32{1}, s.offsets(s.epoch, 5, 11), catalog.ErrInvalidOffset)
	refuse("sequence gap", one, s.prod, []int32{2}, s.offsets(s.epoch, 5, 5), catalog.ErrOutOfOrderSequence)

	// The producer's sequence did not advance through any refusal: next is still 1.
	seg := Flush(NewKey(t), Req(B{TopicID: s.out.ID, Partition: 0, Records: 1}))
	Idempotent(&seg, 0, s.prod, 1)
	seg.Requests[0].GroupOffsets = s.offsets(s.epoch, 2, 2)
	wantResult(t, "after the refusals", commitOne(t, c, seg)[0], []int64{1}, false)

	// A new instance fences the old one, whose request then writes nothing.
	cur := MustInit(t, c, s.tid)
	refuse("fenced epoch", one, s.prod, []int32{2}, s.offsets(s.epoch, 5, 5), catalog.ErrProducerFenced)
	seg = Flush(NewKey(t), Req(B{TopicID: s.out.ID, Partition: 0, Records: 1}))
	Idempotent(&seg, 0, cur, 0)
	seg.Requests[0].GroupOffsets = s.offsets(s.epoch, 3, 3)
	wantResult(t, "new instance", commitOne(t, c, seg)[0], []int64{2}, false)
	if got := committedOffsets(t, c, s.group); got[0] != 3 || got[1] != 3 {
		t.Fatalf("group offsets %v, want 3 and 3", got)
	}
	CheckDense(t, c, s.out.ID, 0)
	CheckDense(t, c, s.out.ID, 1)
}

func testTransactionDuplicate(t *testing.T, c ProducerCatalog) {
	s := newTxnSetup(t, c)
	first := Flush(NewKey(t), Req(B{TopicID: s.out.ID, Partition: 0, Records: 1}))
	Idempotent(&first, 0, s.prod, 0)
	first.Requests[0].GroupOffsets = s.offsets(s.epoch, 3, 3)
	commitOne(t, c, first)
	second := Flush(NewKey(t), Req(B{TopicID: s.out.ID, Partition: 0, Records: 1}))
	Idempotent(&second, 0, s.prod, 1)
	second.Requests[0].GroupOffsets = s.offsets(s.epoch, 7, 7)
	commitOne(t, c, second)

	// A late retry of the first: a duplicate with its original offset; the group's
	// offsets stay where the second put them.
	retry := first
	retry.Key = NewKey(t)
	wantResult(t, "retry", commitOne(t, c, retry)[0], []int64{0}, true)
	if got := committedOffsets(t, c, s.group); got[0] != 7 || got[1] != 7 {
		t.Fatalf("group offsets %v after a duplicate, want 7 and 7 kept", got)
	}
	wantWatermarks(t, c, s.out.ID, 2, 0)
}

func testTransactionWithoutMember(t *testing.T, c ProducerCatalog) {
	in := SeedTopic(t, c, "solo-in", 1, nil)
	out := SeedTopic(t, c, "solo-out", 1, nil)
	SeedRecords(t, c, in.ID, 0, 1, 4)
	group := Name(t, "solo")
	p := MustInit(t, c, "")
	seg := idem(t, out.ID, 0, 1, p, 0)
	seg.Requests[0].GroupOffsets = &catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: 4}}}
	wantResult(t, "commit without a member", commitOne(t, c, seg)[0], []int64{0}, false)
	if got := committedOffsets(t, c, group); got[0] != 4 {
		t.Fatalf("offsets %v, want 0:4 (group created)", got)
	}
	// Once the group has a live member, a memberless commit is refused.
	joinAndOwn(t, c, group, "m", in.Name)
	seg = idem(t, out.ID, 0, 1, p, 1)
	seg.Requests[0].GroupOffsets = &catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: 2}}}
	if res := commitOne(t, c, seg); !errors.Is(res[0].Err, catalog.ErrGroupNotEmpty) {
		t.Fatalf("memberless commit beside a live member: %v, want ErrGroupNotEmpty", res[0].Err)
	}
	wantWatermarks(t, c, out.ID, 1)
}

func testProducerExpiry(t *testing.T, open func(t *testing.T, opts catalog.Options) ProducerCatalog) {
	const expiry = 3 * time.Second // touch interval: 1 s
	c := open(t, catalog.Options{ProducerExpiry: expiry})
	tp := SeedTopic(t, c, "expiry", 1, nil)
	idle := MustInit(t, c, "")
	busy := MustInit(t, c, "")
	tid := Name(t, "txn")
	idleTxn := MustInit(t, c, tid)
	commitOne(t, c, idem(t, tp.ID, 0, 1, idle, 0))
	var seq int32
	deadline := time.Now().Add(expiry + 500*time.Millisecond)
	for time.Now().Before(deadline) {
		if r := commitOne(t, c, idem(t, tp.ID, 0, 1, busy, seq))[0]; r.Err != nil || r.Duplicate {
			t.Fatalf("busy producer seq %d: %+v", seq, r)
		}
		seq++
		time.Sleep(300 * time.Millisecond)
	}
	MustInit(t, c, "") // expires the idle ones
	res := commitOne(t, c, idem(t, tp.ID, 0, 1, idle, 1))
	if !errors.Is(res[0].Err, catalog.ErrUnknownProducer) {
		t.Fatalf("idle producer after expiry: %v, want ErrUnknownProducer", res[0].Err)
	}
	if r := commitOne(t, c, idem(t, tp.ID, 0, 1, busy, seq))[0]; r.Err != nil || r.Duplicate {
		t.Fatalf("busy producer after the expiry pass: %+v", r)
	}
	// An expired transactional id starts again with a new id.
	if again := MustInit(t, c, tid); again.ID == idleTxn.ID || again.Epoch != 0 {
		t.Fatalf("expired transactional id: %+v, want a new id at epoch 0 (old %+v)", again, idleTxn)
	}
}

// testConcurrentProducers runs producers at once over shared partitions, on two
// catalogs of one database, each retrying its requests (in new flushes, as a client
// whose answers were lost would) and pipelining: at the end every producer's records
// are in the log exactly once, in sequence order, and the partitions are dense.
func testConcurrentProducers(t *testing.T, open func(t *testing.T, opts catalog.Options) ProducerCatalog) {
	const (
		producers = 6
		requests  = 120
		parts     = 3
	)
	if testing.Short() {
		t.Log("short: fewer requests")
	}
	n := requests
	if testing.Short() {
		n = 40
	}
	cats := []ProducerCatalog{open(t, catalog.Options{}), open(t, catalog.Options{})}
	tp := SeedTopic(t, cats[0], "conc-idem", parts, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	type landed struct {
		producer int
		seq      int32
		base     int64
		n        int32
	}
	var (
		mu   sync.Mutex
		all  [parts][]landed
		wg   sync.WaitGroup
		errs = make(chan error, producers)
	)
	for g := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cats[g%len(cats)]
			p, err := c.InitProducer(ctx, "", nil, "")
			if err != nil {
				errs <- err
				return
			}
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var next [parts]int32
			seen := map[[2]int32]int64{} // (partition, seq) → base offset answered
			for range n {
				part := rng.Int32N(parts)
				recs := 1 + rng.Int32N(3)
				seq := next[part]
				seg := idem(t, tp.ID, part, recs, p, seq)
				// Send it up to three times, the later ones retries of an answered
				// request; sometimes pair it with the previous request's retry.
				var first int64 = -1
				for attempt := range 1 + rng.IntN(3) {
					seg.Key = NewKey(t)
					res, err := c.Commit(ctx, seg)
					if err != nil {
						errs <- err
						return
					}
					r := res[0]
					if r.Err != nil {
						errs <- fmt.Errorf("producer %d seq %d attempt %d: %w", g, seq, attempt, r.Err)
						return
					}
					if attempt == 0 {
						if r.Duplicate {
							errs <- fmt.Errorf("producer %d seq %d: first attempt answered duplicate", g, seq)
							return
						}
						first = r.BaseOffsets[0]
					} else if !r.Duplicate || r.BaseOffsets[0] != first {
						errs <- fmt.Errorf("producer %d seq %d retry: %+v, want duplicate of %d", g, seq, r, first)
						return
					}
				}
				seen[[2]int32{part, seq}] = first
				mu.Lock()
				all[part] = append(all[part], landed{g, seq, first, recs})
				mu.Unlock()
				next[part] = engine.AddSequence(seq, recs)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for part := range parts {
		ls := all[part]
		slices.SortFunc(ls, func(a, b landed) int { return compare(a.base, b.base) })
		var off int64
		last := map[int]int32{}
		for _, l := range ls {
			if l.base != off {
				t.Fatalf("partition %d: batch at %d where %d was next", part, l.base, off)
			}
			if prev, ok := last[l.producer]; ok && l.seq <= prev {
				t.Fatalf("partition %d: producer %d seq %d landed after seq %d", part, l.producer, l.seq, prev)
			}
			last[l.producer] = l.seq
			off += int64(l.n)
		}
		wantHW := Partition(t, cats[0], tp.ID, int32(part)).HighWatermark
		if wantHW != off {
			t.Fatalf("partition %d: high watermark %d, batches add up to %d", part, wantHW, off)
		}
		CheckDense(t, cats[0], tp.ID, int32(part))
		total += len(ls)
	}
	if total != producers*n {
		t.Fatalf("%d batches landed, want %d", total, producers*n)
	}
}

// BenchmarkCommitIdempotence measures commits per second of flushes of 8 requests, each
// writing one batch of 10 records to each of 8 partitions, plain and idempotent (each
// request from its own producer, continuing its sequences), in one run, so the cost of
// the producer checks can be quoted as a ratio.
func BenchmarkCommitIdempotence(b *testing.B, c ProducerCatalog) {
	for _, idempotent := range []bool{false, true} {
		name := "plain"
		if idempotent {
			name = "idempotent"
		}
		b.Run(name, func(b *testing.B) {
			tp := SeedTopic(b, c, "bench-idem", 8, nil)
			prods := make([]catalog.Producer, 8)
			for i := range prods {
				prods[i] = MustInit(b, c, "")
			}
			var seq int32
			for b.Loop() {
				reqs := make([][]B, 8)
				for r := range reqs {
					for p := range int32(8) {
						reqs[r] = append(reqs[r], B{TopicID: tp.ID, Partition: p, Records: 10})
					}
				}
				seg := Flush(NewKey(b), reqs...)
				if idempotent {
					for r := range reqs {
						Idempotent(&seg, r, prods[r], seq, seq, seq, seq, seq, seq, seq, seq)
					}
					seq += 10
				}
				res, err := c.Commit(b.Context(), seg)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if r.Err != nil || r.Duplicate {
						b.Fatalf("commit: %+v", r)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
