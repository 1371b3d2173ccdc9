package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
)

// A Produce answer's LogAppendTime is the time the records were stamped with on a
// LogAppendTime topic — the timestamp a consumer then reads — and -1 on a CreateTime
// topic. LogStartOffset is the partition's on the refusals a producer reads it with
// (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER) and -1 otherwise. (franz-go
// ignores LogAppendTime in answers; the Java client reports it as the record's time.)
func TestProduceAnswerTimesAndLogStart(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	ctx := t.Context()
	if _, err := cat.CreateTopic(ctx, "appended", 1, map[string]string{"message.timestamp.type": "LogAppendTime"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateTopic(ctx, "created", 1, nil); err != nil {
		t.Fatal(err)
	}
	r := rawTo(t, n)
	sent := time.Now().Add(-time.Hour).UnixMilli()
	ok := &kerr.Error{Code: 0, Message: "none"}

	before := time.Now().UnixMilli()
	app := r.produce("appended", map[int32][]byte{0: batchtest.Batch(t, batchtest.Some(3, sent), 0, -1, -1, -1)})[0]
	after := time.Now().UnixMilli()
	wantCode(t, "produce to a LogAppendTime topic", app.ErrorCode, ok)
	if app.LogAppendTime < before || app.LogAppendTime > after {
		t.Fatalf("LogAppendTime %d, want the broker's clock in [%d, %d]", app.LogAppendTime, before, after)
	}
	for _, rec := range consumeAll(t, n.addr, "appended", 1, 3) {
		if rec.Timestamp.UnixMilli() != app.LogAppendTime {
			t.Fatalf("record at %d stamped %d, its produce answered %d", rec.Offset, rec.Timestamp.UnixMilli(), app.LogAppendTime)
		}
	}
	created := r.produce("created", map[int32][]byte{0: batchtest.Batch(t, batchtest.Some(4, sent), 0, -1, -1, -1)})[0]
	wantCode(t, "produce to a CreateTime topic", created.ErrorCode, ok)
	if created.LogAppendTime != -1 || created.LogStartOffset != -1 {
		t.Fatalf("CreateTime topic: LogAppendTime %d, LogStartOffset %d, want -1 and -1", created.LogAppendTime, created.LogStartOffset)
	}

	// A producer refused for its sequence learns the log start offset.
	del := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "created"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Offset = 2
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics, del.TimeoutMillis = append(del.Topics, dt), 10000
	wantCode(t, "delete records", r.do(del).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode, ok)
	ip := r.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	idem := func(seq int32) []byte { return batchtest.Batch(t, batchtest.Some(2, sent), 0, ip.ProducerID, 0, seq) }
	first := r.produce("created", map[int32][]byte{0: idem(0)})[0]
	wantCode(t, "idempotent at 0", first.ErrorCode, ok)
	if first.LogStartOffset != -1 {
		t.Fatalf("an accepted produce answered LogStartOffset %d, want -1", first.LogStartOffset)
	}
	gap := r.produce("created", map[int32][]byte{0: idem(7)})[0]
	wantCode(t, "sequence gap", gap.ErrorCode, kerr.OutOfOrderSequenceNumber)
	if gap.LogStartOffset != 2 {
		t.Fatalf("OUT_OF_ORDER_SEQUENCE_NUMBER answered LogStartOffset %d, want 2", gap.LogStartOffset)
	}
	unknown := r.produce("created", map[int32][]byte{0: batchtest.Batch(t, batchtest.Some(1, sent), 0, ip.ProducerID+1000, 0, 0)})[0]
	wantCode(t, "unknown producer", unknown.ErrorCode, kerr.UnknownProducerID)
	if unknown.LogStartOffset != 2 {
		t.Fatalf("UNKNOWN_PRODUCER_ID answered LogStartOffset %d, want 2", unknown.LogStartOffset)
	}
}

// max.message.bytes: Kafka clients get Kafka's rule, a bound on each record batch as
// sent (a record over it passes when compression brings its batch under it; small
// records in a batch over it are MESSAGE_TOO_LARGE). The HTTP API, JSON and binary,
// keeps its rule, a bound on each record's key, value and headers.
func TestMaxMessageBytesKafkaAndHTTP(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	const limit = 300
	if _, err := cat.CreateTopic(t.Context(), "limited", 1, map[string]string{"max.message.bytes": strconv.Itoa(limit)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	bigValue := bytes.Repeat([]byte("z"), 2*limit)
	bigGzip := batchtest.Batch(t, []batchtest.Record{{Value: bigValue, Ts: now}}, 1, -1, -1, -1)
	var small []batchtest.Record
	var smallJSON []string
	for i := range 20 {
		v := fmt.Sprintf("record-%02d", i)
		small = append(small, batchtest.Record{Value: []byte(v), Ts: now})
		smallJSON = append(smallJSON, fmt.Sprintf(`{"value":%q}`, v))
	}
	smallPlain := batchtest.Batch(t, small, 0, -1, -1, -1)
	if len(bigGzip) > limit || len(smallPlain) <= limit {
		t.Fatalf("batches of %d and %d bytes: not what the test needs around %d", len(bigGzip), len(smallPlain), limit)
	}

	r := rawTo(t, n)
	ok := &kerr.Error{Code: 0, Message: "none"}
	wantCode(t, "Kafka: a record over the limit in a batch under it", r.produce("limited", map[int32][]byte{0: bytes.Clone(bigGzip)})[0].ErrorCode, ok)
	wantCode(t, "Kafka: small records in a batch over the limit", r.produce("limited", map[int32][]byte{0: bytes.Clone(smallPlain)})[0].ErrorCode, kerr.MessageTooLarge)
	if hw := r.hwm("limited", 0); hw != 1 {
		t.Fatalf("high watermark %d after the Kafka produces, want 1 (the big record alone)", hw)
	}
	got := httpRecords(t, n, "limited", 0, 0)
	if len(got) != 1 || !bytes.Equal(got[0].Value, bigValue) {
		t.Fatalf("read back %d records, want the big record", len(got))
	}

	post := func(contentType string, body []byte) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxFor(t, 30*time.Second), "POST", n.http+"/v1/topics/limited/records?partition=0", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		status            int
	}{
		{"HTTP binary: a record over the limit in a batch under it", "application/vnd.kafka.record-batch", bigGzip, 413},
		{"HTTP binary: small records in a batch over the limit", "application/vnd.kafka.record-batch", smallPlain, 200},
		{"HTTP JSON: a record over the limit", "application/json", fmt.Appendf(nil, `{"records":[{"value":%q}]}`, bigValue), 413},
		{"HTTP JSON: small records, together over the limit", "application/json", []byte(`{"records":[` + strings.Join(smallJSON, ",") + `]}`), 200},
	} {
		if got := post(tc.contentType, tc.body); got != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.status)
		}
	}
	if hw := r.hwm("limited", 0); hw != 41 {
		t.Fatalf("high watermark %d after the HTTP produces, want 41", hw)
	}
}

// gatedStore holds every PutParts until open is closed.
type gatedStore struct {
	objstore.Store
	open chan struct{}
}

func (g gatedStore) PutParts(ctx context.Context, key string, parts [][]byte) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.PutParts(ctx, key, parts)
}

