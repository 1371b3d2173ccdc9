package catalogtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// TxnCatalog is a catalog with Kafka transactions (and the producers and groups they
// touch).
type TxnCatalog interface {
	catalog.Catalog
	catalog.Producers
	catalog.Groups
	catalog.Transactions
	// Compaction: the markers' retention (testTxnMarkerRetention).
	catalog.Compaction
}

// runTransactions runs the transaction coordinator's conformance suite
// (docs/design.md "Transactions"). open returns a catalog for one subtest; every
// subtest names its topics, groups and transactional ids uniquely.
func runTransactions(t *testing.T, open func(t *testing.T) TxnCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c TxnCatalog)
	}{
		{"init/ids_epochs_and_current", testTxnInit},
		{"v1/commit_markers_and_stable_offset", testTxnCommitV1},
		{"v1/abort_ranges", testTxnAbort},
		{"v1/stable_offset_of_two_transactions", testTxnTwoOpen},
		{"produce/refusals_write_nothing", testTxnProduceRefusals},
		{"produce/duplicate_answers_original", testTxnDuplicate},
		{"v2/implicit_add_epoch_bump_and_retry", testTxnV2},
		{"end/refusals", testTxnEndRefusals},
		{"offsets/reach_the_group_at_commit_only", testTxnOffsets},
		{"init/aborts_the_open_transaction", testTxnInitAborts},
		{"timeout/reaper_aborts_and_fences", testTxnTimeout},
		{"describe_and_list", testTxnDescribe},
		{"compaction/aborted_ranges_and_marker_retention", testTxnMarkerRetention},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// txnProduce commits one transactional request of one batch per partition given.
func txnProduce(t testing.TB, c catalog.Catalog, tid string, p catalog.Producer, implicit bool, topic int64, seqs map[int32]int32, parts ...int32) catalog.Result {
	t.Helper()
	bs := make([]B, len(parts))
	for i, pt := range parts {
		bs[i] = B{TopicID: topic, Partition: pt, Records: 2}
	}
	seg := Flush(NewKey(t), Req(bs...))
	ss := make([]int32, len(parts))
	for i, pt := range parts {
		ss[i] = seqs[pt]
	}
	Idempotent(&seg, 0, p, ss...)
	seg.Requests[0].Txn = &catalog.TxnWrite{TransactionalID: tid, ImplicitAdd: implicit}
	res := commitOne(t, c, seg)[0]
	if res.Err == nil && !res.Duplicate {
		for _, pt := range parts {
			seqs[pt] += 2
		}
	}
	return res
}

func mustInitTxn(t testing.TB, c catalog.Transactions, tid string, timeout time.Duration) catalog.Producer {
	t.Helper()
	p, err := c.InitTxnProducer(t.Context(), catalog.InitTxn{TransactionalID: tid, Timeout: timeout})
	if err != nil {
		t.Fatalf("init transactional producer %q: %v", tid, err)
	}
	return p
}

func mustChunks(t testing.TB, c catalog.Catalog, topic int64, part int32, from int64) catalog.ChunkList {
	t.Helper()
	l, err := c.Chunks(t.Context(), topic, part, from, 1<<30)
	if err != nil {
		t.Fatalf("chunks of %d/%d from %d: %v", topic, part, from, err)
	}
	return l
}

// wantStable checks a partition's high watermark and last stable offset, as Partitions
// and Chunks both read them.
func wantStable(t testing.TB, c catalog.Catalog, topic int64, part int32, hw, lso int64) {
	t.Helper()
	p := Partition(t, c, topic, part)
	l := mustChunks(t, c, topic, part, p.LogStartOffset)
	if p.HighWatermark != hw || p.LastStableOffset != lso || l.Partition.HighWatermark != hw || l.Partition.LastStableOffset != lso {
		t.Fatalf("partition %d: high watermark %d (chunks %d), stable %d (chunks %d); want %d, %d", part,
			p.HighWatermark, l.Partition.HighWatermark, p.LastStableOffset, l.Partition.LastStableOffset, hw, lso)
	}
}

func testTxnInit(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tid := Name(t, "txn")
	p0 := mustInitTxn(t, c, tid, time.Minute)
	if p0.Epoch != 0 || p0.ID < 0 {
		t.Fatalf("first init %+v, want epoch 0", p0)
	}
	p1 := mustInitTxn(t, c, tid, time.Minute)
	if p1.ID != p0.ID || p1.Epoch != 1 {
		t.Fatalf("second init %+v, want id %d epoch 1", p1, p0.ID)
	}
	// The caller's current identity (KIP-360): the id's current one bumps, an older one
	// is fenced, and one of an id never known is unknown.
	p2, err := c.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: tid, Timeout: time.Minute, Current: &p1})
	if err != nil || p2 != (catalog.Producer{ID: p0.ID, Epoch: 2}) {
		t.Fatalf("init from the current identity: %+v, %v", p2, err)
	}
	_, err = c.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: tid, Timeout: time.Minute, Current: &p1})
	wantErr(t, "init from an older identity", err, catalog.ErrProducerFenced)
	_, err = c.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: Name(t, "never"), Timeout: time.Minute, Current: &p1})
	wantErr(t, "init from an identity of an unknown id", err, catalog.ErrUnknownProducer)
	_, err = c.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: tid, Timeout: 0})
	wantErr(t, "zero timeout", err, catalog.ErrInvalidTxnTimeout)
	_, err = c.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: "", Timeout: time.Minute})
	wantErr(t, "empty transactional id", err, catalog.ErrInvalidTransactionalID)
	// The plain producers' InitProducer with a transactional id is the same identity.
	p3, err := c.InitProducer(ctx, tid, nil, "")
	if err != nil || p3 != (catalog.Producer{ID: p0.ID, Epoch: 3}) {
		t.Fatalf("InitProducer of the transactional id: %+v, %v", p3, err)
	}
}

