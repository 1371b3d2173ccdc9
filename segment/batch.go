package segment

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strata-io/strata/internal/crc32c"
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
	// attrTransactional marks a transactional producer's batch (Kafka's bit 4): stored
	// as it came; its records are visible to read_committed readers only once the
	// transaction's commit marker is decided.
	attrTransactional = 0x10
	// attrControl marks a control batch (a transaction marker). Objects never hold one:
	// markers are catalog rows that ControlBatch renders at fetch time, and a client's
	// control batch is refused. The delete-horizon bit (0x40) is never written either.
	attrControl = 0x20

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
	Transactional   bool
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
	h.Transactional = attrs&attrTransactional != 0
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
	case attrs&^(attrCompression|attrTimestampType|attrTransactional) != 0:
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
func batchCRC(raw []byte) uint32 { return crc32c.Checksum(raw[offAttributes:]) }

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
	h, section, err := openBatch(raw)
	if err != nil {
		return DecodedBatch{}, fmt.Errorf("segment: decode batch: %w", err)
	}
	d := DecodedBatch{
		BaseOffset:      h.BaseOffset,
		LastOffsetDelta: h.LastOffsetDelta,
		ProducerID:      h.ProducerID,
		ProducerEpoch:   h.ProducerEpoch,
		BaseSequence:    h.BaseSequence,
		Compression:     h.Compression,
		LogAppendTime:   h.LogAppendTime,
		Transactional:   h.Transactional,
		FirstTimestamp:  h.FirstTimestamp,
		MaxTimestamp:    h.MaxTimestamp,
	}
	if d.Records, err = decodeRecords(section, &h); err != nil {
		return DecodedBatch{}, fmt.Errorf("segment: decode batch: %w", err)
	}
	return d, nil
}

// BatchSummary is what ScanBatch learns of a batch's records without decoding them.
type BatchSummary struct {
	Header BatchHeader
	// MinTimestamp and MaxTimestamp bound the records' timestamps as DecodeBatch reads
	// them.
	MinTimestamp, MaxTimestamp int64
	// DataBytes counts the records' keys, values, header keys and header values;
	// MaxRecordDataBytes is the largest one record's count.
	DataBytes, MaxRecordDataBytes int64
	// Headers is the number of headers over all records.
	Headers int
	// Canonical: the batch is laid out exactly as Encode lays out the records DecodeBatch
	// reads from it, with the header's producer fields, codec and timestamp type (the
	// compressed bytes of a compressed batch aside): offset deltas 0..n-1, the first
	// record's timestamp delta 0 and the header's MaxTimestamp the records' maximum
	// (LogAppendTime: every delta 0 and FirstTimestamp equal to MaxTimestamp). Varints
	// are minimal in every batch the decoders accept. A canonical batch can be stored
	// as it is (Batch.Raw) in place of its records.
	Canonical bool
}

// ScanBatch validates one raw batch exactly as DecodeBatch does, and refuses exactly
// what it refuses, but only summarises the records instead of returning them: it
// allocates nothing per record (a compressed batch is still decompressed, once).
func ScanBatch(raw []byte) (BatchSummary, error) {
	h, section, err := openBatch(raw)
	if err != nil {
		return BatchSummary{}, fmt.Errorf("segment: scan batch: %w", err)
	}
	s := BatchSummary{Header: h, Canonical: true}
	if err := checkRecordCount(section, &h); err != nil {
		return BatchSummary{}, fmt.Errorf("segment: scan batch: %w", err)
	}
	err = walkRecords(section, &h, false, func(i int, f *recordFields) {
		ts := f.timestamp(&h)
		if i == 0 {
			s.MinTimestamp, s.MaxTimestamp = ts, ts
		}
		s.MinTimestamp, s.MaxTimestamp = min(s.MinTimestamp, ts), max(s.MaxTimestamp, ts)
		data := int64(len(f.key)+len(f.value)) + f.headerData
		s.DataBytes += data
		s.MaxRecordDataBytes = max(s.MaxRecordDataBytes, data)
		s.Headers += int(f.headers)
		// Encode numbers records 0..n-1 and measures timestamps from the first record's
		// (LogAppendTime: all stamped alike, so every delta is 0).
		if f.offsetDelta != int32(i) || (f.tsDelta != 0 && (i == 0 || h.LogAppendTime)) {
			s.Canonical = false
		}
	})
	if err != nil {
		return BatchSummary{}, fmt.Errorf("segment: scan batch: %w", err)
	}
	if h.LogAppendTime {
		s.Canonical = s.Canonical && h.FirstTimestamp == h.MaxTimestamp
	} else {
		s.Canonical = s.Canonical && h.MaxTimestamp == s.MaxTimestamp
	}
	return s, nil
}

