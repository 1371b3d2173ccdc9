package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/kafka"
)

// KIP-848 members (franz-go's next-gen consumer, opted in) and HTTP members share one
// consumer group: one assignor, one set of offsets.

// httpMember heartbeats a group over the HTTP API in the background, reporting as owned
// what it was last assigned.
type httpMember struct {
	mu    sync.Mutex
	epoch int32
	own   []int32
	stop  context.CancelFunc
	done  chan struct{}
}

func startHTTPMember(t *testing.T, n *node, group, id, topic string) *httpMember {
	m := &httpMember{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			m.mu.Lock()
			owned := fmt.Sprintf(`[{"topic":%q,"partitions":%s}]`, topic, mustJSON(m.own))
			body := fmt.Sprintf(`{"member_id":%q,"member_epoch":%d,"topics":[%q],"owned":%s,"session_timeout_ms":5000}`, id, m.epoch, topic, owned)
			m.mu.Unlock()
			var res struct {
				MemberEpoch int32 `json:"member_epoch"`
				Assignment  []struct {
					Partitions []int32 `json:"partitions"`
				} `json:"assignment"`
			}
			if err := json.Unmarshal(httpDo(t, "POST", n.http+"/v1/groups/"+group+"/heartbeat", body), &res); err != nil {
				t.Errorf("heartbeat answer: %v", err)
				return
			}
			m.mu.Lock()
			m.epoch, m.own = res.MemberEpoch, []int32{}
			for _, a := range res.Assignment {
				m.own = append(m.own, a.Partitions...)
			}
			slices.Sort(m.own)
			m.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { m.stop(); <-m.done })
	return m
}

func (m *httpMember) state() (int32, []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch, slices.Clone(m.own)
}

func mustJSON(v any) string {
	if v == nil {
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// nextGen is franz-go's opt-in to KIP-848 (v1.19+: the client context carries it; the
// broker must advertise ConsumerGroupHeartbeat v1).
func nextGen() kgo.Opt {
	return kgo.WithContext(context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true))
}

func TestFranzGoKIP848BesideHTTPMember(t *testing.T) {
	n := startNode(t, openSQLite(t), kafka.Config{})
	topic, group := "kip848", "g-848"
	createTopic(t, n, topic, 4)
	produceN(t, n, topic, 200)
	hm := startHTTPMember(t, n, group, "http-1", topic)
	testwait.Until(t, 10*time.Second, "the HTTP member owns all 4", func() bool { _, own := hm.state(); return len(own) == 4 })
	km := startMember(t, n, group, topic, nextGen(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	testwait.Until(t, 30*time.Second, "the two members split the partitions", func() bool {
		_, own := hm.state()
		return split(own, km.owned(), 4)
	})
	info, err := n.core.DescribeAnyGroup(t.Context(), broker.Anonymous, group)
	if err != nil || info.Consumer == nil || len(info.Consumer.Members) != 2 {
		t.Fatalf("the group is not one consumer group of two: %+v %v", info, err)
	}
	// The Kafka member consumes and commits its partitions (OffsetCommit v9 at its
	// member epoch); the HTTP member commits its own over HTTP.
	testwait.Until(t, 30*time.Second, "the Kafka member consumed its partitions", func() bool { return len(km.received()) == 100 })
	if err := km.cl.CommitUncommittedOffsets(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	epoch, own := hm.state()
	var offs []string
	for _, p := range own {
		offs = append(offs, fmt.Sprintf(`{"topic":%q,"partition":%d,"offset":50}`, topic, p))
	}
	httpDo(t, "POST", n.http+"/v1/groups/"+group+"/offsets", fmt.Sprintf(`{"member_id":"http-1","member_epoch":%d,"offsets":[%s]}`, epoch, offs[0]+","+offs[1]))
	// The same rows, whichever front end reads them.
	fr, err := kadm.NewClient(client(t, kgo.SeedBrokers(n.addr))).FetchOffsets(ctxFor(t, 10*time.Second), group)
	if err != nil || fr.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fr.Error())
	}
	for p := range int32(4) {
		o, ok := fr.Lookup(topic, p)
		if !ok || o.At != 50 {
			t.Fatalf("partition %d committed at %+v (found %v), want 50 (by either front end)", p, o, ok)
		}
	}
	var httpOffs struct {
		Offsets []struct{ Offset int64 } `json:"offsets"`
	}
	_ = json.Unmarshal(httpDo(t, "GET", n.http+"/v1/groups/"+group+"/offsets", ""), &httpOffs)
	if len(httpOffs.Offsets) != 4 {
		t.Fatalf("HTTP sees %d offsets, want 4", len(httpOffs.Offsets))
	}
	// A classic member cannot join a consumer group with live members.
	j := kmsg.NewPtrJoinGroupRequest()
	j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = group, 10000, 10000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	j.Protocols = append(j.Protocols, jp)
	if resp := rawTo(t, n).do(j).(*kmsg.JoinGroupResponse); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join of a consumer group: error %d, want INCONSISTENT_GROUP_PROTOCOL", resp.ErrorCode)
	}
	// ConsumerGroupDescribe shows both members, with topic ids.
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{group}
	dr := rawTo(t, n).do(d).(*kmsg.ConsumerGroupDescribeResponse)
	if g := dr.Groups[0]; g.ErrorCode != 0 || len(g.Members) != 2 || g.AssignorName != "uniform" {
		t.Fatalf("ConsumerGroupDescribe: %+v", g)
	}
	// The Kafka member leaves (epoch -1): the HTTP member gets everything.
	km.close()
	testwait.Until(t, 20*time.Second, "the HTTP member owns all 4 again", func() bool { _, own := hm.state(); return len(own) == 4 })
	if info, _ := n.core.DescribeAnyGroup(t.Context(), broker.Anonymous, group); info.Consumer == nil || len(info.Consumer.Members) != 1 || info.Type != catalog.GroupTypeConsumer {
		t.Fatalf("after the Kafka member left: %+v", info)
	}
}