func testTxnCommitV1(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 3, nil)
	SeedRecords(t, c, tp.ID, 0, 1, 5) // partition 0 at 5
	tid := Name(t, "txn")
	p := mustInitTxn(t, c, tid, time.Minute)
	seqs := map[int32]int32{}
	if err := c.AddTxnPartitions(ctx, catalog.TxnPartitions{TransactionalID: tid, Producer: p,
		Partitions: []catalog.TopicPartition{{TopicID: tp.ID, Partition: 0}, {TopicID: tp.ID, Partition: 1}}}); err != nil {
		t.Fatal(err)
	}
	wantStable(t, c, tp.ID, 0, 5, 5) // added, nothing written: nothing held back
	wantResult(t, "first batch", txnProduce(t, c, tid, p, false, tp.ID, seqs, 0), []int64{5}, false)
	wantResult(t, "second batch", txnProduce(t, c, tid, p, false, tp.ID, seqs, 0), []int64{7}, false)
	wantStable(t, c, tp.ID, 0, 9, 5)
	SeedRecords(t, c, tp.ID, 0, 1, 1) // a plain record after it, at 9
	wantStable(t, c, tp.ID, 0, 10, 5)
	res, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true})
	if err != nil || res.Markers != 2 || res.Producer != p || res.Retry {
		t.Fatalf("commit: %+v, %v; want 2 markers, the same identity", res, err)
	}
	// Partition 0: the commit marker at 10; partition 1, added but unwritten, has one at 0.
	wantStable(t, c, tp.ID, 0, 11, 11)
	wantStable(t, c, tp.ID, 1, 1, 1)
	wantStable(t, c, tp.ID, 2, 0, 0)
	l := mustChunks(t, c, tp.ID, 0, 0)
	want := catalog.Marker{Offset: 10, ProducerID: p.ID, ProducerEpoch: p.Epoch, Commit: true}
	if len(l.Markers) != 1 || l.Markers[0].Timestamp <= 0 {
		t.Fatalf("markers %+v, want one", l.Markers)
	}
	if m := l.Markers[0]; m.Offset != want.Offset || m.ProducerID != want.ProducerID || m.ProducerEpoch != want.ProducerEpoch || !m.Commit || len(l.Aborted) != 0 {
		t.Fatalf("markers %+v aborted %+v, want %+v and no aborted range", l.Markers, l.Aborted, want)
	}
	if l := mustChunks(t, c, tp.ID, 0, 10); len(l.Chunks) != 0 || len(l.Markers) != 1 || l.Markers[0].Offset != 10 {
		t.Fatalf("from the marker's offset: chunks %+v markers %+v, want the marker alone", l.Chunks, l.Markers)
	}
	if l := mustChunks(t, c, tp.ID, 1, 0); len(l.Chunks) != 0 || len(l.Markers) != 1 || l.Markers[0].Offset != 0 {
		t.Fatalf("partition 1: chunks %+v markers %+v, want the marker at 0", l.Chunks, l.Markers)
	}
	// Committed again (v1 keeps its epoch): a retry answers the same.
	res, err = c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true})
	if err != nil || !res.Retry || res.Markers != 0 {
		t.Fatalf("retried commit: %+v, %v", res, err)
	}
	wantStable(t, c, tp.ID, 0, 11, 11)
}