// ScanBatches splits data into batches and scans each (ScanBatch), calling visit with
// each batch (as SplitBatches returns it) and its summary, in order, until visit
// returns false. It refuses what SplitBatches and ScanBatch refuse, computing each
// batch's CRC once, and lets a caller that has seen enough (too many records, say)
// stop it before the batches after are decompressed. The framing of the whole of data
// is checked before the first call: empty data, a truncated batch or trailing bytes
// are refused without one.
func ScanBatches(data []byte, visit func(raw []byte, s BatchSummary) bool) error {
	if len(data) == 0 {
		return fmt.Errorf("segment: scan batches: no data: %w", ErrCorrupt)
	}
	for pos := 0; pos < len(data); {
		end, err := batchEnd(data, pos)
		if err != nil {
			return err
		}
		pos = end
	}
	for pos := 0; pos < len(data); {
		end, _ := batchEnd(data, pos)
		raw := data[pos:end:end]
		s, err := ScanBatch(raw)
		if err != nil {
			return fmt.Errorf("segment: scan batches: batch at byte %d: %w", pos, err)
		}
		if !visit(raw, s) {
			return nil
		}
		pos = end
	}
	return nil
}

// openBatch checks raw's header and CRC and returns its records section, decompressed.
func openBatch(raw []byte) (BatchHeader, []byte, error) {
	h, err := ParseBatchHeader(raw)
	if err != nil {
		return h, nil, err
	}
	if crc := batchCRC(raw); crc != h.CRC {
		return h, nil, fmt.Errorf("CRC %#08x, computed %#08x: %w", h.CRC, crc, ErrCorrupt)
	}
	section := raw[batchHeaderSize:]
	if h.Compression != CompressionNone {
		if section, err = decompress(section, h.Compression, 4*len(section)); err != nil {
			return h, nil, fmt.Errorf("%w: %w", err, ErrCorrupt)
		}
	}
	return h, section, nil
}

