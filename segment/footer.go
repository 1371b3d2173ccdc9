package segment

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/strata-io/strata/internal/crc32c"
)

// FormatVersion is the footer format Encode writes and the decoders accept.
const FormatVersion = 1

// TrailerSize is the fixed size of the trailer that ends every object; reading the
// last TrailerSize bytes tells the footer's length.
//
// Trailer layout (big-endian): footer length uint32 | footer CRC-32C uint32 |
// format version uint16 | magic "STRSEG".
const TrailerSize = 16

const (
	trailerMagic = "STRSEG"
	// maxFooterLen bounds the footer, so a corrupt trailer cannot make a reader fetch or
	// allocate without limit. It holds over a million batch entries.
	maxFooterLen = 64 << 20
	// minFooterLen: version, batch count, one batch entry (at least 16 bytes: twelve
	// varints and the CRC), index count, footer CRC.
	minFooterLen    = 2 + 1 + 16 + 1 + 4
	minBatchEntry   = 16
	minIndexEntry   = 2
	maxBatchLen     = math.MaxInt32 + 12 // the length field is an int32
	footerCRCLength = 4
)

// Footer layout, version 1 (big-endian fixed fields, varints as Kafka's, unsigned where
// the value cannot be negative, each with exactly one valid encoding):
//
//	version uint16
//	uvarint batch count (>= 1)
//	per batch, in object order:
//	  varint  TopicID
//	  uvarint Partition
//	  uvarint gap: Pos minus the previous batch's end (0 as Encode writes)
//	  uvarint Len
//	  uvarint Records
//	  uvarint BaseOffset
//	  uvarint LastOffsetDelta
//	  varint  FirstTimestamp
//	  varint  MaxTimestamp - FirstTimestamp (wrapping)
//	  varint  ProducerID
//	  varint  ProducerEpoch
//	  varint  BaseSequence
//	  uint32  CRC
//	uvarint index entry count
//	per entry:
//	  uvarint batch number minus the previous entry's plus one (entries point at
//	          strictly later batches; Pos is that batch's Pos)
//	  uvarint Offset minus that batch's BaseOffset (<= its LastOffsetDelta)
//	uint32 CRC-32C of everything above
//
// The batches end where the footer starts.

// appendFooter appends f's encoding, ending in its CRC-32C. f must be valid (as Encode
// builds it); index entries must point at batch starts.
func appendFooter(dst []byte, f *Footer) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, f.Version)
	dst = appendUvarint(dst, uint64(len(f.Batches)))
	var end int64
	for i := range f.Batches {
		b := &f.Batches[i]
		dst = appendVarlong(dst, b.TopicID)
		dst = appendUvarint(dst, uint64(b.Partition))
		dst = appendUvarint(dst, uint64(b.Pos-end))
		dst = appendUvarint(dst, uint64(b.Len))
		dst = appendUvarint(dst, uint64(b.Records))
		dst = appendUvarint(dst, uint64(b.BaseOffset))
		dst = appendUvarint(dst, uint64(b.LastOffsetDelta))
		dst = appendVarlong(dst, b.FirstTimestamp)
		dst = appendVarlong(dst, b.MaxTimestamp-b.FirstTimestamp)
		dst = appendVarlong(dst, b.ProducerID)
		dst = appendVarlong(dst, int64(b.ProducerEpoch))
		dst = appendVarlong(dst, int64(b.BaseSequence))
		dst = binary.BigEndian.AppendUint32(dst, b.CRC)
		end = b.Pos + b.Len
	}
	dst = appendUvarint(dst, uint64(len(f.Index)))
	next := 0 // the lowest batch number the next entry may point at
	for _, e := range f.Index {
		i := sort.Search(len(f.Batches), func(i int) bool { return f.Batches[i].Pos >= e.Pos })
		dst = appendUvarint(dst, uint64(i-next))
		dst = appendUvarint(dst, uint64(e.Offset-f.Batches[i].BaseOffset))
		next = i + 1
	}
	return binary.BigEndian.AppendUint32(dst, crc32c.Checksum(dst[start:]))
}

