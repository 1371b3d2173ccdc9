package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Layout of a Kafka v2 record batch header (61 bytes, big-endian). The length counts
// the bytes after the length field; the CRC-32C covers the attributes to the end.
const (
	offBaseOffset      = 0  // int64, not covered by the CRC
	offLength          = 8  // int32
	offLeaderEpoch     = 12 // int32, not covered by the CRC
	offMagic           = 16 // int8
	offCRC             = 17 // uint32
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offFirstTimestamp  = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offProducerEpoch   = 51 // int16
	offBaseSequence    = 53 // int32
	offNumRecords      = 57 // int32
	batchHeaderSize    = 61

	attrCompression   = 0x07
	attrTimestampType = 0x08 // LogAppendTime
	// Bits Kafka defines that Strata never writes: transactional, control, delete
	// horizon. A batch carrying them is refused rather than misread.

	// minRecordSize is the smallest encoded record: a length, attributes, timestamp
	// delta, offset delta, key, value and header count of one byte each.
	minRecordSize = 7
)

// BatchHeader is the fixed header of a raw batch, read without touching its records.
type BatchHeader struct {
	BaseOffset      int64
	Length          int32  // the batch's length field: len(raw) - 12
	CRC             uint32 // as stored
	Compression     Compression
	LogAppendTime   bool
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// ParseBatchHeader reads the header of one raw batch (exactly one batch, as
// SplitBatches returns) and checks it is one Strata writes: length field matching
// len(raw), magic 2, partition leader epoch -1, known attributes, at least one record,
// consistent offset deltas. It does not check the CRC (SplitBatches and DecodeBatch do),
// so a reader rewriting offsets of batches it has already split pays for no second pass.
func ParseBatchHeader(raw []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(raw) < batchHeaderSize {
		return h, fmt.Errorf("segment: batch header: %d bytes, need %d: %w", len(raw), batchHeaderSize, ErrCorrupt)
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(raw[offBaseOffset:]))
	h.Length = int32(be.Uint32(raw[offLength:]))
	h.CRC = be.Uint32(raw[offCRC:])
	attrs := be.Uint16(raw[offAttributes:])
	h.Compression = Compression(attrs & attrCompression)
	h.LogAppendTime = attrs&attrTimestampType != 0
	h.LastOffsetDelta = int32(be.Uint32(raw[offLastOffsetDelta:]))
	h.FirstTimestamp = int64(be.Uint64(raw[offFirstTimestamp:]))
	h.MaxTimestamp = int64(be.Uint64(raw[offMaxTimestamp:]))
	h.ProducerID = int64(be.Uint64(raw[offProducerID:]))
	h.ProducerEpoch = int16(be.Uint16(raw[offProducerEpoch:]))
	h.BaseSequence = int32(be.Uint32(raw[offBaseSequence:]))
	h.NumRecords = int32(be.Uint32(raw[offNumRecords:]))
	leaderEpoch := int32(be.Uint32(raw[offLeaderEpoch:]))

	var problem string
	switch {
	case int64(h.Length) != int64(len(raw))-12:
		problem = fmt.Sprintf("length field %d, but %d bytes follow it", h.Length, len(raw)-12)
	case raw[offMagic] != 2:
		problem = fmt.Sprintf("magic %d, want 2", raw[offMagic])
	case leaderEpoch != -1:
		problem = fmt.Sprintf("partition leader epoch %d, want -1", leaderEpoch)
	case attrs&^(attrCompression|attrTimestampType) != 0:
		problem = fmt.Sprintf("unsupported attributes %#x", attrs)
	case h.Compression > CompressionZstd:
		problem = fmt.Sprintf("unknown compression %d", h.Compression)
	case h.BaseOffset < 0:
		problem = fmt.Sprintf("negative base offset %d", h.BaseOffset)
	case h.NumRecords < 1:
		problem = fmt.Sprintf("%d records", h.NumRecords)
	case h.LastOffsetDelta < h.NumRecords-1:
		problem = fmt.Sprintf("last offset delta %d for %d records", h.LastOffsetDelta, h.NumRecords)
	case h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta):
		problem = fmt.Sprintf("base offset %d overflows", h.BaseOffset)
	case h.Compression == CompressionNone && int64(h.NumRecords)*minRecordSize > int64(len(raw)-batchHeaderSize):
		problem = fmt.Sprintf("%d records cannot fit in %d bytes", h.NumRecords, len(raw)-batchHeaderSize)
	default:
		return h, nil
	}
	return h, fmt.Errorf("segment: batch header: %s: %w", problem, ErrCorrupt)
}

// batchCRC is the CRC-32C Kafka stores in a batch: of the attributes to the end.
func batchCRC(raw []byte) uint32 { return crc32.Checksum(raw[offAttributes:], castagnoli) }

