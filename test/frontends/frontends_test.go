// Package frontends_test holds the two front ends to one answer for each rule the core
// holds once (docs/design.md "Front ends and the broker core"): a whole node with its
// HTTP API and its Kafka listener, over SQLite and the filesystem store, is sent the
// same refusable request through each, and both must refuse it (each in its own
// vocabulary) or both accept it.
package frontends_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// maxWait is the stack's core's cap on fetch waits (broker.Config.MaxWait).
const maxWait = 300 * time.Millisecond

// stack is one node: HTTP at url, Kafka at kafka.
type stack struct {
	t     *testing.T
	url   string
	kafka string
	kcl   *kgo.Client
}

func startStack(t *testing.T, kafkaConfig ...func(*kafka.Config)) *stack {
	t.Helper()
	n := nodetest.Start(t, nodetest.Kafka(kafkaConfig...),
		nodetest.Mutate(func(c *node.Config) {
			c.WriterConfig = writer.Config{Linger: 5 * time.Millisecond}
			c.ReaderConfig = reader.Config{PollInterval: 50 * time.Millisecond}
			c.Broker = broker.Config{MaxWait: maxWait}
		}))
	s := &stack{t: t, url: n.URL, kafka: n.KafkaAddr}
	var err error
	s.kcl, err = kgo.NewClient(kgo.SeedBrokers(s.kafka), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kcl.Close)
	return s
}

// node sends Kafka requests to the one node as they are, not through franz-go's
// routing to coordinators and leaders.
func (s *stack) node() kmsg.Requestor { return s.kcl.Broker(0) }

// http sends an HTTP request and answers its status and the problem's code, if any.
func (s *stack) http(method, path, body string) (int, string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", v1.ContentTypeJSON)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p v1.Problem
	if resp.StatusCode >= 300 {
		if err := json.Unmarshal(b, &p); err != nil {
			s.t.Fatalf("%s %s: %d answer is not a problem: %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, p.Code
}

// wantHTTP requires an HTTP answer: a status and, for a refusal, its code.
func (s *stack) wantHTTP(method, path, body string, status int, code string) {
	s.t.Helper()
	if got, gotCode := s.http(method, path, body); got != status || gotCode != code {
		s.t.Errorf("HTTP %s %s %s: %d %q, want %d %q", method, path, body, got, gotCode, status, code)
	}
}

// wantKafka requires a Kafka error code (0: none).
func wantKafka(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Errorf("Kafka %s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func createTopicKafka(t *testing.T, s *stack, name string, partitions int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(t.Context(), s.node())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].ErrorCode
}

// TestTopicNames: a name outside the rule is refused by both, to create, to grow and
// to produce; one inside it is taken by both.
func TestTopicNames(t *testing.T) {
	s := startStack(t)
	for _, bad := range []string{"a b", "..", strings.Repeat("n", 250)} {
		s.wantHTTP("POST", "/v1/topics", `{"name":"`+bad+`"}`, 400, "invalid_topic_name")
		wantKafka(t, "CreateTopics "+bad, createTopicKafka(t, s, bad, 1), kerr.InvalidTopicException)
	}
	s.wantHTTP("POST", "/v1/topics", `{"name":"ok.http_1"}`, 201, "")
	wantKafka(t, "CreateTopics ok.kafka_1", createTopicKafka(t, s, "ok.kafka_1", 1), nil)

	s.wantHTTP("POST", "/v1/topics/a%20b/records", `{"records":[{"value":1}]}`, 400, "invalid_topic_name")
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "a b", 3
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(t.Context(), s.node())
	if err != nil {
		t.Fatal(err)
	}
	wantKafka(t, "CreatePartitions a b", resp.Topics[0].ErrorCode, kerr.InvalidTopicException)
	s.wantHTTP("PATCH", "/v1/topics/a%20b", `{"partitions":3}`, 400, "invalid_topic_name")
}

// TestGroupNames: a group name outside the rule is refused by both, to join and to
// commit.
func TestGroupNames(t *testing.T) {
	s := startStack(t)
	if code := createTopicKafka(t, s, "t", 1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	s.wantHTTP("POST", "/v1/groups/a%20b/heartbeat", `{"member_id":"m","member_epoch":0,"topics":["t"]}`, 400, "invalid_group_name")
	s.wantHTTP("POST", "/v1/groups/a%20b/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":0}]}`, 400, "invalid_group_name")

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "a b", 10_000, 10_000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	join.Protocols = append(join.Protocols, p)
	jr, err := join.RequestWith(t.Context(), s.node())
	if err != nil {
		t.Fatal(err)
	}
	wantKafka(t, "JoinGroup a b", jr.ErrorCode, kerr.InvalidGroupID)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "a b", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cr, err := commit.RequestWith(t.Context(), s.node())
	if err != nil {
		t.Fatal(err)
	}
	wantKafka(t, "OffsetCommit a b", cr.Topics[0].Partitions[0].ErrorCode, kerr.InvalidGroupID)
}

// TestSessionTimeout: the HTTP join with a session timeout of 50 ms is refused as the
// catalog refuses it (it took anything above 0 before), and so is a Kafka join; both
// take 100 ms, the lower bound.
func TestSessionTimeout(t *testing.T) {
	s := startStack(t)
	if code := createTopicKafka(t, s, "t", 1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	join := func(group string, ms int32) int16 {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = group, ms, 1000, "consumer"
		req.MemberID = ""
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(t.Context(), s.node())
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	for _, ms := range []int32{0, 50, 99, 1_800_001} {
		body := `{"member_id":"m","member_epoch":0,"topics":["t"],"session_timeout_ms":` + itoa(ms) + `}`
		s.wantHTTP("POST", "/v1/groups/h/heartbeat", body, 400, "invalid_request")
		wantKafka(t, "JoinGroup session timeout "+itoa(ms), join("k", ms), kerr.InvalidSessionTimeout)
	}
	s.wantHTTP("POST", "/v1/groups/h/heartbeat", `{"member_id":"m","member_epoch":0,"topics":["t"],"session_timeout_ms":100}`, 200, "")
	// JoinGroup v4+ first answers MEMBER_ID_REQUIRED: the timeout was accepted.
	wantKafka(t, "JoinGroup session timeout 100", join("k", 100), kerr.MemberIDRequired)
}

// TestPartitionCounts: a count beyond the bound is refused by both, to create and to
// grow; so is growing to 0.
func TestPartitionCounts(t *testing.T) {
	s := startStack(t)
	s.wantHTTP("POST", "/v1/topics", `{"name":"big","partitions":10001}`, 400, "invalid_partition_count")
	wantKafka(t, "CreateTopics 10001 partitions", createTopicKafka(t, s, "big", 10001), kerr.InvalidPartitions)
	s.wantHTTP("POST", "/v1/topics", `{"name":"max","partitions":10000}`, 201, "")
	wantKafka(t, "CreateTopics 1 partition", createTopicKafka(t, s, "one", 1), nil)

	grow := func(topic string, count int32) int16 {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10_000
		resp, err := req.RequestWith(t.Context(), s.node())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	for _, n := range []int32{0, 10001} {
		s.wantHTTP("PATCH", "/v1/topics/one", `{"partitions":`+itoa(n)+`}`, 400, "invalid_partition_count")
		wantKafka(t, "CreatePartitions "+itoa(n), grow("one", n), kerr.InvalidPartitions)
	}
}

// TestCommitShape: a negative partition or offset in a commit is refused by both.
func TestCommitShape(t *testing.T) {
	s := startStack(t)
	if code := createTopicKafka(t, s, "t", 1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	s.wantHTTP("POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":-1,"offset":0}]}`, 400, "invalid_partition")
	s.wantHTTP("POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":-5}]}`, 400, "invalid_offset")
	for _, tc := range []struct {
		partition int32
		offset    int64
		want      *kerr.Error
	}{
		{-1, 0, kerr.UnknownTopicOrPartition},
		{0, -5, kerr.OffsetOutOfRange},
	} {
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Group, commit.Generation = "g", -1
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = "t"
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = tc.partition, tc.offset
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		cr, err := commit.RequestWith(t.Context(), s.node())
		if err != nil {
			t.Fatal(err)
		}
		wantKafka(t, "OffsetCommit", cr.Topics[0].Partitions[0].ErrorCode, tc.want)
	}
	s.wantHTTP("POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":0}]}`, 200, "")
}

