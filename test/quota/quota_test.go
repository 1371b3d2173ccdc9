// Package quota_test proves client quotas end to end: a whole node (internal/node, as
// strata serve starts it) with authentication on, its HTTP API and its Kafka listener,
// managed with kadm and over HTTP, enforced against franz-go producers and HTTP
// clients. The byte-rate runs measure 5 s each; STRATA_LONG=1 measures 20 s and adds
// the check that another principal keeps its solo rate (too noisy for a loaded CI
// machine).
package quota_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/security"
)

const bootKey = "bootstrap-0123456789abcdef0123456789"

// The principals: superusers, so that ACLs stay out of the way of what is measured.
var principals = []string{"User:alice", "User:bob", "User:carol", "User:dave", "User:erin", "User:frank"}

type stack struct {
	t     testing.TB
	url   string
	kafka string
	node  *nodetest.Node
}

func start(t testing.TB) *stack {
	t.Helper()
	n := nodetest.Start(t, nodetest.Keys(bootKey), nodetest.Kafka(), nodetest.Mutate(func(c *node.Config) {
		c.Security.Superusers = principals
	}))
	return &stack{t: t, url: n.URL, kafka: n.KafkaAddr, node: n}
}

type response struct {
	status int
	body   []byte
	header http.Header
}

func (s *stack) do(key, method, path string, body []byte) response {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: resp.StatusCode, body: b, header: resp.Header}
}

// key makes a catalog key for principal: its SASL username and secret.
func (s *stack) key(principal string) (id, secret string) {
	s.t.Helper()
	r := s.do(bootKey, "POST", "/v1/keys", fmt.Appendf(nil, `{"principal":%q}`, principal))
	var m map[string]any
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &m) != nil {
		s.t.Fatalf("create key: %d %s", r.status, r.body)
	}
	return m["id"].(string), m["secret"].(string)
}

func (s *stack) kclient(id, secret string, opts ...kgo.Opt) *kgo.Client {
	s.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.kafka), kgo.SASL(plain.Auth{User: id, Pass: secret}.AsMechanism())}, opts...)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cl.Close)
	return cl
}

// admin is kadm as the bootstrap superuser.
func (s *stack) admin() *kadm.Client {
	return kadm.NewClient(s.kclient(security.StaticKeyID(bootKey), bootKey, kgo.RequestRetries(0)))
}

// setQuota sets keys on a user (bare name, as Kafka names it) through kadm, and waits
// until the node enforces them: the change must reach it within a second.
func (s *stack) setQuota(user string, vals map[string]float64) {
	s.t.Helper()
	before := s.node.Quotas.Version()
	e := kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}}}
	for k, v := range vals {
		e.Ops = append(e.Ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
	}
	res, err := s.admin().AlterClientQuotas(s.t.Context(), []kadm.AlterClientQuotaEntry{e})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			s.t.Fatalf("alter quotas of %s: %v %s", user, r.Err, r.ErrMessage)
		}
	}
	if !testwait.Within(time.Second, func() bool { return s.node.Quotas.Version() != before }) {
		s.t.Fatalf("the quota change of %s did not reach the node within a second", user)
	}
}

