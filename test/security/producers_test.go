package security_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/internal/testkit/batchtest"
)

// wantNotOwner checks the refusal of another principal's producer id: 403 forbidden,
// as Kafka's refusal of an idempotent producer (idempotent-write on the cluster).
func wantNotOwner(t *testing.T, what string, r response, id any) {
	t.Helper()
	if r.status != http.StatusForbidden {
		t.Fatalf("%s: %d %s, want 403 forbidden", what, r.status, r.body)
	}
	m := r.json(t)
	if m["code"] != "forbidden" || m["resource_type"] != "cluster" || m["operation"] != "idempotent-write" ||
		fmt.Sprint(m["producer_id"]) != fmt.Sprint(id) || !strings.Contains(fmt.Sprint(m["detail"], m["title"], m["message"]), "another principal") {
		t.Fatalf("%s: %s, want forbidden to use producer id %v", what, r.body, id)
	}
}

// TestProducersOwnedHTTP: a principal with write on a topic of its own cannot use
// another's producer id — to produce with it (JSON, record batches, /v1/records) or to
// bump its epoch (POST /v1/producers with it as the current identity) — and the
// owner's producer carries on untouched: same epoch, same sequences, not fenced.
func TestProducersOwnedHTTP(t *testing.T) {
	s := startStack(t)
	s.topic("victim-t", 1, 0)
	s.topic("mallory-t", 1, 0)
	_, victim := s.key("User:victim")
	_, mallory := s.key("User:mallory")
	s.allow("User:victim", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "victim-t"})
	s.allow("User:mallory", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "mallory-t"})
	s.allow("User:mallory", grant{op: acl.OpRead, typ: acl.TypeTopic, name: "mallory-t"})

	r := s.do(victim, "POST", "/v1/producers", "")
	if r.status != http.StatusOK {
		t.Fatalf("victim's producer: %d %s", r.status, r.body)
	}
	p := r.json(t)
	id, epoch := p["producer_id"], p["epoch"]
	produce := func(key, topic string, epoch any, seq int) response {
		body := fmt.Sprintf(`{"records":[{"value":%d,"partition":0}],"producer":{"id":%v,"epoch":%v,"sequences":{"0":%d}}}`, seq, id, epoch, seq)
		return s.do(key, "POST", "/v1/topics/"+topic+"/records", body)
	}
	if r := produce(victim, "victim-t", epoch, 0); r.status != http.StatusOK {
		t.Fatalf("victim's first produce: %d %s", r.status, r.body)
	}

	// Every use of the victim's id by mallory, each refused.
	wantNotOwner(t, "produce with it", produce(mallory, "mallory-t", epoch, 0), id)
	wantNotOwner(t, "produce with it at the next epoch (a bump in the commit)", produce(mallory, "mallory-t", fmt.Sprint(epoch.(float64)+1), 0), id)
	wantNotOwner(t, "produce with it to /v1/records", s.do(mallory, "POST", "/v1/records",
		fmt.Sprintf(`{"records":[{"topic":"mallory-t","partition":0,"value":1}],"producer":{"id":%v,"epoch":%v,"sequences":{"mallory-t":{"0":0}}}}`, id, epoch)), id)
	batch := batchtest.Batch(t, batchtest.Some(1, time.Now().UnixMilli()), 0, int64(id.(float64)), int16(epoch.(float64))+1, 0)
	wantNotOwner(t, "produce record batches with it", s.do(mallory, "POST", "/v1/topics/mallory-t/records?partition=0", string(batch),
		"Content-Type", api.RecordBatchContentType), id)
	wantNotOwner(t, "bump its epoch (KIP-360)", s.do(mallory, "POST", "/v1/producers", fmt.Sprintf(`{"producer_id":%v,"epoch":%v}`, id, epoch)), id)

	// Nothing changed: mallory's topic is empty, and the victim's producer goes on at
	// its epoch and sequence.
	if r := s.do(mallory, "GET", "/v1/topics/mallory-t/partitions", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"high_watermark":0`) {
		t.Fatalf("mallory's topic after the refusals: %d %s", r.status, r.body)
	}
	if r := produce(victim, "victim-t", epoch, 1); r.status != http.StatusOK || !strings.Contains(string(r.body), `"offset":1`) {
		t.Fatalf("victim's next produce: %d %s", r.status, r.body)
	}
	// The owner may bump its own epoch; mallory gets an id of its own, and uses it.
	if r := s.do(victim, "POST", "/v1/producers", fmt.Sprintf(`{"producer_id":%v,"epoch":%v}`, id, epoch)); r.status != http.StatusOK ||
		fmt.Sprint(r.json(t)["producer_id"]) != fmt.Sprint(id) {
		t.Fatalf("the owner's bump: %d %s", r.status, r.body)
	}
	own := s.do(mallory, "POST", "/v1/producers", "").json(t)
	body := fmt.Sprintf(`{"records":[{"value":1,"partition":0}],"producer":{"id":%v,"epoch":%v,"sequences":{"0":0}}}`, own["producer_id"], own["epoch"])
	if r := s.do(mallory, "POST", "/v1/topics/mallory-t/records", body); r.status != http.StatusOK {
		t.Fatalf("mallory's own producer: %d %s", r.status, r.body)
	}
}

// TestProducersOwnedKafka: the same over the Kafka protocol — InitProducerId with
// another's id (KIP-360) and Produce with it are refused CLUSTER_AUTHORIZATION_FAILED,
// and the owner's next batch is accepted at its epoch and sequence.
func TestProducersOwnedKafka(t *testing.T) {
	s := startStack(t)
	s.topic("victim-k", 1, 0)
	s.topic("mallory-k", 1, 0)
	vid, victim := s.key("User:victim")
	mid, mallory := s.key("User:mallory")
	s.allow("User:victim", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "victim-k"})
	s.allow("User:mallory", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "mallory-k"})
	vc, mc := s.kclient(vid, victim), s.kclient(mid, mallory)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	initProducer := func(cl *kgo.Client, id int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = 60000, id, epoch
		resp, err := r.RequestWith(ctx, direct(cl))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	produce := func(cl *kgo.Client, topic string, id int64, epoch int16, seq int32) int16 {
		t.Helper()
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batchtest.Batch(t, batchtest.Some(1, time.Now().UnixMilli()), 0, id, epoch, seq)
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		resp, err := r.RequestWith(ctx, direct(cl))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}

	v := initProducer(vc, -1, -1)
	if v.ErrorCode != 0 {
		t.Fatalf("victim's InitProducerId: %v", kerr.ErrorForCode(v.ErrorCode))
	}
	if code := produce(vc, "victim-k", v.ProducerID, v.ProducerEpoch, 0); code != 0 {
		t.Fatalf("victim's first batch: %v", kerr.ErrorForCode(code))
	}
	if m := initProducer(mc, v.ProducerID, v.ProducerEpoch); m.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("mallory's InitProducerId with the victim's id: %v (id %d epoch %d), want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(m.ErrorCode), m.ProducerID, m.ProducerEpoch)
	}
	for _, epoch := range []int16{v.ProducerEpoch, v.ProducerEpoch + 1} {
		if code := produce(mc, "mallory-k", v.ProducerID, epoch, 0); code != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("mallory's batch with the victim's id at epoch %d: %v, want CLUSTER_AUTHORIZATION_FAILED", epoch, kerr.ErrorForCode(code))
		}
	}
	// The victim is not fenced, its sequence did not move, mallory's topic is empty.
	if code := produce(vc, "victim-k", v.ProducerID, v.ProducerEpoch, 1); code != 0 {
		t.Fatalf("victim's next batch: %v", kerr.ErrorForCode(code))
	}
	if r := s.do(bootKey, "GET", "/v1/topics/mallory-k/partitions", ""); !strings.Contains(string(r.body), `"high_watermark":0`) {
		t.Fatalf("mallory's topic after the refusals: %d %s", r.status, r.body)
	}
	// An id of its own works.
	m := initProducer(mc, -1, -1)
	if m.ErrorCode != 0 || m.ProducerID == v.ProducerID {
		t.Fatalf("mallory's own InitProducerId: %v id %d", kerr.ErrorForCode(m.ErrorCode), m.ProducerID)
	}
	if code := produce(mc, "mallory-k", m.ProducerID, m.ProducerEpoch, 0); code != 0 {
		t.Fatalf("mallory's own batch: %v", kerr.ErrorForCode(code))
	}
}
