package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/catalog"
)

func threeNodes() []catalog.Node {
	return []catalog.Node{{ID: 2, Addr: "10.0.0.3:9093"}, {ID: 0, Addr: "10.0.0.1:9091"}, {ID: 1, Addr: "10.0.0.2:9092"}}
}

func TestMetadataBrokersAndPartitions(t *testing.T) {
	fc := newFakeCluster(threeNodes()...)
	orders := fc.add("orders", 6)
	fc.add("audit", 1)
	ts := startServer(t, Config{}, fc)
	c := dial(t, ts.addr)
	for v := int16(0); v <= 12; v++ {
		req := kmsg.NewPtrMetadataRequest()
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means all
		}
		resp := c.roundTrip(req, v).(*kmsg.MetadataResponse)
		var brokers []string
		for _, b := range resp.Brokers {
			brokers = append(brokers, fmt.Sprintf("%d=%s:%d", b.NodeID, b.Host, b.Port))
		}
		slices.Sort(brokers)
		if want := []string{"0=10.0.0.1:9091", "1=10.0.0.2:9092", "2=10.0.0.3:9093"}; !slices.Equal(brokers, want) {
			t.Fatalf("v%d brokers %v, want %v", v, brokers, want)
		}
		if v >= 1 && resp.ControllerID != 0 {
			t.Errorf("v%d controller %d, want the lowest live id 0", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != fc.clusterID) {
			t.Errorf("v%d cluster id %v, want %s", v, resp.ClusterID, fc.clusterID)
		}
		if len(resp.Topics) != 3 {
			t.Fatalf("v%d: %d topics, want 2 and %s", v, len(resp.Topics), offsetsTopic)
		}
		for _, rt := range resp.Topics {
			if v >= 1 && (*rt.Topic == offsetsTopic) != rt.IsInternal || rt.ErrorCode != 0 || len(rt.Partitions) == 0 { // IsInternal from v1
				t.Errorf("v%d topic %s: internal %v, error %d, %d partitions", v, *rt.Topic, rt.IsInternal, rt.ErrorCode, len(rt.Partitions))
			}
			if *rt.Topic != "orders" {
				continue
			}
			if v >= 10 && rt.TopicID != orders.UUID {
				t.Errorf("v%d topic id %x, want %x", v, rt.TopicID, orders.UUID)
			}
			if v < 10 && rt.TopicID != [16]byte{} {
				t.Errorf("v%d carries a topic id", v)
			}
			for i, p := range rt.Partitions {
				if p.Partition != int32(i) || p.ErrorCode != 0 {
					t.Fatalf("v%d partition %d: %+v, want partition %d without error", v, i, p, i)
				}
				if p.Leader < 0 || p.Leader > 2 || !slices.Equal(p.Replicas, []int32{p.Leader}) || !slices.Equal(p.ISR, []int32{p.Leader}) {
					t.Fatalf("v%d partition %d: leader %d replicas %v isr %v", v, i, p.Leader, p.Replicas, p.ISR)
				}
				if v >= 7 && p.LeaderEpoch != 0 {
					t.Fatalf("v%d partition %d: leader epoch %d, want 0", v, i, p.LeaderEpoch)
				}
			}
			if len(rt.Partitions) != 6 {
				t.Fatalf("v%d: %d partitions, want 6", v, len(rt.Partitions))
			}
		}
	}
	// v1+: an empty list asks for no topic.
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	if resp := c.roundTrip(req, 4).(*kmsg.MetadataResponse); len(resp.Topics) != 0 {
		t.Fatalf("v4 with an empty list: %d topics, want none", len(resp.Topics))
	}
}