// removeQuota removes keys of a user through kadm and waits until the node has it.
func (s *stack) removeQuota(user string, keys ...string) {
	s.t.Helper()
	before := s.node.Quotas.Version()
	e := kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}}}
	for _, k := range keys {
		e.Ops = append(e.Ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	if _, err := s.admin().AlterClientQuotas(s.t.Context(), []kadm.AlterClientQuotaEntry{e}); err != nil {
		s.t.Fatal(err)
	}
	if !testwait.Within(time.Second, func() bool { return s.node.Quotas.Version() != before }) {
		s.t.Fatalf("the quota removal of %s did not reach the node within a second", user)
	}
}

func (s *stack) createTopic(name string) {
	s.t.Helper()
	if r := s.do(bootKey, "POST", "/v1/topics", fmt.Appendf(nil, `{"name":%q,"partitions":1}`, name)); r.status != http.StatusCreated {
		s.t.Fatalf("create topic %s: %d %s", name, r.status, r.body)
	}
}

func long() bool { return os.Getenv("STRATA_LONG") == "1" }

// window is how long a rate is measured, after warmup.
func window() time.Duration {
	if long() {
		return 20 * time.Second
	}
	return 5 * time.Second
}

const warmup = 2 * time.Second

// run is what one producer achieved in its measured window.
type run struct {
	rate      float64 // bytes per second acknowledged within the window
	records   int64   // acknowledged in all
	refused   int64   // produce errors (Kafka) or non-200 answers (HTTP)
	throttles int64   // answers that carried a throttle time (Kafka)
}

// meter counts acknowledged bytes that land inside [from, to).
type meter struct {
	from, to time.Time
	bytes    atomic.Int64
}

func (m *meter) add(n int) {
	if now := time.Now(); !now.Before(m.from) && now.Before(m.to) {
		m.bytes.Add(int64(n))
	}
}

type throttleHook struct{ n *atomic.Int64 }

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// produceKafka produces 8 KiB records to topic as fast as franz-go will for warmup and
// the window.
func (s *stack) produceKafka(id, secret, topic string) run {
	var throttles atomic.Int64
	cl := s.kclient(id, secret, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(64<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(64), kgo.WithHooks(throttleHook{&throttles}),
		kgo.ClientID("bench-"+id))
	value := make([]byte, 8<<10)
	rand.Read(value)
	begin := time.Now()
	m := &meter{from: begin.Add(warmup), to: begin.Add(warmup + window())}
	var acked, refused atomic.Int64
	var firstErr error
	var mu sync.Mutex
	ctx := s.t.Context()
	for time.Now().Before(m.to) {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				refused.Add(1)
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
				return
			}
			acked.Add(1)
			m.add(len(r.Value))
		})
	}
	if err := cl.Flush(ctx); err != nil {
		s.t.Fatal(err)
	}
	if firstErr != nil {
		s.t.Errorf("produce refused: %v", firstErr)
	}
	return run{rate: float64(m.bytes.Load()) / window().Seconds(), records: acked.Load(), refused: refused.Load(), throttles: throttles.Load()}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// produceHTTP posts 8 records of 8 KiB (base64 in a JSON body) per request, one request
// after the other, for warmup and the window.
func (s *stack) produceHTTP(secret, topic string) run {
	value := make([]byte, 6<<10)
	rand.Read(value)
	rec := fmt.Sprintf(`{"value":%q}`, base64.StdEncoding.EncodeToString(value))
	body := []byte(`{"records":[` + strings.Repeat(rec+",", 7) + rec + `]}`)
	begin := time.Now()
	m := &meter{from: begin.Add(warmup), to: begin.Add(warmup + window())}
	var r run
	for time.Now().Before(m.to) {
		resp := s.do(secret, "POST", "/v1/topics/"+topic+"/records", body)
		if resp.status != http.StatusOK {
			r.refused++
			if ra := resp.header.Get("Retry-After"); resp.status != http.StatusTooManyRequests || ra == "" {
				s.t.Fatalf("HTTP produce: %d %s", resp.status, resp.body)
			}
			continue
		}
		r.records += 8
		m.add(len(body))
	}
	r.rate = float64(m.bytes.Load()) / window().Seconds()
	return r
}

func (s *stack) highWatermark(topic string) int64 {
	s.t.Helper()
	offs, err := s.admin().ListEndOffsets(s.t.Context(), topic)
	if err != nil {
		s.t.Fatal(err)
	}
	o, _ := offs.Lookup(topic, 0)
	return o.Offset
}

const mib = 1 << 20

func within(rate, want, tolerance float64) bool {
	return rate >= want*(1-tolerance) && rate <= want*(1+tolerance)
}

