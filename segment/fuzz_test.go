package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/crc32c"
)

// Every decoder is fuzzed. Each target checks, beyond "no panic", that an accepted
// input is right: it re-encodes to the same bytes, or its CRCs hold and re-encoding
// what was decoded decodes to the same records. A refused input must be refused with
// ErrCorrupt (ErrInvalid for keys).

// seedObjects are real encoded objects: every codec, writer and compactor layouts.
func seedObjects(tb testing.TB) [][]byte {
	var objs [][]byte
	rng := rand.New(rand.NewPCG(9, 9))
	for _, c := range codecs {
		batches := genBatches(rng, genSpec{partitions: 2, records: 6, perBatch: 3, codecs: []Compression{c}})
		obj, _, err := Encode(batches, EncodeOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		objs = append(objs, obj)
	}
	compacted := []Batch{
		{TopicID: 3, Partition: 1, BaseOffset: 100, Records: []Record{{Key: []byte("a"), OffsetDelta: 0}, {Key: []byte("b"), OffsetDelta: 4}}},
		{TopicID: 3, Partition: 1, BaseOffset: 110, Compression: CompressionLZ4, Records: []Record{{Key: []byte("c"), OffsetDelta: 2, Value: []byte("x")}}},
		{TopicID: 3, Partition: 2, BaseOffset: 7, Records: []Record{{Key: nil, Value: nil}}},
	}
	obj, _, err := Encode(compacted, EncodeOptions{IndexInterval: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return append(objs, obj)
}

// footerOf returns the footer bytes of obj (between the batches and the trailer).
func footerOf(tb testing.TB, obj []byte) []byte {
	n, err := ParseTrailer(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return obj[len(obj)-TrailerSize-int(n) : len(obj)-TrailerSize]
}

// batchesOf returns the raw batches of obj.
func batchesOf(tb testing.TB, obj []byte) [][]byte {
	f, err := ReadFooter(obj)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, b := range f.Batches {
		out = append(out, obj[b.Pos:b.Pos+b.Len])
	}
	return out
}

func mustCorrupt(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v does not wrap ErrCorrupt", err)
	}
}

func FuzzReadFooter(f *testing.F) {
	for _, obj := range seedObjects(f) {
		f.Add(obj)
		f.Add(obj[:len(obj)-1])
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		ft, err := ReadFooter(obj)
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		// Accepted: the footer and trailer re-encode to the object's last bytes, and
		// the batches tile the bytes before the footer.
		fb := appendFooter(nil, &ft)
		tail := appendTrailer(bytes.Clone(fb), len(fb), binary.BigEndian.Uint32(fb[len(fb)-4:]))
		if !bytes.HasSuffix(obj, tail) {
			t.Fatalf("footer does not re-encode to the object's tail")
		}
		var end int64
		for _, b := range ft.Batches {
			if b.Pos < end || b.Len < batchHeaderSize {
				t.Fatalf("batch %+v overlaps or is short", b)
			}
			end = b.Pos + b.Len
		}
		if end != int64(len(obj)-len(tail)) {
			t.Fatalf("batches end at %d, footer starts at %d", end, len(obj)-len(tail))
		}
	})
}

func FuzzDecodeFooter(f *testing.F) {
	for _, obj := range seedObjects(f) {
		f.Add(footerOf(f, obj))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ft, err := DecodeFooter(b)
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		if got := appendFooter(nil, &ft); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded footer differs:\n got %x\nwant %x", got, b)
		}
	})
}

// FuzzDecodeFooterBody fuzzes the footer behind a valid CRC, which random mutation
// of FuzzDecodeFooter's input almost never keeps.
func FuzzDecodeFooterBody(f *testing.F) {
	for _, obj := range seedObjects(f) {
		fb := footerOf(f, obj)
		f.Add(fb[:len(fb)-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b := binary.BigEndian.AppendUint32(bytes.Clone(body), crc32c.Checksum(body))
		ft, err := DecodeFooter(b)
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		if got := appendFooter(nil, &ft); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded footer differs:\n got %x\nwant %x", got, b)
		}
	})
}

func FuzzParseTrailer(f *testing.F) {
	for _, obj := range seedObjects(f) {
		f.Add(obj[len(obj)-TrailerSize:])
	}
	f.Fuzz(func(t *testing.T, tail []byte) {
		n, err := ParseTrailer(tail)
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		last := tail[len(tail)-TrailerSize:]
		if got := appendTrailer(nil, int(n), binary.BigEndian.Uint32(last[4:])); !bytes.Equal(got, last) {
			t.Fatalf("trailer re-encodes to %x, want %x", got, last)
		}
	})
}