func appendTrailer(dst []byte, footerLen int, footerCRC uint32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(footerLen))
	dst = binary.BigEndian.AppendUint32(dst, footerCRC)
	dst = binary.BigEndian.AppendUint16(dst, FormatVersion)
	return append(dst, trailerMagic...)
}

// trailer is a parsed trailer.
type trailer struct {
	footerLen int64
	footerCRC uint32
}

func parseTrailer(tail []byte) (trailer, error) {
	if len(tail) < TrailerSize {
		return trailer{}, fmt.Errorf("segment: trailer: %d bytes, need %d: %w", len(tail), TrailerSize, ErrCorrupt)
	}
	t := tail[len(tail)-TrailerSize:]
	if string(t[10:]) != trailerMagic {
		return trailer{}, fmt.Errorf("segment: trailer: bad magic %q: %w", t[10:], ErrCorrupt)
	}
	if v := binary.BigEndian.Uint16(t[8:]); v != FormatVersion {
		return trailer{}, fmt.Errorf("segment: trailer: format version %d, this build reads %d: %w", v, FormatVersion, ErrCorrupt)
	}
	n := int64(binary.BigEndian.Uint32(t))
	if n < minFooterLen || n > maxFooterLen {
		return trailer{}, fmt.Errorf("segment: trailer: footer length %d outside [%d, %d]: %w", n, minFooterLen, maxFooterLen, ErrCorrupt)
	}
	return trailer{footerLen: n, footerCRC: binary.BigEndian.Uint32(t[4:])}, nil
}

// ParseTrailer reads the trailer (the last TrailerSize bytes of an object) and returns
// the footer's length in bytes (the footer ends where the trailer starts). A longer
// tail is accepted and its last TrailerSize bytes are read, so a reader may fetch a
// generous tail of the object speculatively.
func ParseTrailer(tail []byte) (footerLen int64, err error) {
	t, err := parseTrailer(tail)
	return t.footerLen, err
}

// ReadFooter decodes and validates the footer of a whole object: the trailer, the
// footer's CRC (in the footer and in the trailer), and every batch's byte range, which
// must lie before the footer, with the last batch ending where the footer starts. It
// does not read the batches (Verify does).
func ReadFooter(obj []byte) (Footer, error) {
	t, err := parseTrailer(obj)
	if err != nil {
		return Footer{}, err
	}
	if t.footerLen > int64(len(obj)-TrailerSize) {
		return Footer{}, fmt.Errorf("segment: read footer: footer length %d, but the object has %d bytes before its trailer: %w",
			t.footerLen, len(obj)-TrailerSize, ErrCorrupt)
	}
	start := int64(len(obj)-TrailerSize) - t.footerLen
	fb := obj[start : len(obj)-TrailerSize]
	f, err := DecodeFooter(fb)
	if err != nil {
		return Footer{}, err
	}
	if crc := binary.BigEndian.Uint32(fb[len(fb)-footerCRCLength:]); crc != t.footerCRC {
		return Footer{}, fmt.Errorf("segment: read footer: trailer CRC %#08x, footer's %#08x: %w", t.footerCRC, crc, ErrCorrupt)
	}
	last := f.Batches[len(f.Batches)-1]
	if end := last.Pos + last.Len; end != start {
		return Footer{}, fmt.Errorf("segment: read footer: batches end at byte %d, footer starts at %d: %w", end, start, ErrCorrupt)
	}
	return f, nil
}

// footerReader decodes footer fields, remembering the first error.
type footerReader struct {
	b   []byte
	err error
}

func (r *footerReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("bad %s: %w", what, ErrCorrupt)
	}
}