// TestProducerByteRate: a principal with producer_byte_rate 1 MiB/s producing flat out
// over Kafka and over HTTP gets 1 MiB/s ± 15 %, the Kafka answers carrying throttle
// times, nothing refused and nothing lost.
func TestProducerByteRate(t *testing.T) {
	s := start(t)
	t.Run("kafka", func(t *testing.T) {
		s.t = t
		id, secret := s.key("User:alice")
		s.setQuota("alice", map[string]float64{catalog.QuotaProducerByteRate: mib})
		s.createTopic("alice-kafka")
		r := s.produceKafka(id, secret, "alice-kafka")
		t.Logf("kafka: %.3f MiB/s over %v, %d records, %d throttled answers", r.rate/mib, window(), r.records, r.throttles)
		if !within(r.rate, mib, 0.15) {
			t.Errorf("kafka produce under a 1 MiB/s quota: %.3f MiB/s, want 1 ± 15 %%", r.rate/mib)
		}
		if r.throttles == 0 {
			t.Error("no Kafka answer carried a throttle time")
		}
		if r.refused != 0 {
			t.Errorf("%d records refused", r.refused)
		}
		if hw := s.highWatermark("alice-kafka"); hw != r.records {
			t.Errorf("the topic holds %d records, %d were acknowledged", hw, r.records)
		}
		m := s.do(bootKey, "GET", "/metrics", nil)
		for _, want := range []string{`strata_quota_bytes_total{kind="produce",principal="User:alice"}`, `strata_quota_throttle_seconds_total{kind="produce",principal="User:alice"}`} {
			if !bytes.Contains(m.body, []byte(want)) {
				t.Errorf("/metrics has no %s", want)
			}
		}
	})
	t.Run("http", func(t *testing.T) {
		s.t = t
		_, secret := s.key("User:carol")
		s.setQuota("carol", map[string]float64{catalog.QuotaProducerByteRate: mib})
		s.createTopic("carol-http")
		r := s.produceHTTP(secret, "carol-http")
		t.Logf("http: %.3f MiB/s over %v, %d records, %d refused", r.rate/mib, window(), r.records, r.refused)
		if !within(r.rate, mib, 0.15) {
			t.Errorf("HTTP produce under a 1 MiB/s quota: %.3f MiB/s, want 1 ± 15 %%", r.rate/mib)
		}
		if hw := s.highWatermark("carol-http"); hw != r.records {
			t.Errorf("the topic holds %d records, %d were acknowledged", hw, r.records)
		}
	})
}

// TestOtherPrincipalKeepsItsRate: while a throttled principal produces flat out, another
// principal without a quota keeps ≥ 0.9× the rate it has alone (same run: the mean of
// a solo run before and one after). Long only:
// on a loaded 2-core machine two 5 s runs differ by more than 10 % on their own.
func TestOtherPrincipalKeepsItsRate(t *testing.T) {
	if !long() {
		t.Skip("STRATA_LONG=1 runs it (20 s windows)")
	}
	s := start(t)
	aid, asecret := s.key("User:alice")
	bid, bsecret := s.key("User:bob")
	s.setQuota("alice", map[string]float64{catalog.QuotaProducerByteRate: mib})
	s.createTopic("solo")
	s.createTopic("shared-a")
	s.createTopic("shared-b")
	// Bob alone before and after the shared run, so that a machine whose load drifts
	// does not pass for alice's cost.
	before := s.produceKafka(bid, bsecret, "solo")
	var wg sync.WaitGroup
	var alice run
	wg.Go(func() { alice = s.produceKafka(aid, asecret, "shared-a") })
	shared := s.produceKafka(bid, bsecret, "shared-b")
	wg.Wait()
	after := s.produceKafka(bid, bsecret, "solo")
	solo := run{rate: (before.rate + after.rate) / 2}
	t.Logf("bob alone %.1f and %.1f MiB/s, beside alice %.1f MiB/s (%.2f×); alice %.3f MiB/s", before.rate/mib, after.rate/mib, shared.rate/mib, shared.rate/solo.rate, alice.rate/mib)
	if shared.rate < 0.9*solo.rate {
		t.Errorf("bob beside a throttled alice: %.1f MiB/s, alone %.1f MiB/s: want ≥ 0.9×", shared.rate/mib, solo.rate/mib)
	}
	if !within(alice.rate, mib, 0.15) {
		t.Errorf("alice beside bob: %.3f MiB/s, want 1 ± 15 %%", alice.rate/mib)
	}
}

