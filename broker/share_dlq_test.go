package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/writer"
)

// opAuthorizer refuses one operation on one resource.
type opAuthorizer struct {
	op acl.Operation
	r  acl.Resource
}

func (a opAuthorizer) Allowed(_ Principal, op acl.Operation, r acl.Resource) bool {
	return op != a.op || r != a.r
}

// TestShareDLQConfig: a dead-letter topic is refused without the node's prefix, when
// the topic does not exist or does not opt in, and without alter on the group (alter
// configs alone is not enough); each refusal changes nothing.
func TestShareDLQConfig(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	who := Principal{Name: "app"}
	for name, configs := range map[string]map[string]string{
		"dlq.open":   {catalog.TopicDLQGroupEnable: "true"},
		"dlq.closed": nil,
		"dead.open":  {catalog.TopicDLQGroupEnable: "true"},
	} {
		if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: name, Partitions: 1, Configs: configs}); err != nil {
			t.Fatal(err)
		}
	}
	set := func(topic string) error {
		return b.AlterGroupConfigs(ctx, who, "g", AlterConfigsRequest{Changes: []ConfigChange{{Name: catalog.ShareDLQTopic, Op: ConfigSet, Value: topic}}})
	}
	unchanged := func(what string) {
		t.Helper()
		if cfg, err := b.d.Share.GroupConfigs(ctx, "g"); err != nil || len(cfg) != 0 {
			t.Fatalf("%s left %v, %v", what, cfg, err)
		}
	}
	for topic, rule := range map[string]string{"dead.open": "dlq_prefix", "dlq.none": "dlq_topic_not_found", "dlq.closed": "dlq_not_enabled"} {
		e := wantCode(t, set(topic), CodeInvalidConfig)
		if e.Details["rule"] != rule {
			t.Fatalf("%s: details %v, want rule %s", topic, e.Details, rule)
		}
		unchanged(topic)
	}
	b.d.Authorizer = opAuthorizer{op: acl.OpAlter, r: acl.Group("g")}
	wantCode(t, set("dlq.open"), CodeForbidden)
	unchanged("a change without alter on the group")
	// Other configs need only alter configs.
	if err := b.AlterGroupConfigs(ctx, who, "g", AlterConfigsRequest{Changes: []ConfigChange{{Name: catalog.ShareDeliveryLimit, Op: ConfigSet, Value: "3"}}}); err != nil {
		t.Fatal(err)
	}
	b.d.Authorizer = nil
	if err := set("dlq.open"); err != nil {
		t.Fatal(err)
	}
	// The node's prefix decides: another node's would refuse the same name.
	b.dlqPrefix = "dead."
	wantCode(t, b.AlterGroupConfigs(ctx, who, "g2", AlterConfigsRequest{Changes: []ConfigChange{{Name: catalog.ShareDLQTopic, Op: ConfigSet, Value: "dlq.open"}}}), CodeInvalidConfig)
	if err := b.AlterGroupConfigs(ctx, who, "g2", AlterConfigsRequest{Changes: []ConfigChange{{Name: catalog.ShareDLQTopic, Op: ConfigSet, Value: "dead.open"}}}); err != nil {
		t.Fatal(err)
	}
}

