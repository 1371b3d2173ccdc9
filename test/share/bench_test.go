package share_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
)

// The figures of the share-groups issue: records/s one member acquires and accepts
// over HTTP per catalog backend at batch sizes 1, 10 and 500, beside the same records
// read by a consumer-group member that commits its offset after each batch
// (BenchmarkShareHTTP); and what a share acquire + acknowledge costs in the catalog
// alone, beside a group's offset commit (BenchmarkShareCatalog).
//
//	go test ./test/share -run '^$' -bench . -benchtime 3s

var batches = []int{1, 10, 500}

// backends are the nodes the benchmarks run on.
func backends() []struct {
	name string
	opts []nodetest.Option
} {
	return []struct {
		name string
		opts []nodetest.Option
	}{{"sqlite", nil}, {"postgres", []nodetest.Option{nodetest.OnServices()}}}
}

// stock keeps a topic's partition 0 ahead of what a benchmark consumes.
type stock struct {
	c        *client.Client
	topic    string
	produced int
}

func (s *stock) ensure(b *testing.B, n int) {
	if s.produced >= n {
		return
	}
	produce(b, s.c, s.topic, 1, n-s.produced)
	s.produced = n
}

func BenchmarkShareHTTP(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			n := nodetest.Start(b, be.opts...)
			c := client.New(n.URL)
			ctx := context.Background()
			for _, size := range batches {
				b.Run(fmt.Sprintf("batch=%d/share", size), func(b *testing.B) {
					topic, group := fmt.Sprintf("share-%d", size), fmt.Sprintf("sg-%d", size)
					if _, err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
						b.Fatal(err)
					}
					if _, err := c.ConfigureShareGroup(ctx, group, map[string]string{"share.auto.offset.reset": "earliest"}); err != nil {
						b.Fatal(err)
					}
					s := &stock{c: c, topic: topic}
					member, done := "", 0
					b.ResetTimer()
					for b.Loop() {
						b.StopTimer()
						s.ensure(b, done+size)
						b.StartTimer()
						res, err := c.AcquireShareRecords(ctx, group, client.ShareAcquireRequest{MemberID: member, Topics: []string{topic}, MaxRecords: size})
						if err != nil {
							b.Fatal(err)
						}
						member = res.MemberID
						var acks []client.ShareAck
						for _, p := range res.Partitions {
							rs := p.Records
							done += len(rs)
							acks = append(acks, client.ShareAck{AcquisitionID: p.AcquisitionID,
								Ranges: []client.ShareAckRange{{First: rs[0].Offset, Last: rs[len(rs)-1].Offset, Type: client.AckAccept}}})
						}
						if err := c.AcknowledgeShareRecords(ctx, group, member, acks); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "records/s")
				})
				b.Run(fmt.Sprintf("batch=%d/group", size), func(b *testing.B) {
					topic, group := fmt.Sprintf("group-%d", size), fmt.Sprintf("cg-%d", size)
					if _, err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
						b.Fatal(err)
					}
					hb, err := c.Heartbeat(ctx, group, client.HeartbeatRequest{MemberID: "m", Topics: []string{topic}})
					if err != nil {
						b.Fatal(err)
					}
					for len(hb.Assignment) == 0 {
						if hb, err = c.Heartbeat(ctx, group, client.HeartbeatRequest{MemberID: "m", MemberEpoch: hb.MemberEpoch}); err != nil {
							b.Fatal(err)
						}
					}
					s := &stock{c: c, topic: topic}
					var offset int64
					b.ResetTimer()
					for b.Loop() {
						b.StopTimer()
						s.ensure(b, int(offset)+size)
						b.StartTimer()
						res, err := c.Fetch(ctx, topic, 0, client.FetchOptions{Offset: offset, MaxRecords: size})
						if err != nil {
							b.Fatal(err)
						}
						offset = res.NextOffset
						if err := c.CommitOffsets(ctx, group, "m", hb.MemberEpoch, []client.GroupOffset{{Topic: topic, Partition: 0, Offset: offset}}); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(offset)/b.Elapsed().Seconds(), "records/s")
				})
			}
		})
	}
}

func BenchmarkShareCatalog(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			n := nodetest.Start(b, be.opts...)
			c := client.New(n.URL)
			ctx := context.Background()
			for _, size := range batches {
				b.Run(fmt.Sprintf("batch=%d/acquire+ack", size), func(b *testing.B) {
					topic, group := fmt.Sprintf("cat-%d", size), fmt.Sprintf("cat-%d", size)
					if _, err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
						b.Fatal(err)
					}
					m, err := n.Catalog.ShareHeartbeat(ctx, catalog.ShareHeartbeat{Group: group, MemberID: "bench", Topics: []string{topic}, SessionTimeout: time.Hour})
					if err != nil {
						b.Fatal(err)
					}
					s := &stock{c: c, topic: topic}
					done := 0
					tp := catalog.ShareTP{Topic: topic, Partition: 0}
					b.ResetTimer()
					for b.Loop() {
						b.StopTimer()
						s.ensure(b, done+size)
						b.StartTimer()
						res, err := n.Catalog.ShareAcquire(ctx, catalog.ShareAcquire{Group: group, MemberID: m.ID, Partitions: []catalog.ShareTP{tp},
							MaxRecords: size, ResetEarliest: true})
						if err != nil {
							b.Fatal(err)
						}
						var batches []catalog.AckBatch
						for _, r := range res.Partitions[0].Ranges {
							done += int(r.Last - r.First + 1)
							batches = append(batches, catalog.AckBatch{First: r.First, Last: r.Last, Types: []int8{catalog.AckAccept}})
						}
						errs, err := n.Catalog.ShareAcknowledge(ctx, catalog.ShareAck{Group: group, MemberID: m.ID,
							Partitions: []catalog.ShareAckPartition{{ShareTP: tp, Batches: batches}}})
						if err != nil || (len(errs) > 0 && errs[0] != nil) {
							b.Fatal(err, errs)
						}
					}
					b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "records/s")
				})
			}
			// The baseline: a consumer group's catalog step per batch, its offset commit
			// (outside the group: the commit a member's batch costs, membership aside).
			b.Run("group-commit", func(b *testing.B) {
				if _, err := c.CreateTopic(ctx, "cat-group", 1, nil); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := n.Catalog.CommitOffsets(ctx, catalog.OffsetCommit{Group: "cat-group",
						Offsets: []catalog.CommitOffset{{Topic: "cat-group", Partition: 0, Offset: 0}}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