func testTxnAbort(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 1, nil)
	tid := Name(t, "txn")
	p := mustInitTxn(t, c, tid, time.Minute)
	seqs := map[int32]int32{}
	add(t, c, tid, p, tp.ID, 0)
	txnProduce(t, c, tid, p, false, tp.ID, seqs, 0) // 0-1
	SeedRecords(t, c, tp.ID, 0, 1, 1)               // 2
	txnProduce(t, c, tid, p, false, tp.ID, seqs, 0) // 3-4
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p}); err != nil {
		t.Fatal(err)
	}
	wantStable(t, c, tp.ID, 0, 6, 6)
	for _, from := range []int64{0, 4, 5} {
		l := mustChunks(t, c, tp.ID, 0, from)
		if len(l.Aborted) != 1 || l.Aborted[0] != (catalog.AbortedTxn{ProducerID: p.ID, FirstOffset: 0, LastOffset: 5}) {
			t.Fatalf("from %d: aborted %+v, want producer %d 0..5", from, l.Aborted, p.ID)
		}
		if len(l.Markers) != 1 || l.Markers[0].Commit || l.Markers[0].Offset != 5 {
			t.Fatalf("from %d: markers %+v, want the abort at 5", from, l.Markers)
		}
	}
	// A second transaction, committed: its range is not aborted, the first's still is
	// for a fetch that starts in it.
	add(t, c, tid, p, tp.ID, 0)
	txnProduce(t, c, tid, p, false, tp.ID, seqs, 0) // 6-7
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true}); err != nil {
		t.Fatal(err)
	}
	if l := mustChunks(t, c, tp.ID, 0, 6); len(l.Aborted) != 0 || len(l.Markers) != 1 || !l.Markers[0].Commit || l.Markers[0].Offset != 8 {
		t.Fatalf("from 6: aborted %+v markers %+v", l.Aborted, l.Markers)
	}
	if l := mustChunks(t, c, tp.ID, 0, 0); len(l.Aborted) != 1 || len(l.Markers) != 2 {
		t.Fatalf("from 0: aborted %+v markers %+v", l.Aborted, l.Markers)
	}
}

func add(t testing.TB, c catalog.Transactions, tid string, p catalog.Producer, topic int64, parts ...int32) {
	t.Helper()
	tps := make([]catalog.TopicPartition, len(parts))
	for i, pt := range parts {
		tps[i] = catalog.TopicPartition{TopicID: topic, Partition: pt}
	}
	if err := c.AddTxnPartitions(t.Context(), catalog.TxnPartitions{TransactionalID: tid, Producer: p, Partitions: tps}); err != nil {
		t.Fatalf("add partitions %v to %q: %v", parts, tid, err)
	}
}

func testTxnTwoOpen(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 1, nil)
	ta, tb := Name(t, "a"), Name(t, "b")
	pa, pb := mustInitTxn(t, c, ta, time.Minute), mustInitTxn(t, c, tb, time.Minute)
	sa, sb := map[int32]int32{}, map[int32]int32{}
	add(t, c, ta, pa, tp.ID, 0)
	add(t, c, tb, pb, tp.ID, 0)
	txnProduce(t, c, ta, pa, false, tp.ID, sa, 0) // a: 0-1
	txnProduce(t, c, tb, pb, false, tp.ID, sb, 0) // b: 2-3
	txnProduce(t, c, ta, pa, false, tp.ID, sa, 0) // a: 4-5
	wantStable(t, c, tp.ID, 0, 6, 0)
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: ta, Producer: pa, Commit: true}); err != nil {
		t.Fatal(err)
	}
	wantStable(t, c, tp.ID, 0, 7, 2) // b's first offset holds it now
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tb, Producer: pb}); err != nil {
		t.Fatal(err)
	}
	wantStable(t, c, tp.ID, 0, 8, 8)
	l := mustChunks(t, c, tp.ID, 0, 0)
	if len(l.Markers) != 2 || l.Markers[0].Offset != 6 || l.Markers[1].Offset != 7 || !l.Markers[0].Commit || l.Markers[1].Commit {
		t.Fatalf("markers %+v, want a's commit at 6 and b's abort at 7", l.Markers)
	}
	if len(l.Aborted) != 1 || l.Aborted[0] != (catalog.AbortedTxn{ProducerID: pb.ID, FirstOffset: 2, LastOffset: 7}) {
		t.Fatalf("aborted %+v, want b's 2..7", l.Aborted)
	}
}

