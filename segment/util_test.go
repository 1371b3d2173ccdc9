package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"
)

var codecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

func codecName(c Compression) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}

// genSpec describes a flush to generate.
type genSpec struct {
	partitions int           // distinct (topic, partition) pairs
	records    int           // records in total
	perBatch   int           // records per batch at most (0: 1..records spread)
	codecs     []Compression // picked per batch
	valueSize  int           // typical value size
}

// genBatches makes a flush shaped like spec, shuffled across partitions, with null and
// empty keys, tombstones, empty values, headers (some with null values), timestamps
// that go up and down, idempotent and plain producers, and LogAppendTime batches.
func genBatches(rng *rand.Rand, s genSpec) []Batch {
	if s.perBatch == 0 {
		s.perBatch = max(1, s.records/max(1, s.partitions))
	}
	if len(s.codecs) == 0 {
		s.codecs = codecs
	}
	var out []Batch
	left := s.records
	for p := 0; left > 0; p = (p + 1) % s.partitions {
		n := min(left, 1+rng.IntN(s.perBatch))
		left -= n
		b := Batch{
			TopicID:       int64(1 + p%7),
			Partition:     int32(p / 7),
			ProducerID:    -1,
			ProducerEpoch: -1,
			BaseSequence:  -1,
			Compression:   s.codecs[rng.IntN(len(s.codecs))],
		}
		if rng.IntN(3) == 0 {
			b.ProducerID, b.ProducerEpoch, b.BaseSequence = rng.Int64N(1<<40), int16(rng.IntN(100)), rng.Int32N(1<<20)
		}
		ts := int64(1_700_000_000_000) + rng.Int64N(1e9)
		b.LogAppendTime = rng.IntN(5) == 0
		for range n {
			r := Record{Timestamp: ts + rng.Int64N(2000) - 1000}
			if b.LogAppendTime {
				r.Timestamp = ts
			}
			switch rng.IntN(4) {
			case 0: // null key
			case 1:
				r.Key = []byte{}
			default:
				r.Key = fmt.Appendf(nil, "key-%d", rng.IntN(1000))
			}
			switch rng.IntN(6) {
			case 0: // tombstone
			case 1:
				r.Value = []byte{}
			default:
				r.Value = genValue(rng, s.valueSize)
			}
			for h := range rng.IntN(3) {
				hd := Header{Key: fmt.Sprintf("h%d", h)}
				if rng.IntN(3) > 0 {
					hd.Value = fmt.Appendf(nil, "v%d", rng.IntN(100))
				}
				if rng.IntN(7) == 0 {
					hd.Key = ""
				}
				r.Headers = append(r.Headers, hd)
			}
			b.Records = append(b.Records, r)
		}
		out = append(out, b)
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

var words = []string{"alpha", "beta", "gamma", "delta", "order", "user", "click", "view", "eu-west", "price", "sku", "true", "false", "null"}

// genValue makes a JSON-looking value of about size bytes: compressible, like real data.
func genValue(rng *rand.Rand, size int) []byte {
	if size <= 0 {
		size = 1 + rng.IntN(64)
	}
	b := make([]byte, 0, size+32)
	b = fmt.Appendf(b, `{"id":%d,"user":"user-%d","event":"%s","data":"`, rng.IntN(1e6), rng.IntN(1e4), words[rng.IntN(len(words))])
	for len(b) < size-2 {
		b = append(b, words[rng.IntN(len(words))]...)
		b = append(b, ' ')
	}
	b = append(b, `"}`...)
	return b[:max(size, 0):max(size, 0)]
}

// want is what decoding batch b, stored with base offset base, must give.
func want(b *Batch) []DecodedRecord {
	assign := true
	for _, r := range b.Records {
		if r.OffsetDelta != 0 {
			assign = false
		}
	}
	maxTs := b.Records[0].Timestamp
	for _, r := range b.Records {
		maxTs = max(maxTs, r.Timestamp)
	}
	out := make([]DecodedRecord, len(b.Records))
	for i, r := range b.Records {
		od := int64(r.OffsetDelta)
		if assign {
			od = int64(i)
		}
		ts := r.Timestamp
		if b.LogAppendTime {
			ts = maxTs
		}
		out[i] = DecodedRecord{Offset: b.BaseOffset + od, Timestamp: ts, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	return out
}

// sameBytes is bytes.Equal that also tells null from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func diffRecords(got, want []DecodedRecord) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp {
			return fmt.Sprintf("record %d: offset %d ts %d, want %d %d", i, g.Offset, g.Timestamp, w.Offset, w.Timestamp)
		}
		if !sameBytes(g.Key, w.Key) || !sameBytes(g.Value, w.Value) {
			return fmt.Sprintf("record %d: key %q (nil %v) value %q (nil %v), want %q (nil %v) %q (nil %v)", i,
				g.Key, g.Key == nil, g.Value, g.Value == nil, w.Key, w.Key == nil, w.Value, w.Value == nil)
		}
		if len(g.Headers) != len(w.Headers) {
			return fmt.Sprintf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range g.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !sameBytes(g.Headers[j].Value, w.Headers[j].Value) {
				return fmt.Sprintf("record %d header %d: %q=%q, want %q=%q", i, j, g.Headers[j].Key, g.Headers[j].Value, w.Headers[j].Key, w.Headers[j].Value)
			}
		}
	}
	return ""
}

// checkObject proves obj and infos describe batches exactly: footer, layout, grouping,
// CRCs computed independently, and every batch decoding to its input.
func checkObject(t testing.TB, batches []Batch, obj []byte, infos []BatchInfo, opts EncodeOptions) Footer {
	t.Helper()
	if len(infos) != len(batches) {
		t.Fatalf("%d infos for %d batches", len(infos), len(batches))
	}
	if cap(obj) != len(obj) {
		t.Fatalf("object of %d bytes allocated with capacity %d", len(obj), cap(obj))
	}
	f, err := Verify(obj)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if f.Version != FormatVersion {
		t.Fatalf("footer version %d", f.Version)
	}
	// The footer lists exactly infos, in object order: by ascending partition, stable.
	order := make([]int, len(batches))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return comparePartition(&batches[a], &batches[b]) })
	if len(f.Batches) != len(infos) {
		t.Fatalf("footer has %d batches, want %d", len(f.Batches), len(infos))
	}
	var pos int64
	for k, i := range order {
		if f.Batches[k] != infos[i] {
			t.Fatalf("footer batch %d = %+v, want infos[%d] = %+v", k, f.Batches[k], i, infos[i])
		}
		if infos[i].Pos != pos {
			t.Fatalf("batch %d at %d, want %d (contiguous)", i, infos[i].Pos, pos)
		}
		pos += infos[i].Len
	}
	// Each partition's batches are one contiguous run that splits into its batches.
	for k := 0; k < len(order); {
		j := k
		for j < len(order) && comparePartition(&batches[order[j]], &batches[order[k]]) == 0 {
			j++
		}
		first, last := infos[order[k]], infos[order[j-1]]
		raws, err := SplitBatches(obj[first.Pos : last.Pos+last.Len])
		if err != nil {
			t.Fatalf("split partition run: %v", err)
		}
		if len(raws) != j-k {
			t.Fatalf("partition run splits into %d batches, want %d", len(raws), j-k)
		}
		k = j
	}
	for i := range batches {
		b, in := &batches[i], infos[i]
		raw := obj[in.Pos : in.Pos+in.Len]
		if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); crc != in.CRC || crc != binary.BigEndian.Uint32(raw[17:]) {
			t.Fatalf("batch %d: CRC %#x, info %#x", i, crc, in.CRC)
		}
		if in.TopicID != b.TopicID || in.Partition != b.Partition || in.Records != int32(len(b.Records)) ||
			in.BaseOffset != b.BaseOffset || in.ProducerID != b.ProducerID || in.ProducerEpoch != b.ProducerEpoch ||
			in.BaseSequence != b.BaseSequence || in.FirstTimestamp != b.Records[0].Timestamp {
			t.Fatalf("batch %d: info %+v does not match the batch", i, in)
		}
		d, err := DecodeBatch(raw)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if d.Compression != b.Compression || d.LogAppendTime != b.LogAppendTime || d.BaseOffset != b.BaseOffset ||
			d.ProducerID != b.ProducerID || d.ProducerEpoch != b.ProducerEpoch || d.BaseSequence != b.BaseSequence ||
			d.LastOffsetDelta != in.LastOffsetDelta || d.MaxTimestamp != in.MaxTimestamp || d.FirstTimestamp != in.FirstTimestamp {
			t.Fatalf("batch %d: decoded header %+v, info %+v", i, d, in)
		}
		if msg := diffRecords(d.Records, want(b)); msg != "" {
			t.Fatalf("batch %d (%s): %s", i, codecName(b.Compression), msg)
		}
	}
	return f
}

// rawBatch builds a batch around a records section with a valid CRC, for tests that
// need batches Encode would never write.
func rawBatch(attrs uint16, numRecords, lastDelta int32, firstTs, maxTs int64, section []byte) []byte {
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(section))
	be := binary.BigEndian
	be.PutUint32(b[offLength:], uint32(batchHeaderSize-12+len(section)))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	be.PutUint64(b[offFirstTimestamp:], uint64(firstTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], ^uint64(0))
	be.PutUint16(b[offProducerEpoch:], 0xffff)
	be.PutUint32(b[offBaseSequence:], 0xffffffff)
	be.PutUint32(b[offNumRecords:], uint32(numRecords))
	b = append(b, section...)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// encodeOne encodes a single batch and returns its raw bytes.
func encodeOne(t testing.TB, b Batch) []byte {
	t.Helper()
	obj, infos, err := Encode([]Batch{b}, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj[infos[0].Pos : infos[0].Pos+infos[0].Len]
}
