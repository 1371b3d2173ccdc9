package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/crc32c"
)

// asRaw returns batches with each batch's records replaced by its bytes in obj (as
// Encode laid them out, described by infos), with junk in the base offset: Encode
// must write the Batch's own.
func asRaw(batches []Batch, obj []byte, infos []BatchInfo) []Batch {
	out := make([]Batch, len(batches))
	for i, b := range batches {
		b.Records = nil
		b.Raw = bytes.Clone(obj[infos[i].Pos : infos[i].Pos+infos[i].Len])
		SetBaseOffset(b.Raw, 987654321)
		out[i] = b
	}
	return out
}

// TestRawStoresWhatEncodeWrites: batches handed to Encode already encoded give the
// same object, byte for byte, footer and index included, as the records they hold: the
// reader, the compactor and the check cannot tell a stored batch from an encoded one.
func TestRawStoresWhatEncodeWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for _, c := range codecs {
		for _, layout := range []string{"writer", "compactor"} {
			t.Run(codecName(c)+"/"+layout, func(t *testing.T) {
				batches := genBatches(rng, genSpec{partitions: 5, records: 300, perBatch: 40, codecs: []Compression{c}})
				opts := EncodeOptions{}
				if layout == "compactor" {
					next := map[[2]int64]int64{}
					for i := range batches {
						k := [2]int64{batches[i].TopicID, int64(batches[i].Partition)}
						batches[i].BaseOffset = next[k] + 3
						next[k] = batches[i].BaseOffset + int64(len(batches[i].Records))
					}
					opts.IndexInterval = 500
				}
				want, wantInfos, err := Encode(batches, opts)
				if err != nil {
					t.Fatal(err)
				}
				raws := asRaw(batches, want, wantInfos)
				kept := make([][]byte, len(raws))
				for i := range raws {
					kept[i] = bytes.Clone(raws[i].Raw)
				}
				got, infos, err := Encode(raws, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("object from raw batches differs from the encoded one (%d and %d bytes)", len(got), len(want))
				}
				for i := range infos {
					if infos[i] != wantInfos[i] {
						t.Fatalf("info %d: %+v, want %+v", i, infos[i], wantInfos[i])
					}
					if !bytes.Equal(raws[i].Raw, kept[i]) {
						t.Fatalf("Encode modified raw batch %d", i)
					}
				}
				checkObject(t, batches, got, infos, opts)
			})
		}
	}
}

// TestScanEncodedBatches: every batch Encode writes scans as canonical, with a summary
// computed here from the records it was given.
func TestScanEncodedBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	batches := genBatches(rng, genSpec{partitions: 4, records: 400, perBatch: 50})
	obj, infos, err := Encode(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range batches {
		raw := obj[infos[i].Pos : infos[i].Pos+infos[i].Len]
		s, err := ScanBatch(raw)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		var w BatchSummary
		for j, r := range b.Records {
			ts := r.Timestamp
			if b.LogAppendTime {
				ts = infos[i].MaxTimestamp
			}
			data := int64(len(r.Key) + len(r.Value))
			for _, h := range r.Headers {
				data += int64(len(h.Key) + len(h.Value))
			}
			if j == 0 {
				w.MinTimestamp, w.MaxTimestamp = ts, ts
			}
			w.MinTimestamp, w.MaxTimestamp = min(w.MinTimestamp, ts), max(w.MaxTimestamp, ts)
			w.DataBytes += data
			w.MaxRecordDataBytes = max(w.MaxRecordDataBytes, data)
			w.Headers += len(r.Headers)
		}
		w.Header, _ = ParseBatchHeader(raw)
		w.Canonical = true
		if s != w {
			t.Fatalf("batch %d (%s, LogAppendTime %v): summary %+v, want %+v", i, codecName(b.Compression), b.LogAppendTime, s, w)
		}
	}
}

// scanRec is a record laid out field by field, as any Kafka client may lay it out.
type scanRec struct {
	tsDelta int64
	od      int32
	key     []byte
	value   []byte
	headers []kmsg.Header
}