func testTxnProduceRefusals(t *testing.T, c TxnCatalog) {
	tp := SeedTopic(t, c, "out", 2, nil)
	tid, other := Name(t, "txn"), Name(t, "other")
	p := mustInitTxn(t, c, tid, time.Minute)
	po := mustInitTxn(t, c, other, time.Minute)
	plain := MustInit(t, c, "")
	seqs := map[int32]int32{}
	hw := []int64{0, 0}
	refused := func(what string, res catalog.Result, want error) {
		t.Helper()
		wantErr(t, what, res.Err, want)
		for pt := range int32(2) {
			if p := Partition(t, c, tp.ID, pt); p.HighWatermark != hw[pt] || p.LastStableOffset != hw[pt] {
				t.Fatalf("%s: partition %d moved to %+v", what, pt, p)
			}
		}
	}
	refused("v1, no transaction", txnProduce(t, c, tid, p, false, tp.ID, seqs, 0), catalog.ErrInvalidTxnState)
	add(t, c, tid, p, tp.ID, 0)
	refused("v1, a partition not added", txnProduce(t, c, tid, p, false, tp.ID, seqs, 0, 1), catalog.ErrInvalidTxnState)
	refused("a producer without a transactional id", txnProduce(t, c, tid, plain, false, tp.ID, map[int32]int32{}, 0), catalog.ErrInvalidProducerIDMapping)
	refused("another id's producer", txnProduce(t, c, tid, po, true, tp.ID, map[int32]int32{}, 0), catalog.ErrInvalidProducerIDMapping)
	refused("an epoch ahead", txnProduce(t, c, tid, catalog.Producer{ID: p.ID, Epoch: p.Epoch + 1}, true, tp.ID, map[int32]int32{}, 0), catalog.ErrProducerFenced)
	// A new instance fences p and aborts its transaction: the abort marker of the
	// partition it added, written nothing to, takes offset 0.
	p2 := mustInitTxn(t, c, tid, time.Minute)
	hw[0] = 1
	refused("a fenced epoch", txnProduce(t, c, tid, p, true, tp.ID, seqs, 0), catalog.ErrProducerFenced)
	wantResult(t, "the new instance, v2", txnProduce(t, c, tid, p2, true, tp.ID, map[int32]int32{}, 0), []int64{1}, false)
}

func testTxnDuplicate(t *testing.T, c TxnCatalog) {
	tp := SeedTopic(t, c, "out", 1, nil)
	tid := Name(t, "txn")
	p := mustInitTxn(t, c, tid, time.Minute)
	add(t, c, tid, p, tp.ID, 0)
	seg := Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 3}))
	Idempotent(&seg, 0, p, 0)
	seg.Requests[0].Txn = &catalog.TxnWrite{TransactionalID: tid}
	wantResult(t, "first", commitOne(t, c, seg)[0], []int64{0}, false)
	seg.Key = NewKey(t)
	wantResult(t, "retry", commitOne(t, c, seg)[0], []int64{0}, true)
	wantStable(t, c, tp.ID, 0, 3, 0)
}

func testTxnV2(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 2, nil)
	tid := Name(t, "txn")
	p := mustInitTxn(t, c, tid, time.Minute)
	seqs := map[int32]int32{}
	wantResult(t, "implicit add", txnProduce(t, c, tid, p, true, tp.ID, seqs, 0), []int64{0}, false)
	wantStable(t, c, tp.ID, 0, 2, 0)
	res, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true, BumpEpoch: true})
	next := catalog.Producer{ID: p.ID, Epoch: p.Epoch + 1}
	if err != nil || res.Producer != next || res.Markers != 1 {
		t.Fatalf("commit: %+v, %v; want %+v and one marker", res, err, next)
	}
	wantStable(t, c, tp.ID, 0, 3, 3)
	wantStable(t, c, tp.ID, 1, 0, 0) // never in the transaction: no marker
	// A produce at the epoch before the bump is fenced; the retried EndTxn answers its
	// outcome, and asking for the other one is refused.
	wantErr(t, "produce at the old epoch", txnProduce(t, c, tid, p, true, tp.ID, seqs, 1).Err, catalog.ErrProducerFenced)
	res, err = c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true, BumpEpoch: true})
	if err != nil || !res.Retry || res.Producer != next {
		t.Fatalf("retried commit: %+v, %v; want a retry answering %+v", res, err, next)
	}
	_, err = c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: false, BumpEpoch: true})
	wantErr(t, "abort retrying a commit", err, catalog.ErrInvalidTxnState)
	wantStable(t, c, tp.ID, 0, 3, 3)
	// The next transaction at the new epoch, sequences from 0; an abort of an empty
	// transaction bumps too.
	seqs = map[int32]int32{}
	wantResult(t, "next transaction", txnProduce(t, c, tid, next, true, tp.ID, seqs, 0, 1), []int64{3, 0}, false)
	res, err = c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: next, BumpEpoch: true})
	if err != nil || res.Producer.Epoch != next.Epoch+1 || res.Markers != 2 {
		t.Fatalf("abort: %+v, %v", res, err)
	}
	empty, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: res.Producer, BumpEpoch: true})
	if err != nil || empty.Producer.Epoch != res.Producer.Epoch+1 || empty.Markers != 0 {
		t.Fatalf("abort of an empty transaction: %+v, %v", empty, err)
	}
	_, err = c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: empty.Producer, Commit: true, BumpEpoch: true})
	wantErr(t, "commit of an empty transaction", err, catalog.ErrInvalidTxnState)
	wantStable(t, c, tp.ID, 0, 6, 6)
	wantStable(t, c, tp.ID, 1, 3, 3)
}