// TestFetchWaitCap: a fetch that asks to wait a minute at the high watermark answers
// once the core's cap has passed, through either front end. Only an upper bound is
// asserted, far below the minute asked for: without the cap the call would not answer
// before its context ended.
func TestFetchWaitCap(t *testing.T) {
	s := startStack(t)
	if code := createTopicKafka(t, s, "t", 1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	const bound = 20 * time.Second
	start := time.Now()
	s.wantHTTP("GET", "/v1/topics/t/partitions/0/records?offset=0&wait_ms=60000", "", 200, "")
	if d := time.Since(start); d > bound {
		t.Errorf("HTTP fetch waited %s: the core caps it at %s", d, maxWait)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 60_000, 1, 1<<20
	req.ReplicaID = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	start = time.Now()
	resp, err := req.RequestWith(ctx, s.node())
	if err != nil {
		t.Fatalf("Kafka fetch: %v after %s", err, time.Since(start))
	}
	if d := time.Since(start); d > bound {
		t.Errorf("Kafka fetch waited %s: the core caps it at %s", d, maxWait)
	}
	wantKafka(t, "Fetch", resp.Topics[0].Partitions[0].ErrorCode, nil)
}

func itoa(n int32) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestAuditPage: the page bounds are the core's (the Kafka protocol has no audit log).
func TestAuditPage(t *testing.T) {
	s := startStack(t)
	for _, q := range []string{"limit=0", "limit=1001", "limit=99999999999999999999", "after=-1"} {
		s.wantHTTP("GET", "/v1/audit?"+q, "", 400, "invalid_parameter")
	}
	for _, q := range []string{"", "?limit=1", "?limit=1000", "?after=5"} {
		s.wantHTTP("GET", "/v1/audit"+q, "", 200, "")
	}
}