func sectionOf(recs []scanRec) []byte {
	var section []byte
	for _, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: r.od, Key: r.key, Value: r.value, Headers: r.headers}
		body := kr.AppendTo(nil) // length 0 takes one byte: the rest is the body
		kr.Length = int32(len(body) - 1)
		section = kr.AppendTo(section)
	}
	return section
}

// TestScanBatch: what ScanBatch says of batches laid out as other clients may lay them
// out, with answers worked out by hand.
func TestScanBatch(t *testing.T) {
	three := []scanRec{
		{tsDelta: 0, od: 0, key: []byte("a"), value: []byte("xyz"), headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}},
		{tsDelta: 5, od: 1, key: []byte("bb")},
		{tsDelta: -3, od: 2, value: []byte{}},
	}
	two := func(d0, d1 int64, od0, od1 int32) []scanRec {
		return []scanRec{{tsDelta: d0, od: od0, value: []byte("v")}, {tsDelta: d1, od: od1, value: []byte("w")}}
	}
	for _, tc := range []struct {
		name               string
		attrs              uint16
		recs               []scanRec
		lastDelta          int32
		firstTs, maxTs     int64
		canonical          bool
		minTs, maxRecordTs int64
		data, maxData      int64
		headers            int
	}{
		{"as Encode lays it out", 0, three, 2, 1000, 1005, true, 997, 1005, 8, 6, 1},
		{"lz4, as Encode lays it out", uint16(CompressionLZ4), three, 2, 1000, 1005, true, 997, 1005, 8, 6, 1},
		{"max timestamp above the records'", 0, three, 2, 1000, 2000, false, 997, 1005, 8, 6, 1},
		{"max timestamp below the records'", 0, three, 2, 1000, 1001, false, 997, 1005, 8, 6, 1},
		{"first timestamp delta not 0", 0, two(2, 4, 0, 1), 1, 1000, 1004, false, 1002, 1004, 2, 1, 0},
		{"offset deltas with a gap", 0, two(0, 1, 0, 2), 2, 1000, 1001, false, 1000, 1001, 2, 1, 0},
		{"offset deltas from 1", 0, two(0, 1, 1, 2), 2, 1000, 1001, false, 1000, 1001, 2, 1, 0},
		{"LogAppendTime as Encode stamps it", attrTimestampType, two(0, 0, 0, 1), 1, 3000, 3000, true, 3000, 3000, 2, 1, 0},
		{"LogAppendTime with deltas", attrTimestampType, two(0, 7, 0, 1), 1, 3000, 3000, false, 3000, 3000, 2, 1, 0},
		{"LogAppendTime, first timestamp not the stamp", attrTimestampType, two(0, 0, 0, 1), 1, 1000, 3000, false, 3000, 3000, 2, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			section := sectionOf(tc.recs)
			if c := Compression(tc.attrs & attrCompression); c != CompressionNone {
				var err error
				if section, err = compress(nil, section, c); err != nil {
					t.Fatal(err)
				}
			}
			raw := rawBatch(tc.attrs, int32(len(tc.recs)), tc.lastDelta, tc.firstTs, tc.maxTs, section)
			s, err := ScanBatch(raw)
			if err != nil {
				t.Fatal(err)
			}
			if s.Canonical != tc.canonical || s.MinTimestamp != tc.minTs || s.MaxTimestamp != tc.maxRecordTs ||
				s.DataBytes != tc.data || s.MaxRecordDataBytes != tc.maxData || s.Headers != tc.headers {
				t.Errorf("summary %+v, want canonical %v, timestamps [%d, %d], data %d (max %d), %d headers",
					s, tc.canonical, tc.minTs, tc.maxRecordTs, tc.data, tc.maxData, tc.headers)
			}
			checkScan(t, raw)
		})
	}
}

