package segment

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/crc32c"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec genSpec
	}{
		{"1 partition 1 record", genSpec{partitions: 1, records: 1}},
		{"1 partition 100000 records", genSpec{partitions: 1, records: 100_000, perBatch: 20_000, valueSize: 40}},
		{"1000 partitions 1000 records", genSpec{partitions: 1000, records: 1000, perBatch: 1}},
		{"1000 partitions 100000 records", genSpec{partitions: 1000, records: 100_000, perBatch: 150, valueSize: 20}},
		{"16 partitions 1KiB values", genSpec{partitions: 16, records: 8000, perBatch: 500, valueSize: 1024}},
		{"many small batches per partition", genSpec{partitions: 3, records: 3000, perBatch: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			batches := genBatches(rng, tc.spec)
			obj, infos, err := Encode(batches, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			f := checkObject(t, batches, obj, infos, EncodeOptions{})
			if len(f.Index) != 0 {
				t.Fatalf("writer object has %d index entries", len(f.Index))
			}
		})
	}
	for _, c := range codecs {
		t.Run("every codec/"+codecName(c), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(c)))
			batches := genBatches(rng, genSpec{partitions: 20, records: 2000, perBatch: 200, codecs: []Compression{c}})
			obj, infos, err := Encode(batches, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkObject(t, batches, obj, infos, EncodeOptions{})
		})
	}
}

// TestGolden checks one batch byte for byte against Kafka's v2 layout written out by
// hand, and the CRC table against CRC-32C's published check value.
func TestGolden(t *testing.T) {
	if got := crc32c.Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %#x, want 0xe3069283", got)
	}
	raw := encodeOne(t, Batch{
		TopicID: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		Records: []Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000, Headers: []Header{{Key: "h", Value: nil}}}},
	})
	want, _ := hex.DecodeString("" +
		"0000000000000000" + // base offset
		"0000003d" + // length: 61-12 header bytes + 12 record bytes
		"ffffffff" + // partition leader epoch
		"02" + // magic
		"00000000" + // CRC, checked below
		"0000" + // attributes
		"00000000" + // last offset delta
		"00000000000003e8" + // first timestamp 1000
		"00000000000003e8" + // max timestamp
		"ffffffffffffffff" + // producer id
		"ffff" + // producer epoch
		"ffffffff" + // base sequence
		"00000001" + // records
		"16" + // record length 11 (zigzag)
		"00" + "00" + "00" + // attributes, timestamp delta, offset delta
		"02" + "6b" + "02" + "76" + // key "k", value "v"
		"02" + "02" + "68" + "01") // 1 header: key "h", null value
	binary.BigEndian.PutUint32(want[17:], crc32.Checksum(want[21:], crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(raw, want) {
		t.Fatalf("batch\n got %x\nwant %x", raw, want)
	}
}

func TestEncodeInvalid(t *testing.T) {
	rec := []Record{{Value: []byte("x")}}
	for _, tc := range []struct {
		name    string
		batches []Batch
		opts    EncodeOptions
	}{
		{"no batches", nil, EncodeOptions{}},
		{"empty batch", []Batch{{Records: nil}}, EncodeOptions{}},
		{"negative partition", []Batch{{Partition: -1, Records: rec}}, EncodeOptions{}},
		{"negative base offset", []Batch{{BaseOffset: -5, Records: rec}}, EncodeOptions{}},
		{"unknown compression", []Batch{{Compression: 5, Records: rec}}, EncodeOptions{}},
		{"negative compression", []Batch{{Compression: -1, Records: rec}}, EncodeOptions{}},
		{"negative index interval", []Batch{{Records: rec}}, EncodeOptions{IndexInterval: -1}},
		{"deltas not increasing", []Batch{{Records: []Record{{OffsetDelta: 0}, {OffsetDelta: 2}, {OffsetDelta: 2}}}}, EncodeOptions{}},
		{"deltas decreasing", []Batch{{Records: []Record{{OffsetDelta: 5}, {OffsetDelta: 3}}}}, EncodeOptions{}},
		{"negative delta", []Batch{{Records: []Record{{OffsetDelta: -1}, {OffsetDelta: 3}}}}, EncodeOptions{}},
		{"last offset overflows", []Batch{{BaseOffset: math.MaxInt64, Records: []Record{{}, {}}}}, EncodeOptions{}},
		{"records too large", []Batch{{Records: []Record{{Value: make([]byte, MaxBatchBytes)}}}}, EncodeOptions{}},
		{"overlapping offsets with an index", []Batch{
			{BaseOffset: 10, Records: []Record{{}, {}}},
			{BaseOffset: 11, Records: []Record{{}}},
		}, EncodeOptions{IndexInterval: 1}},
		{"one bad batch among good ones", []Batch{{Records: rec}, {Partition: 3}}, EncodeOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, infos, err := Encode(tc.batches, tc.opts)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if obj != nil || infos != nil {
				t.Fatal("output despite the error")
			}
		})
	}
}

