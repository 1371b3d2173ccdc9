package reader

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
)

const testTopic = 7

// testLog builds partitions the way the writer and the compactor do: objects made with
// segment.Encode, kept in a fakeStore, their chunk rows added to a fakeCatalog with
// offsets assigned in commit order.
type testLog struct {
	t     testing.TB
	store *fakeStore
	cat   *fakeCatalog
	objs  int
	next  map[int32]int64 // offset the next record made for a partition will get
	hw    map[int32]int64 // offset the next committed record gets
}

func newTestLog(t testing.TB) *testLog {
	return &testLog{t: t, store: newFakeStore(), cat: newFakeCatalog(), next: map[int32]int64{}, hw: map[int32]int64{}}
}

// label is what a record at offset o of partition p carries at the start of its value,
// so a record read back at the wrong offset, or from the wrong place, is caught.
func label(p int32, o int64) string { return fmt.Sprintf("p%d-%d.", p, o) }

// value is a record value of exactly size bytes (at least the label) for offset o,
// padded with pseudo-random hex digits: about as compressible as typical JSON.
func value(p int32, o int64, size int) []byte {
	v := []byte(label(p, o))
	rng := rand.New(rand.NewPCG(uint64(p), uint64(o)))
	for len(v) < size {
		v = append(v, "0123456789abcdef"[rng.IntN(16)])
	}
	return v
}

// batch returns a writer batch (base offset 0) of n records of size-byte values for
// partition p. Batches must be flushed in the order they are made.
func (l *testLog) batch(p int32, n, size int, c segment.Compression) segment.Batch {
	b := segment.Batch{TopicID: testTopic, Partition: p, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Compression: c}
	for range n {
		o := l.next[p]
		l.next[p]++
		b.Records = append(b.Records, segment.Record{Value: value(p, o, size), Timestamp: 1_700_000_000_000 + o})
	}
	return b
}

func (l *testLog) newKey() string {
	l.objs++
	return fmt.Sprintf("seg/%06d", l.objs)
}

// flush encodes batches as one writer object, stores it and commits one chunk per
// partition, as the catalog does for a flush in which every request passed.
func (l *testLog) flush(batches ...segment.Batch) []catalog.Chunk {
	l.t.Helper()
	obj, infos, err := segment.Encode(batches, segment.EncodeOptions{})
	if err != nil {
		l.t.Fatalf("encode: %v", err)
	}
	key := l.newKey()
	l.store.put(key, obj)
	var chunks []catalog.Chunk
	for i, bi := range infos {
		var ch *catalog.Chunk
		for j := range chunks {
			if chunks[j].Partition == bi.Partition {
				ch = &chunks[j]
			}
		}
		if ch == nil {
			chunks = append(chunks, catalog.Chunk{TopicID: testTopic, Partition: bi.Partition, SegmentKey: key,
				SegmentSize: int64(len(obj)), Pos: bi.Pos, BaseOffset: l.hw[bi.Partition], LastOffset: l.hw[bi.Partition] - 1})
			ch = &chunks[len(chunks)-1]
		}
		if bi.Pos != ch.Pos+ch.Len {
			l.t.Fatalf("encode: batch %d of partition %d not adjacent to the previous one", i, bi.Partition)
		}
		ch.Len += bi.Len
		ch.LastOffset += int64(bi.LastOffsetDelta) + 1
		ch.MaxTimestamp = max(ch.MaxTimestamp, bi.MaxTimestamp)
	}
	for _, ch := range chunks {
		l.hw[ch.Partition] = ch.LastOffset + 1
	}
	l.cat.add(chunks...)
	return chunks
}

// compacted commits one compactor object for partition p: the records at offsets
// (ascending, gaps allowed, from the high watermark on), per records a batch, with
// real offsets and a sparse index. The chunk row covers tail more offsets after the
// last record: records key compaction removed with their batch.
func (l *testLog) compacted(p int32, offsets []int64, per, size int, tail int64) catalog.Chunk {
	l.t.Helper()
	var batches []segment.Batch
	for i := 0; i < len(offsets); i += per {
		part := offsets[i:min(i+per, len(offsets))]
		b := segment.Batch{TopicID: testTopic, Partition: p, BaseOffset: part[0], ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		for _, o := range part {
			b.Records = append(b.Records, segment.Record{Value: value(p, o, size), Timestamp: 1_700_000_000_000 + o, OffsetDelta: int32(o - part[0])})
		}
		batches = append(batches, b)
	}
	obj, infos, err := segment.Encode(batches, segment.EncodeOptions{IndexInterval: 4096})
	if err != nil {
		l.t.Fatalf("encode: %v", err)
	}
	key := l.newKey()
	l.store.put(key, obj)
	last := infos[len(infos)-1]
	ch := catalog.Chunk{TopicID: testTopic, Partition: p, SegmentKey: key, SegmentSize: int64(len(obj)),
		BaseOffset: l.hw[p], LastOffset: last.BaseOffset + int64(last.LastOffsetDelta) + tail,
		Pos: infos[0].Pos, Len: last.Pos + last.Len - infos[0].Pos, RealOffsets: true}
	l.hw[p] = ch.LastOffset + 1
	l.next[p] = l.hw[p]
	l.cat.add(ch)
	return ch
}

// span is offsets from..to inclusive.
func span(from, to int64) []int64 {
	var s []int64
	for o := from; o <= to; o++ {
		s = append(s, o)
	}
	return s
}

// checkRecords checks that recs are exactly the records at offsets of partition p.
func checkRecords(t *testing.T, p int32, recs []segment.DecodedRecord, offsets []int64) {
	t.Helper()
	got := make([]int64, len(recs))
	for i, r := range recs {
		got[i] = r.Offset
	}
	if fmt.Sprint(got) != fmt.Sprint(offsets) {
		t.Fatalf("offsets %v, want %v", got, offsets)
	}
	for _, r := range recs {
		if want := label(p, r.Offset); !bytes.HasPrefix(r.Value, []byte(want)) {
			t.Fatalf("record at offset %d carries %.20q, want the record labelled %q", r.Offset, r.Value, want)
		}
		if r.Timestamp != 1_700_000_000_000+r.Offset {
			t.Fatalf("record at offset %d: timestamp %d", r.Offset, r.Timestamp)
		}
	}
}