// TestScanRefusesWhatDecodeRefuses: every corruption DecodeBatch refuses, ScanBatch
// refuses too.
func TestScanRefusesWhatDecodeRefuses(t *testing.T) {
	for _, c := range codecs {
		raw := encodeOne(t, Batch{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []Record{
			{Key: []byte("k"), Value: []byte("value"), Timestamp: 5, Headers: []Header{{Key: "h"}}},
			{Value: []byte("second"), Timestamp: 6},
		}})
		for i := range raw {
			bad := bytes.Clone(raw)
			bad[i] ^= 0x41
			checkScan(t, bad)
		}
		for n := range len(raw) {
			checkScan(t, raw[:n])
		}
	}
}

func TestEncodeRawInvalid(t *testing.T) {
	good := encodeOne(t, Batch{ProducerID: 7, ProducerEpoch: 1, BaseSequence: 10, Records: []Record{{Value: []byte("x"), Timestamp: 1}}})
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	leader := bytes.Clone(good)
	binary.BigEndian.PutUint32(leader[offLeaderEpoch:], 3)
	ok := Batch{ProducerID: 7, ProducerEpoch: 1, BaseSequence: 10, Raw: good}
	with := func(f func(b *Batch)) Batch { b := ok; f(&b); return b }
	if _, _, err := Encode([]Batch{ok}, EncodeOptions{}); err != nil {
		t.Fatalf("the good batch: %v", err)
	}
	for _, tc := range []struct {
		name  string
		batch Batch
	}{
		{"records and raw", with(func(b *Batch) { b.Records = []Record{{}} })},
		{"negative partition", with(func(b *Batch) { b.Partition = -1 })},
		{"negative base offset", with(func(b *Batch) { b.BaseOffset = -1 })},
		{"truncated", with(func(b *Batch) { b.Raw = good[:len(good)-1] })},
		{"two batches", with(func(b *Batch) { b.Raw = append(bytes.Clone(good), good...) })},
		{"bad CRC", with(func(b *Batch) { b.Raw = badCRC })},
		{"leader epoch set", with(func(b *Batch) { b.Raw = leader })},
		{"other producer", with(func(b *Batch) { b.ProducerID = 8 })},
		{"other epoch", with(func(b *Batch) { b.ProducerEpoch = 2 })},
		{"other sequence", with(func(b *Batch) { b.BaseSequence = 11 })},
		{"other codec", with(func(b *Batch) { b.Compression = CompressionZstd })},
		{"other timestamp type", with(func(b *Batch) { b.LogAppendTime = true })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, infos, err := Encode([]Batch{tc.batch}, EncodeOptions{})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if obj != nil || infos != nil {
				t.Fatal("output despite the error")
			}
		})
	}
}

