// Package share tests share groups (KIP-932) end to end: members over Kafka (franz-go)
// and HTTP mixed in one group, members that die or stall while holding records, and
// benchmarks of share acquisition against a consumer group reading the same records.
package share_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// recordCount is how many records the mixed run processes: the 100,000 with
// STRATA_LONG=1, a bounded count otherwise.
func recordCount() int {
	if os.Getenv("STRATA_LONG") == "1" {
		return 100_000
	}
	return 4_000
}

type pos struct {
	p int32
	o int64
}

// produce writes n records, value "r<i>", round-robin over partitions.
func produce(t testing.TB, c *client.Client, topic string, partitions int32, n int) {
	t.Helper()
	const batch = 1000
	for i := 0; i < n; i += batch {
		var recs []client.Record
		for j := i; j < min(n, i+batch); j++ {
			recs = append(recs, client.Record{Value: client.String("r" + strconv.Itoa(j)), Partition: client.Int32(int32(j) % partitions)})
		}
		if _, err := c.Produce(context.Background(), topic, recs); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// tally is what the members of a run did.
type tally struct {
	mu       sync.Mutex
	accepted map[pos]int
	released int
	maxCount int
	errs     []string
	// poison is the record every member always releases (none: partition -1), and
	// poisonCounts the delivery counts it was seen at.
	poison       pos
	poisonCounts []int
}

// isPoison answers whether p is the poison record, counting its delivery if so.
func (ty *tally) isPoison(p pos, count int) bool {
	if p != ty.poison {
		return false
	}
	ty.mu.Lock()
	defer ty.mu.Unlock()
	ty.poisonCounts = append(ty.poisonCounts, count)
	return true
}

func (ty *tally) accept(p pos, count int) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	ty.accepted[p]++
	ty.maxCount = max(ty.maxCount, count)
}

func (ty *tally) release(count int) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	ty.released++
	ty.maxCount = max(ty.maxCount, count)
}

func (ty *tally) done() int {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return len(ty.accepted)
}

// httpMember acquires, accepts (or releases one in ten at random) and acknowledges
// until ctx ends; an acceptance counts once the acknowledgement is answered.
func httpMember(ctx context.Context, c *client.Client, group, topic string, ty *tally) {
	member := ""
	defer func() {
		if member != "" {
			_ = c.LeaveShareGroup(context.WithoutCancel(ctx), group, member)
		}
	}()
	for ctx.Err() == nil {
		res, err := c.AcquireShareRecords(ctx, group, client.ShareAcquireRequest{MemberID: member, Topics: []string{topic}, MaxRecords: 50, Wait: 200 * time.Millisecond})
		if err != nil {
			continue
		}
		member = res.MemberID
		var (
			acks     []client.ShareAck
			accepted []pos
			counts   []int
		)
		for _, p := range res.Partitions {
			ack := client.ShareAck{AcquisitionID: p.AcquisitionID}
			for _, r := range p.Records {
				typ := client.AckAccept
				if ty.isPoison(pos{p.Partition, r.Offset}, r.DeliveryCount) || rand.IntN(10) == 0 {
					typ = client.AckRelease
				}
				ack.Ranges = append(ack.Ranges, client.ShareAckRange{First: r.Offset, Last: r.Offset, Type: typ})
				if typ == client.AckAccept {
					accepted, counts = append(accepted, pos{p.Partition, r.Offset}), append(counts, r.DeliveryCount)
				} else {
					ty.release(r.DeliveryCount)
				}
			}
			acks = append(acks, ack)
		}
		if len(acks) == 0 {
			continue
		}
		if err := c.AcknowledgeShareRecords(ctx, group, member, acks); err != nil {
			if ctx.Err() == nil {
				ty.mu.Lock()
				ty.errs = append(ty.errs, err.Error())
				ty.mu.Unlock()
			}
			continue
		}
		for i, p := range accepted {
			ty.accept(p, counts[i])
		}
	}
}

