package share_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestReadCommittedSkipsAborted: a share group with share.isolation.level=
// read_committed never delivers a record of an aborted transaction, over HTTP or to a
// franz-go share consumer (ShareFetch carries no aborted-transactions list, so the
// broker must leave them out), and drains past them; a read_uncommitted group
// delivers them.
func TestReadCommittedSkipsAborted(t *testing.T) {
	n := nodetest.Start(t, nodetest.Kafka())
	c := client.New(n.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "tx", 1, map[string]string{"value.format": "string"}); err != nil {
		t.Fatal(err)
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.TransactionalID("share-tx"), kgo.DefaultProduceTopic("tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(false, "aborted-1", "aborted-2")
	txn(true, "committed-1", "committed-2")
	txn(false, "aborted-3")
	if _, err := c.Produce(ctx, "tx", []client.Record{{Value: client.String("plain"), Partition: client.Int32(0)}}); err != nil {
		t.Fatal(err)
	}
	committed := []string{"committed-1", "committed-2", "plain"}
	all := []string{"aborted-1", "aborted-2", "aborted-3", "committed-1", "committed-2", "plain"}

	configure := func(group, level string) {
		t.Helper()
		if _, err := c.ConfigureShareGroup(ctx, group, map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": level}); err != nil {
			t.Fatal(err)
		}
	}
	drained := func(group string) bool {
		g, err := c.DescribeShareGroup(ctx, group)
		return err == nil && len(g.Partitions) == 1 && g.Partitions[0].Lag == 0 && g.Partitions[0].Acquired == 0
	}
	overHTTP := func(group string) []string {
		var seen []string
		member := ""
		testwait.Until(t, time.Minute, group+" drained over HTTP", func() bool {
			res, err := c.AcquireShareRecords(ctx, group, client.ShareAcquireRequest{MemberID: member, Topics: []string{"tx"}, Wait: 100 * time.Millisecond})
			if err != nil {
				t.Logf("acquire: %v", err)
				return false
			}
			member = res.MemberID
			var acks []client.ShareAck
			for _, pa := range res.Partitions {
				ack := client.ShareAck{AcquisitionID: pa.AcquisitionID}
				for _, r := range pa.Records {
					var v string
					_ = json.Unmarshal(r.Value, &v)
					seen = append(seen, v)
					// Offset by offset: the gaps between (markers, aborted records)
					// were acknowledged by the server already.
					ack.Ranges = append(ack.Ranges, client.ShareAckRange{First: r.Offset, Last: r.Offset, Type: client.AckAccept})
				}
				if len(ack.Ranges) > 0 {
					acks = append(acks, ack)
				}
			}
			if len(acks) > 0 {
				if err := c.AcknowledgeShareRecords(ctx, group, member, acks); err != nil {
					t.Fatalf("acknowledge: %v", err)
				}
			}
			return drained(group)
		})
		slices.Sort(seen)
		return seen
	}
	overKafka := func(group string) []string {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.ShareGroup(group), kgo.ConsumeTopics("tx"), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var (
			mu   sync.Mutex
			seen []string
		)
		testwait.Until(t, time.Minute, group+" drained over Kafka", func() bool {
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen = append(seen, string(r.Value))
				mu.Unlock()
				r.Ack(kgo.AckAccept)
			})
			_ = cl.FlushAcks(ctx)
			return drained(group)
		})
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(seen)
		return seen
	}
	configure("rc-http", "read_committed")
	if got := overHTTP("rc-http"); !slices.Equal(got, committed) {
		t.Errorf("read_committed over HTTP delivered %q, want %q", got, committed)
	}
	configure("rc-kafka", "read_committed")
	if got := overKafka("rc-kafka"); !slices.Equal(got, committed) {
		t.Errorf("read_committed over Kafka delivered %q, want %q", got, committed)
	}
	configure("ru-http", "read_uncommitted")
	if got := overHTTP("ru-http"); !slices.Equal(got, all) {
		t.Errorf("read_uncommitted over HTTP delivered %q, want %q", got, all)
	}
}

// TestResetByDuration: share.auto.offset.reset=by_duration:PT1H starts a new
// share-partition at the first record at most an hour old (on both catalog backends).
func TestResetByDuration(t *testing.T) {
	for name, opts := range map[string][]nodetest.Option{"embedded": nil, "services": {nodetest.OnServices()}} {
		t.Run(name, func(t *testing.T) {
			n := nodetest.Start(t, opts...)
			c := client.New(n.URL)
			ctx := t.Context()
			if _, err := c.CreateTopic(ctx, "timed", 1, map[string]string{"value.format": "string"}); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-3 * time.Hour)
			var recs []client.Record
			for i := range 5 {
				recs = append(recs, client.Record{Value: client.String("old"), Partition: client.Int32(0), Timestamp: old.Add(time.Duration(i) * time.Second)})
			}
			if _, err := c.Produce(ctx, "timed", recs); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Produce(ctx, "timed", []client.Record{{Value: client.String("new"), Partition: client.Int32(0)}, {Value: client.String("new"), Partition: client.Int32(0)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ConfigureShareGroup(ctx, "recent", map[string]string{"share.auto.offset.reset": "by_duration:PT1H"}); err != nil {
				t.Fatal(err)
			}
			res, err := c.AcquireShareRecords(ctx, "recent", client.ShareAcquireRequest{Topics: []string{"timed"}, Wait: time.Second})
			if err != nil || len(res.Partitions) != 1 {
				t.Fatalf("acquire: %+v, %v", res, err)
			}
			rs := res.Partitions[0].Records
			if len(rs) != 2 || rs[0].Offset != 5 || string(rs[0].Value) != `"new"` {
				t.Fatalf("acquired %d records from offset %d, want the 2 recent ones from 5", len(rs), rs[0].Offset)
			}
		})
	}
}