// checkScan proves ScanBatch right about raw: it refuses exactly what DecodeBatch
// refuses; its summary is what the decoded records give; and Canonical holds exactly
// when encoding the decoded records lays out the same records section and header.
func checkScan(t *testing.T, raw []byte) {
	t.Helper()
	s, serr := ScanBatch(raw)
	d, derr := DecodeBatch(raw)
	if (serr == nil) != (derr == nil) {
		t.Fatalf("ScanBatch says %v, DecodeBatch %v", serr, derr)
	}
	if serr != nil {
		mustCorrupt(t, serr)
		return
	}
	h, _ := ParseBatchHeader(raw)
	w := BatchSummary{Header: h, Canonical: s.Canonical}
	b := Batch{BaseOffset: d.BaseOffset, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		BaseSequence: d.BaseSequence, LogAppendTime: d.LogAppendTime}
	for i, r := range d.Records {
		data := int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			data += int64(len(h.Key) + len(h.Value))
		}
		if i == 0 {
			w.MinTimestamp, w.MaxTimestamp = r.Timestamp, r.Timestamp
		}
		w.MinTimestamp, w.MaxTimestamp = min(w.MinTimestamp, r.Timestamp), max(w.MaxTimestamp, r.Timestamp)
		w.DataBytes += data
		w.MaxRecordDataBytes = max(w.MaxRecordDataBytes, data)
		w.Headers += len(r.Headers)
		b.Records = append(b.Records, Record{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
	}
	if s != w {
		t.Fatalf("summary %+v, want %+v", s, w)
	}
	section := raw[batchHeaderSize:]
	if h.Compression != CompressionNone {
		var err error
		if section, err = decompress(section, h.Compression, len(section)); err != nil {
			t.Fatal(err)
		}
	}
	same := false
	if obj, infos, err := Encode([]Batch{b}, EncodeOptions{}); err == nil {
		re := obj[:infos[0].Len]
		same = bytes.Equal(re[offLastOffsetDelta:batchHeaderSize], raw[offLastOffsetDelta:batchHeaderSize]) &&
			bytes.Equal(re[batchHeaderSize:], section)
	}
	if same != s.Canonical {
		t.Fatalf("Canonical %v, but re-encoding the records lays out the same batch: %v", s.Canonical, same)
	}
}

func FuzzScanBatch(f *testing.F) {
	for _, obj := range seedObjects(f) {
		for _, raw := range batchesOf(f, obj) {
			f.Add(raw)
		}
	}
	f.Fuzz(checkScan)
}

// FuzzScanRecords fuzzes the records section behind a valid header and CRC, as
// FuzzDecodeRecords does, with the header's timestamps free so that canonical and
// non-canonical layouts are both reached.
func FuzzScanRecords(f *testing.F) {
	for _, obj := range seedObjects(f) {
		for _, raw := range batchesOf(f, obj) {
			h, _ := ParseBatchHeader(raw)
			attrs := binary.BigEndian.Uint16(raw[offAttributes:])
			f.Add(attrs, h.NumRecords, h.LastOffsetDelta, h.FirstTimestamp, h.MaxTimestamp-h.FirstTimestamp, raw[batchHeaderSize:])
		}
	}
	f.Add(uint16(0), int32(2), int32(1), int64(1000), int64(5), sectionOf([]scanRec{{od: 0}, {tsDelta: 5, od: 1}}))
	f.Fuzz(func(t *testing.T, attrs uint16, n, lastDelta int32, ts, maxAbove int64, section []byte) {
		checkScan(t, rawBatch(attrs, n, lastDelta, ts, ts+maxAbove, section))
	})
}

// FuzzScanBatches: ScanBatches accepts exactly what SplitBatches and ScanBatch accept
// together, says the same of it, and stops when told.
func FuzzScanBatches(f *testing.F) {
	for _, obj := range seedObjects(f) {
		raws := batchesOf(f, obj)
		f.Add(raws[0], uint8(0))
		f.Add(bytes.Join(raws, nil), uint8(1))
		f.Add(bytes.Join(raws, nil)[1:], uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, stop uint8) {
		var raws [][]byte
		var sums []BatchSummary
		err := ScanBatches(data, func(raw []byte, s BatchSummary) bool {
			raws, sums = append(raws, raw), append(sums, s)
			return true
		})
		split, serr := SplitBatches(data)
		var want []BatchSummary
		for _, raw := range split {
			s, err := ScanBatch(raw)
			if err != nil {
				serr = err
				break
			}
			want = append(want, s)
		}
		if (err == nil) != (serr == nil) {
			t.Fatalf("ScanBatches says %v; SplitBatches and ScanBatch %v", err, serr)
		}
		if err != nil {
			mustCorrupt(t, err)
			return
		}
		if len(raws) != len(split) || len(sums) != len(want) {
			t.Fatalf("%d batches and %d summaries, want %d", len(raws), len(sums), len(split))
		}
		for i := range raws {
			if !bytes.Equal(raws[i], split[i]) || cap(raws[i]) != len(raws[i]) || sums[i] != want[i] {
				t.Fatalf("batch %d differs from SplitBatches' and ScanBatch's", i)
			}
		}
		// Told to stop after batch k, it visits no more.
		k, visits := int(stop)%len(raws), 0
		err = ScanBatches(data, func([]byte, BatchSummary) bool {
			visits++
			return visits <= k
		})
		if err != nil || visits != k+1 {
			t.Fatalf("told to stop at batch %d: %d visits, %v", k, visits, err)
		}
	})
}

// EncodeParts lays out the object Encode does, byte for byte, without copying raw
// batches: their bodies are parts that alias the caller's bytes.
func TestEncodePartsAliasesRaw(t *testing.T) {
	rawA := encodeOne(t, Batch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []Record{{Value: []byte("a"), Timestamp: 1}, {Value: []byte("bb"), Timestamp: 2}}})
	rawB := encodeOne(t, Batch{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("c"), 300), Timestamp: 3}}})
	batches := []Batch{
		{TopicID: 2, Partition: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Raw: rawA},
		{TopicID: 1, Partition: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []Record{{Value: []byte("v"), Timestamp: 5}}},
		{TopicID: 2, Partition: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Raw: rawB},
		{TopicID: 3, Partition: 0, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Compression: CompressionGzip, Records: []Record{{Value: []byte("z"), Timestamp: 5}}},
	}
	whole, infos, err := Encode(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keepA, keepB := bytes.Clone(rawA), bytes.Clone(rawB)
	parts, size, crc, pinfos, err := EncodeParts(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(parts, nil); !bytes.Equal(got, whole) || size != int64(len(whole)) {
		t.Fatalf("the parts (%d bytes, size %d) are not Encode's object (%d bytes)", len(got), size, len(whole))
	}
	if want := crc32c.Checksum(whole); crc != want {
		t.Fatalf("CRC-32C %#08x, the object's %#08x", crc, want)
	}
	// A raw batch's bytes changed after its CRC was checked: EncodeParts does not read
	// them, but its CRC is the batch's, so the store's check of it fails.
	changed := bytes.Clone(rawB)
	changed[len(changed)-1] ^= 1
	batches[2].Raw = changed
	cparts, _, ccrc, _, err := EncodeParts(batches, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ccrc == crc32c.Checksum(bytes.Join(cparts, nil)) {
		t.Fatal("the CRC-32C of an object holding a changed batch matches its bytes")
	}
	batches[2].Raw = rawB
	if !reflect.DeepEqual(infos, pinfos) {
		t.Fatalf("infos differ:\n%+v\n%+v", infos, pinfos)
	}
	aliased := 0
	for _, p := range parts {
		for _, raw := range [][]byte{rawA, rawB} {
			if len(p) > 0 && &p[0] == &raw[rawHead] && len(p) == len(raw)-rawHead {
				aliased++
			}
		}
	}
	if aliased != 2 {
		t.Fatalf("%d of the 2 raw batches are parts of their own", aliased)
	}
	if !bytes.Equal(rawA, keepA) || !bytes.Equal(rawB, keepB) {
		t.Fatal("EncodeParts wrote into the caller's batches")
	}
	if _, err := ReadFooter(whole); err != nil {
		t.Fatalf("the object does not open: %v", err)
	}
}

func TestResetLeaderEpochs(t *testing.T) {
	batch := func(n int) []byte {
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = Record{Value: []byte{byte(i)}, Timestamp: 1}
		}
		return bytes.Clone(encodeOne(t, Batch{TopicID: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: recs}))
	}
	a, b := batch(3), batch(2)
	SetLeaderEpoch(a, 0)
	SetLeaderEpoch(b, 7)
	body := append(append([]byte{}, a...), b...)
	crcs := []uint32{binary.BigEndian.Uint32(a[offCRC:]), binary.BigEndian.Uint32(b[offCRC:])}
	// A truncated third batch is left alone (and refused by the validation after).
	body = append(body, b[:20]...)
	ResetLeaderEpochs(body)
	raws, err := SplitBatches(body[:len(a)+len(b)])
	if err != nil {
		t.Fatalf("split after reset: %v", err)
	}
	for i, raw := range raws {
		h, err := ParseBatchHeader(raw)
		if err != nil {
			t.Fatalf("batch %d after reset: %v", i, err)
		}
		if h.CRC != crcs[i] {
			t.Fatalf("batch %d: CRC changed", i)
		}
	}
	if !bytes.Equal(body[len(a)+len(b):], b[:20]) {
		t.Fatalf("the truncated batch was touched")
	}
}