func testTxnEndRefusals(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 1, nil)
	tid := Name(t, "txn")
	p := mustInitTxn(t, c, tid, time.Minute)
	_, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true})
	wantErr(t, "commit with no transaction", err, catalog.ErrInvalidTxnState)
	_, err = c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p})
	wantErr(t, "abort with no transaction (v1)", err, catalog.ErrInvalidTxnState)
	add(t, c, tid, p, tp.ID, 0)
	txnProduce(t, c, tid, p, false, tp.ID, map[int32]int32{}, 0)
	for _, tc := range []struct {
		what string
		req  catalog.EndTxn
		want error
	}{
		{"another epoch", catalog.EndTxn{TransactionalID: tid, Producer: catalog.Producer{ID: p.ID, Epoch: p.Epoch + 1}, Commit: true}, catalog.ErrProducerFenced},
		{"another producer id", catalog.EndTxn{TransactionalID: tid, Producer: catalog.Producer{ID: p.ID + 1000, Epoch: 0}, Commit: true}, catalog.ErrInvalidProducerIDMapping},
		{"an unknown transactional id", catalog.EndTxn{TransactionalID: Name(t, "none"), Producer: p, Commit: true}, catalog.ErrInvalidProducerIDMapping},
	} {
		_, err := c.EndTxn(ctx, tc.req)
		wantErr(t, tc.what, err, tc.want)
		wantStable(t, c, tp.ID, 0, 2, 0)
	}
	for _, tc := range []struct {
		what string
		err  error
		want error
	}{
		{"add partitions at another epoch", c.AddTxnPartitions(ctx, catalog.TxnPartitions{TransactionalID: tid, Producer: catalog.Producer{ID: p.ID, Epoch: p.Epoch + 1},
			Partitions: []catalog.TopicPartition{{TopicID: tp.ID}}}), catalog.ErrProducerFenced},
		{"add a partition out of range", c.AddTxnPartitions(ctx, catalog.TxnPartitions{TransactionalID: tid, Producer: p,
			Partitions: []catalog.TopicPartition{{TopicID: tp.ID, Partition: 3}}}), catalog.ErrPartitionOutOfRange},
		{"add a group at another epoch", c.AddTxnGroup(ctx, catalog.TxnGroup{TransactionalID: tid, Producer: catalog.Producer{ID: p.ID, Epoch: p.Epoch + 1}, Group: "g"}), catalog.ErrProducerFenced},
		{"add a group of another producer", c.AddTxnGroup(ctx, catalog.TxnGroup{TransactionalID: tid, Producer: catalog.Producer{ID: p.ID + 1000}, Group: "g"}), catalog.ErrInvalidProducerIDMapping},
	} {
		wantErr(t, tc.what, tc.err, tc.want)
	}
	if d, err := c.DescribeTxns(ctx, []string{tid}); err != nil || len(d[0].Groups) != 0 || len(d[0].Partitions) != 1 {
		t.Fatalf("after the refusals: %+v, %v; want one partition and no group", d, err)
	}
}