// Two nodes with the same membership answer byte for byte the same, whichever of them
// the client asks; the answer does not depend on the order the registry lists nodes.
func TestMetadataIdenticalOnEveryNode(t *testing.T) {
	a := newFakeCluster(threeNodes()...)
	b := newFakeCluster(threeNodes()...)
	slices.Reverse(b.nodes)
	b.nodes = append(b.nodes[1:], b.nodes[0]) // self differs too
	for _, fc := range []*fakeCluster{a, b} {
		for i := range 20 {
			fc.topics[fmt.Sprintf("t%02d", i)] = catalog.Topic{ID: int64(i), Name: fmt.Sprintf("t%02d", i), Partitions: int32(1 + i%7), UUID: catalog.UUID{byte(i)}}
		}
	}
	var answers [][]byte
	for _, fc := range []*fakeCluster{a, b} {
		ts := startServer(t, Config{}, fc)
		c := dial(t, ts.addr)
		req := kmsg.NewPtrMetadataRequest()
		corr := c.send(req, 12)
		frame, err := c.frame()
		if err != nil {
			t.Fatal(err)
		}
		if resp := decodeResponse(t, req, corr, frame).(*kmsg.MetadataResponse); len(resp.Topics) != 21 || len(resp.Brokers) != 3 {
			t.Fatalf("%d topics, %d brokers; want 20 (and the offsets topic) and 3", len(resp.Topics), len(resp.Brokers))
		}
		answers = append(answers, frame)
	}
	if !bytes.Equal(answers[0], answers[1]) {
		t.Fatal("two nodes with the same membership answer Metadata differently")
	}
}

func TestMetadataTopicErrorsAndAutoCreate(t *testing.T) {
	fc := newFakeCluster()
	known := fc.add("known", 3)
	off := startServer(t, Config{}, fc)
	on := startServer(t, Config{AutoCreateTopics: true, AutoCreatePartitions: 2}, fc)

	ask := func(ts *testServer, v int16, allow bool, topics ...kmsg.MetadataRequestTopic) []kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics, req.AllowAutoTopicCreation = topics, allow
		return dial(t, ts.addr).roundTrip(req, v).(*kmsg.MetadataResponse).Topics
	}
	byName := func(n string) kmsg.MetadataRequestTopic {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &n
		return rt
	}
	byID := func(id catalog.UUID) kmsg.MetadataRequestTopic {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		return rt
	}
	got := ask(off, 12, true, byName("missing"), byName("bad/name"), byID(known.UUID), byID(catalog.NewUUID()), byName("known"), byName("known"))
	var answered []string
	for _, rt := range got {
		name := "id"
		if rt.Topic != nil {
			name = *rt.Topic
		}
		answered = append(answered, fmt.Sprintf("%s=%d", name, rt.ErrorCode))
	}
	// In request order; the repeated name answered once; the known id answered with
	// its name.
	if want := []string{"missing=3", "bad/name=17", "known=0", "id=100", "known=0"}; !slices.Equal(answered, want) {
		t.Fatalf("answered %v, want %v", answered, want)
	}
	if _, err := fc.Topic(t.Context(), "missing"); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Fatal("auto-create off created the topic")
	}
	// Auto-create on, but the client does not allow it (v4+).
	ask(on, 12, false, byName("missing"))
	if _, err := fc.Topic(t.Context(), "missing"); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Fatal("auto-create made a topic the client did not allow")
	}
	got = ask(on, 12, true, byName("missing"), byName("bad/name"))
	if got[0].ErrorCode != 0 || len(got[0].Partitions) != 2 || got[0].TopicID == [16]byte{} {
		t.Fatalf("auto-created topic: %+v, want 2 partitions and a topic id", got[0])
	}
	if got[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("auto-create of an invalid name: error %d, want INVALID_TOPIC_EXCEPTION", got[1].ErrorCode)
	}
	// v0..v3 have no allow flag: auto-create applies when on.
	ask(on, 3, false, byName("old-client"))
	if _, err := fc.Topic(t.Context(), "old-client"); err != nil {
		t.Fatalf("v3 request did not auto-create: %v", err)
	}
}

// Listing every topic fails as a whole: the connection is closed rather than answered
// with an empty list a client would take as every topic deleted.
func TestMetadataListFailureClosesConnection(t *testing.T) {
	fc := newFakeCluster()
	fc.listErr = errors.New("catalog unreachable")
	ts := startServer(t, Config{}, fc)
	c := dial(t, ts.addr)
	c.send(kmsg.NewPtrMetadataRequest(), 12)
	c.expectClosed()
}

func TestSharedAddress(t *testing.T) {
	fc := newFakeCluster(threeNodes()...)
	fc.add("orders", 8)
	ts := startServer(t, Config{SharedAddress: "kafka.example.com:9092"}, fc)
	resp := dial(t, ts.addr).roundTrip(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse)
	// One broker at the shared address (librdkafka cannot tell several ids at one
	// address apart): the lowest live id, leading everything.
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 0 || resp.Brokers[0].Host != "kafka.example.com" || resp.Brokers[0].Port != 9092 || resp.ControllerID != 0 {
		t.Fatalf("brokers %+v controller %d, want node 0 alone at the shared address", resp.Brokers, resp.ControllerID)
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.Leader != 0 {
				t.Fatalf("partition %d led by %d, want 0", p.Partition, p.Leader)
			}
		}
	}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKeys = []string{"g1", "g2", "g3"}
	for _, c := range dial(t, ts.addr).roundTrip(find, 4).(*kmsg.FindCoordinatorResponse).Coordinators {
		if c.NodeID != 0 || c.Host != "kafka.example.com" {
			t.Fatalf("coordinator of %s: %d at %s, want 0 at the shared address", c.Key, c.NodeID, c.Host)
		}
	}
}

