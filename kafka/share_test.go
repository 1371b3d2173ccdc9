package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/objstore/fs"
)

// shareMember drives one share-group member over the wire: its heartbeat and its share
// session with the node (each request's epoch the one after the last answer's).
type shareMember struct {
	t       *testing.T
	cl      *kgo.Client
	to      kmsg.Requestor // the node its share session is with
	group   string
	id      string
	topicID [16]byte
	epoch   int32 // the share session's
}

func (m *shareMember) join(topic string) {
	m.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = m.group, m.id, 0, []string{topic}
	resp, err := req.RequestWith(ctx10(m.t), m.cl)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("%s: join: %v, code %d", m.id, err, resp.ErrorCode)
	}
	if resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 1 || resp.Assignment.TopicPartitions[0].TopicID != m.topicID {
		m.t.Fatalf("%s: assignment %+v, want the topic's partitions", m.id, resp.Assignment)
	}
}

// fetch acquires up to max records, waiting up to wait, and answers the acquired
// ranges as [first, last, delivery count].
func (m *shareMember) fetch(max int32, wait time.Duration) [][3]int64 {
	m.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.epoch
	req.MaxRecords, req.BatchSize, req.MaxWaitMillis, req.MaxBytes = max, max, int32(wait.Milliseconds()), 1<<20
	if m.epoch == 0 {
		t := kmsg.NewShareFetchRequestTopic()
		t.TopicID = m.topicID
		t.Partitions = []kmsg.ShareFetchRequestTopicPartition{kmsg.NewShareFetchRequestTopicPartition()}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx10(m.t), m.to)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("%s: share fetch: %v, code %d", m.id, err, resp.ErrorCode)
	}
	m.epoch++
	out := [][3]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.t.Fatalf("%s: share fetch partition error %d", m.id, p.ErrorCode)
			}
			if len(p.AcquiredRecords) > 0 && len(p.Records) == 0 {
				m.t.Fatalf("%s: acquired %v without the records", m.id, p.AcquiredRecords)
			}
			for _, a := range p.AcquiredRecords {
				out = append(out, [3]int64{a.FirstOffset, a.LastOffset, int64(a.DeliveryCount)})
			}
		}
	}
	return out
}

// ack acknowledges [first, last] with typ and answers the partition's error code.
func (m *shareMember) ack(first, last int64, typ int8) int16 {
	m.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &m.group, &m.id, m.epoch
	t := kmsg.NewShareAcknowledgeRequestTopic()
	t.TopicID = m.topicID
	p := kmsg.NewShareAcknowledgeRequestTopicPartition()
	b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = first, last, []int8{typ}
	p.AcknowledgementBatches = append(p.AcknowledgementBatches, b)
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx10(m.t), m.to)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("%s: share acknowledge: %v, code %d", m.id, err, resp.ErrorCode)
	}
	m.epoch++
	return resp.Topics[0].Partitions[0].ErrorCode
}

func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kvs ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kvs[i], kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx10(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode
}