func testTxnOffsets(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	in := SeedTopic(t, c, "in", 2, nil)
	SeedRecords(t, c, in.ID, 0, 1, 10)
	out := SeedTopic(t, c, "out", 1, nil)
	group := Name(t, "g")
	if err := c.CommitOffsets(ctx, catalog.OffsetCommit{Group: group, Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	tid := Name(t, "txn")
	p := mustInitTxn(t, c, tid, time.Minute)
	commit := func(off int64, addGroup bool) error {
		return c.TxnCommitOffsets(ctx, catalog.TxnOffsetCommit{TransactionalID: tid, Producer: p, Group: group, AddGroup: addGroup,
			MemberID: "", MemberEpoch: -1, Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: off, Metadata: "m"}}})
	}
	wantErr(t, "offsets with no transaction", commit(5, false), catalog.ErrInvalidTxnState)
	add(t, c, tid, p, out.ID, 0)
	wantErr(t, "offsets of a group not in the transaction", commit(5, false), catalog.ErrInvalidTxnState)
	if err := c.AddTxnGroup(ctx, catalog.TxnGroup{TransactionalID: tid, Producer: p, Group: group}); err != nil {
		t.Fatal(err)
	}
	if err := commit(5, false); err != nil {
		t.Fatal(err)
	}
	if err := commit(6, false); err != nil { // the later wins
		t.Fatal(err)
	}
	wantErr(t, "offsets of a topic that does not exist", c.TxnCommitOffsets(ctx, catalog.TxnOffsetCommit{TransactionalID: tid, Producer: p,
		Group: group, Offsets: []catalog.CommitOffset{{Topic: Name(t, "nope"), Offset: 1}}}), catalog.ErrTopicNotFound)
	if got := committedOffsets(t, c, group); got[0] != 1 {
		t.Fatalf("before the commit the group's offsets are %v, want 0:1", got)
	}
	pending, err := c.PendingTxnOffsets(ctx, group)
	if err != nil || len(pending) != 1 || pending[0].Topic != in.Name || !slices.Equal(pending[0].Partitions, []int32{0}) {
		t.Fatalf("pending offsets %v, %v", pending, err)
	}
	// Aborted: they never arrive.
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p}); err != nil {
		t.Fatal(err)
	}
	if got := committedOffsets(t, c, group); got[0] != 1 {
		t.Fatalf("after the abort the group's offsets are %v, want 0:1", got)
	}
	if pending, _ := c.PendingTxnOffsets(ctx, group); len(pending) != 0 {
		t.Fatalf("pending after the abort: %v", pending)
	}
	// TxnOffsetCommit v5 adds the group itself and begins the transaction; a commit
	// moves the offsets into the group.
	if err := commit(7, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true}); err != nil {
		t.Fatal(err)
	}
	offs, err := c.GroupOffsets(ctx, group)
	if err != nil || len(offs) != 1 || offs[0].Offset != 7 || offs[0].Metadata != "m" {
		t.Fatalf("after the commit: %+v, %v; want 0:7 with its metadata", offs, err)
	}
	// A committed transaction's offsets reach a group that did not exist.
	fresh := Name(t, "fresh")
	if err := c.TxnCommitOffsets(ctx, catalog.TxnOffsetCommit{TransactionalID: tid, Producer: p, Group: fresh, AddGroup: true,
		MemberEpoch: -1, Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 1, Offset: 0}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true}); err != nil {
		t.Fatal(err)
	}
	if got := committedOffsets(t, c, fresh); len(got) != 1 || got[1] != 0 {
		t.Fatalf("a new group's offsets %v, want 1:0", got)
	}
}

