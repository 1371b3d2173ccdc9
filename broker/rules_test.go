package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

// Every topic-config rule, through every way records reach the core: a request of
// records (the JSON front end), batches stored as they came, and batches decoded.

// produceOne produces one record to topic partition 0 through the records path.
func (e *env) produceOne(topic string, r Record) (writer.Request, error) {
	e.t.Helper()
	r.Topic = topic
	n := e.w.calls()
	_, err := e.b.Produce(context.Background(), Anonymous, ProduceRequest{Records: []Record{r}})
	if err != nil {
		if e.w.calls() != n {
			e.t.Fatalf("refused (%v), yet the writer was called", err)
		}
		return writer.Request{}, err
	}
	return e.w.reqs[len(e.w.reqs)-1], nil
}

// produceBatch produces one batch of recs to topic partition 0.
func (e *env) produceBatch(topic string, body []byte) (writer.Request, error) {
	e.t.Helper()
	n := e.w.calls()
	_, err := e.b.ProduceBatches(context.Background(), Anonymous, BatchesRequest{Topic: topic, Batches: body})
	if err != nil {
		if e.w.calls() != n {
			e.t.Fatalf("refused (%v), yet the writer was called", err)
		}
		return writer.Request{}, err
	}
	return e.w.reqs[len(e.w.reqs)-1], nil
}

func TestRuleCreateTimeBounds(t *testing.T) {
	now := testNow.UnixMilli()
	for _, tc := range []struct {
		topic string
		ts    int64
		code  Code // "" accepted
	}{
		{"bounded", now - 1000, ""},
		{"bounded", now - 1001, CodeTimestampOutOfRange},
		{"bounded", now + 1000, ""},
		{"bounded", now + 1001, CodeTimestampOutOfRange},
		{"plain", 0, ""}, // message.timestamp.before.max.ms defaults to unbounded
		{"plain", now + 86400000, ""},
		{"plain", now + 86400001, CodeTimestampOutOfRange}, // after.max.ms: one day
		{"plain", -5, CodeInvalidRecord},
	} {
		e := newEnv(t)
		req, err := e.produceOne(tc.topic, Record{Partition: 0, Value: []byte("v"), Timestamp: tc.ts})
		if tc.code != "" {
			er := wantCode(t, err, tc.code)
			if er.Details["record"] != 0 {
				t.Errorf("records %s %d: details %v", tc.topic, tc.ts, er.Details)
			}
			if tc.code == CodeTimestampOutOfRange && (er.Details["timestamp"] != tc.ts || er.Details["now"] != now) {
				t.Errorf("records %s %d: details %v", tc.topic, tc.ts, er.Details)
			}
		} else if err != nil || req.Records[0].Timestamp != tc.ts || req.Records[0].LogAppendTime {
			t.Errorf("records %s %d: %v, stored %+v", tc.topic, tc.ts, err, req.Records)
		}

		req, err = e.produceBatch(tc.topic, batchtest.Batch(t, []batchtest.Record{{Key: []byte("k"), Value: []byte("v"), Ts: tc.ts}}, 0, -1, -1, -1))
		if tc.code != "" {
			wantCode(t, err, tc.code)
		} else if err != nil || req.Raw == nil {
			t.Errorf("batches %s %d: %v; stored as sent: %v", tc.topic, tc.ts, err, req.Raw != nil)
		}
	}
	// A record without a timestamp gets the node clock.
	e := newEnv(t)
	req, err := e.produceOne("bounded", Record{Partition: -1, Value: []byte("v"), Timestamp: -1})
	if err != nil || req.Records[0].Timestamp != now {
		t.Fatalf("no timestamp: %v, stored %+v", err, req.Records)
	}
}

func TestRuleMaxMessageBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     string
		value   string
		headers []kmsg.Header
		code    Code
	}{
		{"at the limit", "", "1234567890", nil, ""},
		{"value over", "", "12345678901", nil, CodeRecordTooLarge},
		{"key and headers count", "abc", "1", []kmsg.Header{{Key: "hdr", Value: []byte("xyzw")}}, CodeRecordTooLarge},
		{"key and headers at the limit", "abc", "", []kmsg.Header{{Key: "hdr", Value: []byte("xyzw")}}, ""},
	} {
		e := newEnv(t)
		var key []byte
		if tc.key != "" {
			key = []byte(tc.key)
		}
		r := Record{Partition: 0, Key: key, Value: []byte(tc.value), Timestamp: -1}
		for _, h := range tc.headers {
			r.Headers = append(r.Headers, segmentHeader(h))
		}
		_, err := e.produceOne("bounded", r)
		if tc.code != "" {
			er := wantCode(t, err, tc.code)
			if er.Details["size"] != int64(11) || er.Details["max_message_bytes"] != int64(10) {
				t.Errorf("%s: details %v", tc.name, er.Details)
			}
		} else if err != nil {
			t.Errorf("%s: records: %v", tc.name, err)
		}

		body := batchtest.Batch(t, []batchtest.Record{{Key: key, Value: []byte(tc.value), Headers: tc.headers, Ts: testNow.UnixMilli()}}, 0, -1, -1, -1)
		req, err := e.produceBatch("bounded", body)
		if tc.code != "" {
			wantCode(t, err, tc.code)
		} else if err != nil || req.Raw == nil {
			t.Errorf("%s: batches: %v; stored as sent: %v", tc.name, err, req.Raw != nil)
		}
	}
}