func FuzzSplitBatches(f *testing.F) {
	for _, obj := range seedObjects(f) {
		raws := batchesOf(f, obj)
		f.Add(raws[0])
		f.Add(bytes.Join(raws, nil))
		f.Add(bytes.Join(raws, nil)[1:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raws, err := SplitBatches(data)
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		if !bytes.Equal(bytes.Join(raws, nil), data) {
			t.Fatal("batches do not tile the input")
		}
		for _, raw := range raws {
			if crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(raw[17:]) {
				t.Fatal("accepted a batch with a bad CRC")
			}
			if int(int32(binary.BigEndian.Uint32(raw[8:]))) != len(raw)-12 {
				t.Fatal("accepted a batch whose length field disagrees")
			}
		}
	})
}

// checkReencode proves an accepted batch was decoded right: encoding what was decoded
// and decoding that again gives the same batch.
func checkReencode(t *testing.T, raw []byte, d DecodedBatch) {
	t.Helper()
	if crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(raw[17:]) {
		t.Fatal("accepted a batch with a bad CRC")
	}
	if len(d.Records) == 0 || d.Records[len(d.Records)-1].Offset != d.BaseOffset+int64(d.LastOffsetDelta) {
		t.Fatalf("records do not end at the last offset delta")
	}
	b := Batch{BaseOffset: d.BaseOffset, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		BaseSequence: d.BaseSequence, Compression: d.Compression, LogAppendTime: d.LogAppendTime}
	for i, r := range d.Records {
		if i > 0 && r.Offset <= d.Records[i-1].Offset {
			t.Fatal("offsets not increasing")
		}
		b.Records = append(b.Records, Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
			OffsetDelta: int32(r.Offset - d.BaseOffset)})
	}
	re, err := DecodeBatch(encodeOne(t, b))
	if err != nil {
		t.Fatalf("re-encoded batch does not decode: %v", err)
	}
	if msg := diffRecords(re.Records, d.Records); msg != "" {
		t.Fatalf("re-encoded batch differs: %s", msg)
	}
	if re.BaseOffset != d.BaseOffset || re.LastOffsetDelta != d.LastOffsetDelta || re.ProducerID != d.ProducerID ||
		re.ProducerEpoch != d.ProducerEpoch || re.BaseSequence != d.BaseSequence || re.Compression != d.Compression ||
		re.LogAppendTime != d.LogAppendTime {
		t.Fatalf("re-encoded header %+v, decoded %+v", re, d)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, obj := range seedObjects(f) {
		for _, raw := range batchesOf(f, obj) {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := DecodeBatch(raw)
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		checkReencode(t, raw, d)
	})
}

// FuzzDecodeRecords fuzzes the records section and the decompressors behind a valid
// batch header and CRC, which random mutation of FuzzDecodeBatch's input rarely keeps.
func FuzzDecodeRecords(f *testing.F) {
	for _, obj := range seedObjects(f) {
		for _, raw := range batchesOf(f, obj) {
			h, _ := ParseBatchHeader(raw)
			attrs := binary.BigEndian.Uint16(raw[offAttributes:])
			f.Add(attrs, h.NumRecords, h.LastOffsetDelta, h.FirstTimestamp, raw[batchHeaderSize:])
		}
	}
	f.Fuzz(func(t *testing.T, attrs uint16, n, lastDelta int32, ts int64, section []byte) {
		raw := rawBatch(attrs, n, lastDelta, ts, ts+5, section)
		d, err := DecodeBatch(raw)
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		checkReencode(t, raw, d)
	})
}

// FuzzEncode builds batches from fuzz input: Encode refuses them with ErrInvalid or
// writes an object that verifies and decodes to them, and that the same batches handed
// over already encoded (Batch.Raw) give again.
func FuzzEncode(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03key\x00value"), int64(0))
	f.Add([]byte("\x05\x03\x11\x07a\x01b\x02c\x00\xff\xfe"), int64(64))
	f.Add(bytes.Repeat([]byte{0x21, 0x40, 0x83}, 40), int64(100))
	f.Fuzz(func(t *testing.T, data []byte, interval int64) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			c := data[0]
			data = data[1:]
			return c
		}
		chunk := func() []byte {
			c := next()
			switch {
			case c == 0xff:
				return nil
			case c == 0xfe:
				return []byte{}
			}
			n := min(int(c%16), len(data))
			v := data[:n]
			data = data[n:]
			return v
		}
		var batches []Batch
		for len(data) > 0 && len(batches) < 20 {
			c := next()
			b := Batch{TopicID: int64(c & 3), Partition: int32(c>>2&3) - int32(c>>7), Compression: Compression((c >> 4 & 7) % 6),
				LogAppendTime: c&0x40 != 0, BaseOffset: int64(next()) * 10, ProducerID: int64(next()) - 1}
			nr := int(next() % 5)
			for range nr {
				r := Record{Key: chunk(), Value: chunk(), Timestamp: int64(int8(next())), OffsetDelta: int32(int8(next()))}
				if next()%3 == 0 {
					r.Headers = []Header{{Key: string(chunk()), Value: chunk()}}
				}
				b.Records = append(b.Records, r)
			}
			batches = append(batches, b)
		}
		obj, infos, err := Encode(batches, EncodeOptions{IndexInterval: interval % 200})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		checkObject(t, batches, obj, infos, EncodeOptions{IndexInterval: interval % 200})
		// The batches handed over already encoded give the same object.
		again, _, err := Encode(asRaw(batches, obj, infos), EncodeOptions{IndexInterval: interval % 200})
		if err != nil || !bytes.Equal(again, obj) {
			t.Fatalf("the same batches, raw, encode to another object (%v)", err)
		}
	})
}

func FuzzKeyTime(f *testing.F) {
	at := time.Date(2026, 12, 2, 11, 5, 33, 123e6, time.UTC)
	f.Add(NewKey(at))
	f.Add(NewKey(time.Unix(0, 0)))
	f.Add("segments/20261202T110533.123Z-0123456789abcdef")
	f.Add("segments/20261302T110533.123Z-0123456789abcdef")
	f.Fuzz(func(t *testing.T, key string) {
		kt, err := KeyTime(key)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// Accepted: the key is exactly what NewKey makes for that time.
		if kt.Location() != time.UTC || !kt.Equal(kt.Truncate(time.Millisecond)) {
			t.Fatalf("time %v is not a UTC millisecond", kt)
		}
		made := NewKey(kt)
		if made[:len(made)-keyRandomHex] != key[:len(key)-keyRandomHex] {
			t.Fatalf("key %q, NewKey(%v) = %q", key, kt, made)
		}
	})
}