// Produce frames are read into reused buffers. A Produce that stopped waiting for the
// writer (its timeout: REQUEST_TIMED_OUT, outcome unknown) must not give its frame
// back, as the writer still holds its records: the next Produces, whose frames would
// reuse it, must not change what the first one wrote.
func TestProduceFrameNotReusedWhileWriterHoldsIt(t *testing.T) {
	cat := openSQLite(t)
	fsStore, err := fs.New(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	gate := gatedStore{Store: fsStore, open: make(chan struct{})}
	n := startNodeOn(t, cat, gate, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "held", 1, nil); err != nil {
		t.Fatal(err)
	}
	r := rawTo(t, n)
	now := time.Now().UnixMilli()
	batch := func(tag string) []byte {
		recs := make([]batchtest.Record, 64)
		for i := range recs {
			recs[i] = batchtest.Record{Value: bytes.Repeat([]byte(tag), 2048/len(tag)), Ts: now}
		}
		return batchtest.Batch(t, recs, 0, -1, -1, -1) // 128 KiB: a pooled frame
	}
	send := func(tag string, timeoutMs int32) kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, timeoutMs
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "held"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch(tag)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return r.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	wantCode(t, "a produce the store holds past its timeout", send("first", 300).ErrorCode, kerr.RequestTimedOut)
	var wg sync.WaitGroup
	later := make([]kmsg.ProduceResponseTopicPartition, 4)
	for i := range later {
		wg.Go(func() { later[i] = send(fmt.Sprintf("later-%d", i), 30000) })
		// Each takes a frame buffer in turn: the next is sent once the writer holds
		// this one (the first, timed out, is held too).
		testwait.Until(t, 10*time.Second, fmt.Sprintf("the writer to hold later produce %d", i), func() bool {
			return writerRequests(t, n.http) >= float64(2+i)
		})
	}
	close(gate.open)
	wg.Wait()
	for i, res := range later {
		wantCode(t, fmt.Sprintf("later produce %d", i), res.ErrorCode, &kerr.Error{Code: 0, Message: "none"})
	}
	got := consumeAll(t, n.addr, "held", 1, 5*64)
	tags := []string{"first", "later-0", "later-1", "later-2", "later-3"}
	counts := map[string]int{}
	for _, rec := range got {
		for _, tag := range tags {
			if bytes.Equal(rec.Value, bytes.Repeat([]byte(tag), 2048/len(tag))) {
				counts[tag]++
			}
		}
	}
	if !bytes.HasPrefix(got[0].Value, []byte("first")) {
		t.Errorf("offset 0 holds %.12q…, want the first produce's records", got[0].Value)
	}
	for _, tag := range tags {
		if counts[tag] != 64 {
			t.Errorf("%d records of %s, want 64 (all: %v)", counts[tag], tag, counts)
		}
	}
}

// writerRequests reads the node's strata_writer_requests_total: the produce requests
// its writer has taken into its buffer.
func writerRequests(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "strata_writer_requests_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}
