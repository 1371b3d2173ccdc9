package segment

import (
	"encoding/binary"

	"github.com/strata-io/strata/internal/crc32c"
)

// A transaction marker as Kafka clients read it: a control batch (transactional and
// control attributes) of one record whose key is the control record's version (0) and
// type (0 abort, 1 commit), and whose value is the end-transaction marker's version (0)
// and coordinator epoch. Markers are catalog rows (docs/design.md "Transactions"):
// the reader renders each with ControlBatch where its offset falls, and no object
// holds one.

// controlRecord is the one record of a marker: length 16, attributes 0, timestamp delta
// 0, offset delta 0, key of 4 bytes, value of 6 bytes, no headers.
var controlRecord = [...]byte{
	32,         // length 16 (what follows), zigzag
	0,          // attributes
	0,          // timestamp delta
	0,          // offset delta
	8,          // key length 4
	0, 0, 0, 0, // key: version 0, type (set below)
	12,               // value length 6
	0, 0, 0, 0, 0, 0, // value: version 0, coordinator epoch 0
	0, // headers
}

// ControlBatchSize is the length of every batch ControlBatch renders.
const ControlBatchSize = batchHeaderSize + len(controlRecord)

// ControlBatch renders a commit (or abort) marker of producer id/epoch at offset, stamped
// ts (unix ms), as Kafka writes one.
func ControlBatch(offset, producerID int64, producerEpoch int16, commit bool, ts int64) []byte {
	b := make([]byte, ControlBatchSize)
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(offset))
	be.PutUint32(b[offLength:], uint32(ControlBatchSize-12))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff) // -1, as stored batches carry it
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	be.PutUint32(b[offLastOffsetDelta:], 0)
	be.PutUint64(b[offFirstTimestamp:], uint64(ts))
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	be.PutUint64(b[offProducerID:], uint64(producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(b[offBaseSequence:], 0xffffffff) // -1
	be.PutUint32(b[offNumRecords:], 1)
	copy(b[batchHeaderSize:], controlRecord[:])
	if commit {
		b[batchHeaderSize+8] = 1 // the key's type
	}
	be.PutUint32(b[offCRC:], crc32c.Checksum(b[offAttributes:]))
	return b
}

// IsControlBatch reports whether a raw batch is a control batch (a transaction marker).
func IsControlBatch(raw []byte) bool {
	return len(raw) >= batchHeaderSize && binary.BigEndian.Uint16(raw[offAttributes:])&attrControl != 0
}

// Transactional reports whether the batches of data carry Kafka's transactional
// attribute: any of them, and all of them. Only the framing is read (lengths and
// attributes): call it on batches already validated.
func Transactional(data []byte) (some, all bool) {
	all = true
	for pos := 0; pos < len(data); {
		end, err := batchEnd(data, pos)
		if err != nil {
			break
		}
		t := binary.BigEndian.Uint16(data[pos+offAttributes:])&attrTransactional != 0
		some, all = some || t, all && t
		pos = end
	}
	return some, all && some
}