// kafkaMember is a franz-go share consumer doing the same; franz-go acknowledges
// with its next fetch.
func kafkaMember(ctx context.Context, t *testing.T, seed, group, topic string, ty *tally) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			if err := rs.Error(); err != nil {
				ty.mu.Lock()
				ty.errs = append(ty.errs, "kafka ack: "+err.Error())
				ty.mu.Unlock()
			}
		}))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if ty.isPoison(pos{r.Partition, r.Offset}, int(r.DeliveryCount())) || rand.IntN(10) == 0 {
				r.Ack(kgo.AckRelease)
				ty.release(int(r.DeliveryCount()))
				return
			}
			r.Ack(kgo.AckAccept)
			ty.accept(pos{r.Partition, r.Offset}, int(r.DeliveryCount()))
		})
	}
}

// mixed: eight members, four over Kafka and four over HTTP, share a two-partition
// topic and release one delivery in ten at random: every record is accepted exactly
// once, and then the group has nothing in flight and nothing archived. With poison,
// one more record is released by every member every time: it is delivered exactly
// share.delivery.count.limit times (10) and copied once, with its headers, to the
// group's dead-letter topic — counted once in strata_share_dead_lettered_records_total
// and in the group's description.
func mixed(t *testing.T, poison bool, opts ...nodetest.Option) {
	n := nodetest.Start(t, append(opts, nodetest.Kafka())...)
	c := client.New(n.URL)
	ctx := t.Context()
	const topic, group = "jobs", "workers"
	if _, err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	const limit, dlq = 10, "dlq.jobs"
	configs := map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": strconv.Itoa(limit)}
	if poison {
		if _, err := c.CreateTopic(ctx, dlq, 1, map[string]string{"errors.deadletterqueue.group.enable": "true"}); err != nil {
			t.Fatal(err)
		}
		configs["errors.deadletterqueue.topic.name"] = dlq
	}
	if _, err := c.ConfigureShareGroup(ctx, group, configs); err != nil {
		t.Fatal(err)
	}
	total := recordCount()
	start := time.Now()
	produce(t, c, topic, 2, total)
	ty := &tally{accepted: map[pos]int{}, poison: pos{p: -1}}
	if poison {
		offs, err := c.Produce(ctx, topic, []client.Record{{Value: client.String("poison"), Partition: client.Int32(1),
			Headers: []client.Header{{Key: "trace", Value: []byte("p-1")}}}})
		if err != nil {
			t.Fatal(err)
		}
		ty.poison = pos{offs[0].Partition, offs[0].Offset}
	}
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { httpMember(run, c, group, topic, ty) })
		wg.Go(func() { kafkaMember(run, t, n.KafkaAddr, group, topic, ty) })
	}
	testwait.Until(t, 5*time.Minute, fmt.Sprintf("%d records accepted", total), func() bool { return ty.done() >= total })
	elapsed := time.Since(start)
	if poison {
		testwait.Until(t, time.Minute, "the poison record dead-lettered", func() bool {
			g, err := c.DescribeShareGroup(ctx, group)
			return err == nil && len(g.Partitions) == 2 && g.Partitions[1].StartOffset > ty.poison.o
		})
	}
	stop()
	wg.Wait()
	ty.mu.Lock()
	defer ty.mu.Unlock()
	t.Logf("%d records accepted in %s (%.0f/s, production included) by 8 members; %d deliveries released; highest delivery count %d",
		total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), ty.released, ty.maxCount)
	if len(ty.errs) > 0 {
		t.Errorf("%d acknowledgements refused, first: %s", len(ty.errs), ty.errs[0])
	}
	for p, k := range ty.accepted {
		if k != 1 {
			t.Errorf("partition %d offset %d accepted %d times", p.p, p.o, k)
		}
	}
	if len(ty.accepted) != total || ty.released == 0 {
		t.Fatalf("%d records accepted of %d, %d released", len(ty.accepted), total, ty.released)
	}
	if poison {
		checkPoison(t, n, c, ty, dlq, group, topic, limit)
	}
	testwait.Until(t, time.Minute, "the group to settle", func() bool {
		g, err := c.DescribeShareGroup(ctx, group)
		if err != nil || len(g.Partitions) != 2 {
			return false
		}
		for _, p := range g.Partitions {
			if p.Lag != 0 || p.Acquired != 0 || p.Archived != 0 || p.Available != 0 {
				t.Logf("partition %d: %+v", p.Partition, p)
				return false
			}
		}
		return true
	})
}

