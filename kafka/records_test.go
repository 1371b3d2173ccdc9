package kafka_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/kafka"
)

// Records through franz-go, the reference Kafka client, against a node on the embedded
// catalog: the idempotent producer with five requests in flight and every codec, read
// back by a direct consumer exactly as produced.

func client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// testRecords makes n keyed records with headers and distinct timestamps (unix ms,
// recent enough for the default timestamp bounds).
func testRecords(topic, tag string, n int) []*kgo.Record {
	base := time.Now().Add(-time.Hour).UnixMilli()
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{
			Topic:     topic,
			Key:       fmt.Appendf(nil, "key-%d", i%17),
			Value:     bytes.Repeat(fmt.Appendf(nil, "%s-value-%d;", tag, i), 1+i%7),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "%d", i)}, {Key: "empty"}},
			Timestamp: time.UnixMilli(base + int64(i)*3),
		}
	}
	return out
}

// consumeAll reads partitions from the start until every partition has reached its
// high watermark, as a direct (group-less) consumer does.
func consumeAll(t *testing.T, addr, topic string, partitions int32, want int) []*kgo.Record {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := client(t, kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx := ctxFor(t, 30*time.Second)
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), want, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// sameRecords compares what was produced (with the offsets the producer was answered)
// with what was consumed: offsets, partitions, keys, values, headers, timestamps.
func sameRecords(t *testing.T, produced, consumed []*kgo.Record) {
	t.Helper()
	key := func(r *kgo.Record) string { return fmt.Sprintf("%d/%d", r.Partition, r.Offset) }
	byPos := map[string]*kgo.Record{}
	for _, r := range consumed {
		if _, dup := byPos[key(r)]; dup {
			t.Fatalf("consumed %s twice", key(r))
		}
		byPos[key(r)] = r
	}
	if len(consumed) != len(produced) {
		t.Fatalf("consumed %d records, produced %d", len(consumed), len(produced))
	}
	for _, p := range produced {
		c, ok := byPos[key(p)]
		switch {
		case !ok:
			t.Fatalf("produced %s (key %s) was not consumed", key(p), p.Key)
		case !bytes.Equal(c.Key, p.Key) || !bytes.Equal(c.Value, p.Value):
			t.Fatalf("%s: consumed key %q value %q, produced %q %q", key(p), c.Key, c.Value, p.Key, p.Value)
		case !c.Timestamp.Equal(p.Timestamp):
			t.Fatalf("%s: timestamp %v, produced %v", key(p), c.Timestamp, p.Timestamp)
		case !slices.EqualFunc(c.Headers, p.Headers, func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }):
			t.Fatalf("%s: headers %v, produced %v", key(p), c.Headers, p.Headers)
		}
	}
	// Offsets are dense per partition, in the order produced.
	per := map[int32][]int64{}
	for _, r := range consumed {
		per[r.Partition] = append(per[r.Partition], r.Offset)
	}
	for p, offs := range per {
		slices.Sort(offs)
		for i, o := range offs {
			if o != offs[0]+int64(i) {
				t.Fatalf("partition %d: offsets %v are not dense", p, offs)
			}
		}
	}
}

func produceSync(t *testing.T, cl *kgo.Client, recs []*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(ctxFor(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestFranzGoIdempotentEveryCodec(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "codec-" + c.name
			if _, err := cat.CreateTopic(t.Context(), topic, 3, nil); err != nil {
				t.Fatal(err)
			}
			// Idempotent by default, with five requests in flight per broker.
			cl := client(t, kgo.SeedBrokers(n.addr), kgo.ProducerBatchCompression(c.codec),
				kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(4<<10))
			recs := testRecords(topic, c.name, 600)
			// Asynchronously, so that several requests are in flight at once.
			done := make(chan error, len(recs))
			for _, r := range recs {
				cl.Produce(t.Context(), r, func(r *kgo.Record, err error) { done <- err })
			}
			for range recs {
				if err := <-done; err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			for _, r := range recs {
				if r.ProducerID < 0 {
					t.Fatalf("record %s/%d produced without a producer id: not idempotent", r.Key, r.Offset)
				}
			}
			sameRecords(t, recs, consumeAll(t, n.addr, topic, 3, len(recs)))
		})
	}
}

// A batch the topic refuses (over max.message.bytes) fails; franz-go then
// bumps its producer epoch by itself (KIP-360) and restarts its sequences at 0, which
// the server accepts as the producer's new epoch.
func TestFranzGoEpochBumpAfterError(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "small", 1, map[string]string{"max.message.bytes": "1000"}); err != nil {
		t.Fatal(err)
	}
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("small"), kgo.RecordRetries(3))
	first := []*kgo.Record{{Value: []byte("a")}, {Value: []byte("b")}}
	produceSync(t, cl, first)
	// Random bytes: compressed, the batch still exceeds the topic's limit.
	noise := make([]byte, 2000)
	rand.Read(noise)
	err := cl.ProduceSync(ctxFor(t, 30*time.Second), &kgo.Record{Value: noise}).FirstErr()
	if err == nil || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("oversized record: %v, want MESSAGE_TOO_LARGE", err)
	}
	after := []*kgo.Record{{Value: []byte("c")}, {Value: []byte("d")}}
	produceSync(t, cl, after)
	if after[0].ProducerID != first[0].ProducerID || after[0].ProducerEpoch != first[0].ProducerEpoch+1 {
		t.Fatalf("after the error: producer %d epoch %d, before %d epoch %d: want the same id at the next epoch",
			after[0].ProducerID, after[0].ProducerEpoch, first[0].ProducerID, first[0].ProducerEpoch)
	}
	if after[0].Offset != 2 || after[1].Offset != 3 {
		t.Fatalf("offsets after the bump %d, %d, want 2 and 3", after[0].Offset, after[1].Offset)
	}
	got := consumeAll(t, n.addr, "small", 1, 4)
	for i, r := range got {
		if want := string(rune('a' + i)); string(r.Value) != want || r.Offset != int64(i) {
			t.Fatalf("record %d: %q at %d, want %q", i, r.Value, r.Offset, want)
		}
	}
}

// Without idempotence, pipelined requests to one partition still land in the order they
// were sent: the connection's Produce requests reach the writer in order.
func TestFranzGoPipelinedOrder(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "ordered", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("ordered"), kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(5), kgo.ProducerBatchMaxBytes(1<<10), kgo.ProducerLinger(0))
	const total = 2000
	done := make(chan error, total)
	for i := range total {
		cl.Produce(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "%06d", i)}, func(_ *kgo.Record, err error) { done <- err })
	}
	for range total {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	got := consumeAll(t, n.addr, "ordered", 1, total)
	for i, r := range got {
		if want := fmt.Sprintf("%06d", i); string(r.Value) != want {
			t.Fatalf("offset %d holds %q, want %q: pipelined requests reordered", r.Offset, r.Value, want)
		}
	}
}

// acks=0 gets no answer at all, and the records are still written.
func TestFranzGoAcksZero(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "fire", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("fire"), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.NoAck()))
	recs := testRecords("fire", "acks0", 50)
	produceSync(t, cl, recs)
	got := consumeAll(t, n.addr, "fire", 1, len(recs))
	for i, r := range got {
		if !bytes.Equal(r.Value, recs[i].Value) {
			t.Fatalf("offset %d: %q, want %q", r.Offset, r.Value, recs[i].Value)
		}
	}
}
