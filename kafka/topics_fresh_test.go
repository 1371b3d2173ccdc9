package kafka_test

import (
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testkit/batchtest"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/objstore/fs"
)

// Metadata answers what the catalog holds now, on every node: a topic deleted or grown
// through one node's DeleteTopics or CreatePartitions is gone or grown in the next
// Metadata of that node and of another one, whose topic cache (which produce and fetch
// trust for two seconds) still holds the topic as it was.
func TestMetadataSeesAdminChangesAtOnce(t *testing.T) {
	cat := openSQLite(t)
	store, err := fs.New(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	na, nb := startNodeOn(t, cat, store, kafka.Config{}), startNodeOn(t, cat, store, kafka.Config{})
	ra, rb := rawTo(t, na), rawTo(t, nb)
	ok := &kerr.Error{Code: 0, Message: "none"}
	for _, name := range []string{"doomed", "growing"} {
		if _, err := cat.CreateTopic(t.Context(), name, 1, nil); err != nil {
			t.Fatal(err)
		}
		// Both nodes' caches now hold the topic.
		for _, r := range []raw{ra, rb} {
			wantCode(t, "produce to "+name, r.produce(name, map[int32][]byte{0: batchtest.Batch(t, batchtest.Some(1, 0), 0, -1, -1, -1)})[0].ErrorCode, ok)
		}
	}
	metadata := func(r raw, name string) kmsg.MetadataResponseTopic {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		return r.do(req).(*kmsg.MetadataResponse).Topics[0]
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("doomed")
	del.TopicNames, del.Topics, del.TimeoutMillis = []string{"doomed"}, append(del.Topics, dt), 10000 // v0-5, v6
	wantCode(t, "delete topic", ra.do(del).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode, ok)
	grow := kmsg.NewPtrCreatePartitionsRequest()
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "growing", 3
	grow.Topics, grow.TimeoutMillis = append(grow.Topics, gt), 10000
	wantCode(t, "grow topic", ra.do(grow).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode, ok)

	for node, r := range map[string]raw{"the node that changed them": ra, "another node": rb} {
		wantCode(t, node+": Metadata of the deleted topic", metadata(r, "doomed").ErrorCode, kerr.UnknownTopicOrPartition)
		if md := metadata(r, "growing"); md.ErrorCode != 0 || len(md.Partitions) != 3 {
			t.Errorf("%s: Metadata of the grown topic: error %d, %d partitions, want 3", node, md.ErrorCode, len(md.Partitions))
		}
	}
}