func TestRuleCompactedNeedsKey(t *testing.T) {
	for _, topic := range []string{"compact", "both"} {
		e := newEnv(t)
		er := wantCode(t, second(e.produceOne(topic, Record{Partition: 0, Value: []byte("v"), Timestamp: -1})), CodeInvalidRecord)
		if er.Details["field"] != "key" || er.Details["record"] != 0 {
			t.Errorf("%s: records: details %v", topic, er.Details)
		}
		if _, err := e.produceOne(topic, Record{Partition: 0, Key: []byte("k"), Timestamp: -1}); err != nil {
			t.Errorf("%s: a keyed tombstone: %v", topic, err)
		}

		now := testNow.UnixMilli()
		body := batchtest.Batch(t, []batchtest.Record{{Key: []byte("k"), Value: []byte("v"), Ts: now}, {Value: []byte("no key"), Ts: now}}, 0, -1, -1, -1)
		er = wantCode(t, second(e.produceBatch(topic, body)), CodeInvalidRecord)
		if er.Details["record"] != 1 {
			t.Errorf("%s: batches: details %v", topic, er.Details)
		}
		// Keyed batches are decoded (every key checked) and re-encoded, never stored raw.
		req, err := e.produceBatch(topic, batchtest.Batch(t, batchtest.Some(3, now), 0, -1, -1, -1))
		if err != nil || req.Raw != nil || len(req.Records) != 3 {
			t.Errorf("%s: keyed batches: %v, raw %v, %d records", topic, err, req.Raw != nil, len(req.Records))
		}
	}
	// Without compaction a record needs no key.
	e := newEnv(t)
	if _, err := e.produceOne("plain", Record{Partition: 0, Value: []byte("v"), Timestamp: -1}); err != nil {
		t.Errorf("plain: %v", err)
	}
}

func TestRuleLogAppendTime(t *testing.T) {
	e := newEnv(t)
	// The producer's timestamp is ignored, even one far outside any bound.
	req, err := e.produceOne("stamped", Record{Partition: 0, Value: []byte("v"), Timestamp: 5})
	if err != nil || !req.Records[0].LogAppendTime || req.Records[0].Timestamp != 0 {
		t.Fatalf("records: %v, stored %+v", err, req.Records)
	}
	// Batches are decoded so that the writer can stamp every record.
	req, err = e.produceBatch("stamped", batchtest.Batch(t, batchtest.Some(2, 5), 0, -1, -1, -1))
	if err != nil || req.Raw != nil || len(req.Records) != 2 || !req.Records[0].LogAppendTime || !req.Records[1].LogAppendTime {
		t.Fatalf("batches: %v, raw %v, records %+v", err, req.Raw != nil, req.Records)
	}
	// A batch claiming LogAppendTime on a CreateTime topic.
	body := logAppendBatch(batchtest.Batch(t, batchtest.Some(1, testNow.UnixMilli()), 0, -1, -1, -1))
	er := wantCode(t, second(e.produceBatch("plain", body)), CodeInvalidRecord)
	if er.Details["batch"] != 0 {
		t.Errorf("details %v", er.Details)
	}
	if _, err := e.produceBatch("stamped", body); err != nil {
		t.Errorf("a LogAppendTime batch on a LogAppendTime topic: %v", err)
	}
}