// SplitBatches splits data holding whole batches into one sub-slice per batch,
// checking lengths, magic and CRC (no decompression). Each sub-slice's capacity ends
// with the batch, so appending to one cannot overwrite the next. Empty data, a
// truncated batch or trailing bytes are errors wrapping ErrCorrupt.
func SplitBatches(data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("segment: split batches: no data: %w", ErrCorrupt)
	}
	// Count first so the result is allocated once.
	n := 0
	for pos := 0; pos < len(data); n++ {
		end, err := batchEnd(data, pos)
		if err != nil {
			return nil, err
		}
		pos = end
	}
	out := make([][]byte, 0, n)
	for pos := 0; pos < len(data); {
		end, _ := batchEnd(data, pos)
		raw := data[pos:end:end]
		h, err := ParseBatchHeader(raw)
		if err != nil {
			return nil, fmt.Errorf("segment: split batches: batch at byte %d: %w", pos, err)
		}
		if crc := batchCRC(raw); crc != h.CRC {
			return nil, fmt.Errorf("segment: split batches: batch at byte %d: CRC %#08x, computed %#08x: %w", pos, h.CRC, crc, ErrCorrupt)
		}
		out = append(out, raw)
		pos = end
	}
	return out, nil
}

// batchEnd returns where the batch starting at data[pos] ends, from its length field.
func batchEnd(data []byte, pos int) (int, error) {
	if len(data)-pos < batchHeaderSize {
		return 0, fmt.Errorf("segment: split batches: batch at byte %d truncated: %d bytes left, header needs %d: %w",
			pos, len(data)-pos, batchHeaderSize, ErrCorrupt)
	}
	length := int64(int32(binary.BigEndian.Uint32(data[pos+offLength:])))
	if length < batchHeaderSize-12 {
		return 0, fmt.Errorf("segment: split batches: batch at byte %d: length field %d below the header's %d: %w",
			pos, length, batchHeaderSize-12, ErrCorrupt)
	}
	if length > int64(len(data)-pos-12) {
		return 0, fmt.Errorf("segment: split batches: batch at byte %d truncated: length field %d, %d bytes left: %w",
			pos, length, len(data)-pos-12, ErrCorrupt)
	}
	return pos + 12 + int(length), nil
}

// SetBaseOffset rewrites a raw batch's base offset in place (not covered by the CRC).
// It panics if batch is shorter than 8 bytes: callers pass batches SplitBatches checked.
func SetBaseOffset(batch []byte, base int64) {
	binary.BigEndian.PutUint64(batch[offBaseOffset:], uint64(base))
}

// DecodeBatches splits data into batches and decodes each (see DecodeBatch).
func DecodeBatches(data []byte) ([]DecodedBatch, error) {
	raws, err := SplitBatches(data)
	if err != nil {
		return nil, err
	}
	out := make([]DecodedBatch, len(raws))
	for i, raw := range raws {
		if out[i], err = DecodeBatch(raw); err != nil {
			return nil, fmt.Errorf("segment: decode batch %d of %d: %w", i, len(raws), err)
		}
	}
	return out, nil
}

// DecodeBatch decodes one raw batch, decompressing and validating it: header, CRC,
// every record's framing, strictly increasing offset deltas ending at the header's last
// offset delta, and the record count. A record's offset is BaseOffset+OffsetDelta; its
// timestamp is FirstTimestamp+delta, or MaxTimestamp for every record when the batch has
// LogAppendTime, as Kafka reads it. Null keys, values and header values come back nil,
// empty ones as empty non-nil slices.
//
// Keys, values and header values alias raw (uncompressed batches) or one buffer per
// batch (compressed ones): they must not be modified, and raw must not be reused while
// they are in use.
func DecodeBatch(raw []byte) (DecodedBatch, error) {
	h, err := ParseBatchHeader(raw)
	if err != nil {
		return DecodedBatch{}, fmt.Errorf("segment: decode batch: %w", err)
	}
	if crc := batchCRC(raw); crc != h.CRC {
		return DecodedBatch{}, fmt.Errorf("segment: decode batch: CRC %#08x, computed %#08x: %w", h.CRC, crc, ErrCorrupt)
	}
	section := raw[batchHeaderSize:]
	if h.Compression != CompressionNone {
		if section, err = decompress(section, h.Compression, 4*len(section)); err != nil {
			return DecodedBatch{}, fmt.Errorf("segment: decode batch: %w: %w", err, ErrCorrupt)
		}
	}
	d := DecodedBatch{
		BaseOffset:      h.BaseOffset,
		LastOffsetDelta: h.LastOffsetDelta,
		ProducerID:      h.ProducerID,
		ProducerEpoch:   h.ProducerEpoch,
		BaseSequence:    h.BaseSequence,
		Compression:     h.Compression,
		LogAppendTime:   h.LogAppendTime,
		FirstTimestamp:  h.FirstTimestamp,
		MaxTimestamp:    h.MaxTimestamp,
	}
	if d.Records, err = decodeRecords(section, &h); err != nil {
		return DecodedBatch{}, fmt.Errorf("segment: decode batch: %w", err)
	}
	return d, nil
}

