package segment

import (
	"bytes"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControlBatch: a rendered marker reads back, through kmsg as a Kafka client reads
// it, as a control batch of the producer with the marker's type, a valid CRC and one
// record.
func TestControlBatch(t *testing.T) {
	for _, commit := range []bool{true, false} {
		raw := ControlBatch(42, 7, 3, commit, 1700000000000)
		if len(raw) != ControlBatchSize || !IsControlBatch(raw) {
			t.Fatalf("length %d, control %v", len(raw), IsControlBatch(raw))
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if b.FirstOffset != 42 || b.ProducerID != 7 || b.ProducerEpoch != 3 || b.NumRecords != 1 || b.Attributes != 0x30 ||
			b.FirstSequence != -1 || b.MaxTimestamp != 1700000000000 || int(b.Length) != len(raw)-12 {
			t.Fatalf("batch %+v", b)
		}
		if crc := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); crc != b.CRC {
			t.Fatalf("CRC %x, computed %x", b.CRC, crc)
		}
		var r kmsg.Record
		if err := r.ReadFrom(b.Records); err != nil {
			t.Fatal(err)
		}
		// The record's length is what follows its length field, as a client decoding
		// records back to back needs it.
		if int(r.Length) != len(b.Records)-1 {
			t.Fatalf("record length %d, %d bytes follow it", r.Length, len(b.Records)-1)
		}
		typ := byte(0)
		if commit {
			typ = 1
		}
		if !bytes.Equal(r.Key, []byte{0, 0, 0, typ}) || !bytes.Equal(r.Value, []byte{0, 0, 0, 0, 0, 0}) {
			t.Fatalf("record key %x value %x", r.Key, r.Value)
		}
	}
	if IsControlBatch(make([]byte, batchHeaderSize)) {
		t.Fatal("a zero header is not a control batch")
	}
}
