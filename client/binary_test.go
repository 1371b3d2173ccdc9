package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/segment"
)

func TestEncodeBatchIsAKafkaBatch(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_000)
	recs := []RawRecord{
		{Timestamp: ts, Key: []byte("k"), Value: []byte("v1"), Headers: []RawHeader{{Key: "h", Value: nil}, {Key: "g", Value: []byte{0xff}}}},
		{Timestamp: ts.Add(5 * time.Millisecond), Key: nil, Value: []byte{}},
		{Timestamp: ts.Add(time.Millisecond), Key: []byte{}, Value: nil},
	}
	for _, o := range []BatchOptions{{}, {Compression: CompressionZstd}, {Idempotent: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 40}} {
		prefix := []byte("prefix")
		out, err := EncodeBatch(prefix, recs, o)
		if err != nil {
			t.Fatal(err)
		}
		raw := out[len(prefix):]
		// franz-go reads it as a Kafka client would.
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(raw); err != nil {
			t.Fatalf("%+v: kmsg cannot read the batch: %v", o, err)
		}
		wantPID, wantEpoch, wantSeq := int64(-1), int16(-1), int32(-1)
		if o.Idempotent {
			wantPID, wantEpoch, wantSeq = o.ProducerID, o.ProducerEpoch, o.BaseSequence
		}
		if kb.Magic != 2 || kb.NumRecords != 3 || kb.FirstOffset != 0 || kb.PartitionLeaderEpoch != -1 ||
			kb.ProducerID != wantPID || kb.ProducerEpoch != wantEpoch || kb.FirstSequence != wantSeq ||
			kb.FirstTimestamp != ts.UnixMilli() || kb.MaxTimestamp != ts.UnixMilli()+5 || kb.Attributes&7 != int16(o.Compression) {
			t.Errorf("%+v: batch header %+v", o, kb)
		}
		// Laid out as the server's writer lays out records, so the server stores it as it
		// is rather than decode and re-encode it.
		if s, err := segment.ScanBatch(raw); err != nil || !s.Canonical {
			t.Errorf("%+v: the server would re-encode the batch: scan %v, canonical %v", o, err, s.Canonical)
		}
		got, err := DecodeBatches(raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			w := recs[i]
			if r.Offset != int64(i) || !r.Timestamp.Equal(w.Timestamp) || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
				!bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
				t.Errorf("%+v: record %d: %+v, want %+v", o, i, r, w)
			}
		}
		if h := got[0].Headers; h[0].Value != nil || !bytes.Equal(h[1].Value, []byte{0xff}) {
			t.Errorf("headers %+v", h)
		}
	}
	if _, err := EncodeBatch(nil, nil, BatchOptions{}); err == nil {
		t.Error("an empty batch encoded")
	}
}

func TestProduceBatchesRequest(t *testing.T) {
	calls := 0
	f, srv := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/topics/orders/records": func(w http.ResponseWriter, r *http.Request) {
			calls++
			if calls == 1 {
				problemAnswer(w, 429, "buffer_full", "full", "0")
				return
			}
			jsonAnswer(`{"partition":3,"base_offset":10,"last_offset":11,"duplicate":true}`)(w, r)
		},
	})
	c := New(srv.URL, WithRetries(2, time.Millisecond), WithAPIKey("secret"))
	got, err := c.ProduceBinary(context.Background(), "orders", 3, []RawRecord{{Value: []byte("a")}, {Value: []byte("b")}}, BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != (BatchOffsets{Partition: 3, BaseOffset: 10, LastOffset: 11, Duplicate: true}) {
		t.Errorf("answer %+v", got)
	}
	req := f.last()
	if req.Query != "partition=3" || req.Header.Get("Content-Type") != RecordBatchContentType || req.Header.Get("Authorization") != "Bearer secret" {
		t.Errorf("request %s %s?%s headers %v", req.Method, req.Path, req.Query, req.Header)
	}
	if recs, err := DecodeBatches([]byte(req.Body), 0); err != nil || len(recs) != 2 || string(recs[1].Value) != "b" {
		t.Errorf("body decodes to %+v, %v", recs, err)
	}
	if f.count() != 2 {
		t.Errorf("%d requests: the 429 was not retried once", f.count())
	}

	// A refusal is an *Error with its code.
	_, srv = newFake(t, map[string]http.HandlerFunc{
		"POST /v1/topics/orders/records": func(w http.ResponseWriter, r *http.Request) {
			problemAnswer(w, 400, "invalid_record", "record batches: batch 0: CRC", "")
		},
	})
	_, err = New(srv.URL).ProduceBatches(context.Background(), "orders", 0, []byte("junk"))
	if !HasCode(err, "invalid_record") {
		t.Errorf("refusal: %v", err)
	}
}

func TestFetchBinary(t *testing.T) {
	recs := []RawRecord{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	b1, err := EncodeBatch(nil, recs[:2], BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := EncodeBatch(nil, recs[2:], BatchOptions{Compression: CompressionLZ4})
	if err != nil {
		t.Fatal(err)
	}
	segment.SetBaseOffset(b1, 20)
	segment.SetBaseOffset(b2, 22)
	body := append(bytes.Clone(b1), b2...)
	f, srv := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/topics/t/partitions/1/records": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", RecordBatchContentType)
			w.Header().Set("Strata-Next-Offset", "23")
			w.Header().Set("Strata-High-Watermark", "30")
			w.Header().Set("Strata-Log-Start-Offset", "5")
			io.Copy(w, bytes.NewReader(body))
		},
		"GET /v1/topics/json/partitions/0/records": jsonAnswer(`{"records":[]}`),
	})
	c := New(srv.URL)
	res, err := c.FetchBinary(context.Background(), "t", 1, FetchOptions{Offset: 21, MaxBytes: 1000, Wait: time.Second, Base64: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.NextOffset != 23 || res.HighWatermark != 30 || res.LogStartOffset != 5 || len(res.Records) != 2 ||
		res.Records[0].Offset != 21 || string(res.Records[0].Value) != "b" || res.Records[1].Offset != 22 || string(res.Records[1].Value) != "c" {
		t.Errorf("result %+v", res)
	}
	req := f.last()
	if req.Header.Get("Accept") != RecordBatchContentType || req.Query != "max_bytes=1000&offset=21&wait_ms=1000" {
		t.Errorf("request ?%s Accept %q", req.Query, req.Header.Get("Accept"))
	}
	raw, err := c.FetchBatches(context.Background(), "t", 1, FetchOptions{Offset: 21})
	if err != nil || !bytes.Equal(raw.Batches, body) || binary.BigEndian.Uint64(raw.Batches) != 20 {
		t.Errorf("raw batches: %v", err)
	}
	// A server answering JSON (one that predates the binary path) is an error, not
	// an empty fetch.
	if _, err := c.FetchBatches(context.Background(), "json", 0, FetchOptions{}); err == nil {
		t.Error("a JSON answer was taken for record batches")
	}
}
