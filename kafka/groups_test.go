package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
)

// Consumer groups through franz-go: classic groups with the client's balancers (the
// catalog keeps the state machine, the leader assigns), static membership, and the
// group administration requests.

// member is a franz-go group consumer polling in the background: what it is assigned,
// and every record it got.
type member struct {
	t    *testing.T
	cl   *kgo.Client
	mu   sync.Mutex
	own  map[int32]bool
	got  map[string]bool // "partition/offset"
	revs int             // revocations seen
	stop context.CancelFunc
	done chan struct{}
}

func startMember(t *testing.T, n *node, group, topic string, opts ...kgo.Opt) *member {
	t.Helper()
	m := &member{t: t, own: map[int32]bool{}, got: map[string]bool{}, done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(n.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.HeartbeatInterval(200 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
		kgo.RebalanceTimeout(10 * time.Second), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			for _, p := range a[topic] {
				m.own[p] = true
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			_ = cl.CommitMarkedOffsets(ctx)
			m.mu.Lock()
			for _, p := range r[topic] {
				delete(m.own, p)
			}
			m.revs++
			m.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.mu.Lock()
			for _, p := range l[topic] {
				delete(m.own, p)
			}
			m.mu.Unlock()
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				m.mu.Lock()
				m.got[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true
				m.mu.Unlock()
			})
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close leaves the group (a dynamic member sends LeaveGroup) and stops polling.
func (m *member) close() {
	m.stop()
	<-m.done
	m.cl.Close()
}

func (m *member) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.own {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (m *member) received() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]bool, len(m.got))
	for k := range m.got {
		out[k] = true
	}
	return out
}

// produceN produces n records round-robin over the topic's partitions and waits for
// them.
func produceN(t *testing.T, n *node, topic string, count int) {
	t.Helper()
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		cl.Produce(ctxFor(t, 30*time.Second), &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
			wg.Done()
		})
	}
	wg.Wait()
}

func createTopic(t *testing.T, n *node, name string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(client(t, kgo.SeedBrokers(n.addr)))
	if _, err := adm.CreateTopic(ctxFor(t, 10*time.Second), partitions, 1, nil, name); err != nil {
		t.Fatal(err)
	}
}

func split(a, b []int32, n int32) bool {
	all := append(slices.Clone(a), b...)
	slices.Sort(all)
	return len(a) > 0 && len(b) > 0 && len(all) == int(n) && slices.Equal(slices.Compact(all), all) && all[0] == 0 && all[n-1] == n-1
}

// TestFranzGoClassicGroups: two consumers split the partitions with each balancer, every
// record is consumed, one leaves and the other gets everything, and the committed
// offsets are where they stopped.
func TestFranzGoClassicGroups(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, openSQLite(t), kafka.Config{})
			topic, group := "cls-"+tc.name, "g-"+tc.name
			createTopic(t, n, topic, 4)
			produceN(t, n, topic, 200)
			a := startMember(t, n, group, topic, kgo.Balancers(tc.balancer))
			testwait.Until(t, 20*time.Second, "a owns all 4", func() bool { return len(a.owned()) == 4 })
			b := startMember(t, n, group, topic, kgo.Balancers(tc.balancer))
			testwait.Until(t, 30*time.Second, "a and b split the partitions", func() bool { return split(a.owned(), b.owned(), 4) })
			produceN(t, n, topic, 200)
			testwait.Until(t, 30*time.Second, "every record consumed", func() bool {
				got := a.received()
				for k := range b.received() {
					got[k] = true
				}
				return len(got) == 400
			})
			info, err := n.core.DescribeAnyGroup(t.Context(), broker.Anonymous, group)
			if err != nil || info.Classic == nil || info.Classic.State != catalog.ClassicStable || len(info.Classic.Members) != 2 ||
				info.Classic.Protocol != tc.name || info.Classic.ProtocolType != "consumer" {
				t.Fatalf("describe: %+v %v", info.Classic, err)
			}
			b.close()
			testwait.Until(t, 30*time.Second, "a owns all 4 after b left", func() bool { return len(a.owned()) == 4 })
			produceN(t, n, topic, 40)
			testwait.Until(t, 30*time.Second, "a consumes what came after", func() bool {
				got := a.received()
				for k := range b.received() {
					got[k] = true
				}
				return len(got) == 440
			})
			if err := a.cl.CommitUncommittedOffsets(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			offs, err := n.core.GroupOffsets(t.Context(), broker.Anonymous, group)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, o := range offs {
				total += o.Offset
			}
			if total != 440 {
				t.Fatalf("committed offsets add up to %d, want 440: %+v", total, offs)
			}
		})
	}
}

// TestFranzGoStaticMembership: a static member restarted within its session joins back
// at the same generation, and the other member keeps its partitions throughout.
func TestFranzGoStaticMembership(t *testing.T) {
	n := startNode(t, openSQLite(t), kafka.Config{})
	topic, group := "static", "g-static"
	createTopic(t, n, topic, 4)
	a := startMember(t, n, group, topic, kgo.InstanceID("inst-a"), kgo.Balancers(kgo.RangeBalancer()))
	b := startMember(t, n, group, topic, kgo.InstanceID("inst-b"), kgo.Balancers(kgo.RangeBalancer()))
	testwait.Until(t, 30*time.Second, "a and b split the partitions", func() bool { return split(a.owned(), b.owned(), 4) })
	generation := func() int32 {
		info, err := n.core.DescribeAnyGroup(t.Context(), broker.Anonymous, group)
		if err != nil || info.Classic == nil {
			t.Fatalf("describe: %v", err)
		}
		return info.Classic.Generation
	}
	testwait.Until(t, 10*time.Second, "the group is stable", func() bool {
		info, _ := n.core.DescribeAnyGroup(t.Context(), broker.Anonymous, group)
		return info.Classic != nil && info.Classic.State == catalog.ClassicStable
	})
	gen, aOwns, aRevs := generation(), a.owned(), a.revs
	b.close() // a static member does not leave: its session keeps its place
	b2 := startMember(t, n, group, topic, kgo.InstanceID("inst-b"), kgo.Balancers(kgo.RangeBalancer()))
	testwait.Until(t, 20*time.Second, "the restarted member has b's partitions", func() bool { return len(b2.owned()) == 4-len(aOwns) })
	time.Sleep(time.Second) // heartbeats of both, in case a rebalance were coming
	if got := generation(); got != gen {
		t.Fatalf("generation %d after the static rejoin, want %d (no rebalance)", got, gen)
	}
	a.mu.Lock()
	revs := a.revs
	a.mu.Unlock()
	if !slices.Equal(a.owned(), aOwns) || revs != aRevs {
		t.Fatalf("a owns %v (revoked %d times), want %v untouched", a.owned(), revs-aRevs, aOwns)
	}
}
