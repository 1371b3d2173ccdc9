package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

// clientBatch lays recs out as one batch the way a Kafka client does (segment's
// encoder writes the layout Kafka clients write), with a base offset a client might
// send: the writer must store 0 there.
func clientBatch(t testing.TB, recs []segment.Record, c segment.Compression, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	obj, infos, err := segment.Encode([]segment.Batch{{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		Compression: c, Records: recs}}, segment.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw := bytes.Clone(obj[:infos[0].Len])
	segment.SetBaseOffset(raw, 4242)
	return raw
}

// rawReq is a request of raw batches for topic/partition, scanned as the API scans them.
func rawReq(t testing.TB, topic int64, part int32, batches ...[]byte) Request {
	t.Helper()
	rb := &RawBatches{TopicID: topic, Partition: part, Batches: batches}
	for _, b := range batches {
		s, err := segment.ScanBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		rb.Summaries = append(rb.Summaries, s)
	}
	return Request{Raw: rb}
}

// records makes n records with values of size bytes, a header on every third.
func records(n, size int, ts int64) []segment.Record {
	recs := make([]segment.Record, n)
	for i := range recs {
		recs[i] = segment.Record{Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, size), Timestamp: ts + int64(i%7)}
		if i%3 == 0 {
			recs[i].Headers = []segment.Header{{Key: "trace", Value: []byte("t")}, {Key: "null"}}
		}
	}
	return recs
}

// asRecords is recs as writer records for topic/partition.
func asRecords(topic int64, part int32, recs []segment.Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{TopicID: topic, Partitions: part + 1, Partition: part, Record: r}
	}
	return out
}

// withBase returns raw with base offset base.
func withBase(raw []byte, base int64) []byte {
	raw = bytes.Clone(raw)
	segment.SetBaseOffset(raw, base)
	return raw
}

// A raw request's batches land in the object byte for byte, base offset 0 aside, as
// one catalog batch; the object is the one the same records sent as Records give.
func TestRawStoredAsSent(t *testing.T) {
	for _, c := range []segment.Compression{segment.CompressionNone, segment.CompressionLZ4, segment.CompressionZstd} {
		t.Run(fmt.Sprint("compression=", c), func(t *testing.T) {
			recs := records(50, 100, 1_700_000_000_000)
			raw := clientBatch(t, recs, c, -1, -1, -1)

			objects := map[string][]byte{}
			for _, form := range []string{"raw", "records"} {
				h := start(t, Config{Linger: never}, true)
				r := rawReq(t, 1, 3, raw)
				if form == "records" {
					r = Request{Records: asRecords(1, 3, recs), Compression: c}
				}
				chs := h.enqueueInOrder(t, r)
				h.w.Flush(context.Background())
				resp := mustOK(t, await(t, chs[0]))
				if len(resp.Records) != len(recs) {
					t.Fatalf("%s: %d answers for %d records", form, len(resp.Records), len(recs))
				}
				for i, rr := range resp.Records {
					if rr != (RecordResult{Partition: 3, Offset: int64(i)}) {
						t.Fatalf("%s: record %d at %+v", form, i, rr)
					}
				}
				seg := h.cat.commitCalls()[0]
				obj, _ := h.store.get(seg.Key)
				objects[form] = obj
				cb := seg.Requests[0].Batches
				if len(cb) != 1 || cb[0].Records != 50 || cb[0].MaxTimestamp != 1_700_000_000_006 || cb[0].BaseSequence != -1 {
					t.Fatalf("%s: commit batches %+v", form, cb)
				}
				if form == "raw" && !bytes.Equal(obj[cb[0].Pos:cb[0].Pos+cb[0].Len], withBase(raw, 0)) {
					t.Fatal("the stored batch is not the one sent, base offset aside")
				}
				if form == "raw" && !putAliases(h.store.putParts()[0], raw[16:]) {
					t.Fatal("the put copied the raw batch instead of sending the request's bytes")
				}
			}
			if !bytes.Equal(objects["raw"], objects["records"]) {
				t.Fatal("the object of the raw request differs from that of the same records")
			}
		})
	}
}

// putAliases reports whether one of parts is b itself (not a copy).
func putAliases(parts [][]byte, b []byte) bool {
	for _, p := range parts {
		if len(p) == len(b) && len(b) > 0 && &p[0] == &b[0] {
			return true
		}
	}
	return false
}