// TestShareGroupAcknowledgements: over the Kafka protocol, bad acknowledgements (never
// acquired, held by another member, already acknowledged, out of range) answer their
// codes and change nothing; an expired lock redelivers (and refuses the late holder's
// acknowledgement); the delivery limit archives. On SQLite with one node, and on
// Postgres with the two members' share sessions on two nodes.
func TestShareGroupAcknowledgements(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		n := startNode(t, openSQLite(t), kafka.Config{})
		testShareAcks(t, n, n)
	})
	t.Run("postgres_two_nodes", func(t *testing.T) {
		dsn := testsvc.PostgresDSN(t)
		open := func() *postgres.Catalog {
			c, err := postgres.Open(t.Context(), dsn, catalog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		store, err := fs.New(filepath.Join(t.TempDir(), "objects"))
		if err != nil {
			t.Fatal(err)
		}
		testShareAcks(t, startNodeOn(t, open(), store, kafka.Config{}), startNodeOn(t, open(), store, kafka.Config{}))
	})
}

func testShareAcks(t *testing.T, n, n2 *node) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("q"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := admin(t, kgo.SeedBrokers(n.addr))
	if _, err := adm.CreateTopic(ctx10(t), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx10(t), kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	td, err := adm.ListTopics(ctx10(t), "q")
	if err != nil {
		t.Fatal(err)
	}
	const g = "work"
	// Configs are taken before the group exists; a bad one is refused and changes
	// nothing.
	if code := setGroupConfigs(t, cl, g, "share.delivery.count.limit", "1"); code != kerr.InvalidConfig.Code {
		t.Fatalf("delivery limit 1: code %d, want INVALID_CONFIG", code)
	}
	if code := setGroupConfigs(t, cl, g, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "60000", "share.delivery.count.limit", "2"); code != 0 {
		t.Fatalf("set configs: code %d", code)
	}
	a := &shareMember{t: t, cl: cl, to: cl.Broker(int(n.id)), group: g, id: "member-a", topicID: td["q"].ID}
	b := &shareMember{t: t, cl: cl, to: cl.Broker(int(n2.id)), group: g, id: "member-b", topicID: td["q"].ID}
	a.join("q")
	b.join("q")
	if got := a.fetch(4, 0); fmt.Sprint(got) != "[[0 3 1]]" {
		t.Fatalf("a acquired %v, want [[0 3 1]]", got)
	}
	if got := b.fetch(4, 0); fmt.Sprint(got) != "[[4 7 1]]" {
		t.Fatalf("b acquired %v, want [[4 7 1]]", got)
	}
	if code := a.ack(0, 0, catalog.AckAccept); code != 0 {
		t.Fatalf("accept 0: code %d", code)
	}
	if code := a.ack(1, 1, catalog.AckRelease); code != 0 {
		t.Fatalf("release 1: code %d", code)
	}
	state := func() catalog.SharePartitionState {
		d, err := n.core.DescribeShareGroup(t.Context(), broker.Principal{}, g)
		if err != nil || len(d.Partitions) != 1 {
			t.Fatalf("describe: %+v, %v", d, err)
		}
		return d.Partitions[0]
	}
	before := state()
	for _, tc := range []struct {
		name        string
		first, last int64
		want        int16
	}{
		{"held by another member", 4, 4, kerr.InvalidRecordState.Code},
		{"never acquired (released)", 1, 1, kerr.InvalidRecordState.Code},
		{"already acknowledged", 0, 0, kerr.InvalidRecordState.Code},
		{"out of range", 20, 21, kerr.InvalidRequest.Code},
	} {
		if code := a.ack(tc.first, tc.last, catalog.AckAccept); code != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.want)
		}
		if after := state(); after != before {
			t.Fatalf("%s changed the share-partition: %+v, was %+v", tc.name, after, before)
		}
	}
	// At the limit (2), a release archives: offset 1, released by a, goes to b at
	// delivery 2; released again it is done and never delivered again.
	if got := b.fetch(1, 0); fmt.Sprint(got) != "[[1 1 2]]" {
		t.Fatalf("b acquired %v, want the released [[1 1 2]]", got)
	}
	if code := b.ack(1, 1, catalog.AckRelease); code != 0 {
		t.Fatalf("b releases 1: code %d", code)
	}
	if s := state(); s.StartOffset != 2 {
		t.Fatalf("after the archive: %+v, want the start at 2", s)
	}
	// An expired lock redelivers: a takes 8-9 under a 1 s lock; b gets them at delivery
	// 2 once it has passed (by the catalog's clock), and a's late acknowledgement is
	// refused.
	if code := setGroupConfigs(t, cl, g, "share.record.lock.duration.ms", "1000"); code != 0 {
		t.Fatalf("set the lock: code %d", code)
	}
	if got := a.fetch(10, 0); fmt.Sprint(got) != "[[8 9 1]]" {
		t.Fatalf("a acquired %v, want [[8 9 1]]", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	var again [][3]int64
	for len(again) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("8-9 never redelivered after a's lock expired")
		}
		again = b.fetch(10, 500*time.Millisecond)
	}
	if fmt.Sprint(again) != "[[8 9 2]]" {
		t.Fatalf("b acquired %v, want [[8 9 2]]", again)
	}
	if code := a.ack(8, 9, catalog.AckAccept); code != kerr.InvalidRecordState.Code {
		t.Fatalf("a's late acknowledgement: code %d, want INVALID_RECORD_STATE", code)
	}
}

// TestShareGroupIDsExclusive: a consumer group's id used as a share group, and the
// reverse, are refused with GROUP_ID_NOT_FOUND, as Kafka refuses them.
func TestShareGroupIDsExclusive(t *testing.T) {
	n := startNode(t, openSQLite(t), kafka.Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := admin(t, kgo.SeedBrokers(n.addr))
	if _, err := adm.CreateTopic(ctx10(t), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberID, cg.MemberEpoch, cg.SubscribedTopicNames, cg.RebalanceTimeoutMillis = "consumers", "m1", 0, []string{"q"}, 30000
	cg.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp, err := cg.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("consumer join: %v, code %d", err, resp.ErrorCode)
	}
	sh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sh.GroupID, sh.MemberID, sh.MemberEpoch, sh.SubscribedTopicNames = "consumers", "s1", 0, []string{"q"}
	if resp, err := sh.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share join on a consumer group: %v, code %d, want GROUP_ID_NOT_FOUND", err, resp.ErrorCode)
	}
	sh.GroupID = "sharers"
	if resp, err := sh.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("share join: %v, code %d", err, resp.ErrorCode)
	}
	cg.Group = "sharers"
	if resp, err := cg.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer join on a share group: %v, code %d, want GROUP_ID_NOT_FOUND", err, resp.ErrorCode)
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "sharers", "consumer", 30000, 30000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	if resp, err := jg.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic join on a share group: %v, code %d, want GROUP_ID_NOT_FOUND", err, resp.ErrorCode)
	}
	// Both groups are listed, each with its type.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(5)
	resp, err := lg.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, g := range resp.Groups {
		types[g.Group] = g.GroupType
	}
	if types["consumers"] != "consumer" || types["sharers"] != "share" {
		t.Fatalf("listed %v, want consumers: consumer, sharers: share", types)
	}
}
