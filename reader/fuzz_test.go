package reader

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/strata-io/strata/segment"
)

// fuzzLog is a partition layout with every kind of chunk: writer chunks (uncompressed
// and compressed, several batches, shared objects) and a compacted chunk with real
// offsets and holes.
func fuzzLog(t testing.TB) *testLog {
	l := newTestLog(t)
	l.flush(l.batch(0, 3, 20, segment.CompressionNone), l.batch(1, 2, 20, segment.CompressionGzip), l.batch(0, 2, 20, segment.CompressionZstd))
	l.compacted(0, []int64{5, 7, 8}, 2, 20, 1)
	l.flush(l.batch(0, 2, 20, segment.CompressionLZ4), l.batch(1, 3, 20, segment.CompressionSnappy))
	return l
}

func fetchAll(r *Reader) ([]segment.DecodedRecord, [][]byte, error) {
	var recs []segment.DecodedRecord
	var raws [][]byte
	for p := range int32(2) {
		f := Fetch{TopicID: testTopic, Partition: p}
		res, err := r.Fetch(context.Background(), f)
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, res.Records...)
		raw, err := r.FetchRaw(context.Background(), f)
		if err != nil {
			return nil, nil, err
		}
		raws = append(raws, raw.Batches...)
	}
	return recs, raws, nil
}

func sameRecords(a, b []segment.DecodedRecord) bool {
	return slices.EqualFunc(a, b, func(x, y segment.DecodedRecord) bool {
		return x.Offset == y.Offset && x.Timestamp == y.Timestamp && bytes.Equal(x.Key, y.Key) && bytes.Equal(x.Value, y.Value) &&
			slices.EqualFunc(x.Headers, y.Headers, func(h, g segment.Header) bool { return h.Key == g.Key && bytes.Equal(h.Value, g.Value) })
	})
}

// FuzzFetchCorruptObject flips bytes of stored objects: a fetch must then fail or
// return exactly what it returns from intact objects — never other records, offsets
// or batches, and never panic.
func FuzzFetchCorruptObject(f *testing.F) {
	l := fuzzLog(f)
	want, wantRaw, err := fetchAll(New(l.store, l.cat, Config{}, nil, nil))
	if err != nil || len(want) != 15 {
		f.Fatalf("intact: %d records, %v", len(want), err)
	}
	keys := make([]string, 0, len(l.store.objects))
	for k := range l.store.objects {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Each mutation is 5 bytes: object, position (uint16), xor mask, unused.
	for _, seed := range [][]byte{
		{0, 0, 3, 0xff, 0},  // a base offset (not under the CRC) of a writer batch
		{2, 0, 3, 0x01, 0},  // a base offset of a compacted batch
		{0, 0, 10, 0x01, 0}, // a length field
		{0, 0, 70, 0x80, 0}, // a record
		{1, 0, 40, 0x04, 0}, // a compacted batch's header
		{2, 0, 120, 0x10, 0, 1, 0, 150, 0x01, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, muts []byte) {
		store := newFakeStore()
		for k, obj := range l.store.objects {
			store.put(k, bytes.Clone(obj))
		}
		changed := false
		for ; len(muts) >= 5; muts = muts[5:] {
			obj := store.objects[keys[int(muts[0])%len(keys)]]
			pos := int(binary.BigEndian.Uint16(muts[1:])) % len(obj)
			changed = changed || muts[3] != 0
			obj[pos] ^= muts[3]
		}
		got, gotRaw, err := fetchAll(New(store, l.cat, Config{}, nil, nil))
		if err != nil {
			return
		}
		if !sameRecords(got, want) {
			t.Fatalf("corrupt objects served other records than intact ones (changed=%v)", changed)
		}
		if !slices.EqualFunc(gotRaw, wantRaw, bytes.Equal) {
			t.Fatalf("corrupt objects served other raw batches than intact ones (changed=%v)", changed)
		}
	})
}