// Several raw batches of one request lie back to back under one catalog batch, beside
// other requests for the same partition; each request's offsets are contiguous.
func TestRawSeveralBatches(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	prod := &catalog.Producer{ID: 9, Epoch: 2}
	a := clientBatch(t, records(3, 10, 1_000), segment.CompressionNone, 9, 2, 10)
	b := clientBatch(t, records(4, 10, 2_000), segment.CompressionGzip, 9, 2, 13)
	idem := rawReq(t, 1, 0, a, b)
	idem.Producer = prod
	idem.Sequences = map[TopicPartition]int32{{1, 0}: 10}
	chs := h.enqueueInOrder(t,
		req(rec(1, 1, 0, "", "before")),
		idem,
		req(rec(1, 1, 0, "", "after")),
	)
	h.w.Flush(context.Background())
	if got := mustOK(t, await(t, chs[0])).Records[0].Offset; got != 0 {
		t.Errorf("first request at %d, want 0", got)
	}
	resp := mustOK(t, await(t, chs[1]))
	if len(resp.Records) != 7 || resp.Records[0].Offset != 1 || resp.Records[6].Offset != 7 {
		t.Errorf("raw request answered %+v, want offsets 1..7", resp.Records)
	}
	if got := mustOK(t, await(t, chs[2])).Records[0].Offset; got != 8 {
		t.Errorf("last request at %d, want 8", got)
	}
	seg := h.cat.commitCalls()[0]
	cr := seg.Requests[1]
	if cr.Producer != prod || len(cr.Batches) != 1 || cr.Batches[0].Records != 7 || cr.Batches[0].BaseSequence != 10 ||
		cr.Batches[0].Len != int64(len(a)+len(b)) || cr.Batches[0].MaxTimestamp != 2_003 {
		t.Fatalf("commit request %+v", cr)
	}
	obj, _ := h.store.get(seg.Key)
	want := append(withBase(a, 0), withBase(b, 0)...)
	if got := obj[cr.Batches[0].Pos : cr.Batches[0].Pos+cr.Batches[0].Len]; !bytes.Equal(got, want) {
		t.Fatal("the stored batches are not the ones sent, back to back")
	}
	ft, err := segment.ReadFooter(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(ft.Batches) != 4 || ft.Batches[1].BaseSequence != 10 || ft.Batches[2].BaseSequence != 13 || ft.Batches[2].Records != 4 {
		t.Fatalf("footer %+v: want the records batch, both raw batches with their own sequences, the records batch", ft.Batches)
	}
}

// With Config.Compression set, an uncompressed raw batch is encoded with it, as its
// records would have been; a compressed one is stored as it came.
func TestRawRecodedForConfiguredCompression(t *testing.T) {
	h := start(t, Config{Linger: never, Compression: segment.CompressionZstd}, true)
	plain := clientBatch(t, records(5, 10, 1_000), segment.CompressionNone, -1, -1, -1)
	lz := clientBatch(t, records(5, 10, 1_000), segment.CompressionLZ4, -1, -1, -1)
	chs := h.enqueueInOrder(t, rawReq(t, 1, 0, plain), rawReq(t, 1, 0, lz))
	h.w.Flush(context.Background())
	for _, c := range chs {
		mustOK(t, await(t, c))
	}
	seg := h.cat.commitCalls()[0]
	for i, want := range []segment.Compression{segment.CompressionZstd, segment.CompressionLZ4} {
		b := seg.Requests[i].Batches[0]
		if d := decodeAt(t, h.store, seg.Key, b.Pos, b.Len); d.Compression != want || len(d.Records) != 5 {
			t.Errorf("request %d stored with codec %d and %d records, want %d and 5", i, d.Compression, len(d.Records), want)
		}
	}
	obj, _ := h.store.get(seg.Key)
	if b := seg.Requests[1].Batches[0]; !bytes.Equal(obj[b.Pos:b.Pos+b.Len], withBase(lz, 0)) {
		t.Error("the compressed batch is not stored as it came")
	}
}

// A raw request is sized as its records are: buffer cap and flush limit see the same
// bytes whatever form the request came in.
func TestRawSizedAsRecords(t *testing.T) {
	w := New(newMemStore(), newFakeCatalog(t, nil), Config{}, nil, nil)
	recs := records(30, 200, 1_000)
	raw, err := w.prepare(rawReq(t, 1, 0, clientBatch(t, recs, segment.CompressionZstd, -1, -1, -1)))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := w.prepare(Request{Records: asRecords(1, 0, recs)})
	if err != nil {
		t.Fatal(err)
	}
	// 30 records: keys k0..k9 (2 bytes) and k10..k29 (3 bytes), values of 200, and ten
	// records with two headers of 10 bytes in all ("trace" "t", "null" nil).
	want := int64(batchOverhead + 30*recordOverhead + 10*2 + 20*3 + 30*200 + 10*(2*headerOverhead+10))
	if raw.size != want || dec.size != want || raw.records != 30 {
		t.Errorf("raw request sized %d (%d records), records request %d; want %d", raw.size, raw.records, dec.size, want)
	}
}

func TestRawRefused(t *testing.T) {
	h := start(t, Config{Linger: never, MaxFlushBytes: 64 << 10, BufferBytes: 1 << 20}, true)
	plain := clientBatch(t, records(2, 10, 1_000), segment.CompressionNone, -1, -1, -1)
	idem := func(seq int32) []byte {
		return clientBatch(t, records(2, 10, 1_000), segment.CompressionNone, 7, 1, seq)
	}
	gaps := clientBatch(t, []segment.Record{{Value: []byte("a"), OffsetDelta: 0}, {Value: []byte("b"), OffsetDelta: 2}}, segment.CompressionNone, -1, -1, -1)
	stamped, infos, _ := segment.Encode([]segment.Batch{{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LogAppendTime: true,
		Records: []segment.Record{{Value: []byte("a"), Timestamp: 5}}}}, segment.EncodeOptions{})
	stamped = stamped[:infos[0].Len]
	big := clientBatch(t, records(100, 1000, 1_000), segment.CompressionZstd, -1, -1, -1)
	prod := &catalog.Producer{ID: 7, Epoch: 1}
	with := func(r Request, f func(r *Request)) Request {
		rb := *r.Raw
		r.Raw = &rb
		f(&r)
		return r
	}
	seqs := func(s int32) map[TopicPartition]int32 { return map[TopicPartition]int32{{1, 0}: s} }
	h.expectRefused(t, []refusal{
		{"records too", with(rawReq(t, 1, 0, plain), func(r *Request) { r.Records = []Record{rec(1, 1, 0, "", "a")} }), ErrInvalid, "one or the other"},
		{"compression", with(rawReq(t, 1, 0, plain), func(r *Request) { r.Compression = segment.CompressionGzip }), ErrInvalid, "own codec"},
		{"no batches", Request{Raw: &RawBatches{TopicID: 1}}, ErrInvalid, "no raw batches"},
		{"no summaries", with(rawReq(t, 1, 0, plain), func(r *Request) { r.Raw.Summaries = nil }), ErrInvalid, "0 summaries"},
		{"negative partition", rawReq(t, 1, -1, plain), ErrInvalid, "partition -1"},
		{"summary of another batch", with(rawReq(t, 1, 0, plain), func(r *Request) { r.Raw.Batches = [][]byte{idem(0)} }), ErrInvalid, "another batch"},
		{"not canonical", rawReq(t, 1, 0, gaps), ErrInvalid, "send its records instead"},
		{"LogAppendTime", rawReq(t, 1, 0, stamped), ErrInvalid, "LogAppendTime"},
		{"idempotent batch, no producer", rawReq(t, 1, 0, idem(0)), ErrInvalid, "carries producer 7"},
		{"plain batch, producer", with(rawReq(t, 1, 0, plain), func(r *Request) { r.Producer, r.Sequences = prod, seqs(0) }), ErrInvalid, "carries producer -1"},
		{"other epoch", with(rawReq(t, 1, 0, idem(0)), func(r *Request) { r.Producer, r.Sequences = &catalog.Producer{ID: 7, Epoch: 2}, seqs(0) }), ErrInvalid, "epoch 1"},
		{"other sequence", with(rawReq(t, 1, 0, idem(0)), func(r *Request) { r.Producer, r.Sequences = prod, seqs(1) }), ErrInvalid, "base sequence 0"},
		{"sequence gap", with(rawReq(t, 1, 0, idem(0), idem(3)), func(r *Request) { r.Producer, r.Sequences = prod, seqs(0) }), ErrInvalid, "raw batch 1"},
		{"no sequence", with(rawReq(t, 1, 0, idem(0)), func(r *Request) { r.Producer = prod }), ErrInvalid, "no base sequence"},
		{"sequences without producer", with(rawReq(t, 1, 0, plain), func(r *Request) { r.Sequences = seqs(0) }), ErrInvalid, "without a producer"},
		{"too large", rawReq(t, 1, 0, big), ErrTooLarge, "split it"},
	})
	// A good idempotent request of two batches passes the same checks.
	good := with(rawReq(t, 1, 0, idem(0), idem(2)), func(r *Request) { r.Producer, r.Sequences = prod, seqs(0) })
	chs := h.enqueueInOrder(t, good)
	h.w.Flush(context.Background())
	mustOK(t, await(t, chs[0]))
}

// A raw batch changed after it was accepted, so that its CRC no longer holds, fails its
// own request and the rest of the flush commits: EncodeParts does not read it, but the
// object's CRC-32C, made from the batches' CRCs, fails the put (the store checks it;
// this one through objstore.PutPartsCRC32C), and the request alone is then refused.
func TestRawRefusedByEncoder(t *testing.T) {
	h := start(t, Config{Linger: never}, true)
	raw := clientBatch(t, records(3, 10, 1_000), segment.CompressionNone, -1, -1, -1)
	chs := h.enqueueInOrder(t, req(rec(1, 1, 0, "", "a")), rawReq(t, 1, 0, raw), req(rec(1, 1, 0, "", "c")))
	raw[len(raw)-1] ^= 1
	h.w.Flush(context.Background())
	mustOK(t, await(t, chs[0]))
	if o := await(t, chs[1]); !errors.Is(o.err, ErrInvalid) || !errors.Is(o.err, segment.ErrInvalid) {
		t.Errorf("changed raw batch: %v, want ErrInvalid", o.err)
	}
	if got := mustOK(t, await(t, chs[2])).Records[0].Offset; got != 1 {
		t.Errorf("request 2 at %d, want 1", got)
	}
}
