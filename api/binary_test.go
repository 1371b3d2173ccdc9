package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// kafkaRecord is a record as a Kafka producer hands it to its batch encoder.
type kafkaRecord struct {
	key, value []byte
	headers    []kmsg.Header
	ts         int64
}

// kafkaBatch lays records out as one v2 batch the way a Kafka client does, with
// franz-go's kmsg and nothing of Strata's encoder: what a foreign producer would send.
// codec is 0 (none) or 3 (lz4).
func kafkaBatch(t testing.TB, recs []kafkaRecord, codec int16, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	var section []byte
	first, maxTs := recs[0].ts, recs[0].ts
	for i, r := range recs {
		maxTs = max(maxTs, r.ts)
		kr := kmsg.Record{TimestampDelta64: r.ts - first, OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		body := kr.AppendTo(nil) // length 0 takes one byte: the rest is the body
		kr.Length = int32(len(body) - 1)
		section = kr.AppendTo(section)
	}
	if codec == 3 {
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
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
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func someRecords(n int, ts int64) []kafkaRecord {
	recs := make([]kafkaRecord, n)
	for i := range recs {
		recs[i] = kafkaRecord{key: []byte("k" + strconv.Itoa(i)), value: bytes.Repeat([]byte{byte('a' + i%26)}, 10+i), ts: ts + int64(i)}
	}
	return recs
}

func (e *testEnv) postBatches(path string, body []byte, headers ...header) *httptest.ResponseRecorder {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", RecordBatchContentType)
	for _, h := range headers {
		req.Header.Set(h.k, h.v)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

func TestBinaryProduceRefusals(t *testing.T) {
	ts := testNow.UnixMilli()
	good := kafkaBatch(t, someRecords(3, ts), 0, -1, -1, -1)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	lz := kafkaBatch(t, someRecords(2, ts), 3, -1, -1, -1)
	idem := func(seq int32) []byte { return kafkaBatch(t, someRecords(2, ts), 0, 7, 1, seq) }
	logAppend := bytes.Clone(good)
	logAppend[22] |= 0x08 // attributes: timestamp type
	binary.BigEndian.PutUint32(logAppend[17:], crc32.Checksum(logAppend[21:], crc32.MakeTable(crc32.Castagnoli)))
	for _, tc := range []struct {
		name   string
		path   string
		body   []byte
		status int
		code   Code
	}{
		{"no partition", "/v1/topics/t/records", good, 400, CodeInvalidPartition},
		{"bad partition", "/v1/topics/t/records?partition=-1", good, 400, CodeInvalidPartition},
		{"partition out of range", "/v1/topics/t/records?partition=2", good, 404, CodePartitionOutOfRange},
		{"unknown topic", "/v1/topics/nope/records?partition=0", good, 404, CodeTopicNotFound},
		{"empty body", "/v1/topics/t/records?partition=0", nil, 400, CodeEmptyBatch},
		{"bad CRC", "/v1/topics/t/records?partition=0", corrupt, 400, CodeInvalidRecord},
		{"truncated", "/v1/topics/t/records?partition=0", good[:len(good)-3], 400, CodeInvalidRecord},
		{"trailing bytes", "/v1/topics/t/records?partition=0", append(bytes.Clone(good), 0, 0), 400, CodeInvalidRecord},
		{"JSON sent as batches", "/v1/topics/t/records?partition=0", []byte(`{"records":[{"value":1}]}`), 400, CodeInvalidRecord},
		{"mixed codecs", "/v1/topics/t/records?partition=0", append(bytes.Clone(good), lz...), 400, CodeInvalidRecord},
		{"mixed producers", "/v1/topics/t/records?partition=0", append(bytes.Clone(good), idem(0)...), 400, CodeInvalidRecord},
		{"sequence gap", "/v1/topics/t/records?partition=0", append(idem(0), idem(3)...), 400, CodeInvalidRecord},
		{"LogAppendTime batch to a CreateTime topic", "/v1/topics/t/records?partition=0", logAppend, 400, CodeInvalidRecord},
		{"timestamp too new", "/v1/topics/t/records?partition=0", kafkaBatch(t, someRecords(1, ts+2*86400000), 0, -1, -1, -1), 422, CodeTimestampOutOfRange},
		{"too many records", "/v1/topics/t/records?partition=0", kafkaBatch(t, someRecords(11, ts), 0, -1, -1, -1), 400, CodeTooManyRecords},
		{"record too large", "/v1/topics/small/records?partition=0", kafkaBatch(t, []kafkaRecord{{value: make([]byte, 200), ts: ts}}, 0, -1, -1, -1), 400, CodeRecordTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{MaxRecordsPerRequest: 10})
			e.createTopic("t", 2, nil)
			e.createTopic("small", 1, map[string]string{"max.message.bytes": "100"})
			rec := e.postBatches(tc.path, tc.body)
			var pb struct{ Code Code }
			_ = json.Unmarshal(rec.Body.Bytes(), &pb)
			if rec.Code != codeIndex[tc.code].Status || pb.Code != tc.code {
				t.Errorf("HTTP %d %s, want %d %s: %s", rec.Code, pb.Code, codeIndex[tc.code].Status, tc.code, rec.Body)
			}
			if _, calls, _ := e.c.stats(); calls != 0 {
				t.Errorf("refused input reached the writer (%d calls)", calls)
			}
		})
	}
}

func TestBinaryProduceToFake(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("t", 2, nil)
	e.createTopic("stamped", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	ts := testNow.UnixMilli() - 1000
	recs := someRecords(3, ts)
	recs[1].key = nil                                                                        // null key
	recs[2].value = []byte{}                                                                 // empty, not null
	recs[0].headers = []kmsg.Header{{Key: "h", Value: nil}, {Key: "g", Value: []byte{0xff}}} // null and non-UTF-8 values
	// Two batches are one request.
	body := append(kafkaBatch(t, recs[:2], 0, -1, -1, -1), kafkaBatch(t, recs[2:], 0, -1, -1, -1)...)
	rec := e.postBatches("/v1/topics/t/records?partition=1", body)
	if rec.Code != 200 {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	if got, want := rec.Body.String(), `{"partition":1,"base_offset":0,"last_offset":2}`+"\n"; got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
	e.c.mu.Lock()
	got := append([]writer.Record(nil), e.c.produced...)
	e.c.mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d records produced", len(got))
	}
	for i, r := range got {
		w := recs[i]
		if r.Partition != 1 || r.Timestamp != w.ts || !bytes.Equal(r.Value, w.value) || (r.Key == nil) != (w.key == nil) || !bytes.Equal(r.Key, w.key) || (r.Value == nil) != (w.value == nil) {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
	if h := got[0].Headers; len(h) != 2 || h[0].Key != "h" || h[0].Value != nil || !bytes.Equal(h[1].Value, []byte{0xff}) {
		t.Errorf("headers %+v", h)
	}

	rec = e.postBatches("/v1/topics/stamped/records?partition=0", kafkaBatch(t, someRecords(1, 5), 0, -1, -1, -1))
	if rec.Code != 200 {
		t.Fatalf("LogAppendTime topic: HTTP %d: %s", rec.Code, rec.Body)
	}
	e.c.mu.Lock()
	last := e.c.produced[len(e.c.produced)-1]
	e.c.mu.Unlock()
	if !last.LogAppendTime {
		t.Error("a LogAppendTime topic's record is not stamped by the writer")
	}

	// A JSON body still goes the JSON way, and a JSON fetch is unchanged.
	if rec := e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1,"partition":0}]}`); rec.Code != 200 {
		t.Errorf("JSON produce: HTTP %d: %s", rec.Code, rec.Body)
	}
	// The fake reader has no FetchRaw: a binary fetch says so.
	if rec := e.do("GET", "/v1/topics/t/partitions/1/records", "", header{"Accept", RecordBatchContentType}); rec.Code != 503 {
		t.Errorf("binary fetch from a reader without FetchRaw: HTTP %d: %s", rec.Code, rec.Body)
	}
}

// realStack is the API over a real writer, reader, SQLite catalog and filesystem store.
type realStack struct {
	url string
	cat *sqlite.Catalog
}

func newRealStack(t *testing.T) *realStack {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	cat, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	store, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(store, cat, writer.Config{Linger: 2 * time.Millisecond}, nil, nil)
	rd := reader.New(store, cat, reader.Config{}, nil, nil)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	a := New(Config{}, Deps{Catalog: cat, Writer: w, Reader: rd})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return &realStack{url: srv.URL, cat: cat}
}

func (s *realStack) post(t *testing.T, path string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(s.url+path, RecordBatchContentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *realStack) fetch(t *testing.T, path string) ([]byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
	req.Header.Set("Accept", RecordBatchContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != RecordBatchContentType {
		t.Fatalf("binary fetch %s: HTTP %d %s: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return b, resp.Header
}

// TestBinaryRoundTripBytes: batches a Kafka client encoded (kmsg, not Strata's encoder)
// go through the real writer, object store, catalog and reader and come back byte for
// byte, base offsets rewritten to the offsets the produce answered.
func TestBinaryRoundTripBytes(t *testing.T) {
	s := newRealStack(t)
	ctx := t.Context()
	if _, err := s.cat.CreateTopic(ctx, "rt", 2, nil); err != nil {
		t.Fatal(err)
	}
	prod, err := s.cat.InitProducer(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	withHeaders := someRecords(4, now)
	withHeaders[0].headers = []kmsg.Header{{Key: "trace", Value: []byte("abc")}, {Key: "null", Value: nil}}
	withHeaders[1].key = nil
	withHeaders[2].value = nil // a tombstone
	withHeaders[3].value = []byte{}
	sent := [][]byte{
		kafkaBatch(t, withHeaders, 0, -1, -1, -1),
		kafkaBatch(t, someRecords(100, now+10), 0, -1, -1, -1),
		kafkaBatch(t, someRecords(5, now+20), 0, prod.ID, prod.Epoch, 0), // idempotent
		kafkaBatch(t, someRecords(1, now+30), 0, -1, -1, -1),
	}
	var bases []int64
	for i, b := range sent {
		status, body := s.post(t, "/v1/topics/rt/records?partition=1", b)
		if status != 200 {
			t.Fatalf("produce %d: HTTP %d: %s", i, status, body)
		}
		var ans struct{ BaseOffset, LastOffset int64 }
		if err := json.Unmarshal([]byte(strings.ReplaceAll(strings.ReplaceAll(body, "base_offset", "BaseOffset"), "last_offset", "LastOffset")), &ans); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, ans.BaseOffset)
	}
	// An idempotent retry answers the original offsets and writes nothing.
	status, body := s.post(t, "/v1/topics/rt/records?partition=1", sent[2])
	if status != 200 || !strings.Contains(body, `"base_offset":`+strconv.FormatInt(bases[2], 10)) || !strings.Contains(body, `"duplicate":true`) {
		t.Errorf("idempotent retry: HTTP %d %s", status, body)
	}

	got, h := s.fetch(t, "/v1/topics/rt/partitions/1/records?offset=0&max_bytes=10000000")
	raws, err := segment.SplitBatches(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(raws) != len(sent) {
		t.Fatalf("fetched %d batches, sent %d", len(raws), len(sent))
	}
	for i, raw := range raws {
		if base := int64(binary.BigEndian.Uint64(raw)); base != bases[i] {
			t.Errorf("batch %d: base offset %d, the produce answered %d", i, base, bases[i])
		}
		if !bytes.Equal(raw[8:], sent[i][8:]) {
			t.Errorf("batch %d: bytes after the base offset differ:\n got %x\nsent %x", i, raw[8:], sent[i][8:])
		}
	}
	if h.Get(HeaderNextOffset) != "110" || h.Get(HeaderHighWatermark) != "110" || h.Get(HeaderLogStartOffset) != "0" {
		t.Errorf("headers: next %s, high watermark %s, log start %s", h.Get(HeaderNextOffset), h.Get(HeaderHighWatermark), h.Get(HeaderLogStartOffset))
	}

	// From the middle of a batch: the batch holding the offset comes whole.
	got, h = s.fetch(t, "/v1/topics/rt/partitions/1/records?offset=50&max_records=1")
	if !bytes.Equal(got[8:], sent[1][8:]) || h.Get(HeaderNextOffset) != "104" {
		t.Errorf("fetch at 50: %d bytes, next %s; want batch 1 whole and next 104", len(got), h.Get(HeaderNextOffset))
	}
	// At the high watermark: no batch, and the answer says where to go on.
	got, h = s.fetch(t, "/v1/topics/rt/partitions/1/records?offset=110")
	if len(got) != 0 || h.Get(HeaderNextOffset) != "110" {
		t.Errorf("fetch at the high watermark: %d bytes, next %s", len(got), h.Get(HeaderNextOffset))
	}

	// A JSON fetch reads the same records.
	resp, err := http.Get(s.url + "/v1/topics/rt/partitions/1/records?offset=0&max_records=4&format=base64")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var js struct {
		Records []struct {
			Offset    int64
			Timestamp int64
			Key       *string
			Value     *string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&js); err != nil || len(js.Records) != 4 {
		t.Fatalf("JSON fetch: %v, %d records", err, len(js.Records))
	}
	if r := js.Records[1]; r.Key != nil || r.Timestamp != now+1 {
		t.Errorf("JSON fetch record 1: %+v", r)
	}
	if js.Records[2].Value != nil || js.Records[3].Value == nil || *js.Records[3].Value != "" {
		t.Errorf("JSON fetch: tombstone and empty value not kept apart: %+v %+v", js.Records[2], js.Records[3])
	}
}

// TestBinaryCompressedAndMerged: a compressed batch comes back with the same records
// and codec; several batches of one request come back as one batch of their records.
func TestBinaryCompressedAndMerged(t *testing.T) {
	s := newRealStack(t)
	if _, err := s.cat.CreateTopic(t.Context(), "c", 1, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	lz := kafkaBatch(t, someRecords(20, now), 3, -1, -1, -1)
	two := append(kafkaBatch(t, someRecords(3, now), 0, -1, -1, -1), kafkaBatch(t, someRecords(2, now+5), 0, -1, -1, -1)...)
	for _, b := range [][]byte{lz, two} {
		if status, body := s.post(t, "/v1/topics/c/records?partition=0", b); status != 200 {
			t.Fatalf("HTTP %d: %s", status, body)
		}
	}
	got, _ := s.fetch(t, "/v1/topics/c/partitions/0/records?offset=0")
	dec, err := segment.DecodeBatches(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec) != 2 || dec[0].Compression != segment.CompressionLZ4 || len(dec[0].Records) != 20 || len(dec[1].Records) != 5 {
		t.Fatalf("fetched %d batches: %+v", len(dec), dec)
	}
	want, err := segment.DecodeBatches(append(bytes.Clone(lz), two...))
	if err != nil {
		t.Fatal(err)
	}
	var wantRecs, gotRecs []segment.DecodedRecord
	for _, b := range want {
		wantRecs = append(wantRecs, b.Records...)
	}
	for _, b := range dec {
		gotRecs = append(gotRecs, b.Records...)
	}
	for i := range wantRecs {
		w, g := wantRecs[i], gotRecs[i]
		if g.Offset != int64(i) || g.Timestamp != w.Timestamp || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) {
			t.Errorf("record %d: %+v, want %+v at offset %d", i, g, w, i)
		}
	}
}

// BenchmarkDecodeBinaryProduce measures the binary produce body's validation and
// conversion: 500 records of 1 KiB in one batch.
func BenchmarkDecodeBinaryProduce(b *testing.B) {
	recs := make([]kafkaRecord, 500)
	now := testNow.UnixMilli()
	for i := range recs {
		recs[i] = kafkaRecord{key: []byte("key-" + strconv.Itoa(i%64)), value: bytes.Repeat([]byte("x"), 1024), ts: now}
	}
	body := kafkaBatch(b, recs, 0, -1, -1, -1)
	cfg, _ := catalog.ParseConfig(nil)
	ti := topicInfo{topic: catalog.Topic{ID: 1, Name: "t", Partitions: 8}, cfg: cfg}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, p := decodeBinaryProduce(body, ti, 0, now, 10000); p != nil {
			b.Fatal(p)
		}
	}
}

// FuzzDecodeBinaryProduce: any body is refused with a problem or turned into exactly
// the records the segment decoder reads from it, never a panic.
func FuzzDecodeBinaryProduce(f *testing.F) {
	now := testNow.UnixMilli()
	f.Add(kafkaBatch(f, someRecords(3, now), 0, -1, -1, -1))
	f.Add(kafkaBatch(f, someRecords(2, now), 3, -1, -1, -1))
	f.Add(append(kafkaBatch(f, someRecords(2, now), 0, 5, 0, 0), kafkaBatch(f, someRecords(1, now), 0, 5, 0, 2)...))
	f.Add([]byte{})
	cfg, _ := catalog.ParseConfig(nil)
	ti := topicInfo{topic: catalog.Topic{ID: 1, Name: "t", Partitions: 4}, cfg: cfg}
	f.Fuzz(func(t *testing.T, body []byte) {
		bp, p := decodeBinaryProduce(body, ti, 2, now, 1000)
		if p != nil {
			if bp.records != nil {
				t.Fatal("records beside a problem")
			}
			return
		}
		dec, err := segment.DecodeBatches(body)
		if err != nil {
			t.Fatalf("accepted a body the decoder refuses: %v", err)
		}
		n := 0
		for _, b := range dec {
			n += len(b.Records)
		}
		if n != len(bp.records) || n == 0 {
			t.Fatalf("%d records accepted, the decoder reads %d", len(bp.records), n)
		}
		for _, r := range bp.records {
			if r.Partition != 2 || r.TopicID != 1 {
				t.Fatalf("record placed at topic %d partition %d", r.TopicID, r.Partition)
			}
		}
	})
}