// TestCorruptAnyByte flips every byte of a small object, one at a time: Verify must
// refuse each, and so must the decoder of the part that was hit.
func TestCorruptAnyByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	batches := genBatches(rng, genSpec{partitions: 3, records: 15, perBatch: 3})
	for i := range batches {
		batches[i].Compression = codecs[i%len(codecs)]
	}
	obj, infos, err := Encode(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	footerStart := int(infos[0].Pos)
	for _, in := range infos {
		footerStart = max(footerStart, int(in.Pos+in.Len))
	}
	for i := range obj {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(obj)
			bad[i] ^= mask
			if _, err := Verify(bad); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d ^ %#x: Verify err = %v", i, mask, err)
			}
			if i < footerStart {
				for _, in := range infos {
					if int(in.Pos) <= i && i < int(in.Pos+in.Len) && i-int(in.Pos) >= 8 {
						raw := bad[in.Pos : in.Pos+in.Len]
						if _, err := DecodeBatch(raw); !errors.Is(err, ErrCorrupt) {
							t.Fatalf("byte %d ^ %#x: DecodeBatch err = %v", i, mask, err)
						}
						if _, err := SplitBatches(raw); !errors.Is(err, ErrCorrupt) {
							t.Fatalf("byte %d ^ %#x: SplitBatches err = %v", i, mask, err)
						}
					}
				}
			} else if _, err := ReadFooter(bad); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d ^ %#x: ReadFooter err = %v", i, mask, err)
			}
		}
	}
}

func TestTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	batches := genBatches(rng, genSpec{partitions: 2, records: 10, perBatch: 5})
	obj, infos, err := Encode(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(obj) {
		if _, err := ReadFooter(obj[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadFooter of %d of %d bytes: %v", n, len(obj), err)
		}
		if _, err := ReadFooter(obj[n+1:]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadFooter without the first %d bytes: %v", n+1, err)
		}
	}
	raw := obj[infos[0].Pos : infos[0].Pos+infos[0].Len]
	data := append(bytes.Clone(raw), raw...)
	for n := range len(data) {
		if n == len(raw) {
			continue // one whole batch
		}
		if _, err := SplitBatches(data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("SplitBatches of %d of %d bytes: %v", n, len(data), err)
		}
		if _, err := DecodeBatches(data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeBatches of %d of %d bytes: %v", n, len(data), err)
		}
	}
	for n := range len(raw) {
		if _, err := DecodeBatch(raw[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeBatch of %d of %d bytes: %v", n, len(raw), err)
		}
	}
	ds, err := DecodeBatches(data)
	if err != nil || len(ds) != 2 {
		t.Fatalf("DecodeBatches of two batches: %d, %v", len(ds), err)
	}
}

func TestSplitAndRewrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	batches := genBatches(rng, genSpec{partitions: 1, records: 50, perBatch: 10})
	obj, infos, err := Encode(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := infos[0]
	for _, in := range infos {
		if in.Pos > last.Pos {
			last = in
		}
	}
	chunk := bytes.Clone(obj[:last.Pos+last.Len])
	raws, err := SplitBatches(chunk)
	if err != nil {
		t.Fatal(err)
	}
	// The reader's offset rewrite: consecutive base offsets from the chunk's base.
	next := int64(1000)
	for i, raw := range raws {
		if cap(raw) != len(raw) {
			t.Fatalf("batch %d: capacity %d beyond its length %d", i, cap(raw), len(raw))
		}
		h, err := ParseBatchHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != 0 || h.Length != int32(len(raw)-12) {
			t.Fatalf("batch %d header %+v", i, h)
		}
		SetBaseOffset(raw, next)
		next += int64(h.LastOffsetDelta) + 1
	}
	ds, err := DecodeBatches(chunk)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(1000)
	for _, d := range ds {
		for _, r := range d.Records {
			if r.Offset != off {
				t.Fatalf("offset %d, want %d", r.Offset, off)
			}
			off++
		}
	}
	if off != 1050 {
		t.Fatalf("decoded up to offset %d, want 1050", off)
	}
	if _, err := SplitBatches(nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("SplitBatches(nil) = %v", err)
	}
}

// TestCompacted encodes what the compactor writes: real offsets, gaps left by key
// compaction, and a sparse index.
func TestCompacted(t *testing.T) {
	var batches []Batch
	off := int64(5000)
	for i := range 200 {
		b := Batch{TopicID: 9, Partition: 2, BaseOffset: off, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			Compression: codecs[i%len(codecs)]}
		delta := int32(i % 3) // some batches start above their base offset
		for j := range 1 + i%7 {
			b.Records = append(b.Records, Record{Key: []byte{byte(j)}, Value: make([]byte, 100), Timestamp: int64(i*1000 + j), OffsetDelta: delta})
			delta += 1 + int32(j%4) // gaps
		}
		if len(b.Records) == 1 && b.Records[0].OffsetDelta == 0 {
			b.Records[0].OffsetDelta = 0 // a lone record at its base offset
		}
		batches = append(batches, b)
		off += int64(delta) + int64(i%5) // gaps between batches too
	}
	const interval = 1000
	obj, infos, err := Encode(batches, EncodeOptions{IndexInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	f := checkObject(t, batches, obj, infos, EncodeOptions{IndexInterval: interval})
	if len(f.Index) < 5 || f.Index[0] != (IndexEntry{Offset: 5000, Pos: 0}) {
		t.Fatalf("index %v", f.Index)
	}
	for i := 1; i < len(f.Index); i++ {
		if f.Index[i].Pos-f.Index[i-1].Pos < interval || f.Index[i].Offset <= f.Index[i-1].Offset {
			t.Fatalf("index entries %d and %d: %v %v", i-1, i, f.Index[i-1], f.Index[i])
		}
	}
	// An entry at least every interval bytes, give or take one batch.
	var maxLen int64
	for _, in := range infos {
		maxLen = max(maxLen, in.Len)
	}
	for i := 1; i < len(f.Index); i++ {
		if f.Index[i].Pos-f.Index[i-1].Pos >= interval+maxLen {
			t.Fatalf("index gap %d", f.Index[i].Pos-f.Index[i-1].Pos)
		}
	}
	// Every entry points at the batch holding its offset.
	for _, e := range f.Index {
		i, ok := f.Find(9, 2, e.Offset)
		if !ok || f.Batches[i].Pos != e.Pos {
			t.Fatalf("entry %v: Find = %d %v", e, i, ok)
		}
	}
	// Find by every offset in range.
	for _, b := range batches {
		for _, r := range want(&b) {
			i, ok := f.Find(9, 2, r.Offset)
			if !ok || f.Batches[i].BaseOffset != b.BaseOffset {
				t.Fatalf("Find(%d) = %d %v", r.Offset, i, ok)
			}
		}
	}
	if _, ok := f.Find(9, 2, off+100); ok {
		t.Fatal("Find beyond the last offset succeeded")
	}
	if _, ok := f.Find(9, 3, 5000); ok {
		t.Fatal("Find in another partition succeeded")
	}
	if i, ok := f.Find(9, 2, 0); !ok || i != 0 {
		t.Fatalf("Find below the first offset = %d %v", i, ok)
	}
}

func TestIndexMultiplePartitions(t *testing.T) {
	var batches []Batch
	for p := range 4 {
		for i := range 10 {
			batches = append(batches, Batch{TopicID: 1, Partition: int32(3 - p), BaseOffset: int64(i * 10),
				Records: []Record{{Value: make([]byte, 50), OffsetDelta: 0}, {Value: nil, OffsetDelta: 9}}})
		}
	}
	obj, infos, err := Encode(batches, EncodeOptions{IndexInterval: 300})
	if err != nil {
		t.Fatal(err)
	}
	f := checkObject(t, batches, obj, infos, EncodeOptions{IndexInterval: 300})
	runs := 0
	for _, e := range f.Index {
		if e.Offset == 0 {
			runs++
		}
	}
	if runs != 4 {
		t.Fatalf("index %v: want an entry at offset 0 of each of 4 partitions", f.Index)
	}
	for p := range int32(4) {
		i, ok := f.Find(1, p, 55)
		if !ok || f.Batches[i].Partition != p || f.Batches[i].BaseOffset != 50 {
			t.Fatalf("Find(p%d, 55) = %d %v", p, i, ok)
		}
	}
}

// TestKmsgReads proves a Kafka client reads what Encode writes: franz-go's kmsg parses
// the batch and each record, the CRC is checked with the standard library, and the
// gzip batch is inflated with the standard library's gzip.
func TestKmsgReads(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionGzip} {
		t.Run(codecName(c), func(t *testing.T) {
			b := Batch{TopicID: 1, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 40, Compression: c, Records: []Record{
				{Key: []byte("a"), Value: []byte(`{"x":1}`), Timestamp: 1_000, Headers: []Header{{Key: "trace", Value: []byte("t1")}, {Key: "null"}}},
				{Key: nil, Value: nil, Timestamp: 900},
				{Key: []byte{}, Value: []byte{}, Timestamp: 1_500},
			}}
			raw := encodeOne(t, b)
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			if rb.Magic != 2 || int(rb.Length) != len(raw)-12 || rb.NumRecords != 3 || rb.LastOffsetDelta != 2 ||
				rb.FirstTimestamp != 1_000 || rb.MaxTimestamp != 1_500 || rb.ProducerID != 77 || rb.ProducerEpoch != 3 ||
				rb.FirstSequence != 40 || rb.Attributes != int16(c) || rb.PartitionLeaderEpoch != -1 {
				t.Fatalf("kmsg batch %+v", rb)
			}
			if uint32(rb.CRC) != crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)) {
				t.Fatal("CRC mismatch")
			}
			records := rb.Records
			if c == CompressionGzip {
				zr, err := stdgzip.NewReader(bytes.NewReader(records))
				if err != nil {
					t.Fatal(err)
				}
				if records, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			var got []kmsg.Record
			for len(records) > 0 {
				l, n := binary.Varint(records)
				if n <= 0 || int(l)+n > len(records) {
					t.Fatalf("bad record length %d", l)
				}
				var r kmsg.Record
				if err := r.ReadFrom(records[:n+int(l)]); err != nil {
					t.Fatal(err)
				}
				got = append(got, r)
				records = records[n+int(l):]
			}
			if len(got) != 3 {
				t.Fatalf("%d records", len(got))
			}
			for i, r := range got {
				w := b.Records[i]
				if int64(rb.FirstTimestamp)+r.TimestampDelta64 != w.Timestamp || r.OffsetDelta != int32(i) ||
					!sameBytes(r.Key, w.Key) || !sameBytes(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: %+v, want %+v", i, r, w)
				}
				for j, h := range r.Headers {
					if h.Key != w.Headers[j].Key || !sameBytes(h.Value, w.Headers[j].Value) {
						t.Fatalf("record %d header %d: %+v", i, j, h)
					}
				}
			}
		})
	}
}

// recordsSection returns the uncompressed records section Encode writes for recs.
func recordsSection(t testing.TB, recs []Record) []byte {
	return encodeOne(t, Batch{Records: recs})[batchHeaderSize:]
}

// TestDecodeForeignCompression decodes batches compressed the ways other Kafka clients
// do: snappy in xerial framing (Java), snappy as one plain block (franz-go,
// librdkafka), LZ4 frames with other block sizes and checksums, zstd from a
// differently configured encoder.
func TestDecodeForeignCompression(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	var recs []Record
	for i := range 300 {
		recs = append(recs, Record{Key: []byte{byte(i)}, Value: genValue(rng, 500), Timestamp: 100})
	}
	section := recordsSection(t, recs)
	check := func(t *testing.T, c Compression, compressed []byte) {
		t.Helper()
		d, err := DecodeBatch(rawBatch(uint16(c), 300, 299, 100, 100, compressed))
		if err != nil {
			t.Fatal(err)
		}
		if msg := diffRecords(d.Records, want(&Batch{Records: recs})); msg != "" {
			t.Fatal(msg)
		}
	}
	t.Run("xerial snappy", func(t *testing.T) {
		x := append([]byte(nil), xerialMagic...)
		x = binary.BigEndian.AppendUint32(x, 1)
		x = binary.BigEndian.AppendUint32(x, 1)
		for rest := section; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			blk := s2.EncodeSnappy(nil, rest[:n])
			x = binary.BigEndian.AppendUint32(x, uint32(len(blk)))
			x = append(x, blk...)
			rest = rest[n:]
		}
		check(t, CompressionSnappy, x)
	})
	t.Run("plain snappy", func(t *testing.T) { check(t, CompressionSnappy, s2.EncodeSnappy(nil, section)) })
	t.Run("lz4 4MiB blocks with block checksums", func(t *testing.T) {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.BlockChecksumOption(true)); err != nil {
			t.Fatal(err)
		}
		w.Write(section)
		w.Close()
		check(t, CompressionLZ4, buf.Bytes())
	})
	t.Run("zstd best with small window", func(t *testing.T) {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(64<<10))
		check(t, CompressionZstd, e.EncodeAll(section, nil))
	})
	t.Run("zstd streamed without a content size, compressing far better than 4x", func(t *testing.T) {
		// As librdkafka's streaming compressor writes: the frame declares no size, so
		// the decoder's room must grow past its first guess.
		var reps []Record
		for i := range 300 {
			reps = append(reps, Record{Key: []byte{byte(i)}, Value: bytes.Repeat([]byte("x"), 2000), Timestamp: 100})
		}
		var buf bytes.Buffer
		e, _ := zstd.NewWriter(&buf)
		e.Write(recordsSection(t, reps))
		e.Close()
		var h zstd.Header
		if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
			t.Fatalf("the streamed frame declares its size (%v): not the case under test", err)
		}
		d, err := DecodeBatch(rawBatch(uint16(CompressionZstd), 300, 299, 100, 100, buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if msg := diffRecords(d.Records, want(&Batch{Records: reps})); msg != "" {
			t.Fatal(msg)
		}
	})
	t.Run("gzip stdlib", func(t *testing.T) {
		var buf bytes.Buffer
		w := stdgzip.NewWriter(&buf)
		w.Write(section)
		w.Close()
		check(t, CompressionGzip, buf.Bytes())
	})
}

