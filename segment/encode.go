package segment

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/crc32c"
)

// EncodeOptions tunes Encode.
type EncodeOptions struct {
	// IndexInterval, when > 0, adds a sparse index entry at least every IndexInterval
	// bytes (compactor objects, whose batches carry real offsets). Every partition's
	// first batch gets an entry. It requires each partition's batches, in the order
	// given, to cover strictly increasing offset ranges.
	IndexInterval int64
}

// plan is what validating a batch learns, reused when laying it out.
type plan struct {
	size      int   // bytes of the uncompressed records section (Raw: of the section as given)
	lastDelta int32 // offset delta of the last record
	assign    bool  // the records' offset deltas are 0..n-1 (all given as 0)
	records   int32
	firstTs   int64
	maxTs     int64
	encLen    int // bytes of the encoded batch
	staged    int // where a compressed batch starts in encoder.staged
}

// encoder holds scratch space reused across batches and calls.
type encoder struct {
	records []byte        // uncompressed records of a compressed batch
	staged  []byte        // compressed batches, before they are copied into the object
	footer  []byte        // the footer, measured before the object is allocated
	headers []kmsg.Header // one record's headers, converted for kmsg
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// Encode lays out batches as one object. infos[i] describes batches[i].
//
// Batches are grouped by (TopicID, Partition), ascending, keeping the caller's order
// within a partition, so each partition's batches form one contiguous byte range: from
// the Pos of its first batch to the end of its last. Invalid input (an empty batch, a
// negative partition or base offset, offset deltas that do not strictly increase, a
// batch over MaxBatchBytes, a Raw batch whose header or CRC is bad or disagrees with the
// Batch's fields, ...) is refused with an error wrapping ErrInvalid. A Raw batch is
// copied, not re-encoded; its footer entry is read from its header.
func Encode(batches []Batch, opts EncodeOptions) (obj []byte, infos []BatchInfo, err error) {
	parts, _, infos, err := encode(batches, opts, false)
	if err != nil {
		return nil, nil, err
	}
	return parts[0], infos, nil
}

// EncodeParts is Encode for an object that is sent rather than kept: it does not copy
// Raw batches. The object is parts laid end to end (size bytes in all); each Raw
// batch's bytes past its first 16 — the base offset, length and leader epoch, the
// fields Encode writes, which go in a patched copy — are a part of their own that
// aliases the caller's batch. A writer's flush of Kafka batches then holds its
// requests' bytes once, not once more in the object (an object store client streams
// the parts: objstore.Store.PutParts).
//
// crc is the object's CRC-32C, made from the Raw batches' own CRCs rather than a pass
// over their bytes, which EncodeParts does not read to check them either: a request's
// batches are checked as they are accepted (ScanBatch), and the object's CRC then
// carries that check to the store, which verifies it against the bytes it receives
// (objstore.PutPartsCRC32C). A batch whose bytes no longer match its CRC — changed in
// memory since — fails the put instead of being stored.
func EncodeParts(batches []Batch, opts EncodeOptions) (parts [][]byte, size int64, crc uint32, infos []BatchInfo, err error) {
	parts, crc, infos, err = encode(batches, opts, true)
	for _, p := range parts {
		size += int64(len(p))
	}
	return parts, size, crc, infos, err
}

// rawHead is how much of a Raw batch EncodeParts copies: up to the magic byte, past
// the fields it patches.
const rawHead = offMagic

// encode is Encode, or with split EncodeParts (and the object's CRC-32C).
func encode(batches []Batch, opts EncodeOptions, split bool) (parts [][]byte, crc uint32, infos []BatchInfo, err error) {
	if len(batches) == 0 {
		return nil, 0, nil, fmt.Errorf("segment: encode: no batches: %w", ErrInvalid)
	}
	if opts.IndexInterval < 0 {
		return nil, 0, nil, fmt.Errorf("segment: encode: index interval %d is negative: %w", opts.IndexInterval, ErrInvalid)
	}
	plans := make([]plan, len(batches))
	for i := range batches {
		b := &batches[i]
		p, err := checkBatch(b, !split)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("segment: encode: batch %d (topic %d, partition %d): %w", i, b.TopicID, b.Partition, err)
		}
		plans[i] = p
	}

	order := make([]int, len(batches))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return comparePartition(&batches[a], &batches[b]) })
	if opts.IndexInterval > 0 {
		for k := 1; k < len(order); k++ {
			prev, next := &batches[order[k-1]], &batches[order[k]]
			if comparePartition(prev, next) == 0 && next.BaseOffset <= prev.BaseOffset+int64(plans[order[k-1]].lastDelta) {
				return nil, 0, nil, fmt.Errorf("segment: encode: batch %d (topic %d, partition %d): base offset %d not above the previous batch's last offset %d: %w",
					order[k], next.TopicID, next.Partition, next.BaseOffset, prev.BaseOffset+int64(plans[order[k-1]].lastDelta), ErrInvalid)
			}
		}
	}

	// The object is allocated once at its exact size. Compressed batches have no size
	// until compressed, so they are laid out first in scratch space and copied in; the
	// footer's size does not depend on the CRCs still unknown (fixed width), so it is
	// measured before the uncompressed batches are written.
	e := encoders.Get().(*encoder)
	defer e.release()
	e.staged = e.staged[:0]
	for _, i := range order {
		b, p := &batches[i], &plans[i]
		if b.Raw != nil || b.Compression == CompressionNone {
			p.encLen = batchHeaderSize + p.size
			continue
		}
		p.staged = len(e.staged)
		if e.staged, err = e.appendBatch(e.staged, b, p); err != nil {
			return nil, 0, nil, fmt.Errorf("segment: encode: batch %d (topic %d, partition %d): %w", i, b.TopicID, b.Partition, err)
		}
		p.encLen = len(e.staged) - p.staged
	}
	infos = make([]BatchInfo, len(batches))
	footer := Footer{Version: FormatVersion, Batches: make([]BatchInfo, len(batches))}
	var pos, lastIndexed int64
	for k, i := range order {
		b, p := &batches[i], &plans[i]
		infos[i] = BatchInfo{
			TopicID:         b.TopicID,
			Partition:       b.Partition,
			Pos:             pos,
			Len:             int64(p.encLen),
			Records:         p.records,
			BaseOffset:      b.BaseOffset,
			LastOffsetDelta: p.lastDelta,
			FirstTimestamp:  p.firstTs,
			MaxTimestamp:    p.maxTs,
			ProducerID:      b.ProducerID,
			ProducerEpoch:   b.ProducerEpoch,
			BaseSequence:    b.BaseSequence,
		}
		if opts.IndexInterval > 0 {
			newRun := k == 0 || comparePartition(&batches[order[k-1]], b) != 0
			if newRun || pos-lastIndexed >= opts.IndexInterval {
				footer.Index = append(footer.Index, IndexEntry{Offset: b.BaseOffset, Pos: pos})
				lastIndexed = pos
			}
		}
		pos += int64(p.encLen)
	}
	for k, i := range order {
		footer.Batches[k] = infos[i] // sized now; the CRCs follow
	}
	e.footer = appendFooter(e.footer[:0], &footer)
	footerLen := len(e.footer)
	if footerLen > maxFooterLen {
		return nil, 0, nil, fmt.Errorf("segment: encode: footer of %d batches takes %d bytes, more than %d: %w", len(batches), footerLen, maxFooterLen, ErrInvalid)
	}

	// obj's capacity is exact, so the parts cut from it stay valid as it grows.
	obj := make([]byte, 0, int(pos)-aliased(batches, split)+footerLen+TrailerSize)
	cut := 0 // obj[cut:] is not in parts yet
	for k, i := range order {
		b, p := &batches[i], &plans[i]
		start := len(obj)
		switch {
		case b.Raw != nil && split:
			obj = appendRaw(obj, b, b.Raw[:rawHead])
			parts = append(parts, obj[cut:len(obj):len(obj)], b.Raw[rawHead:]) // never empty: rawHead > 0
			cut = len(obj)
			infos[i].CRC = binary.BigEndian.Uint32(b.Raw[offCRC:])
			// The aliased part is the magic byte and the CRC, then what the CRC covers.
			crc = crc32c.Update(crc, parts[len(parts)-2])
			crc = crc32c.Combine(crc32c.Update(crc, b.Raw[rawHead:offAttributes]), infos[i].CRC, int64(len(b.Raw)-offAttributes))
			footer.Batches[k] = infos[i]
			continue
		case b.Raw != nil:
			obj = appendRaw(obj, b, b.Raw)
		case b.Compression == CompressionNone:
			if obj, err = e.appendBatch(obj, b, p); err != nil {
				return nil, 0, nil, fmt.Errorf("segment: encode: batch %d (topic %d, partition %d): %w", i, b.TopicID, b.Partition, err)
			}
		default:
			obj = append(obj, e.staged[p.staged:p.staged+p.encLen]...)
		}
		infos[i].CRC = binary.BigEndian.Uint32(obj[start+offCRC:])
		footer.Batches[k] = infos[i]
	}
	obj = appendFooter(obj, &footer)
	obj = appendTrailer(obj, footerLen, binary.BigEndian.Uint32(obj[len(obj)-4:]))
	if split {
		crc = crc32c.Update(crc, obj[cut:])
	}
	return append(parts, obj[cut:]), crc, infos, nil
}