func testTxnInitAborts(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 1, nil)
	group := Name(t, "g")
	tid := Name(t, "txn")
	p := mustInitTxn(t, c, tid, time.Minute)
	seqs := map[int32]int32{}
	txnProduce(t, c, tid, p, true, tp.ID, seqs, 0)
	if err := c.TxnCommitOffsets(ctx, catalog.TxnOffsetCommit{TransactionalID: tid, Producer: p, Group: group, AddGroup: true,
		MemberEpoch: -1, Offsets: []catalog.CommitOffset{{Topic: tp.Name, Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	wantStable(t, c, tp.ID, 0, 2, 0)
	p2 := mustInitTxn(t, c, tid, time.Minute)
	wantStable(t, c, tp.ID, 0, 3, 3)
	if l := mustChunks(t, c, tp.ID, 0, 0); len(l.Aborted) != 1 || l.Aborted[0] != (catalog.AbortedTxn{ProducerID: p.ID, FirstOffset: 0, LastOffset: 2}) {
		t.Fatalf("aborted %+v", l.Aborted)
	}
	if _, err := c.GroupOffsets(ctx, group); err == nil {
		if got := committedOffsets(t, c, group); len(got) != 0 {
			t.Fatalf("the aborted transaction's offsets reached the group: %v", got)
		}
	}
	_, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true})
	wantErr(t, "the fenced instance's commit", err, catalog.ErrProducerFenced)
	if p2.Epoch != p.Epoch+1 {
		t.Fatalf("new instance %+v", p2)
	}
}

func testTxnTimeout(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 1, nil)
	tid, slow := Name(t, "txn"), Name(t, "slow")
	p := mustInitTxn(t, c, tid, 300*time.Millisecond)
	ps := mustInitTxn(t, c, slow, time.Hour)
	txnProduce(t, c, slow, ps, true, tp.ID, map[int32]int32{}, 0) // 0-1, not due
	txnProduce(t, c, tid, p, true, tp.ID, map[int32]int32{}, 0)   // 2-3
	wantStable(t, c, tp.ID, 0, 4, 0)
	var aborted []catalog.TxnDescription
	deadline := time.Now().Add(10 * time.Second)
	for len(aborted) == 0 && time.Now().Before(deadline) {
		got, err := c.AbortExpiredTxns(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got {
			if d.TransactionalID == slow {
				t.Fatalf("aborted %q, whose timeout is an hour", slow)
			}
			if d.TransactionalID == tid {
				aborted = append(aborted, d)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(aborted) != 1 || aborted[0].ProducerID != p.ID || aborted[0].Epoch != p.Epoch {
		t.Fatalf("aborted %+v, want %q at %+v", aborted, tid, p)
	}
	wantStable(t, c, tp.ID, 0, 5, 0) // the slow one still holds it
	// The late producer is fenced; InitProducerId naming its identity recovers it.
	_, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true})
	wantErr(t, "the late producer's commit", err, catalog.ErrProducerFenced)
	_, err = c.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, BumpEpoch: true})
	wantErr(t, "the late producer's abort (v2): no retry of the reaper's", err, catalog.ErrProducerFenced)
	p2, err := c.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: tid, Timeout: time.Minute, Current: &p})
	if err != nil || p2.Epoch != p.Epoch+2 {
		t.Fatalf("recovery from the aborted identity: %+v, %v; want epoch %d", p2, err, p.Epoch+2)
	}
	if again, err := c.AbortExpiredTxns(ctx, 10); err != nil || slices.ContainsFunc(again, func(d catalog.TxnDescription) bool { return d.TransactionalID == tid }) {
		t.Fatalf("aborted again: %+v, %v", again, err)
	}
	if _, err := c.EndTxn(ctx, catalog.EndTxn{TransactionalID: slow, Producer: ps}); err != nil {
		t.Fatal(err)
	}
	wantStable(t, c, tp.ID, 0, 6, 6)
}