// TestDecompressionBomb: a small batch that inflates past the limit is refused, for
// every codec. The bombs are many copies of one compressed MiB of zeros (gzip members,
// LZ4 and zstd frames, xerial chunks), and one snappy block claiming the whole size.
// The limit is lowered to 4 MiB so the test inflates little; the code paths are the
// ones MaxBatchBytes takes.
func TestDecompressionBomb(t *testing.T) {
	// A plain snappy block states its decoded size first: refused before allocating,
	// at the real limit.
	huge := binary.AppendUvarint(nil, MaxBatchBytes+1)
	if _, err := DecodeBatch(rawBatch(uint16(CompressionSnappy), 1, 0, 0, 0, append(huge, 0))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("snappy block: err = %v", err)
	}

	defer func(l int) { decompressLimit = l }(decompressLimit)
	decompressLimit = 4 << 20
	mib := make([]byte, 1<<20)
	for _, c := range codecs[1:] {
		t.Run(codecName(c), func(t *testing.T) {
			var unit, prefix []byte
			if c == CompressionSnappy {
				blk := s2.EncodeSnappy(nil, mib)
				unit = binary.BigEndian.AppendUint32(nil, uint32(len(blk)))
				unit = append(unit, blk...)
				prefix = append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
			} else {
				var err error
				if unit, err = compress(nil, mib, c); err != nil {
					t.Fatal(err)
				}
			}
			bomb := func(copies int) []byte {
				b := bytes.Clone(prefix)
				for range copies {
					b = append(b, unit...)
				}
				return b
			}
			// Exactly the limit inflates: the bomb is refused for its size, not
			// because concatenation is unsupported.
			out, err := decompress(bomb(4), c, 0)
			if err != nil || len(out) != 4<<20 {
				t.Fatalf("four copies: %d bytes, %v", len(out), err)
			}
			b := bomb(5)
			if len(b) > 5<<20/16 { // inflates at least 16-fold
				t.Fatalf("bomb of %d bytes is not small", len(b))
			}
			if _, err := DecodeBatch(rawBatch(uint16(c), 1, 0, 0, 0, b)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v", err)
			}
			if c == CompressionSnappy {
				if _, err := DecodeBatch(rawBatch(uint16(c), 1, 0, 0, 0, s2.EncodeSnappy(nil, make([]byte, 5<<20)))); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("one block: err = %v", err)
				}
			}
		})
	}
}