// decodeRecords parses an uncompressed records section holding h.NumRecords records.
func decodeRecords(p []byte, h *BatchHeader) ([]DecodedRecord, error) {
	if err := checkRecordCount(p, h); err != nil {
		return nil, err
	}
	recs := make([]DecodedRecord, h.NumRecords)
	err := walkRecords(p, h, true, func(i int, f *recordFields) {
		recs[i] = DecodedRecord{
			Offset:    h.BaseOffset + int64(f.offsetDelta),
			Timestamp: f.timestamp(h),
			Key:       f.key,
			Value:     f.value,
			Headers:   f.kept,
		}
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// checkRecordCount refuses a record count that cannot fit in p, before anything is
// allocated for it.
func checkRecordCount(p []byte, h *BatchHeader) error {
	if n := int(h.NumRecords); n > len(p)/minRecordSize {
		return fmt.Errorf("%d records cannot fit in %d bytes: %w", n, len(p), ErrCorrupt)
	}
	return nil
}

// recordFields is one record as parsed, aliasing the records section.
type recordFields struct {
	tsDelta     int64
	offsetDelta int32
	key, value  []byte
	headers     int32    // header count
	headerData  int64    // bytes of the header keys and values
	kept        []Header // the headers, when walkRecords was asked to keep them
}

// timestamp is the record's timestamp as Kafka reads it.
func (f *recordFields) timestamp(h *BatchHeader) int64 {
	if h.LogAppendTime {
		return h.MaxTimestamp
	}
	return h.FirstTimestamp + f.tsDelta
}

// walkRecords parses an uncompressed records section holding h.NumRecords records
// (checkRecordCount has bounded it), calling visit with each, in order. It checks every
// record's framing, strictly increasing offset deltas ending at the header's last
// offset delta, and that nothing follows the last record. keep asks for each record's
// headers as a new slice (recordFields.kept); otherwise they are only counted.
func walkRecords(p []byte, h *BatchHeader, keep bool, visit func(i int, f *recordFields)) error {
	prev := int32(-1)
	var f recordFields // one for all records: visit's pointer would move a new one to the heap each time
	for i := range int(h.NumRecords) {
		length, k := readVarint32(p)
		if k == 0 || length < 0 || int(length) > len(p)-k {
			return fmt.Errorf("record %d: bad length: %w", i, ErrCorrupt)
		}
		body := p[k : k+int(length)]
		p = p[k+int(length):]
		f = recordFields{}
		if err := parseRecord(body, &f, h, keep); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if f.offsetDelta <= prev {
			return fmt.Errorf("record %d: offset delta %d not above the previous %d: %w", i, f.offsetDelta, prev, ErrCorrupt)
		}
		prev = f.offsetDelta
		visit(i, &f)
	}
	if prev != h.LastOffsetDelta {
		return fmt.Errorf("last record's offset delta %d, header says %d: %w", prev, h.LastOffsetDelta, ErrCorrupt)
	}
	if len(p) != 0 {
		return fmt.Errorf("%d bytes after the last record: %w", len(p), ErrCorrupt)
	}
	return nil
}

// parseRecord parses one record's body (after its length) into f. The body must be
// consumed exactly.
func parseRecord(b []byte, f *recordFields, h *BatchHeader, keep bool) error {
	if len(b) == 0 || b[0] != 0 {
		return fmt.Errorf("missing or non-zero attributes: %w", ErrCorrupt)
	}
	b = b[1:]
	var k int
	if f.tsDelta, k = readVarint64(b); k == 0 {
		return fmt.Errorf("bad timestamp delta: %w", ErrCorrupt)
	}
	b = b[k:]
	if f.offsetDelta, k = readVarint32(b); k == 0 || f.offsetDelta < 0 {
		return fmt.Errorf("bad offset delta: %w", ErrCorrupt)
	}
	b = b[k:]
	var ok bool
	if f.key, b, ok = readBytes(b); !ok {
		return fmt.Errorf("bad key: %w", ErrCorrupt)
	}
	if f.value, b, ok = readBytes(b); !ok {
		return fmt.Errorf("bad value: %w", ErrCorrupt)
	}
	nh, k := readVarint32(b)
	// A header takes at least two bytes (key length and value length).
	if k == 0 || nh < 0 || int(nh) > (len(b)-k)/2 {
		return fmt.Errorf("bad header count: %w", ErrCorrupt)
	}
	b = b[k:]
	f.headers = nh
	if keep && nh > 0 {
		f.kept = make([]Header, nh)
	}
	for j := range int(nh) {
		key, rest, ok := readBytes(b)
		if !ok || key == nil {
			return fmt.Errorf("header %d: bad key: %w", j, ErrCorrupt)
		}
		var value []byte
		if value, b, ok = readBytes(rest); !ok {
			return fmt.Errorf("header %d: bad value: %w", j, ErrCorrupt)
		}
		f.headerData += int64(len(key) + len(value))
		if keep {
			f.kept[j] = Header{Key: string(key), Value: value}
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%d bytes after the headers: %w", len(b), ErrCorrupt)
	}
	if f.offsetDelta > h.LastOffsetDelta {
		return fmt.Errorf("offset delta %d beyond the last %d: %w", f.offsetDelta, h.LastOffsetDelta, ErrCorrupt)
	}
	return nil
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
