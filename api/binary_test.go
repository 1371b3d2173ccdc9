package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

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
	good := batchtest.Batch(t, batchtest.Some(3, ts), 0, -1, -1, -1)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	lz := batchtest.Batch(t, batchtest.Some(2, ts), 3, -1, -1, -1)
	corruptLZ := bytes.Clone(lz)
	corruptLZ[len(corruptLZ)-2] ^= 1
	idem := func(seq int32) []byte { return batchtest.Batch(t, batchtest.Some(2, ts), 0, 7, 1, seq) }
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
		{"timestamp too new", "/v1/topics/t/records?partition=0", batchtest.Batch(t, batchtest.Some(1, ts+2*86400000), 0, -1, -1, -1), 422, CodeTimestampOutOfRange},
		{"too many records", "/v1/topics/t/records?partition=0", batchtest.Batch(t, batchtest.Some(11, ts), 0, -1, -1, -1), 400, CodeTooManyRecords},
		{"record too large", "/v1/topics/small/records?partition=0", batchtest.Batch(t, []batchtest.Record{{Value: make([]byte, 200), Ts: ts}}, 0, -1, -1, -1), 400, CodeRecordTooLarge},
		// The same refusals when every batch is one the node could store as it came.
		{"bad CRC, lz4", "/v1/topics/t/records?partition=0", corruptLZ, 400, CodeInvalidRecord},
		{"truncated second batch", "/v1/topics/t/records?partition=0", append(bytes.Clone(good), good[:len(good)-1]...), 400, CodeInvalidRecord},
		{"too many records over two batches", "/v1/topics/t/records?partition=0", append(batchtest.Batch(t, batchtest.Some(6, ts), 0, -1, -1, -1), batchtest.Batch(t, batchtest.Some(5, ts), 0, -1, -1, -1)...), 400, CodeTooManyRecords},
		{"record too large in a second, lz4 batch", "/v1/topics/small/records?partition=0",
			append(batchtest.Batch(t, []batchtest.Record{{Value: make([]byte, 10), Ts: ts}}, 3, -1, -1, -1), batchtest.Batch(t, []batchtest.Record{{Value: make([]byte, 10), Ts: ts}, {Value: make([]byte, 200), Ts: ts}}, 3, -1, -1, -1)...), 400, CodeRecordTooLarge},
		{"header makes the record too large", "/v1/topics/small/records?partition=0", batchtest.Batch(t, []batchtest.Record{{Value: make([]byte, 60), Headers: []kmsg.Header{{Key: "h", Value: make([]byte, 40)}}, Ts: ts}}, 0, -1, -1, -1), 400, CodeRecordTooLarge},
		{"timestamp too old", "/v1/topics/recent/records?partition=0", batchtest.Batch(t, []batchtest.Record{{Value: []byte("a"), Ts: ts}, {Value: []byte("b"), Ts: ts - 2000}}, 0, -1, -1, -1), 422, CodeTimestampOutOfRange},
		{"negative timestamp", "/v1/topics/t/records?partition=0", batchtest.Batch(t, []batchtest.Record{{Value: []byte("a"), Ts: -5}}, 0, -1, -1, -1), 400, CodeInvalidRecord},
		{"idempotent then plain", "/v1/topics/t/records?partition=0", append(idem(0), good...), 400, CodeInvalidRecord},
		{"negative producer id", "/v1/topics/t/records?partition=0", batchtest.Batch(t, batchtest.Some(1, ts), 0, -2, 0, 0), 400, CodeInvalidRecord},
		{"idempotent with a negative sequence", "/v1/topics/t/records?partition=0", idem(-1), 400, CodeInvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{MaxRecordsPerRequest: 10})
			e.createTopic("t", 2, nil)
			e.createTopic("small", 1, map[string]string{"max.message.bytes": "100"})
			e.createTopic("recent", 1, map[string]string{"message.timestamp.before.max.ms": "1000"})
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
	recs := batchtest.Some(3, ts)
	recs[1].Key = nil                                                                        // null key
	recs[2].Value = []byte{}                                                                 // empty, not null
	recs[0].Headers = []kmsg.Header{{Key: "h", Value: nil}, {Key: "g", Value: []byte{0xff}}} // null and non-UTF-8 values
	// Two batches are one request.
	body := append(batchtest.Batch(t, recs[:2], 0, -1, -1, -1), batchtest.Batch(t, recs[2:], 0, -1, -1, -1)...)
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
		if r.Partition != 1 || r.Timestamp != w.Ts || !bytes.Equal(r.Value, w.Value) || (r.Key == nil) != (w.Key == nil) || !bytes.Equal(r.Key, w.Key) || (r.Value == nil) != (w.Value == nil) {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
	if h := got[0].Headers; len(h) != 2 || h[0].Key != "h" || h[0].Value != nil || !bytes.Equal(h[1].Value, []byte{0xff}) {
		t.Errorf("headers %+v", h)
	}
	e.c.mu.Lock()
	raws := e.c.rawRequests
	e.c.mu.Unlock()
	if raws != 1 {
		t.Errorf("%d requests reached the writer as raw batches, want 1: batches laid out as Kafka clients lay them out are stored as they came", raws)
	}

	rec = e.postBatches("/v1/topics/stamped/records?partition=0", batchtest.Batch(t, batchtest.Some(1, 5), 0, -1, -1, -1))
	if rec.Code != 200 {
		t.Fatalf("LogAppendTime topic: HTTP %d: %s", rec.Code, rec.Body)
	}
	e.c.mu.Lock()
	last := e.c.produced[len(e.c.produced)-1]
	e.c.mu.Unlock()
	if !last.LogAppendTime {
		t.Error("a LogAppendTime topic's record is not stamped by the writer")
	}
	e.c.mu.Lock()
	after := e.c.rawRequests
	e.c.mu.Unlock()
	if after != raws {
		t.Error("a LogAppendTime topic's batch reached the writer raw: the writer must stamp its records")
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
	url   string
	cat   *sqlite.Catalog
	store *fs.Store
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
	a := newAPI(Config{}, testDeps{Catalog: cat, Writer: w, Reader: rd})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return &realStack{url: srv.URL, cat: cat, store: store}
}

// storedBatches returns every batch of topic's partition in every object in the store,
// as the objects hold them.
func (s *realStack) storedBatches(t *testing.T, topic string, part int32) [][]byte {
	t.Helper()
	ctx := t.Context()
	tp, err := s.cat.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	err = s.store.List(ctx, "", func(info objstore.Info) error {
		obj, err := s.store.Get(ctx, info.Key)
		if err != nil {
			return err
		}
		ft, err := segment.ReadFooter(obj)
		if err != nil {
			return fmt.Errorf("object %s: %w", info.Key, err)
		}
		for _, b := range ft.Batches {
			if b.TopicID == tp.ID && b.Partition == part {
				out = append(out, obj[b.Pos:b.Pos+b.Len])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
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
	prod, err := s.cat.InitProducer(ctx, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	withHeaders := batchtest.Some(4, now)
	withHeaders[0].Headers = []kmsg.Header{{Key: "trace", Value: []byte("abc")}, {Key: "null", Value: nil}}
	withHeaders[1].Key = nil
	withHeaders[2].Value = nil // a tombstone
	withHeaders[3].Value = []byte{}
	sent := [][]byte{
		batchtest.Batch(t, withHeaders, 0, -1, -1, -1),
		batchtest.Batch(t, batchtest.Some(100, now+10), 0, -1, -1, -1),
		batchtest.Batch(t, batchtest.Some(5, now+20), 0, prod.ID, prod.Epoch, 0), // idempotent
		batchtest.Batch(t, batchtest.Some(1, now+30), 0, -1, -1, -1),
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

// splitAll splits bodies of batches into their batches.
func splitAll(t *testing.T, bodies ...[]byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, b := range bodies {
		raws, err := segment.SplitBatches(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raws...)
	}
	return out
}

// postOK produces body to topic's partition 0 and returns the answer's base offset.
func (s *realStack) postOK(t *testing.T, topic string, body []byte) (base int64, answer string) {
	t.Helper()
	status, answer := s.post(t, "/v1/topics/"+topic+"/records?partition=0", body)
	if status != 200 {
		t.Fatalf("produce: HTTP %d: %s", status, answer)
	}
	var ans struct {
		BaseOffset int64 `json:"base_offset"`
	}
	if err := json.Unmarshal([]byte(answer), &ans); err != nil {
		t.Fatal(err)
	}
	return ans.BaseOffset, answer
}

// TestBinaryStoredAsSent: batches laid out as Kafka clients lay them out — plain,
// compressed, idempotent, several per request — are in the segment objects exactly as
// the client sent them, base offset 0 aside, and a binary fetch returns them byte for
// byte with their real base offsets. An idempotent retry writes nothing.
func TestBinaryStoredAsSent(t *testing.T) {
	s := newRealStack(t)
	ctx := t.Context()
	if _, err := s.cat.CreateTopic(ctx, "s", 1, nil); err != nil {
		t.Fatal(err)
	}
	prod, err := s.cat.InitProducer(ctx, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	mixed := batchtest.Some(6, now)
	mixed[0].Headers = []kmsg.Header{{Key: "trace", Value: []byte("abc")}, {Key: "null", Value: nil}}
	mixed[1].Key = nil
	mixed[2].Value = nil
	mixed[3].Ts = now - 50 // timestamps need not rise
	idem := append(batchtest.Batch(t, batchtest.Some(3, now), 3, prod.ID, prod.Epoch, 0), batchtest.Batch(t, batchtest.Some(4, now), 3, prod.ID, prod.Epoch, 3)...)
	bodies := [][]byte{
		batchtest.Batch(t, mixed, 0, -1, -1, -1),
		batchtest.Batch(t, mixed, 3, -1, -1, -1),                    // lz4
		batchtest.Batch(t, batchtest.Some(200, now), 1, -1, -1, -1), // gzip
		append(batchtest.Batch(t, batchtest.Some(2, now), 0, -1, -1, -1), batchtest.Batch(t, batchtest.Some(5, now+1), 0, -1, -1, -1)...),
		idem,
	}
	var bases []int64
	for _, b := range bodies {
		base, _ := s.postOK(t, "s", b)
		bases = append(bases, base)
	}
	sent := splitAll(t, bodies...)

	stored := s.storedBatches(t, "s", 0)
	if len(stored) != len(sent) {
		t.Fatalf("%d batches stored, %d sent", len(stored), len(sent))
	}
	// Flushes are keyed by time: match each sent batch rather than trust the key order.
	for i, b := range sent {
		want := bytes.Clone(b)
		segment.SetBaseOffset(want, 0)
		n := 0
		for _, st := range stored {
			if bytes.Equal(st, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("sent batch %d (%d bytes) is stored as sent, base offset 0, %d times; want once", i, len(b), n)
		}
	}

	got, h := s.fetch(t, "/v1/topics/s/partitions/0/records?offset=0&max_bytes=10000000")
	fetched := splitAll(t, got)
	if len(fetched) != len(sent) {
		t.Fatalf("fetched %d batches, sent %d", len(fetched), len(sent))
	}
	var next int64
	for i, raw := range fetched {
		if base := int64(binary.BigEndian.Uint64(raw)); base != next {
			t.Errorf("batch %d: base offset %d, want %d", i, base, next)
		}
		if !bytes.Equal(raw[8:], sent[i][8:]) {
			t.Errorf("batch %d: bytes after the base offset differ from those sent", i)
		}
		hd, err := segment.ParseBatchHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		next += int64(hd.NumRecords)
	}
	if h.Get(HeaderNextOffset) != strconv.FormatInt(next, 10) || bases[len(bases)-1] != next-7 {
		t.Errorf("next offset %s, the last request at %d; want %d and %d", h.Get(HeaderNextOffset), bases[len(bases)-1], next, next-7)
	}

	// The idempotent request again: its original offsets, nothing committed (its
	// flush's object holds it, unreferenced, until the compactor drops the object).
	base, answer := s.postOK(t, "s", idem)
	if base != bases[len(bases)-1] || !strings.Contains(answer, `"duplicate":true`) {
		t.Errorf("idempotent retry: %s, want base offset %d and duplicate", answer, bases[len(bases)-1])
	}
	got, h = s.fetch(t, "/v1/topics/s/partitions/0/records?offset=0&max_bytes=10000000")
	if n := len(splitAll(t, got)); n != len(sent) || h.Get(HeaderHighWatermark) != strconv.FormatInt(next, 10) {
		t.Errorf("after the retry: %d batches, high watermark %s; want %d and %d", n, h.Get(HeaderHighWatermark), len(sent), next)
	}
}

// TestBinaryReencoded: what the node cannot store as it came is stored as before:
// re-encoded with the records and codec it came with, a request's batches as one —
// batches whose timestamps are measured from another base than the first record's, and
// any batch for a LogAppendTime topic, whose records the writer stamps.
func TestBinaryReencoded(t *testing.T) {
	s := newRealStack(t)
	for _, topic := range []struct {
		name    string
		configs map[string]string
	}{{"c", nil}, {"stamped", map[string]string{"message.timestamp.type": "LogAppendTime"}}} {
		if _, err := s.cat.CreateTopic(t.Context(), topic.name, 1, topic.configs); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	for _, tc := range []struct {
		name, topic string
		body        []byte
		codec       segment.Compression
	}{
		{"first timestamp below the first record's, lz4", "c",
			append(batchtest.BatchAt(t, batchtest.Some(20, now), 3, -1, -1, -1, now-10), batchtest.BatchAt(t, batchtest.Some(3, now), 3, -1, -1, -1, now-10)...), segment.CompressionLZ4},
		{"first timestamp below the first record's", "c", batchtest.BatchAt(t, batchtest.Some(4, now), 0, -1, -1, -1, now-10), segment.CompressionNone},
		{"LogAppendTime", "stamped", append(batchtest.Batch(t, batchtest.Some(3, now-60_000), 0, -1, -1, -1), batchtest.Batch(t, batchtest.Some(2, now-60_000), 0, -1, -1, -1)...), segment.CompressionNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.storedBatches(t, tc.topic, 0))
			base, _ := s.postOK(t, tc.topic, tc.body)
			stored := s.storedBatches(t, tc.topic, 0)
			if len(stored) != before+1 {
				t.Fatalf("%d batches stored, want %d: one re-encoded batch for the request", len(stored), before+1)
			}
			got, _ := s.fetch(t, "/v1/topics/"+tc.topic+"/partitions/0/records?offset="+strconv.FormatInt(base, 10))
			dec, err := segment.DecodeBatches(got)
			if err != nil {
				t.Fatal(err)
			}
			sent, err := segment.DecodeBatches(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			var want []segment.DecodedRecord
			for _, b := range sent {
				want = append(want, b.Records...)
			}
			stamped := tc.topic == "stamped"
			if len(dec) != 1 || dec[0].Compression != tc.codec || dec[0].LogAppendTime != stamped || len(dec[0].Records) != len(want) || dec[0].BaseOffset != base {
				t.Fatalf("fetched %d batches: %+v; want one %d-record batch at %d with codec %d, LogAppendTime %v", len(dec), dec, len(want), base, tc.codec, stamped)
			}
			for i, g := range dec[0].Records {
				w := want[i]
				if g.Offset != base+int64(i) || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) {
					t.Errorf("record %d: %+v, want %+v at offset %d", i, g, w, base+int64(i))
				}
				if wantTs := w.Timestamp; !stamped && g.Timestamp != wantTs || stamped && g.Timestamp < now {
					t.Errorf("record %d: timestamp %d; sent %d (stamped: %v)", i, g.Timestamp, wantTs, stamped)
				}
			}
		})
	}
}
