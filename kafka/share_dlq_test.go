package kafka_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
)

// TestShareDeadLettersKafka: over the Kafka protocol, IncrementalAlterConfigs on the
// group refuses a dead-letter topic without the prefix or the topic's opt-in
// (INVALID_CONFIG, nothing changed) and takes one with both; records a member rejects
// over ShareAcknowledge land in it once each, with the context headers.
func TestShareDeadLettersKafka(t *testing.T) {
	n := startNode(t, openSQLite(t), kafka.Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("q"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := admin(t, kgo.SeedBrokers(n.addr))
	if _, err := adm.CreateTopic(ctx10(t), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx10(t), 1, 1, nil, "dlq.closed"); err != nil {
		t.Fatal(err)
	}
	enable := "true"
	if _, err := adm.CreateTopic(ctx10(t), 1, 1, map[string]*string{catalog.TopicDLQGroupEnable: &enable}, "dlq.q"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx10(t), kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	const g = "dl"
	for _, bad := range []string{"q", "dlq.closed", "dlq.none"} {
		if code := setGroupConfigs(t, cl, g, catalog.ShareDLQTopic, bad); code != kerr.InvalidConfig.Code {
			t.Fatalf("dead-letter topic %s: code %d, want INVALID_CONFIG", bad, code)
		}
	}
	if cfg, _, err := n.core.GroupConfigs(t.Context(), broker.Principal{}, g); err != nil || cfg[catalog.ShareDLQTopic] != "" {
		t.Fatalf("after the refusals: %v, %v; want no dead-letter topic", cfg, err)
	}
	if code := setGroupConfigs(t, cl, g, "share.auto.offset.reset", "earliest", catalog.ShareDLQTopic, "dlq.q"); code != 0 {
		t.Fatalf("set configs: code %d", code)
	}
	td, err := adm.ListTopics(ctx10(t), "q")
	if err != nil {
		t.Fatal(err)
	}
	m := &shareMember{t: t, cl: cl, to: cl.Broker(int(n.id)), group: g, id: "member-a", topicID: td["q"].ID}
	m.join("q")
	var got [][3]int64
	testwait.NoError(t, 10*time.Second, "records acquired", func() error {
		if got = m.fetch(3, 200*time.Millisecond); len(got) == 0 {
			return errors.New("nothing acquired yet")
		}
		return nil
	})
	if code := m.ack(0, 1, catalog.AckReject); code != 0 {
		t.Fatalf("reject 0-1: code %d", code)
	}
	if code := m.ack(2, 2, catalog.AckAccept); code != 0 {
		t.Fatalf("accept 2: code %d", code)
	}
	recs := consumeAll(t, n.addr, "dlq.q", 1, 2)
	if len(recs) != 2 {
		t.Fatalf("dead-letter topic: %d records, want 2", len(recs))
	}
	for i, r := range recs {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		want := map[string]string{broker.DLQHeaderTopic: "q", broker.DLQHeaderPartition: "0", broker.DLQHeaderOffset: []string{"0", "1"}[i],
			broker.DLQHeaderDeliveryCount: "1", broker.DLQHeaderReason: "rejected", broker.DLQHeaderGroup: g}
		for k, v := range want {
			if h[k] != v {
				t.Fatalf("copy %d (%q): header %s=%q, want %q (all: %v)", i, r.Value, k, h[k], v, h)
			}
		}
		if string(r.Value) != []string{"a", "b"}[i] {
			t.Fatalf("copy %d: value %q", i, r.Value)
		}
	}
}
