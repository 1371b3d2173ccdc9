package frontends_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
