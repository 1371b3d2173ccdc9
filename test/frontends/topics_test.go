package frontends_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/kafka"
)

// TestExplicitPartitionCount: a count given explicitly is checked as given by both —
// 0 and -2 are refused (the HTTP API refused 0 while CreateTopics took it as the
// default; Kafka refuses it too: INVALID_PARTITIONS) — while the default (the HTTP
// body without "partitions", Kafka's -1) makes one partition through either.
func TestExplicitPartitionCount(t *testing.T) {
	s := startStack(t)
	for _, n := range []int32{0, -2} {
		s.wantHTTP("POST", "/v1/topics", `{"name":"z","partitions":`+itoa(n)+`}`, 400, "invalid_partition_count")
		wantKafka(t, "CreateTopics "+itoa(n)+" partitions", createTopicKafka(t, s, "z", n), kerr.InvalidPartitions)
	}
	s.wantHTTP("GET", "/v1/topics/z", "", 404, "topic_not_found")

	s.wantHTTP("POST", "/v1/topics", `{"name":"http"}`, 201, "")
	wantKafka(t, "CreateTopics -1 partitions", createTopicKafka(t, s, "kafka", -1), nil)
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"http", "kafka"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(t.Context(), s.node())
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 || len(rt.Partitions) != 1 {
			t.Errorf("%s: %v, %d partitions; want the default, 1", *rt.Topic, kerr.ErrorForCode(rt.ErrorCode), len(rt.Partitions))
		}
	}
}

// TestInternalAndAutoCreatedTopics: the offsets topic is listed by the Kafka protocol
// (internal) while it does not exist, but neither front end writes to it; made by
// either front end it exists for both; a topic auto-created by a Kafka Metadata request
// is made under the same rules as one created over HTTP, and served by both.
func TestInternalAndAutoCreatedTopics(t *testing.T) {
	s := startStack(t, func(c *kafka.Config) { c.AutoCreateTopics = true })
	metadata := func(names ...string) map[string]kmsg.MetadataResponseTopic {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		for _, name := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(t.Context(), s.node())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]kmsg.MetadataResponseTopic{}
		for _, rt := range resp.Topics {
			out[*rt.Topic] = rt
		}
		return out
	}
	const offsets = broker.OffsetsTopic
	md := metadata(offsets, "a b", "auto")
	if rt := md[offsets]; rt.ErrorCode != 0 || !rt.IsInternal || len(rt.Partitions) != 1 || rt.TopicID != broker.OffsetsTopicID {
		t.Errorf("Metadata %s: %+v", offsets, rt)
	}
	wantKafka(t, "Metadata auto-creating a b", md["a b"].ErrorCode, kerr.InvalidTopicException)
	s.wantHTTP("POST", "/v1/topics", `{"name":"a b"}`, 400, "invalid_topic_name")
	if rt := md["auto"]; rt.ErrorCode != 0 || rt.IsInternal || len(rt.Partitions) != 1 {
		t.Errorf("Metadata auto: %+v", rt)
	}
	s.wantHTTP("GET", "/v1/topics/auto", "", 200, "")
	s.wantHTTP("POST", "/v1/topics", `{"name":"auto"}`, 409, "topic_exists")

	// Listed, yet not there to write to.
	s.wantHTTP("POST", "/v1/topics/"+offsets+"/records", `{"records":[{"value":1}]}`, 404, "topic_not_found")
	wantKafka(t, "Produce to "+offsets, produceKafka(t, s, offsets), kerr.UnknownTopicOrPartition)

	// Made over HTTP, it exists for both, internal whoever made it.
	s.wantHTTP("POST", "/v1/topics", `{"name":"`+offsets+`","partitions":2}`, 201, "")
	wantKafka(t, "CreateTopics "+offsets, createTopicKafka(t, s, offsets, 1), kerr.TopicAlreadyExists)
	rt := metadata(offsets)[offsets]
	if rt.ErrorCode != 0 || !rt.IsInternal || len(rt.Partitions) != 2 || rt.TopicID == broker.OffsetsTopicID {
		t.Errorf("Metadata %s once made: %+v", offsets, rt)
	}
	wantKafka(t, "Produce to "+offsets+" once made", produceKafka(t, s, offsets), nil)
	s.wantHTTP("POST", "/v1/topics/"+offsets+"/records", `{"records":[{"value":1,"partition":0}]}`, 200, "")
}

// produceKafka produces one record to partition 0 of topic and answers the partition's
// error code.
func produceKafka(t *testing.T, s *stack, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Batch(t, batchtest.Some(1, time.Now().UnixMilli()), 0, -1, -1, -1)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), s.node())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}