// TestMixedMembersEmbedded and TestMixedMembersServices: mixed on strata dev's shape
// and on Postgres and MinIO.
func TestMixedMembersEmbedded(t *testing.T) { mixed(t, false) }
func TestMixedMembersServices(t *testing.T) { mixed(t, false, nodetest.OnServices()) }

// TestMixedMembersPoisonEmbedded and TestMixedMembersPoisonServices: mixed with a
// poison record.
func TestMixedMembersPoisonEmbedded(t *testing.T) { mixed(t, true) }
func TestMixedMembersPoisonServices(t *testing.T) { mixed(t, true, nodetest.OnServices()) }

// checkPoison checks what became of the poison record (ty.mu held): seen at delivery
// counts 1 to limit, once each; one copy in the dead-letter topic with its own headers
// and the __dlq.errors.* ones; the node's and the group's running totals of
// dead-lettered records 1.
func checkPoison(t *testing.T, n *nodetest.Node, c *client.Client, ty *tally, dlq, group, topic string, limit int) {
	t.Helper()
	counts := slices.Sorted(slices.Values(ty.poisonCounts))
	want := make([]int, limit)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(counts, want) {
		t.Errorf("the poison record was delivered at counts %v, want 1 to %d once each", counts, limit)
	}
	res, err := c.Fetch(t.Context(), dlq, 0, client.FetchOptions{MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.HighWatermark != 1 || len(res.Records) != 1 {
		t.Fatalf("dead-letter topic: %d records, high watermark %d; want the poison record once", len(res.Records), res.HighWatermark)
	}
	got := map[string]string{}
	for _, h := range res.Records[0].Headers {
		got[h.Key] = string(h.Value)
	}
	wantHeaders := map[string]string{"trace": "p-1", "__dlq.errors.topic": topic, "__dlq.errors.partition": strconv.Itoa(int(ty.poison.p)),
		"__dlq.errors.offset": strconv.FormatInt(ty.poison.o, 10), "__dlq.errors.delivery.count": strconv.Itoa(limit),
		"__dlq.errors.reason": "delivery_limit", "__dlq.errors.group.id": group}
	if !maps.Equal(got, wantHeaders) {
		t.Errorf("the dead-letter copy's headers %v, want %v", got, wantHeaders)
	}
	// The mover counts once its copy's flush answered, a moment after the commit that
	// moved the start offset past the record.
	testwait.Until(t, 10*time.Second, "the dead-lettered record counted", func() bool { return deadLettered(t, n, group) >= 1 })
	if total := deadLettered(t, n, group); total != 1 {
		t.Errorf("strata_share_dead_lettered_records_total{group=%q} = %v, want 1", group, total)
	}
	if g, err := c.DescribeShareGroup(t.Context(), group); err != nil || g.DeadLettered != 1 {
		t.Errorf("the group's description: %d dead-lettered, %v; want 1", g.DeadLettered, err)
	}
}

// deadLettered reads the node's strata_share_dead_lettered_records_total for group.
func deadLettered(t *testing.T, n *nodetest.Node, group string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "strata_share_dead_lettered_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" && l.GetValue() == group {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// acquireAll acquires for member until it holds something, answering the member id
// and the acquisitions.
func acquireAll(t *testing.T, c *client.Client, group, member, topic string) (string, []client.ShareAcquisition, time.Time) {
	t.Helper()
	var (
		res client.ShareAcquireResult
		at  time.Time
	)
	testwait.Until(t, time.Minute, "records acquired", func() bool {
		var err error
		res, err = c.AcquireShareRecords(t.Context(), group, client.ShareAcquireRequest{MemberID: member, Topics: []string{topic}, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Logf("acquire: %v", err)
			return false
		}
		member, at = res.MemberID, time.Now()
		return len(res.Partitions) > 0
	})
	return member, res.Partitions, at
}

// TestDeadMemberRedeliveredAtTheDeadline: the records of a member that stops without
// acknowledging or leaving (as a SIGKILLed process) go to another member once their
// lock passes, not before, one delivery count up.
func TestDeadMemberRedeliveredAtTheDeadline(t *testing.T) {
	n := nodetest.Start(t)
	c := client.New(n.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "jobs", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConfigureShareGroup(ctx, "g", map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1500"}); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "jobs", 1, 20)
	_, held, _ := acquireAll(t, c, "g", "", "jobs")
	deadline := time.Time(held[0].LockDeadline)
	// The other member polls all along; what it gets must come after the deadline.
	other := ""
	for {
		res, err := c.AcquireShareRecords(ctx, "g", client.ShareAcquireRequest{MemberID: other, Topics: []string{"jobs"}, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		other = res.MemberID
		if len(res.Partitions) == 0 {
			if time.Now().After(deadline.Add(time.Minute)) {
				t.Fatal("the dead member's records never came back")
			}
			continue
		}
		got := time.Now()
		if got.Before(deadline) {
			t.Fatalf("redelivered at %s, before the lock deadline %s", got.Format(time.StampMilli), deadline.Format(time.StampMilli))
		}
		rs := res.Partitions[0].Records
		if len(rs) != len(held[0].Records) || rs[0].DeliveryCount != 2 {
			t.Fatalf("redelivered %d records at delivery count %d, want the dead member's %d at 2", len(rs), rs[0].DeliveryCount, len(held[0].Records))
		}
		t.Logf("redelivered %s after the lock deadline", got.Sub(deadline).Round(time.Millisecond))
		return
	}
}

// TestStalledMemberLateAck: a member stalled (as a SIGSTOPped process) past its lock
// acknowledges after another member acquired its records again: refused with
// acquisition_not_held, and the other member's delivery is untouched — its own
// acknowledgement is what accepts them.
func TestStalledMemberLateAck(t *testing.T) {
	n := nodetest.Start(t)
	c := client.New(n.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "jobs", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConfigureShareGroup(ctx, "g", map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	produce(t, c, "jobs", 1, 10)
	stalled, held, _ := acquireAll(t, c, "g", "", "jobs")
	other, again, _ := acquireAll(t, c, "g", "", "jobs") // after the lock passed
	if again[0].Records[0].DeliveryCount != 2 {
		t.Fatalf("re-acquired at delivery count %d, want 2", again[0].Records[0].DeliveryCount)
	}
	all := func(a client.ShareAcquisition, typ string) []client.ShareAck {
		rs := a.Records
		return []client.ShareAck{{AcquisitionID: a.AcquisitionID, Ranges: []client.ShareAckRange{{First: rs[0].Offset, Last: rs[len(rs)-1].Offset, Type: typ}}}}
	}
	err := c.AcknowledgeShareRecords(ctx, "g", stalled, all(held[0], client.AckAccept))
	if !client.HasCode(err, client.CodeAcquisitionNotHeld) {
		t.Fatalf("the stalled member's late acceptance: %v, want %s", err, client.CodeAcquisitionNotHeld)
	}
	g, err := c.DescribeShareGroup(ctx, "g")
	if err != nil || len(g.Partitions) != 1 || g.Partitions[0].Acknowledged != 0 || g.Partitions[0].Acquired != int64(len(again[0].Records)) {
		t.Fatalf("after the refused acceptance: %+v, %v; want the other member's %d records still acquired", g, err, len(again[0].Records))
	}
	if err := c.AcknowledgeShareRecords(ctx, "g", other, all(again[0], client.AckAccept)); err != nil {
		t.Fatalf("the holder's acceptance: %v", err)
	}
	g, err = c.DescribeShareGroup(ctx, "g")
	if err != nil || g.Partitions[0].Lag != 0 {
		t.Fatalf("after the holder's acceptance: %+v, %v; want nothing left", g, err)
	}
}
