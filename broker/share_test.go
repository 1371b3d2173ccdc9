package broker

import (
	"testing"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// TestShareAuthorization: share groups are authorized as Kafka checks them — read on
// the group for a heartbeat, a fetch and an acknowledgement, read on each topic fetched
// (a partition of a topic refused answers forbidden, the others their records), alter
// configs on the group to configure it — and a refusal changes nothing.
func TestShareAuthorization(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	who := Principal{Name: "app"}
	for _, name := range []string{"open", "secret"} {
		if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: name, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Produce(ctx, who, ProduceRequest{Records: []Record{{Topic: name, Partition: 0, Value: []byte("v"), Timestamp: -1}}}); err != nil {
			t.Fatal(err)
		}
	}
	earliest := "earliest"
	if err := b.AlterGroupConfigs(ctx, who, "g", AlterConfigsRequest{Changes: []ConfigChange{{Name: catalog.ShareAutoOffsetReset, Op: ConfigSet, Value: earliest}}}); err != nil {
		t.Fatal(err)
	}
	auth := &countingAuthorizer{refused: map[acl.Resource]bool{acl.Topic("secret"): true, acl.Group("closed"): true}, asked: map[acl.Resource]int{}}
	b.d.Authorizer = auth

	wantCode(t, b.AlterGroupConfigs(ctx, who, "closed", AlterConfigsRequest{Changes: []ConfigChange{{Name: catalog.ShareAutoOffsetReset, Op: ConfigSet, Value: earliest}}}), CodeForbidden)
	if cfg, err := b.d.Share.GroupConfigs(ctx, "closed"); err != nil || len(cfg) != 0 {
		t.Fatalf("a refused config change left %v, %v", cfg, err)
	}
	wantCode(t, second(b.ShareHeartbeat(ctx, who, catalog.ShareHeartbeat{Group: "closed", MemberID: "m", Topics: []string{"open"}})), CodeForbidden)
	if ok, err := b.IsShareGroup(ctx, "closed"); err != nil || ok {
		t.Fatalf("a refused join made the group: %v, %v", ok, err)
	}
	wantCode(t, second(b.ShareHeartbeat(ctx, who, catalog.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"open", "secret"}})), CodeForbidden)
	if _, err := b.ShareHeartbeat(ctx, who, catalog.ShareHeartbeat{Group: "g", MemberID: "m", Topics: []string{"open"}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, second(b.ShareFetch(ctx, who, ShareFetchRequest{Group: "closed", MemberID: "m", Partitions: []catalog.ShareTP{{Topic: "open"}}, MaxRecords: 10})), CodeForbidden)
	res, err := b.ShareFetch(ctx, who, ShareFetchRequest{Group: "g", MemberID: "m", MaxRecords: 10,
		Partitions: []catalog.ShareTP{{Topic: "open"}, {Topic: "secret"}}})
	if err != nil || len(res.Partitions) != 2 {
		t.Fatalf("fetch: %+v, %v", res, err)
	}
	if p := res.Partitions[0]; p.Err != nil || len(p.Ranges) != 1 || len(p.Batches) == 0 {
		t.Fatalf("open: %+v, want its one record", p)
	}
	wantCode(t, res.Partitions[1].Err, CodeForbidden)
	if len(res.Partitions[1].Ranges) != 0 {
		t.Fatal("a refused partition acquired records")
	}
	wantCode(t, second(b.ShareAcknowledge(ctx, who, "closed", "m", []catalog.ShareAckPartition{{ShareTP: catalog.ShareTP{Topic: "open"}, Batches: []catalog.AckBatch{{First: 0, Last: 0, Types: []int8{catalog.AckAccept}}}}})), CodeForbidden)
	errs, err := b.ShareAcknowledge(ctx, who, "g", "m", []catalog.ShareAckPartition{
		{ShareTP: catalog.ShareTP{Topic: "secret"}, Batches: []catalog.AckBatch{{First: 0, Last: 0, Types: []int8{catalog.AckAccept}}}},
		{ShareTP: catalog.ShareTP{Topic: "open"}, Batches: []catalog.AckBatch{{First: 0, Last: 0, Types: []int8{catalog.AckAccept}}}},
	})
	if err != nil || errs[1] != nil {
		t.Fatalf("acknowledge: %v, %v", errs, err)
	}
	wantCode(t, errs[0], CodeForbidden)
	// A bad acknowledgement answers its code: already acknowledged.
	errs, err = b.ShareAcknowledge(ctx, who, "g", "m", []catalog.ShareAckPartition{{ShareTP: catalog.ShareTP{Topic: "open"}, Batches: []catalog.AckBatch{{First: 0, Last: 0, Types: []int8{catalog.AckAccept}}}}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, errs[0], CodeInvalidRecordState)
}
