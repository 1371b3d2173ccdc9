package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batchtest"
	"github.com/strata-io/strata/kafka"
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