func testTxnDescribe(t *testing.T, c TxnCatalog) {
	ctx := t.Context()
	tp := SeedTopic(t, c, "out", 2, nil)
	ta, tb := Name(t, "a"), Name(t, "b")
	pa := mustInitTxn(t, c, ta, 42*time.Second)
	pb := mustInitTxn(t, c, tb, time.Minute)
	add(t, c, ta, pa, tp.ID, 1, 0)
	if err := c.AddTxnGroup(ctx, catalog.TxnGroup{TransactionalID: ta, Producer: pa, Group: "g1"}); err != nil {
		t.Fatal(err)
	}
	ds, err := c.DescribeTxns(ctx, []string{ta, tb, Name(t, "none")})
	if err != nil || len(ds) != 3 {
		t.Fatalf("describe: %+v, %v", ds, err)
	}
	a := ds[0]
	if a.TransactionalID != ta || a.ProducerID != pa.ID || a.Epoch != pa.Epoch || a.State != catalog.TxnOngoing || a.Timeout != 42*time.Second ||
		a.StartedAt.IsZero() || fmt.Sprint(a.Partitions) != fmt.Sprint([]catalog.TopicPartitions{{Topic: tp.Name, Partitions: []int32{0, 1}}}) ||
		!slices.Equal(a.Groups, []string{"g1"}) {
		t.Fatalf("a: %+v", a)
	}
	if b := ds[1]; b.State != catalog.TxnEmpty || b.ProducerID != pb.ID || !b.StartedAt.IsZero() || len(b.Partitions) != 0 {
		t.Fatalf("b: %+v", b)
	}
	if n := ds[2]; n.State != "" || n.ProducerID != -1 {
		t.Fatalf("unknown: %+v", n)
	}
	list, err := c.ListTxns(ctx, catalog.TxnFilter{States: []string{catalog.TxnOngoing}})
	if err != nil || !slices.ContainsFunc(list, func(d catalog.TxnDescription) bool { return d.TransactionalID == ta }) ||
		slices.ContainsFunc(list, func(d catalog.TxnDescription) bool { return d.TransactionalID == tb }) {
		t.Fatalf("ongoing: %+v, %v", list, err)
	}
	list, err = c.ListTxns(ctx, catalog.TxnFilter{ProducerIDs: []int64{pb.ID}})
	if err != nil || len(list) != 1 || list[0].TransactionalID != tb {
		t.Fatalf("by producer: %+v, %v", list, err)
	}
	list, err = c.ListTxns(ctx, catalog.TxnFilter{OngoingFor: time.Hour})
	if err != nil || slices.ContainsFunc(list, func(d catalog.TxnDescription) bool { return d.TransactionalID == ta }) {
		t.Fatalf("ongoing for an hour: %+v, %v", list, err)
	}
	st, err := c.TxnStats(ctx)
	if err != nil || st.Open < 1 || st.OldestOpen.IsZero() || st.DatabaseTime.Before(st.OldestOpen) {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// testTxnMarkerRetention: the compactor's view of markers — the aborted ranges a
// rewrite drops, DropMarkers under a lease (by offset and decision time), and DropChunks
// taking the markers below the log start.
func testTxnMarkerRetention(t *testing.T, tc TxnCatalog) {
	ctx := t.Context()
	c := tc
	tp := SeedTopic(t, tc, "out", 1, nil)
	tid := Name(t, "txn")
	p := mustInitTxn(t, tc, tid, time.Minute)
	seqs := map[int32]int32{}
	txnProduce(t, tc, tid, p, true, tp.ID, seqs, 0) // 0-1, aborted at 2
	if _, err := tc.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p}); err != nil {
		t.Fatal(err)
	}
	txnProduce(t, tc, tid, p, true, tp.ID, seqs, 0) // 3-4, committed at 5
	if _, err := tc.EndTxn(ctx, catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: true}); err != nil {
		t.Fatal(err)
	}
	SeedRecords(t, tc, tp.ID, 0, 1, 1) // 6
	aborted := func(from, to int64) []catalog.AbortedTxn {
		t.Helper()
		a, err := c.AbortedTxns(ctx, tp.ID, 0, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	want := []catalog.AbortedTxn{{ProducerID: p.ID, FirstOffset: 0, LastOffset: 2}}
	for _, r := range [][2]int64{{0, 0}, {0, 6}, {1, 1}, {2, 2}} {
		if got := aborted(r[0], r[1]); !slices.Equal(got, want) {
			t.Fatalf("aborted in [%d, %d]: %+v, want %+v", r[0], r[1], got, want)
		}
	}
	if got := aborted(3, 6); len(got) != 0 {
		t.Fatalf("aborted in [3, 6]: %+v, want none", got)
	}

	makeDue(t, c, tp.Name)
	l := compactionLease(t, c, "markers", tp.ID, 0)
	// Decided too recently: nothing goes, and the earliest one left says when.
	dropped, next, err := c.DropMarkers(ctx, l, 6, time.Unix(0, 0))
	if err != nil || dropped != 0 || next == 0 {
		t.Fatalf("drop markers decided before 1970: %d dropped, next %d, %v", dropped, next, err)
	}
	// Below 3: the abort marker only.
	dropped, next, err = c.DropMarkers(ctx, l, 3, time.Now().Add(time.Hour))
	if err != nil || dropped != 1 || next != 0 {
		t.Fatalf("drop markers below 3: %d dropped, next %d, %v; want 1, 0", dropped, next, err)
	}
	if m := mustChunks(t, tc, tp.ID, 0, 0).Markers; len(m) != 1 || m[0].Offset != 5 {
		t.Fatalf("markers after the drop: %+v, want the commit at 5", m)
	}
	if got := aborted(0, 6); len(got) != 0 {
		t.Fatalf("aborted ranges after the drop: %+v", got)
	}
	giveBack(t, c, l)
	if _, _, err := c.DropMarkers(ctx, l, 6, time.Now().Add(time.Hour)); !errors.Is(err, catalog.ErrCompactionConflict) {
		t.Fatalf("drop markers without the lease: %v, want ErrCompactionConflict", err)
	}

	// The log start past the commit marker: DropChunks takes it.
	if _, err := c.DeleteRecords(ctx, tp.ID, 0, 6); err != nil {
		t.Fatal(err)
	}
	l = compactionLease(t, c, "markers", tp.ID, 0)
	if _, _, err := c.DropChunks(ctx, l); err != nil {
		t.Fatal(err)
	}
	giveBack(t, c, l)
	if m := mustChunks(t, tc, tp.ID, 0, 6).Markers; len(m) != 0 {
		t.Fatalf("markers after the log start moved past them: %+v", m)
	}
	if _, next, err := c.DropMarkers(ctx, compactionLease(t, c, "markers", tp.ID, 0), 7, time.Unix(0, 0)); err != nil || next != 0 {
		t.Fatalf("markers left below 7: earliest at %d (%v), want none", next, err)
	}
}