func TestPartitionRange(t *testing.T) {
	e := newEnv(t)
	er := wantCode(t, second(e.produceOne("plain", Record{Partition: 2, Value: []byte("v"), Timestamp: -1})), CodePartitionOutOfRange)
	if er.Details["partitions"] != int32(2) || er.Details["record"] != 0 {
		t.Errorf("details %v", er.Details)
	}
	wantCode(t, second(e.produceOne("plain", Record{Partition: -2, Value: []byte("v"), Timestamp: -1})), CodeInvalidPartition)
	_, err := e.b.ProduceBatches(context.Background(), Anonymous, BatchesRequest{Topic: "plain", Partition: 2,
		Batches: batchtest.Batch(t, batchtest.Some(1, testNow.UnixMilli()), 0, -1, -1, -1)})
	wantCode(t, err, CodePartitionOutOfRange)

	// Grown behind the cache's back: a partition beyond the cached count re-reads.
	reads := e.cat.reads
	if _, err := e.cat.UpdateTopic(context.Background(), "plain", 4, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.produceOne("plain", Record{Partition: 3, Value: []byte("v"), Timestamp: -1}); err != nil {
		t.Fatalf("a partition the topic grew: %v", err)
	}
	if e.cat.reads != reads+1 {
		t.Errorf("catalog reads %d, want %d", e.cat.reads, reads+1)
	}
}

func segmentHeader(h kmsg.Header) segment.Header { return segment.Header{Key: h.Key, Value: h.Value} }

func second[T any](_ T, err error) error { return err }

// logAppendBatch sets a batch's timestamp type to LogAppendTime (attribute bit 3) and
// fixes its CRC.
func logAppendBatch(raw []byte) []byte {
	raw = bytes.Clone(raw)
	raw[22] |= 0x08
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// With BatchSizeRule (the Kafka front end's), max.message.bytes bounds each batch as
// sent, as Kafka's brokers do: a record over it is accepted when compression brings
// its batch under it, small records are refused when their batch is over it, and a
// request of several batches each under it is accepted. Without it (the HTTP API's),
// each record's key, value and headers are bounded, whatever the batch. Both on the
// raw path (stored as sent) and the decoding one (a LogAppendTime topic).
func TestRuleMaxMessageBytesPerBatch(t *testing.T) {
	const limit = 300
	now := testNow.UnixMilli()
	big := []batchtest.Record{{Value: bytes.Repeat([]byte("z"), 2*limit), Ts: now}} // gzip makes it small
	var small []batchtest.Record
	for i := range 20 {
		small = append(small, batchtest.Record{Value: fmt.Appendf(nil, "record-%02d", i), Ts: now})
	}
	bigGzip := batchtest.Batch(t, big, 1, -1, -1, -1)
	smallPlain := batchtest.Batch(t, small, 0, -1, -1, -1)
	halves := append(batchtest.Batch(t, small[:10], 0, -1, -1, -1), batchtest.Batch(t, small[10:], 0, -1, -1, -1)...)
	if len(bigGzip) > limit || len(smallPlain) <= limit || len(halves)/2 > limit || len(halves) <= limit {
		t.Fatalf("batch sizes %d, %d, %d: not what the cases need around %d", len(bigGzip), len(smallPlain), len(halves), limit)
	}
	for _, tc := range []struct {
		name          string
		body          []byte
		perBatch, rec Code // the answer under each rule; "" accepted
	}{
		{"a record over the limit, its compressed batch under it", bigGzip, "", CodeRecordTooLarge},
		{"small records, their batch over the limit", smallPlain, CodeRecordTooLarge, ""},
		{"two batches under the limit, together over it", halves, "", ""},
	} {
		for _, topic := range []string{"limited", "limited-stamped"} {
			for _, perBatch := range []bool{true, false} {
				e := newEnv(t)
				cfg := map[string]string{"max.message.bytes": strconv.Itoa(limit)}
				if topic == "limited-stamped" {
					cfg["message.timestamp.type"] = "LogAppendTime"
				}
				if _, err := e.cat.CreateTopic(context.Background(), topic, 1, cfg); err != nil {
					t.Fatal(err)
				}
				n := e.w.calls()
				_, err := e.b.ProduceBatches(context.Background(), Anonymous, BatchesRequest{Topic: topic, Batches: bytes.Clone(tc.body), BatchSizeRule: perBatch})
				want := tc.rec
				if perBatch {
					want = tc.perBatch
				}
				what := fmt.Sprintf("%s, %s, per batch %v", tc.name, topic, perBatch)
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v, want accepted", what, err)
				case want != "":
					if er, ok := err.(*Error); !ok || er.Code != want {
						t.Errorf("%s: %v, want %s", what, err, want)
					} else if perBatch && (er.Details["size"] != int64(len(tc.body)) || er.Details["max_message_bytes"] != int64(limit)) {
						t.Errorf("%s: details %v, want the batch's size %d and the limit", what, er.Details, len(tc.body))
					}
					if e.w.calls() != n {
						t.Errorf("%s: refused, yet the writer was called", what)
					}
				}
			}
		}
	}
}