func TestFindCoordinator(t *testing.T) {
	fc := newFakeCluster(threeNodes()...)
	ts := startServer(t, Config{}, fc)
	c := dial(t, ts.addr)
	m := ts.view.get(t.Context())
	addrs := map[int32]string{0: "10.0.0.1:9091", 1: "10.0.0.2:9092", 2: "10.0.0.3:9093"}

	keys := []string{"billing", "audit", "g1", "g2", "g3", "g4"}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = keys
	resp := c.roundTrip(req, 4).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != len(keys) {
		t.Fatalf("%d coordinators for %d keys", len(resp.Coordinators), len(keys))
	}
	seen := map[int32]bool{}
	for i, co := range resp.Coordinators {
		want := m.coordinator(0, keys[i])
		if co.Key != keys[i] || co.NodeID != want || co.ErrorCode != 0 || fmt.Sprintf("%s:%d", co.Host, co.Port) != addrs[want] {
			t.Fatalf("coordinator %d: %+v, want key %s at node %d (%s)", i, co, keys[i], want, addrs[want])
		}
		seen[co.NodeID] = true
	}
	if len(seen) < 2 {
		t.Errorf("6 groups all on one of 3 nodes: %v", seen)
	}
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "billing"
		resp := c.roundTrip(req, v).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 || resp.NodeID != m.coordinator(0, "billing") {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = 7, []string{"x"}
	if r := c.roundTrip(req, 4).(*kmsg.FindCoordinatorResponse); r.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("coordinator type 7: error %d, want INVALID_REQUEST", r.Coordinators[0].ErrorCode)
	}
}

func TestDescribeCluster(t *testing.T) {
	fc := newFakeCluster(threeNodes()...)
	ts := startServer(t, Config{}, fc)
	c := dial(t, ts.addr)
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 1
		resp := c.roundTrip(req, v).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 || resp.ClusterID != fc.clusterID || resp.ControllerID != 0 || len(resp.Brokers) != 3 {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2 // controllers
	if r := c.roundTrip(req, 1).(*kmsg.DescribeClusterResponse); r.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Fatalf("controller endpoint: error %d, want MISMATCHED_ENDPOINT_TYPE", r.ErrorCode)
	}
}

// __consumer_offsets is listed as Kafka lists it — internal, by name and by id — and
// never auto-created; a topic of that name made by hand takes its place (internal too).
func TestOffsetsTopicListed(t *testing.T) {
	fc := newFakeCluster(threeNodes()...)
	ts := startServer(t, Config{AutoCreateTopics: true}, fc)
	c := dial(t, ts.addr)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(offsetsTopic)
	req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), true
	resp := c.roundTrip(req, 12).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || !resp.Topics[0].IsInternal || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].TopicID != offsetsTopicID {
		t.Fatalf("by name: %+v", resp.Topics)
	}
	if _, err := fc.Topic(t.Context(), offsetsTopic); err == nil {
		t.Fatal("the offsets topic was auto-created")
	}
	byID := kmsg.NewPtrMetadataRequest()
	rt = kmsg.NewMetadataRequestTopic()
	rt.TopicID = offsetsTopicID
	byID.Topics = append(byID.Topics, rt)
	if resp := c.roundTrip(byID, 12).(*kmsg.MetadataResponse); len(resp.Topics) != 1 || !resp.Topics[0].IsInternal {
		t.Fatalf("by id: %+v", resp.Topics)
	}
	fc.add(offsetsTopic, 4)
	resp = c.roundTrip(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse)
	n := 0
	for _, tp := range resp.Topics {
		if *tp.Topic == offsetsTopic {
			n++
			if !tp.IsInternal || len(tp.Partitions) != 4 {
				t.Fatalf("a real topic of that name: %+v", tp)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%s listed %d times", offsetsTopic, n)
	}
}