// TestDecodeTransactional: a transactional producer's batch (attribute bit 4) is
// accepted and says so; encoded with Transactional, a batch carries the bit.
func TestDecodeTransactional(t *testing.T) {
	good := recordsSection(t, []Record{{Value: []byte("a")}, {Value: []byte("b")}})
	d, err := DecodeBatch(rawBatch(0x10, 2, 1, 0, 0, good))
	if err != nil || !d.Transactional || len(d.Records) != 2 {
		t.Fatalf("decode: %+v, %v", d, err)
	}
	obj, infos, err := Encode([]Batch{{TopicID: 1, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0, Transactional: true,
		Records: []Record{{Value: []byte("x")}}}}, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw := obj[infos[0].Pos : infos[0].Pos+infos[0].Len]
	h, err := ParseBatchHeader(raw)
	if err != nil || !h.Transactional {
		t.Fatalf("encoded header %+v, %v", h, err)
	}
	// Stored as it came: a Raw batch must say what its header says.
	if _, _, err := Encode([]Batch{{TopicID: 1, ProducerID: 5, ProducerEpoch: 1, Raw: raw}}, EncodeOptions{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("raw transactional batch given as not transactional: %v", err)
	}
	if _, _, err := Encode([]Batch{{TopicID: 1, ProducerID: 5, ProducerEpoch: 1, Transactional: true, Raw: raw}}, EncodeOptions{}); err != nil {
		t.Fatalf("raw transactional batch: %v", err)
	}
}

// TestDecodeRefuses checks batches with valid CRCs that Strata must still refuse.
func TestDecodeRefuses(t *testing.T) {
	good := recordsSection(t, []Record{{Value: []byte("a")}, {Value: []byte("b")}})
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"control", rawBatch(0x20, 2, 1, 0, 0, good)},
		{"transactional control", rawBatch(0x30, 2, 1, 0, 0, good)},
		{"delete horizon", rawBatch(0x40, 2, 1, 0, 0, good)},
		{"compression 5", rawBatch(5, 2, 1, 0, 0, good)},
		{"no records", rawBatch(0, 0, 0, 0, 0, nil)},
		{"count too high", rawBatch(0, 3, 2, 0, 0, good)},
		{"count too low", rawBatch(0, 1, 1, 0, 0, good)},
		{"last delta too high", rawBatch(0, 2, 5, 0, 0, good)},
		{"last delta too low", rawBatch(0, 2, 0, 0, 0, good)},
		{"trailing bytes", rawBatch(0, 2, 1, 0, 0, append(bytes.Clone(good), 0))},
		{"garbage compressed", rawBatch(4, 2, 1, 0, 0, []byte("not zstd at all"))},
		{"null header key", rawBatch(0, 1, 0, 0, 0, []byte{0x10, 0, 0, 0, 1, 1, 2, 1, 1})},
		{"overlong varint", rawBatch(0, 1, 0, 0, 0, []byte{0x0e, 0, 0x80, 0, 0, 1, 1, 0})},
		{"non-zero record attributes", rawBatch(0, 1, 0, 0, 0, []byte{0x0c, 1, 0, 0, 1, 1, 0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeBatch(tc.raw); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// The same framing with a null key and value, one record, decodes: the table
	// above fails for the reason it names.
	d, err := DecodeBatch(rawBatch(0, 1, 0, 7, 9, []byte{0x0c, 0, 0, 0, 1, 1, 0}))
	if err != nil || len(d.Records) != 1 || d.Records[0].Key != nil || d.Records[0].Value != nil || d.Records[0].Timestamp != 7 {
		t.Fatalf("minimal record: %+v, %v", d, err)
	}
	d, err = DecodeBatch(rawBatch(attrTimestampType, 1, 0, 7, 9, []byte{0x0c, 0, 0, 0, 1, 1, 0}))
	if err != nil || d.Records[0].Timestamp != 9 || !d.LogAppendTime {
		t.Fatalf("LogAppendTime record: %+v, %v", d, err)
	}
}

func TestFooterRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	batches := genBatches(rng, genSpec{partitions: 3, records: 9, perBatch: 3})
	obj, _, err := Encode(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFooter(obj)
	if err != nil {
		t.Fatal(err)
	}
	// Re-encode edited footers (with valid CRCs) and check the validation catches each.
	for _, tc := range []struct {
		name string
		edit func(f *Footer)
	}{
		{"version", func(f *Footer) { f.Version = 2 }},
		{"no batches", func(f *Footer) { f.Batches = nil }},
		{"unsorted", func(f *Footer) { f.Batches[0].TopicID = 1 << 40 }},
		{"no records", func(f *Footer) { f.Batches[0].Records = 0 }},
		{"records beyond deltas", func(f *Footer) { f.Batches[0].LastOffsetDelta = f.Batches[0].Records - 2 }},
		{"short batch", func(f *Footer) { f.Batches[0].Len = 60 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := f
			g.Batches = append([]BatchInfo(nil), f.Batches...)
			tc.edit(&g)
			fb := appendFooter(nil, &g)
			if _, err := DecodeFooter(fb); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeFooter err = %v", err)
			}
		})
	}
	// A footer whose batches do not end where the footer starts.
	g := f
	g.Batches = append([]BatchInfo(nil), f.Batches...)
	g.Batches[len(g.Batches)-1].Len--
	data := obj[:len(obj)-TrailerSize-int(mustTrailer(t, obj))]
	fb := appendFooter(nil, &g)
	bad := appendTrailer(append(bytes.Clone(data), fb...), len(fb), binary.BigEndian.Uint32(fb[len(fb)-4:]))
	if _, err := ReadFooter(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadFooter with a short last batch: %v", err)
	}
	// An index entry past the last batch.
	g = f
	g.Index = []IndexEntry{{Offset: 0, Pos: 0}, {Offset: 0, Pos: 0}}
	if _, err := DecodeFooter(appendFooter(nil, &g)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("duplicate index entry: %v", err)
	}
	if _, err := ParseTrailer(obj[len(obj)-TrailerSize+1:]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short trailer: %v", err)
	}
	n, err := ParseTrailer(obj[len(obj)-100:])
	if err != nil || n != mustTrailer(t, obj) {
		t.Fatalf("ParseTrailer of a longer tail = %d, %v", n, err)
	}
	fd, err := DecodeFooter(obj[len(obj)-TrailerSize-int(n) : len(obj)-TrailerSize])
	if err != nil || len(fd.Batches) != len(f.Batches) {
		t.Fatalf("DecodeFooter by range: %v", err)
	}
}

func mustTrailer(t *testing.T, obj []byte) int64 {
	t.Helper()
	n, err := ParseTrailer(obj[len(obj)-TrailerSize:])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEncodeConcurrent exercises the pooled compressors from several goroutines.
func TestEncodeConcurrent(t *testing.T) {
	done := make(chan error)
	for g := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(8, uint64(g)))
			var err error
			for range 20 {
				batches := genBatches(rng, genSpec{partitions: 4, records: 200, perBatch: 50})
				obj, _, e := Encode(batches, EncodeOptions{})
				if e == nil {
					_, e = Verify(obj)
				}
				if e != nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