// TestShareDLQMover: a second mover is kept out by the first's lease; the first copies
// three rejected records once, and passes after the copy find nothing to do. The
// running totals (strata_share_dead_lettered_records_total, the group's description)
// count the three records, and nothing for the fenced mover, a failed flush, the empty
// passes or records archived without a copy.
func TestShareDLQMover(t *testing.T) {
	b, cat := newRealCore(t)
	ctx := t.Context()
	who := Principal{Name: "app"}
	for name, configs := range map[string]map[string]string{"q": nil, "dlq.q": {catalog.TopicDLQGroupEnable: "true"}} {
		if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: name, Partitions: 1, Configs: configs}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Produce(ctx, who, ProduceRequest{Records: []Record{{Topic: "q", Partition: 0, Key: []byte("k"), Value: []byte("v"), Timestamp: -1},
		{Topic: "q", Partition: 0, Value: []byte("v1"), Timestamp: -1}, {Topic: "q", Partition: 0, Value: []byte("v2"), Timestamp: -1}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.AlterGroupConfigs(ctx, who, "g", AlterConfigsRequest{Changes: []ConfigChange{
		{Name: catalog.ShareDLQTopic, Op: ConfigSet, Value: "dlq.q"}, {Name: catalog.ShareAutoOffsetReset, Op: ConfigSet, Value: "earliest"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ShareHeartbeat(ctx, who, catalog.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"q"}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.ShareFetch(ctx, who, ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 10, Partitions: []catalog.ShareTP{{Topic: "q"}}})
	if err != nil || len(res.Partitions) != 1 || len(res.Partitions[0].Ranges) != 1 {
		t.Fatalf("fetch: %+v, %v", res, err)
	}
	errs, err := b.ShareAcknowledge(ctx, who, "g", "m", []catalog.ShareAckPartition{{ShareTP: catalog.ShareTP{Topic: "q"}, Batches: []catalog.AckBatch{{First: 0, Last: 2, Types: []int8{catalog.AckReject}}}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("reject: %v %v", errs, err)
	}
	if _, ok, err := cat.AcquireShareDLQLease(ctx, "g", "mover-1", ShareDLQLeaseTTL); err != nil || !ok {
		t.Fatalf("mover-1's lease: %v %v", ok, err)
	}
	dead := func(want float64) {
		t.Helper()
		if got := testutil.ToFloat64(b.dlqMetrics.copied.WithLabelValues("g")); got != want {
			t.Fatalf("strata_share_dead_lettered_records_total{group=g} = %v, want %v", got, want)
		}
		if d, err := b.DescribeShareGroup(ctx, who, "g"); err != nil || float64(d.DeadLettered) != want {
			t.Fatalf("the group's description: %d dead-lettered, %v; want %v", d.DeadLettered, err, want)
		}
	}
	if n, err := b.MoveShareDLQ(ctx, "mover-2", nil); err != nil || n != 0 {
		t.Fatalf("second mover while the first holds the lease: copied %d, %v; want 0", n, err)
	}
	dead(0)
	// A copy whose flush fails is not counted: the records stay pending.
	w := b.d.Writer
	b.d.Writer = failingWriter{}
	if n, err := b.MoveShareDLQ(ctx, "mover-1", nil); err == nil || n != 0 {
		t.Fatalf("first mover with a failing flush: copied %d, %v; want an error", n, err)
	}
	dead(0)
	b.d.Writer = w
	if n, err := b.MoveShareDLQ(ctx, "mover-1", nil); err != nil || n != 3 {
		t.Fatalf("first mover: copied %d, %v; want 3", n, err)
	}
	if n, err := b.MoveShareDLQ(ctx, "mover-1", nil); err != nil || n != 0 {
		t.Fatalf("first mover again: copied %d, %v; want 0", n, err)
	}
	dead(3)
	ps, err := cat.Partitions(ctx, mustTopicID(t, b, "dlq.q"))
	if err != nil || ps[0].HighWatermark != 3 {
		t.Fatalf("dead-letter topic: %+v, %v; want three records", ps, err)
	}

	// A group that no longer names a dead-letter topic has its pending records
	// archived, not copied.
	if _, err := b.Produce(ctx, who, ProduceRequest{Records: []Record{{Topic: "q", Partition: 0, Value: []byte("w"), Timestamp: -1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ShareFetch(ctx, who, ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 10, Partitions: []catalog.ShareTP{{Topic: "q"}}}); err != nil {
		t.Fatal(err)
	}
	if errs, err := b.ShareAcknowledge(ctx, who, "g", "m", []catalog.ShareAckPartition{{ShareTP: catalog.ShareTP{Topic: "q"}, Batches: []catalog.AckBatch{{First: 3, Last: 3, Types: []int8{catalog.AckReject}}}}}); err != nil || errs[0] != nil {
		t.Fatalf("reject: %v %v", errs, err)
	}
	if err := b.AlterGroupConfigs(ctx, who, "g", AlterConfigsRequest{Changes: []ConfigChange{{Name: catalog.ShareDLQTopic, Op: ConfigDelete}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.MoveShareDLQ(ctx, "mover-1", nil); err != nil || n != 0 {
		t.Fatalf("mover without a dead-letter topic: copied %d, %v; want 0", n, err)
	}
	dead(3)
	d, err := b.DescribeShareGroup(ctx, who, "g")
	if err != nil || len(d.Partitions) != 1 || d.Partitions[0].DeadLetterPending != 0 || d.Partitions[0].StartOffset != 4 {
		t.Fatalf("after the config was removed: %+v, %v; want offset 3 archived", d, err)
	}
}

// failingWriter fails every flush before it commits.
type failingWriter struct{}

func (failingWriter) Produce(context.Context, writer.Request) (writer.Response, error) {
	return writer.Response{}, errors.New("the flush failed before its commit")
}

func mustTopicID(t *testing.T, b *Broker, name string) int64 {
	t.Helper()
	ti, e := b.lookupTopic(t.Context(), name)
	if e != nil {
		t.Fatal(e)
	}
	return ti.ID
}
