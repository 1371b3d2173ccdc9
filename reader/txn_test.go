package reader

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/segment"
)

// txnLog writes a partition's log as the writer and the coordinator would: plain and
// transactional batches through the catalog's commit, decisions through EndTxn.
type txnLog struct {
	t     *testing.T
	store *fs.Store
	cat   *sqlite.Catalog
	topic catalog.Topic
	seqs  map[int64]int32
}

// write commits one batch of n records labelled with their expected offsets from at;
// p nil is a plain producer's, otherwise tid's transactional batch.
func (l *txnLog) write(at int64, n int, tid string, p *catalog.Producer) {
	l.t.Helper()
	ctx := l.t.Context()
	b := segment.Batch{TopicID: l.topic.ID, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if p != nil {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.Transactional = p.ID, p.Epoch, l.seqs[p.ID], true
	}
	for i := range n {
		b.Records = append(b.Records, segment.Record{Value: fmt.Appendf(nil, "%d", at+int64(i)), Timestamp: 1_700_000_000_000})
	}
	obj, infos, err := segment.Encode([]segment.Batch{b}, segment.EncodeOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	key := segment.NewKey(time.Now())
	if err := l.store.Put(ctx, key, obj); err != nil {
		l.t.Fatal(err)
	}
	bi := infos[0]
	req := catalog.Request{Batches: []catalog.Batch{{TopicID: l.topic.ID, Pos: bi.Pos, Len: bi.Len, Records: int32(n),
		MaxTimestamp: bi.MaxTimestamp, BaseSequence: b.BaseSequence}}}
	if p != nil {
		req.Producer, req.Txn = p, &catalog.TxnWrite{TransactionalID: tid, ImplicitAdd: true}
		l.seqs[p.ID] += int32(n)
	}
	res, err := l.cat.Commit(ctx, catalog.Segment{Key: key, Size: int64(len(obj)), Requests: []catalog.Request{req}})
	if err != nil || res[0].Err != nil || res[0].BaseOffsets[0] != at {
		l.t.Fatalf("commit at %d: %+v, %v", at, res, err)
	}
}

func (l *txnLog) end(tid string, p catalog.Producer, commit bool) {
	l.t.Helper()
	if _, err := l.cat.EndTxn(l.t.Context(), catalog.EndTxn{TransactionalID: tid, Producer: p, Commit: commit}); err != nil {
		l.t.Fatal(err)
	}
}

// TestTransactionalFetch: what each kind of fetch sees of a log with committed,
// aborted and open transactions among plain records.
func TestTransactionalFetch(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	topic, err := cat.CreateTopic(ctx, "t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &txnLog{t: t, store: store, cat: cat, topic: topic, seqs: map[int64]int32{}}
	init := func(tid string) catalog.Producer {
		p, err := cat.InitTxnProducer(ctx, catalog.InitTxn{TransactionalID: tid, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, o := init("a"), init("b"), init("open")
	// 0-1 plain; a: 2-3; b: 4-5; plain 6; a: 7; a commits (8); b aborts (9); plain 10;
	// open: 11-12, not decided; plain 13.
	l.write(0, 2, "", nil)
	l.write(2, 2, "a", &a)
	l.write(4, 2, "b", &b)
	l.write(6, 1, "", nil)
	l.write(7, 1, "a", &a)
	l.end("a", a, true)
	l.end("b", b, false)
	l.write(10, 1, "", nil)
	l.write(11, 2, "open", &o)
	l.write(13, 1, "", nil)

	r := New(store, cat, Config{PollInterval: time.Hour}, nil, nil)
	values := func(f Fetch) ([]string, Result) {
		t.Helper()
		res, err := r.Fetch(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rec := range res.Records {
			if string(rec.Value) != fmt.Sprint(rec.Offset) {
				t.Fatalf("record at %d holds %s", rec.Offset, rec.Value)
			}
			out = append(out, string(rec.Value))
		}
		return out, res
	}
	f := Fetch{TopicID: topic.ID, Offset: 0, MaxRecords: 100}
	got, res := values(f)
	if want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "10", "11", "12", "13"}; !slices.Equal(got, want) || res.NextOffset != 14 {
		t.Fatalf("read uncommitted: %v next %d, want %v next 14 (no markers)", got, res.NextOffset, want)
	}
	if res.HighWatermark != 14 || res.LastStableOffset != 11 {
		t.Fatalf("high watermark %d, stable %d; want 14, 11", res.HighWatermark, res.LastStableOffset)
	}
	f.Isolation = ReadCommitted
	got, res = values(f)
	if want := []string{"0", "1", "2", "3", "6", "7", "10"}; !slices.Equal(got, want) || res.NextOffset != 11 {
		t.Fatalf("read committed: %v next %d, want %v next 11 (b aborted, open held back)", got, res.NextOffset, want)
	}
	// From inside the aborted range, and at the stable offset itself.
	f.Offset = 5
	if got, res = values(f); !slices.Equal(got, []string{"6", "7", "10"}) || res.NextOffset != 11 {
		t.Fatalf("read committed from 5: %v next %d", got, res.NextOffset)
	}
	f.Offset = 11
	if got, res = values(f); len(got) != 0 || res.NextOffset != 11 {
		t.Fatalf("read committed at the stable offset: %v next %d", got, res.NextOffset)
	}

	// Kafka's view: stored batches and rendered markers, up to the stable offset, with
	// the aborted transactions for the client to drop.
	raw, err := r.FetchRaw(ctx, Fetch{TopicID: topic.ID, MaxBytes: 1 << 20, Isolation: ReadCommitted, Markers: true})
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	var controls []int64
	for _, bt := range raw.Batches {
		base := int64(binary.BigEndian.Uint64(bt))
		if segment.IsControlBatch(bt) {
			controls = append(controls, base)
		} else {
			bases = append(bases, base)
		}
	}
	if !slices.Equal(bases, []int64{0, 2, 4, 6, 7, 10}) || !slices.Equal(controls, []int64{8, 9}) || raw.NextOffset != 11 {
		t.Fatalf("raw read committed: batches at %v, markers at %v, next %d", bases, controls, raw.NextOffset)
	}
	if len(raw.Aborted) != 1 || raw.Aborted[0] != (catalog.AbortedTxn{ProducerID: b.ID, FirstOffset: 4, LastOffset: 9}) {
		t.Fatalf("aborted %+v", raw.Aborted)
	}

	// A read-committed long poll at the stable offset waits for the decision.
	r2 := New(store, cat, Config{PollInterval: time.Hour}, nil, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r2.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	type answer struct {
		res Result
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		res, err := r2.Fetch(ctx, Fetch{TopicID: topic.ID, Offset: 11, MaxRecords: 100, Isolation: ReadCommitted, Wait: time.Minute})
		ch <- answer{res, err}
	}()
	select {
	case a := <-ch:
		t.Fatalf("the poll answered before the decision: %+v, %v", a.res, a.err)
	case <-time.After(200 * time.Millisecond):
	}
	l.end("open", o, true)
	select {
	case a := <-ch:
		if a.err != nil || len(a.res.Records) != 3 || a.res.Records[0].Offset != 11 || a.res.NextOffset != 15 {
			t.Fatalf("after the commit: %+v, %v; want 11, 12, 13 and next 15", a.res, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll was not woken by the commit")
	}
}
