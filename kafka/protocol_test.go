package kafka_test

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/kafka"
)

// The protocol's rules one request at a time, with hand-built requests sent through a
// franz-go connection to the node (kgo.Client.Broker(...).Request): produce refusals,
// fetch sizes and long-polls, offsets by timestamp.

// raw is a node and a connection to it for hand-built requests.
type raw struct {
	t  *testing.T
	n  *node
	br *kgo.Broker
}

func rawTo(t *testing.T, n *node) raw {
	cl := client(t, kgo.SeedBrokers(n.addr))
	return raw{t: t, n: n, br: cl.Broker(int(n.id))}
}

func (r raw) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	resp, err := r.br.Request(ctxFor(r.t, 30*time.Second), req)
	if err != nil {
		r.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// produce sends one Produce (acks all) of batches, one per partition of topic, and
// answers each partition's result.
func (r raw) produce(topic string, batches map[int32][]byte) map[int32]kmsg.ProduceResponseTopicPartition {
	r.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p, b := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := r.do(req).(*kmsg.ProduceResponse)
	out := map[int32]kmsg.ProduceResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

// listOffset answers ListOffsets for one partition at ts.
func (r raw) listOffset(topic string, partition int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	r.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return r.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

func (r raw) hwm(topic string, partition int32) int64 {
	r.t.Helper()
	return r.listOffset(topic, partition, -1).Offset
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != want.Code {
		t.Fatalf("%s: error %v, want %s", what, kerr.ErrorForCode(got), want.Message)
	}
}

func withCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// Each partition of a Produce is its own request: a corrupt batch is refused with
// CORRUPT_MESSAGE and writes nothing, while the good partition beside it commits.
func TestProduceRefusals(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "in", 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateTopic(t.Context(), "keyed", 1, map[string]string{"cleanup.policy": "compact", "max.message.bytes": "100"}); err != nil {
		t.Fatal(err)
	}
	r := rawTo(t, n)
	now := time.Now().UnixMilli()
	good := func() []byte { return batchtest.Batch(t, batchtest.Some(3, now), 0, -1, -1, -1) }
	corrupt := func(mut func(b []byte) []byte) []byte { return mut(good()) }
	cases := []struct {
		name  string
		batch []byte
		want  *kerr.Error
	}{
		{"CRC mismatch", corrupt(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), kerr.CorruptMessage},
		{"magic 1", corrupt(func(b []byte) []byte { b[16] = 1; return withCRC(b) }), kerr.CorruptMessage},
		{"codec 5", corrupt(func(b []byte) []byte { b[22] |= 5; return withCRC(b) }), kerr.CorruptMessage},
		{"control batch", corrupt(func(b []byte) []byte { b[22] |= 0x20; return withCRC(b) }), kerr.CorruptMessage},
		// A transactional batch from a producer without a transactional id: Kafka's
		// answer is that no transactional id is no write on one.
		{"transactional batch", corrupt(func(b []byte) []byte { b[22] |= 0x10; return withCRC(b) }), kerr.TransactionalIDAuthorizationFailed},
		{"last offset delta", corrupt(func(b []byte) []byte { b[26] = 7; return withCRC(b) }), kerr.CorruptMessage},
		{"length", corrupt(func(b []byte) []byte { return b[:len(b)-2] }), kerr.CorruptMessage},
		{"no batch", nil, kerr.CorruptMessage},
	}
	for _, tc := range cases {
		res := r.produce("in", map[int32][]byte{0: tc.batch, 1: good()})
		wantCode(t, tc.name, res[0].ErrorCode, tc.want)
		wantCode(t, tc.name+": the other partition", res[1].ErrorCode, &kerr.Error{Code: 0, Message: "none"})
	}
	if hw := r.hwm("in", 0); hw != 0 {
		t.Fatalf("partition 0 after the refusals: high watermark %d, want 0: something was written", hw)
	}
	if hw := r.hwm("in", 1); hw != int64(3*len(cases)) {
		t.Fatalf("partition 1: high watermark %d, want %d", hw, 3*len(cases))
	}

	// The leader epoch a client sends (librdkafka and Sarama send 0) is the broker's to
	// set, outside the CRC: accepted.
	res := r.produce("in", map[int32][]byte{0: corrupt(func(b []byte) []byte { binary.BigEndian.PutUint32(b[12:], 0); return b })})
	wantCode(t, "leader epoch 0", res[0].ErrorCode, &kerr.Error{Code: 0, Message: "none"})

	// The topic's rules.
	keyless := batchtest.Batch(t, []batchtest.Record{{Value: []byte("v"), Ts: now}}, 0, -1, -1, -1)
	wantCode(t, "keyless on a compacted topic", r.produce("keyed", map[int32][]byte{0: keyless})[0].ErrorCode, kerr.InvalidRecord)
	big := batchtest.Batch(t, []batchtest.Record{{Key: []byte("k"), Value: make([]byte, 200), Ts: now}}, 0, -1, -1, -1)
	wantCode(t, "over max.message.bytes", r.produce("keyed", map[int32][]byte{0: big})[0].ErrorCode, kerr.MessageTooLarge)
	future := batchtest.Batch(t, []batchtest.Record{{Key: []byte("k"), Value: []byte("v"), Ts: now + 7*24*3600*1000}}, 0, -1, -1, -1)
	wantCode(t, "a week ahead", r.produce("keyed", map[int32][]byte{0: future})[0].ErrorCode, kerr.InvalidTimestamp)
	wantCode(t, "unknown topic", r.produce("nope", map[int32][]byte{0: good()})[0].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "partition out of range", r.produce("in", map[int32][]byte{5: good()})[5].ErrorCode, kerr.UnknownTopicOrPartition)

	// Idempotent refusals.
	ip := r.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	idem := func(epoch int16, seq int32) []byte {
		return batchtest.Batch(t, batchtest.Some(2, now), 0, ip.ProducerID, epoch, seq)
	}
	wantCode(t, "idempotent at 0", r.produce("in", map[int32][]byte{1: idem(0, 0)})[1].ErrorCode, &kerr.Error{Code: 0, Message: "none"})
	dup := r.produce("in", map[int32][]byte{1: idem(0, 0)})[1]
	wantCode(t, "retry", dup.ErrorCode, &kerr.Error{Code: 0, Message: "none"})
	if dup.BaseOffset != int64(3*len(cases)) {
		t.Fatalf("retry answered offset %d, want the original %d", dup.BaseOffset, 3*len(cases))
	}
	wantCode(t, "gap", r.produce("in", map[int32][]byte{1: idem(0, 5)})[1].ErrorCode, kerr.OutOfOrderSequenceNumber)
	wantCode(t, "epoch ahead, not at 0", r.produce("in", map[int32][]byte{1: idem(2, 2)})[1].ErrorCode, kerr.OutOfOrderSequenceNumber)
	wantCode(t, "epoch ahead at 0", r.produce("in", map[int32][]byte{1: idem(2, 0)})[1].ErrorCode, &kerr.Error{Code: 0, Message: "none"})
	wantCode(t, "old epoch", r.produce("in", map[int32][]byte{1: idem(0, 2)})[1].ErrorCode, kerr.InvalidProducerEpoch)
	unknown := batchtest.Batch(t, batchtest.Some(1, now), 0, ip.ProducerID+1000, 0, 0)
	wantCode(t, "unknown producer", r.produce("in", map[int32][]byte{1: unknown})[1].ErrorCode, kerr.UnknownProducerID)

	// A transactional producer's batch for a partition it did not add (transactions v1,
	// Produce v11) is refused and writes nothing.
	tid := "txn"
	ipt := kmsg.NewPtrInitProducerIDRequest()
	ipt.TransactionalID = &tid
	wantCode(t, "transactional InitProducerId without a timeout", r.do(ipt).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.InvalidTransactionTimeout)
	ipt.TransactionTimeoutMillis = 60_000
	tp := r.do(ipt).(*kmsg.InitProducerIDResponse)
	wantCode(t, "transactional InitProducerId", tp.ErrorCode, &kerr.Error{Code: 0, Message: "none"})
	v11 := kversion.Stable()
	v11.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	r11 := raw{t: t, n: n, br: client(t, kgo.SeedBrokers(n.addr), kgo.MaxVersions(v11)).Broker(int(n.id))}
	treq := kmsg.NewPtrProduceRequest()
	treq.TransactionID, treq.Acks = &tid, -1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Batch(t, batchtest.Some(2, now), 0, tp.ProducerID, tp.ProducerEpoch, 0)
	rp.Records[22] |= 0x10
	rp.Records = withCRC(rp.Records)
	rt.Partitions = append(rt.Partitions, rp)
	treq.Topics = append(treq.Topics, rt)
	wantCode(t, "transactional produce to a partition not added", r11.do(treq).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, kerr.InvalidTxnState)
	if hw := r.hwm("in", 0); hw != 3 {
		t.Fatalf("partition 0: high watermark %d, want 3 (the leader-epoch batch alone)", hw)
	}
}

// fetchReq is a Fetch of one partition.
func fetchReq(topic string, partition int32, offset int64, partMax, maxBytes, minBytes, waitMs int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = waitMs, minBytes, maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// batchesOf splits a fetched partition's bytes into batches and checks each: CRC,
// partition leader epoch 0.
func batchesOf(t *testing.T, b []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("fetched batch: %v", err)
		}
		n := 12 + int(rb.Length)
		if crc := crc32.Checksum(b[21:n], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != crc {
			t.Fatalf("fetched batch at offset %d: CRC %x, computed %x", rb.FirstOffset, uint32(rb.CRC), crc)
		}
		if rb.PartitionLeaderEpoch != 0 {
			t.Fatalf("fetched batch at offset %d: leader epoch %d, want 0", rb.FirstOffset, rb.PartitionLeaderEpoch)
		}
		out = append(out, rb)
		b = b[n:]
	}
	return out
}

func TestFetchSizesAndOffsets(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "f", 2, nil); err != nil {
		t.Fatal(err)
	}
	r := rawTo(t, n)
	now := time.Now().UnixMilli()
	var sizes []int
	for i := range 3 { // three batches of 4 records each: offsets 0-3, 4-7, 8-11
		b := batchtest.Batch(t, batchtest.Some(4, now+int64(i)), 0, -1, -1, -1)
		sizes = append(sizes, len(b))
		wantCode(t, "produce", r.produce("f", map[int32][]byte{0: b, 1: b})[0].ErrorCode, &kerr.Error{Message: "none"})
	}
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		return r.do(req).(*kmsg.FetchResponse)
	}
	// Mid-batch: the batch holding offset 6 comes whole, from 4.
	resp := fetch(fetchReq("f", 0, 6, 1<<20, 1<<20, 1, 0))
	p := resp.Topics[0].Partitions[0]
	if resp.SessionID != 0 || p.ErrorCode != 0 || p.HighWatermark != 12 || p.LastStableOffset != 12 || p.LogStartOffset != 0 {
		t.Fatalf("fetch at 6: session %d err %d hwm %d lso %d log start %d", resp.SessionID, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
	}
	bs := batchesOf(t, p.RecordBatches)
	if len(bs) != 2 || bs[0].FirstOffset != 4 || bs[1].FirstOffset != 8 {
		t.Fatalf("fetch at 6: %d batches from %d, want 2 from 4", len(bs), bs[0].FirstOffset)
	}
	// The first batch comes even over the partition's limit, and alone.
	p = fetch(fetchReq("f", 0, 0, 10, 1<<20, 1, 0)).Topics[0].Partitions[0]
	if bs := batchesOf(t, p.RecordBatches); len(bs) != 1 || bs[0].FirstOffset != 0 {
		t.Fatalf("fetch with a 10-byte partition limit: %d batches, want the first alone", len(bs))
	}
	// The response limit: partition 0's first batch, nothing of partition 1.
	two := fetchReq("f", 0, 0, 1<<20, int32(sizes[0]+1), 1, 0)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 1, 0, 1<<20
	two.Topics[0].Partitions = append(two.Topics[0].Partitions, rp)
	ps := fetch(two).Topics[0].Partitions
	if ps[1].RecordBatches == nil {
		t.Fatal("partition 1's records are null: librdkafka refuses a null record set (send empty bytes)")
	}
	if a, b := batchesOf(t, ps[0].RecordBatches), batchesOf(t, ps[1].RecordBatches); len(a) != 1 || len(b) != 0 || ps[1].HighWatermark != 12 {
		t.Fatalf("fetch over the response limit: %d and %d batches (hwm %d), want 1 and 0", len(a), len(b), ps[1].HighWatermark)
	}
	// Past the high watermark, and below the log start after DeleteRecords.
	wantCode(t, "offset 13", fetch(fetchReq("f", 0, 13, 1<<20, 1<<20, 1, 0)).Topics[0].Partitions[0].ErrorCode, kerr.OffsetOutOfRange)
	wantCode(t, "unknown topic", fetch(fetchReq("nope", 0, 0, 1<<20, 1<<20, 1, 0)).Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	// A session the client believes in does not exist: sessions are not served.
	sess := fetchReq("f", 0, 0, 1<<20, 1<<20, 1, 0)
	sess.SessionID, sess.SessionEpoch = 7, 1
	wantCode(t, "fetch session", fetch(sess).ErrorCode, kerr.FetchSessionIDNotFound)
}

// A fetch at the high watermark waits, and a commit on any of its partitions wakes it;
// MinBytes not reached ends at MaxWait with what there is.
func TestFetchLongPoll(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "lp", 2, nil); err != nil {
		t.Fatal(err)
	}
	r := rawTo(t, n)
	now := time.Now().UnixMilli()
	req := fetchReq("lp", 0, 0, 1<<20, 1<<20, 1, 10000)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	const delay = 300 * time.Millisecond
	go func() {
		time.Sleep(delay)
		r.produce("lp", map[int32][]byte{1: batchtest.Batch(t, batchtest.Some(2, now), 0, -1, -1, -1)})
	}()
	start := time.Now()
	ps := r.do(req).(*kmsg.FetchResponse).Topics[0].Partitions
	took := time.Since(start)
	if len(batchesOf(t, ps[1].RecordBatches)) != 1 || took < delay || took > 5*time.Second {
		t.Fatalf("long-poll answered after %v with %d bytes on partition 1, want the batch produced after %v", took, len(ps[1].RecordBatches), delay)
	}
	// MinBytes beyond what there is: the wait runs out, and the answer has what there is.
	req = fetchReq("lp", 1, 0, 1<<20, 1<<20, 1<<20, 500)
	start = time.Now()
	p := r.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if took := time.Since(start); took < 450*time.Millisecond || took > 5*time.Second || len(batchesOf(t, p.RecordBatches)) != 1 {
		t.Fatalf("MinBytes unreached: answered after %v with %d bytes, want ~500ms and the one batch", took, len(p.RecordBatches))
	}
}

// ListOffsets by timestamp answers the first record at or after the time, found inside
// its batch, with the record's own timestamp.
func TestListOffsetsByTimestamp(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "ts", 1, nil); err != nil {
		t.Fatal(err)
	}
	r := rawTo(t, n)
	base := time.Now().Add(-time.Hour).UnixMilli()
	recs := func(ts ...int64) []batchtest.Record {
		out := make([]batchtest.Record, len(ts))
		for i, d := range ts {
			out[i] = batchtest.Record{Key: []byte{byte(i)}, Value: []byte{byte(d)}, Ts: base + d}
		}
		return out
	}
	// Offsets 0-2 at +1000, +3000, +2000 (out of order within the batch); 3 at +5000;
	// 4-5 at +4000, +4500.
	for _, b := range [][]batchtest.Record{recs(1000, 3000, 2000), recs(5000), recs(4000, 4500)} {
		wantCode(t, "produce", r.produce("ts", map[int32][]byte{0: batchtest.Batch(t, b, 0, -1, -1, -1)})[0].ErrorCode, &kerr.Error{Message: "none"})
	}
	for _, tc := range []struct {
		ts, offset, at int64
	}{
		{base, 0, base + 1000},
		{base + 1000, 0, base + 1000},
		{base + 1500, 1, base + 3000},
		{base + 2000, 1, base + 3000},
		{base + 3500, 3, base + 5000},
		{base + 5000, 3, base + 5000},
		{base + 5001, -1, -1},
		{-3, 3, base + 5000}, // the largest timestamp
		{-2, 0, -1},
		{-1, 6, -1},
	} {
		p := r.listOffset("ts", 0, tc.ts)
		if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.at || p.LeaderEpoch != 0 {
			t.Errorf("ListOffsets at %d: offset %d timestamp %d (err %d), want offset %d timestamp %d", tc.ts, p.Offset, p.Timestamp, p.ErrorCode, tc.offset, tc.at)
		}
	}
	// v0 answers a list of offsets (a client pinned to Kafka 0.10.0 asks in v0).
	old := client(t, kgo.SeedBrokers(n.addr), kgo.MaxVersions(kversion.V0_10_0()))
	r0 := raw{t: t, n: n, br: old.Broker(int(n.id))}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "ts"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.MaxNumOffsets = -1, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if got := r0.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].OldStyleOffsets; len(got) != 1 || got[0] != 6 {
		t.Errorf("ListOffsets v0 latest: %v, want [6]", got)
	}
}