// decodeRecords parses an uncompressed records section holding h.NumRecords records.
func decodeRecords(p []byte, h *BatchHeader) ([]DecodedRecord, error) {
	n := int(h.NumRecords)
	if n > len(p)/minRecordSize {
		return nil, fmt.Errorf("%d records cannot fit in %d bytes: %w", n, len(p), ErrCorrupt)
	}
	recs := make([]DecodedRecord, n)
	prev := int32(-1)
	for i := range recs {
		length, k := readVarint32(p)
		if k == 0 || length < 0 || int(length) > len(p)-k {
			return nil, fmt.Errorf("record %d: bad length: %w", i, ErrCorrupt)
		}
		body := p[k : k+int(length)]
		p = p[k+int(length):]
		od, err := decodeRecord(body, &recs[i], h)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if od <= prev {
			return nil, fmt.Errorf("record %d: offset delta %d not above the previous %d: %w", i, od, prev, ErrCorrupt)
		}
		prev = od
	}
	if prev != h.LastOffsetDelta {
		return nil, fmt.Errorf("last record's offset delta %d, header says %d: %w", prev, h.LastOffsetDelta, ErrCorrupt)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%d bytes after the last record: %w", len(p), ErrCorrupt)
	}
	return recs, nil
}

// decodeRecord parses one record's body (after its length) into r, returning its
// offset delta. The body must be consumed exactly.
func decodeRecord(b []byte, r *DecodedRecord, h *BatchHeader) (int32, error) {
	if len(b) == 0 || b[0] != 0 {
		return 0, fmt.Errorf("missing or non-zero attributes: %w", ErrCorrupt)
	}
	b = b[1:]
	tsDelta, k := readVarint64(b)
	if k == 0 {
		return 0, fmt.Errorf("bad timestamp delta: %w", ErrCorrupt)
	}
	b = b[k:]
	od, k := readVarint32(b)
	if k == 0 || od < 0 {
		return 0, fmt.Errorf("bad offset delta: %w", ErrCorrupt)
	}
	b = b[k:]
	var ok bool
	if r.Key, b, ok = readBytes(b); !ok {
		return 0, fmt.Errorf("bad key: %w", ErrCorrupt)
	}
	if r.Value, b, ok = readBytes(b); !ok {
		return 0, fmt.Errorf("bad value: %w", ErrCorrupt)
	}
	nh, k := readVarint32(b)
	// A header takes at least two bytes (key length and value length).
	if k == 0 || nh < 0 || int(nh) > (len(b)-k)/2 {
		return 0, fmt.Errorf("bad header count: %w", ErrCorrupt)
	}
	b = b[k:]
	if nh > 0 {
		r.Headers = make([]Header, nh)
		for j := range r.Headers {
			key, rest, ok := readBytes(b)
			if !ok || key == nil {
				return 0, fmt.Errorf("header %d: bad key: %w", j, ErrCorrupt)
			}
			r.Headers[j].Key = string(key)
			if r.Headers[j].Value, b, ok = readBytes(rest); !ok {
				return 0, fmt.Errorf("header %d: bad value: %w", j, ErrCorrupt)
			}
		}
	}
	if len(b) != 0 {
		return 0, fmt.Errorf("%d bytes after the headers: %w", len(b), ErrCorrupt)
	}
	if od > h.LastOffsetDelta {
		return 0, fmt.Errorf("offset delta %d beyond the last %d: %w", od, h.LastOffsetDelta, ErrCorrupt)
	}
	r.Offset = h.BaseOffset + int64(od)
	if h.LogAppendTime {
		r.Timestamp = h.MaxTimestamp
	} else {
		r.Timestamp = h.FirstTimestamp + tsDelta
	}
	return od, nil
}

// readBytes reads a varint-length-prefixed byte string; length -1 is null (nil).
func readBytes(b []byte) (v, rest []byte, ok bool) {
	l, k := readVarint32(b)
	if k == 0 || l < -1 || int(l) > len(b)-k {
		return nil, nil, false
	}
	if l == -1 {
		return nil, b[k:], true
	}
	end := k + int(l)
	return b[k:end:end], b[end:], true
}