func (r *footerReader) uvarint(what string, limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := readUvarint64(r.b)
	if n == 0 || v > limit {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *footerReader) varint(what string, lo, hi int64) int64 {
	if r.err != nil {
		return 0
	}
	v, n := readVarint64(r.b)
	if n == 0 || v < lo || v > hi {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *footerReader) uint32(what string) uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// DecodeFooter decodes footer bytes (without trailer) and validates them: CRC, version,
// counts, byte ranges (in object order, non-overlapping, each at least a batch header
// long), per-batch fields (record count within the offset deltas, no offset overflow),
// batches grouped by ascending (TopicID, Partition), and index entries pointing at batch
// starts with offsets inside those batches, increasing within a partition.
func DecodeFooter(b []byte) (Footer, error) {
	if len(b) < minFooterLen || len(b) > maxFooterLen {
		return Footer{}, fmt.Errorf("segment: decode footer: %d bytes, outside [%d, %d]: %w", len(b), minFooterLen, maxFooterLen, ErrCorrupt)
	}
	body := b[:len(b)-footerCRCLength]
	if want, got := binary.BigEndian.Uint32(b[len(body):]), crc32c.Checksum(body); want != got {
		return Footer{}, fmt.Errorf("segment: decode footer: CRC %#08x, computed %#08x: %w", want, got, ErrCorrupt)
	}
	f, err := decodeFooterBody(body)
	if err != nil {
		return Footer{}, fmt.Errorf("segment: decode footer: %w", err)
	}
	return f, nil
}

func decodeFooterBody(body []byte) (Footer, error) {
	f := Footer{Version: binary.BigEndian.Uint16(body)}
	if f.Version != FormatVersion {
		return Footer{}, fmt.Errorf("format version %d, this build reads %d: %w", f.Version, FormatVersion, ErrCorrupt)
	}
	r := footerReader{b: body[2:]}
	n := r.uvarint("batch count", uint64(len(body)/minBatchEntry))
	if r.err == nil && n == 0 {
		return Footer{}, fmt.Errorf("no batches: %w", ErrCorrupt)
	}
	f.Batches = make([]BatchInfo, n)
	var end int64
	for i := range f.Batches {
		bi := &f.Batches[i]
		bi.TopicID = r.varint("topic id", math.MinInt64, math.MaxInt64)
		bi.Partition = int32(r.uvarint("partition", math.MaxInt32))
		gap := int64(r.uvarint("gap", math.MaxInt64))
		bi.Len = int64(r.uvarint("length", maxBatchLen))
		bi.Records = int32(r.uvarint("record count", math.MaxInt32))
		bi.BaseOffset = int64(r.uvarint("base offset", math.MaxInt64))
		bi.LastOffsetDelta = int32(r.uvarint("last offset delta", math.MaxInt32))
		bi.FirstTimestamp = r.varint("first timestamp", math.MinInt64, math.MaxInt64)
		bi.MaxTimestamp = bi.FirstTimestamp + r.varint("max timestamp", math.MinInt64, math.MaxInt64)
		bi.ProducerID = r.varint("producer id", math.MinInt64, math.MaxInt64)
		bi.ProducerEpoch = int16(r.varint("producer epoch", math.MinInt16, math.MaxInt16))
		bi.BaseSequence = int32(r.varint("base sequence", math.MinInt32, math.MaxInt32))
		bi.CRC = r.uint32("crc")
		if r.err != nil {
			return Footer{}, fmt.Errorf("batch %d: %w", i, r.err)
		}
		var problem string
		switch {
		case gap > math.MaxInt64-end-bi.Len:
			problem = "byte range overflows"
		case bi.Len < batchHeaderSize:
			problem = fmt.Sprintf("length %d below a batch header's %d", bi.Len, batchHeaderSize)
		case bi.Records < 1:
			problem = "no records"
		case bi.LastOffsetDelta < bi.Records-1:
			problem = fmt.Sprintf("last offset delta %d for %d records", bi.LastOffsetDelta, bi.Records)
		case bi.BaseOffset > math.MaxInt64-int64(bi.LastOffsetDelta):
			problem = "last offset overflows"
		case i > 0 && comparePartitionInfo(&f.Batches[i-1], bi) > 0:
			problem = "batches not grouped by ascending topic and partition"
		}
		if problem != "" {
			return Footer{}, fmt.Errorf("batch %d: %s: %w", i, problem, ErrCorrupt)
		}
		bi.Pos = end + gap
		end = bi.Pos + bi.Len
	}
	ni := r.uvarint("index entry count", uint64(len(r.b)/minIndexEntry))
	if r.err != nil {
		return Footer{}, r.err
	}
	if ni > 0 {
		f.Index = make([]IndexEntry, ni)
	}
	next := 0
	for i := range f.Index {
		bn := r.uvarint("index batch", uint64(len(f.Batches)-next))
		if r.err == nil && int(bn) >= len(f.Batches)-next {
			r.fail("index batch")
		}
		if r.err != nil {
			return Footer{}, fmt.Errorf("index entry %d: %w", i, r.err)
		}
		bi := &f.Batches[next+int(bn)]
		delta := r.uvarint("index offset", uint64(bi.LastOffsetDelta))
		if r.err != nil {
			return Footer{}, fmt.Errorf("index entry %d: %w", i, r.err)
		}
		f.Index[i] = IndexEntry{Offset: bi.BaseOffset + int64(delta), Pos: bi.Pos}
		if i > 0 {
			pi := &f.Batches[next-1]
			if comparePartitionInfo(pi, bi) == 0 && f.Index[i-1].Offset >= f.Index[i].Offset {
				return Footer{}, fmt.Errorf("index entry %d: offset %d not above the previous %d: %w", i, f.Index[i].Offset, f.Index[i-1].Offset, ErrCorrupt)
			}
		}
		next += int(bn) + 1
	}
	if len(r.b) != 0 {
		return Footer{}, fmt.Errorf("%d bytes after the index: %w", len(r.b), ErrCorrupt)
	}
	return f, nil
}

func comparePartitionInfo(a, b *BatchInfo) int {
	if c := cmp.Compare(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Find returns the position in f.Batches of the first batch of (topicID, partition)
// whose last offset is at least offset, for objects whose batches carry real offsets
// in increasing order (compactor objects). ok is false when the partition has no such
// batch.
func (f *Footer) Find(topicID int64, partition int32, offset int64) (i int, ok bool) {
	key := BatchInfo{TopicID: topicID, Partition: partition}
	lo := sort.Search(len(f.Batches), func(i int) bool { return comparePartitionInfo(&f.Batches[i], &key) >= 0 })
	hi := lo + sort.Search(len(f.Batches)-lo, func(i int) bool { return comparePartitionInfo(&f.Batches[lo+i], &key) > 0 })
	i = lo + sort.Search(hi-lo, func(i int) bool {
		b := &f.Batches[lo+i]
		return b.BaseOffset+int64(b.LastOffsetDelta) >= offset
	})
	return i, i < hi
}

// Verify checks a whole object: its footer (ReadFooter), then every batch against its
// footer entry (every header field and the CRC), decoding every batch fully.
func Verify(obj []byte) (Footer, error) {
	f, err := ReadFooter(obj)
	if err != nil {
		return Footer{}, err
	}
	for i := range f.Batches {
		bi := &f.Batches[i]
		raw := obj[bi.Pos : bi.Pos+bi.Len]
		if end, err := batchEnd(raw, 0); err != nil || end != len(raw) {
			return Footer{}, fmt.Errorf("segment: verify: batch %d at byte %d: length field disagrees with the footer's %d: %w", i, bi.Pos, bi.Len, ErrCorrupt)
		}
		d, err := DecodeBatch(raw)
		if err != nil {
			return Footer{}, fmt.Errorf("segment: verify: batch %d at byte %d: %w", i, bi.Pos, err)
		}
		got := BatchInfo{
			TopicID: bi.TopicID, Partition: bi.Partition, Pos: bi.Pos, Len: bi.Len,
			Records:         int32(len(d.Records)),
			BaseOffset:      d.BaseOffset,
			LastOffsetDelta: d.LastOffsetDelta,
			FirstTimestamp:  d.FirstTimestamp,
			MaxTimestamp:    d.MaxTimestamp,
			ProducerID:      d.ProducerID,
			ProducerEpoch:   d.ProducerEpoch,
			BaseSequence:    d.BaseSequence,
			CRC:             binary.BigEndian.Uint32(raw[offCRC:]),
		}
		if got != *bi {
			return Footer{}, fmt.Errorf("segment: verify: batch %d at byte %d: header %+v, footer %+v: %w", i, bi.Pos, got, *bi, ErrCorrupt)
		}
	}
	return f, nil
}
