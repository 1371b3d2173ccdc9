// Package batchtest lays records out as Kafka v2 record batches the way a Kafka client
// does, with franz-go's kmsg and nothing of Strata's encoder: what a foreign producer
// would send. Tests of every layer that takes batches (the broker core, the HTTP API)
// build their input with it.
package batchtest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"strconv"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/crc32c"
)

// Record is a record as a Kafka producer hands it to its batch encoder.
type Record struct {
	Key, Value []byte
	Headers    []kmsg.Header
	Ts         int64
}

// Batch lays records out as one v2 batch. codec is 0 (none), 1 (gzip) or 3 (lz4); pid,
// epoch and seq are the producer fields (-1, -1, -1: none).
func Batch(t testing.TB, recs []Record, codec int16, pid int64, epoch int16, seq int32) []byte {
	return BatchAt(t, recs, codec, pid, epoch, seq, recs[0].Ts)
}

// BatchAt is Batch with the batch's first timestamp, from which the records' timestamps
// are measured, given: a client may measure them from another base than the first
// record's timestamp (Strata's encoder never does).
func BatchAt(t testing.TB, recs []Record, codec int16, pid int64, epoch int16, seq int32, first int64) []byte {
	t.Helper()
	var section []byte
	maxTs := recs[0].Ts
	for i, r := range recs {
		maxTs = max(maxTs, r.Ts)
		kr := kmsg.Record{TimestampDelta64: r.Ts - first, OffsetDelta: int32(i), Key: r.Key, Value: r.Value, Headers: r.Headers}
		body := kr.AppendTo(nil) // length 0 takes one byte: the rest is the body
		kr.Length = int32(len(body) - 1)
		section = kr.AppendTo(section)
	}
	if codec != 0 {
		var buf bytes.Buffer
		var zw io.WriteCloser
		switch codec {
		case 1:
			zw = gzip.NewWriter(&buf)
		case 3:
			zw = lz4.NewWriter(&buf)
		default:
			t.Fatalf("codec %d", codec)
		}
		if _, err := zw.Write(section); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		section = buf.Bytes()
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: codec,
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: first, MaxTimestamp: maxTs,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(len(recs)), Records: section,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32c.Checksum(raw[21:]))
	return raw
}

// Some returns n keyed records with values of growing length, timestamps ts, ts+1, ...
func Some(n int, ts int64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: []byte("k" + strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 10+i), Ts: ts + int64(i)}
	}
	return recs
}