// createTopicCode sends one CreateTopics for name straight to the node.
func createTopicCode(ctx context.Context, cl *kgo.Client, name string) (int16, string, int32, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(0))
	if err != nil {
		return 0, "", 0, err
	}
	msg := ""
	if m := resp.Topics[0].ErrorMessage; m != nil {
		msg = *m
	}
	return resp.Topics[0].ErrorCode, msg, resp.ThrottleMillis, nil
}

// TestControllerMutationRate: a flood of topic creations by a principal with
// controller_mutation_rate 2 is stopped with THROTTLING_QUOTA_EXCEEDED (and a throttle
// time); over HTTP, 429 with Retry-After; nothing is created by a refused request.
func TestControllerMutationRate(t *testing.T) {
	s := start(t)
	id, secret := s.key("User:dave")
	s.setQuota("dave", map[string]float64{catalog.QuotaControllerMutationRate: 2})
	cl := s.kclient(id, secret, kgo.RequestRetries(0))
	created, refusedAt := 0, -1
	for i := range 50 {
		code, _, thr, err := createTopicCode(t.Context(), cl, fmt.Sprintf("flood-%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if code == kerr.ThrottlingQuotaExceeded.Code {
			if thr <= 0 {
				t.Errorf("THROTTLING_QUOTA_EXCEEDED with throttle_time_ms %d", thr)
			}
			refusedAt = i
			break
		}
		if code != 0 {
			t.Fatalf("create topic %d: %v", i, kerr.ErrorForCode(code))
		}
		created++
	}
	if refusedAt < 0 {
		t.Fatal("50 topic creations in a row under controller_mutation_rate 2: none throttled")
	}
	t.Logf("throttled at creation %d", refusedAt)
	ts, err := s.admin().ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ts.Has(fmt.Sprintf("flood-%02d", refusedAt)) {
		t.Error("the refused topic exists")
	}
	r := s.do(secret, "POST", "/v1/topics", []byte(`{"name":"flood-http","partitions":1}`))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !bytes.Contains(r.body, []byte("throttling_quota_exceeded")) {
		t.Errorf("HTTP topic creation over the rate: %d (Retry-After %q) %s, want 429 throttling_quota_exceeded", r.status, r.header.Get("Retry-After"), r.body)
	}
}

// TestCountCaps: topic_count refuses the next creation with a clear error, over Kafka
// (POLICY_VIOLATION naming the cap) and HTTP (403 quota_exceeded); deleting one makes
// room again. (connector_count is refused by the same catalog check: catalogtest's
// quotas/caps proves it on both backends.)
func TestCountCaps(t *testing.T) {
	s := start(t)
	id, secret := s.key("User:erin")
	s.setQuota("erin", map[string]float64{catalog.QuotaTopicCount: 2})
	cl := s.kclient(id, secret, kgo.RequestRetries(0))
	for _, n := range []string{"erin-1", "erin-2"} {
		if code, msg, _, err := createTopicCode(t.Context(), cl, n); err != nil || code != 0 {
			t.Fatalf("create %s: %v %v %s", n, err, kerr.ErrorForCode(code), msg)
		}
	}
	code, msg, _, err := createTopicCode(t.Context(), cl, "erin-3")
	if err != nil {
		t.Fatal(err)
	}
	if code != kerr.PolicyViolation.Code || !strings.Contains(msg, "topic_count") {
		t.Errorf("third topic under topic_count 2: %v %q, want POLICY_VIOLATION naming topic_count", kerr.ErrorForCode(code), msg)
	}
	r := s.do(secret, "POST", "/v1/topics", []byte(`{"name":"erin-3","partitions":1}`))
	var p struct {
		Code, Detail string
	}
	_ = json.Unmarshal(r.body, &p)
	if r.status != http.StatusForbidden || p.Code != "quota_exceeded" || !strings.Contains(p.Detail, "topic_count is 2") {
		t.Errorf("HTTP third topic: %d %s, want 403 quota_exceeded saying topic_count is 2", r.status, r.body)
	}
	// Another principal's topics do not count; a deleted one stops counting.
	s.createTopic("boot-topic")
	if r := s.do(secret, "DELETE", "/v1/topics/erin-1", nil); r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if code, msg, _, err := createTopicCode(t.Context(), cl, "erin-3"); err != nil || code != 0 {
		t.Errorf("create after a delete under the cap: %v %v %s", err, kerr.ErrorForCode(code), msg)
	}
}

// TestQuotaBadInput: unknown keys, negative values, fractions of whole-number keys and
// entities that are neither user nor client id get INVALID_REQUEST (Kafka) or 400
// (HTTP), and change nothing — the valid entry beside a bad one included.
func TestQuotaBadInput(t *testing.T) {
	s := start(t)
	adm := s.admin()
	ctx := t.Context()
	frank := "frank"
	good := kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &frank}},
		Ops: []kadm.AlterClientQuotaOp{{Key: catalog.QuotaProducerByteRate, Value: 1000}}}
	ip := "10.0.0.1"
	for name, bad := range map[string]kadm.AlterClientQuotaEntry{
		"unknown key": {Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &frank}}, Ops: []kadm.AlterClientQuotaOp{{Key: "produce_rate", Value: 1}}},
		"negative":    {Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &frank}}, Ops: []kadm.AlterClientQuotaOp{{Key: catalog.QuotaConsumerByteRate, Value: -5}}},
		"fraction":    {Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &frank}}, Ops: []kadm.AlterClientQuotaOp{{Key: catalog.QuotaProducerByteRate, Value: 0.5}}},
		"ip entity":   {Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &ip}}, Ops: []kadm.AlterClientQuotaOp{{Key: catalog.QuotaProducerByteRate, Value: 1}}},
		"no entity":   {Ops: []kadm.AlterClientQuotaOp{{Key: catalog.QuotaProducerByteRate, Value: 1}}},
	} {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{good, bad})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !errors.Is(r.Err, kerr.InvalidRequest) {
				t.Errorf("%s: entry %v answered %v, want INVALID_REQUEST", name, r.Entity, r.Err)
			}
		}
	}
	d, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 0 {
		t.Errorf("refused alterations left quotas: %+v", d)
	}
	for _, body := range []string{
		`{"entity":{"user":"User:frank"},"quotas":{"produce_rate":1}}`,
		`{"entity":{"user":"User:frank"},"quotas":{"producer_byte_rate":-1}}`,
		`{"entity":{"ip":"10.0.0.1"},"quotas":{"producer_byte_rate":1}}`,
		`{"entity":{},"quotas":{"producer_byte_rate":1}}`,
		`{"entity":{"user":"frank"},"quotas":{"producer_byte_rate":1}}`,
		`{"entity":{"user":"User:frank","client_id":"x"},"quotas":{"topic_count":1}}`,
	} {
		if r := s.do(bootKey, "PUT", "/v1/quotas", []byte(body)); r.status != http.StatusBadRequest {
			t.Errorf("PUT /v1/quotas %s: %d %s, want 400", body, r.status, r.body)
		}
	}
	if r := s.do(bootKey, "GET", "/v1/quotas", nil); r.status != http.StatusOK || string(bytes.TrimSpace(r.body)) != `{"quotas":[]}` {
		t.Errorf("GET /v1/quotas after refusals: %d %s", r.status, r.body)
	}
	// And a good one, over HTTP, is read back over Kafka with the bare user name.
	if r := s.do(bootKey, "PUT", "/v1/quotas", []byte(`{"entity":{"user":"User:frank","client_id":"app"},"quotas":{"producer_byte_rate":1048576,"request_percentage":50}}`)); r.status != http.StatusOK {
		t.Fatalf("PUT /v1/quotas: %d %s", r.status, r.body)
	}
	d, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &frank}, {Type: "client-id", MatchType: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 || len(d[0].Values) != 2 || len(d[0].Entity) != 2 || *d[0].Entity[0].Name != "frank" {
		t.Errorf("DescribeClientQuotas after the HTTP PUT: %+v", d)
	}
}