// aliased is how many bytes of batches' Raw batches EncodeParts (split) leaves in the
// caller's memory rather than copying.
func aliased(batches []Batch, split bool) int {
	n := 0
	for i := range batches {
		if b := &batches[i]; split && b.Raw != nil {
			n += len(b.Raw) - rawHead
		}
	}
	return n
}

// appendRaw appends raw — b's Raw batch, or its head — with b's base offset and the
// leader epoch -1 written in.
func appendRaw(obj []byte, b *Batch, raw []byte) []byte {
	start := len(obj)
	obj = append(obj, raw...)
	binary.BigEndian.PutUint64(obj[start+offBaseOffset:], uint64(b.BaseOffset))
	binary.BigEndian.PutUint32(obj[start+offLeaderEpoch:], math.MaxUint32) // -1
	return obj
}

func (e *encoder) release() {
	// A rare huge batch must not pin its scratch space in the pool for ever.
	if cap(e.records) > 16<<20 {
		e.records = nil
	}
	if cap(e.staged) > 16<<20 {
		e.staged = nil
	}
	clear(e.headers[:cap(e.headers)]) // drop references to the caller's bytes
	e.headers = e.headers[:0]
	encoders.Put(e)
}

func comparePartition(a, b *Batch) int {
	if c := cmp.Compare(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// checkBatch validates b and measures its records section.
func checkBatch(b *Batch, checkCRC bool) (plan, error) {
	if b.Raw != nil {
		return checkRaw(b, checkCRC)
	}
	p := plan{assign: true, records: int32(len(b.Records))}
	n := len(b.Records)
	switch {
	case n == 0:
		return p, fmt.Errorf("no records: %w", ErrInvalid)
	case n > MaxBatchBytes/minRecordSize:
		return p, fmt.Errorf("%d records, more than %d: %w", n, MaxBatchBytes/minRecordSize, ErrInvalid)
	case b.Partition < 0:
		return p, fmt.Errorf("negative partition: %w", ErrInvalid)
	case b.BaseOffset < 0:
		return p, fmt.Errorf("negative base offset %d: %w", b.BaseOffset, ErrInvalid)
	case b.Compression < CompressionNone || b.Compression > CompressionZstd:
		return p, fmt.Errorf("unknown compression %d: %w", b.Compression, ErrInvalid)
	}
	for j := range b.Records {
		if b.Records[j].OffsetDelta != 0 {
			p.assign = false
			break
		}
	}
	first := b.Records[0].Timestamp
	p.firstTs, p.maxTs = first, first
	prev := int32(-1)
	for j := range b.Records {
		r := &b.Records[j]
		od := int32(j)
		if !p.assign {
			od = r.OffsetDelta
			if od <= prev {
				return p, fmt.Errorf("record %d: offset delta %d not above the previous %d: %w", j, od, prev, ErrInvalid)
			}
			prev = od
		}
		p.maxTs = max(p.maxTs, r.Timestamp)
		body, err := recordBodyLen(r, od, r.Timestamp-first)
		if err != nil {
			return p, fmt.Errorf("record %d: %w", j, err)
		}
		p.size += varintLen(int32(body)) + body
		if p.size > MaxBatchBytes {
			return p, fmt.Errorf("records take more than %d bytes: %w", MaxBatchBytes, ErrInvalid)
		}
		p.lastDelta = od
	}
	if b.BaseOffset > math.MaxInt64-int64(p.lastDelta) {
		return p, fmt.Errorf("base offset %d overflows: %w", b.BaseOffset, ErrInvalid)
	}
	return p, nil
}

// checkRaw validates a pre-encoded batch: its header, its CRC with checkCRC (EncodeParts
// does not read the bytes again: the object's CRC it returns carries the batches' CRCs
// to the store, which verifies them), and that b's fields say what its header says, so
// that the footer entry read from the header describes the batch the caller meant. The records were checked by ScanBatch; walking them again
// would cost what storing the batch as it is saves.
func checkRaw(b *Batch, checkCRC bool) (plan, error) {
	var p plan
	switch {
	case len(b.Records) != 0:
		return p, fmt.Errorf("both records and a raw batch: %w", ErrInvalid)
	case b.Partition < 0:
		return p, fmt.Errorf("negative partition: %w", ErrInvalid)
	case b.BaseOffset < 0:
		return p, fmt.Errorf("negative base offset %d: %w", b.BaseOffset, ErrInvalid)
	}
	h, err := ParseBatchHeader(b.Raw)
	if err != nil {
		return p, fmt.Errorf("raw batch: %s: %w", strings.TrimSuffix(err.Error(), ": "+ErrCorrupt.Error()), ErrInvalid)
	}
	var problem string
	switch {
	case checkCRC && batchCRC(b.Raw) != h.CRC:
		problem = fmt.Sprintf("CRC %#08x, computed %#08x", h.CRC, batchCRC(b.Raw))
	case h.ProducerID != b.ProducerID || h.ProducerEpoch != b.ProducerEpoch || h.BaseSequence != b.BaseSequence:
		problem = fmt.Sprintf("producer %d epoch %d base sequence %d, the batch says %d, %d, %d",
			h.ProducerID, h.ProducerEpoch, h.BaseSequence, b.ProducerID, b.ProducerEpoch, b.BaseSequence)
	case h.Compression != b.Compression:
		problem = fmt.Sprintf("compression %d, the batch says %d", h.Compression, b.Compression)
	case h.LogAppendTime != b.LogAppendTime:
		problem = fmt.Sprintf("LogAppendTime %v, the batch says %v", h.LogAppendTime, b.LogAppendTime)
	case h.Transactional != b.Transactional:
		problem = fmt.Sprintf("transactional %v, the batch says %v", h.Transactional, b.Transactional)
	case len(b.Raw)-batchHeaderSize > MaxBatchBytes:
		problem = fmt.Sprintf("records take more than %d bytes", MaxBatchBytes)
	case b.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta):
		problem = fmt.Sprintf("base offset %d overflows", b.BaseOffset)
	default:
		return plan{size: len(b.Raw) - batchHeaderSize, lastDelta: h.LastOffsetDelta,
			records: h.NumRecords, firstTs: h.FirstTimestamp, maxTs: h.MaxTimestamp}, nil
	}
	return p, fmt.Errorf("raw batch: %s: %w", problem, ErrInvalid)
}

// recordBodyLen is the encoded size of a record after its length prefix.
func recordBodyLen(r *Record, offsetDelta int32, tsDelta int64) (int, error) {
	if len(r.Key) > MaxBatchBytes || len(r.Value) > MaxBatchBytes || len(r.Headers) > MaxBatchBytes {
		return 0, fmt.Errorf("larger than %d bytes: %w", MaxBatchBytes, ErrInvalid)
	}
	n := 1 + varlongLen(tsDelta) + varintLen(offsetDelta) + bytesLen(r.Key) + bytesLen(r.Value) +
		varintLen(int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		if len(h.Key) > MaxBatchBytes || len(h.Value) > MaxBatchBytes {
			return 0, fmt.Errorf("header %d larger than %d bytes: %w", i, MaxBatchBytes, ErrInvalid)
		}
		n += varintLen(int32(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
		if n > MaxBatchBytes {
			return 0, fmt.Errorf("larger than %d bytes: %w", MaxBatchBytes, ErrInvalid)
		}
	}
	return n, nil
}

// appendBatch appends b as one Kafka v2 record batch: kmsg lays out the header and the
// records; the length, CRC-32C and compression are filled in here.
func (e *encoder) appendBatch(dst []byte, b *Batch, p *plan) ([]byte, error) {
	attrs := int16(b.Compression)
	if b.LogAppendTime {
		attrs |= attrTimestampType
	}
	if b.Transactional {
		attrs |= attrTransactional
	}
	h := kmsg.RecordBatch{
		FirstOffset:          b.BaseOffset,
		PartitionLeaderEpoch: -1, // as producers send it
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      p.lastDelta,
		FirstTimestamp:       b.Records[0].Timestamp,
		MaxTimestamp:         p.maxTs,
		ProducerID:           b.ProducerID,
		ProducerEpoch:        b.ProducerEpoch,
		FirstSequence:        b.BaseSequence,
		NumRecords:           int32(len(b.Records)),
	}
	start := len(dst)
	dst = h.AppendTo(dst)
	if b.Compression == CompressionNone {
		dst = grow(dst, p.size)
		dst = e.appendRecords(dst, b, p)
	} else {
		if cap(e.records) < p.size {
			e.records = make([]byte, 0, p.size)
		}
		e.records = e.appendRecords(e.records[:0], b, p)
		var err error
		if dst, err = compress(dst, e.records, b.Compression); err != nil {
			return nil, err
		}
	}
	length := len(dst) - start - 12
	if length > math.MaxInt32 {
		return nil, fmt.Errorf("batch of %d bytes: %w", length, ErrInvalid)
	}
	binary.BigEndian.PutUint32(dst[start+offLength:], uint32(length))
	binary.BigEndian.PutUint32(dst[start+offCRC:], crc32c.Checksum(dst[start+offAttributes:]))
	return dst, nil
}

func (e *encoder) appendRecords(dst []byte, b *Batch, p *plan) []byte {
	first := b.Records[0].Timestamp
	for j := range b.Records {
		r := &b.Records[j]
		od := r.OffsetDelta
		if p.assign {
			od = int32(j)
		}
		tsDelta := r.Timestamp - first
		body, _ := recordBodyLen(r, od, tsDelta) // checked by checkBatch
		e.headers = e.headers[:0]
		for _, h := range r.Headers {
			e.headers = append(e.headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr := kmsg.Record{
			Length:           int32(body),
			TimestampDelta64: tsDelta,
			OffsetDelta:      od,
			Key:              r.Key,
			Value:            r.Value,
			Headers:          e.headers,
		}
		dst = kr.AppendTo(dst)
	}
	return dst
}
