package push_test

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"

	dto "github.com/prometheus/client_model/go"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
)

// pushNode starts a node running the push role, allowed to call loopback over plain
// HTTP (as strata dev with --push-allow 127.0.0.0/8 --push-allow-insecure).
func pushNode(t *testing.T, opts ...nodetest.Option) *nodetest.Node {
	t.Helper()
	return nodetest.Start(t, append([]nodetest.Option{nodetest.Mutate(func(c *node.Config) {
		c.Push = true
		c.PushConfig = node.PushConfig{Allow: []string{"127.0.0.0/8"}, AllowInsecure: true, LeaseTTL: 3 * time.Second}
	})}, opts...)...)
}

func nodeMutate(m func(*node.Config)) nodetest.Option { return nodetest.Mutate(m) }

// setup creates a topic of 3 partitions with n records (value "poison" every
// poisonEvery'th when not 0) and a share group reading from the earliest offset.
func setup(t *testing.T, core *broker.Broker, n, poisonEvery int) (topic, group string) {
	t.Helper()
	ctx := context.Background()
	topic, group = "orders", "hooks"
	if _, err := core.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: topic, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if err := core.AlterGroupConfigs(ctx, broker.Anonymous, group, broker.AlterConfigsRequest{Changes: []broker.ConfigChange{
		{Name: catalog.ShareAutoOffsetReset, Op: broker.ConfigSet, Value: "earliest"}}}); err != nil {
		t.Fatal(err)
	}
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		var recs []broker.Record
		for j := i; j < min(n, i+chunk); j++ {
			v := `{"n":` + strconv.Itoa(j) + `}`
			if poisonEvery > 0 && j%poisonEvery == 0 {
				v = `"poison"`
			}
			recs = append(recs, broker.Record{Topic: topic, Partition: int32(j % 3), Key: []byte("k" + strconv.Itoa(j)), Value: []byte(v)})
		}
		if _, err := core.Produce(ctx, broker.Anonymous, broker.ProduceRequest{Records: recs}); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	return topic, group
}

type wireRecord struct {
	Topic         string          `json:"topic"`
	Partition     int32           `json:"partition"`
	Offset        int64           `json:"offset"`
	Timestamp     int64           `json:"timestamp"`
	Key           json.RawMessage `json:"key"`
	Value         json.RawMessage `json:"value"`
	DeliveryCount int16           `json:"delivery_count"`
}

type recordID struct {
	partition int32
	offset    int64
}

// receiver is a webhook that misbehaves as the issue's: it fails a share of calls
// with 500, answers 429 with Retry-After now and then, hangs past the timeout
// sometimes, and rejects poison records (a batch of one with 422; in a larger batch
// one by one in its 200 answer). It counts what it answered per record.
type receiver struct {
	t      *testing.T
	secret string
	chaos  bool

	mu         sync.Mutex
	rnd        *rand.Rand
	accepted   map[recordID]int
	rejected   map[recordID]int
	maxCount   int16
	calls      int
	badSig     int
	keys       map[string]int // idempotency keys of calls answered 2xx
	outcomeDup int            // 2xx answers to a key answered 2xx before
}

func newReceiver(t *testing.T, chaos bool) *receiver {
	return &receiver{t: t, chaos: chaos, rnd: rand.New(rand.NewPCG(1, 2)), accepted: map[recordID]int{},
		rejected: map[recordID]int{}, keys: map[string]int{}}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rc.mu.Lock()
	secret := rc.secret
	rc.mu.Unlock()
	if secret != "" && !verify(secret, r.Header.Get("Strata-Signature"), body, time.Now(), 5*time.Minute) {
		rc.mu.Lock()
		rc.badSig++
		rc.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var req struct {
		Records []wireRecord `json:"records"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Records) == 0 {
		rc.t.Errorf("a call's body: %v (%q)", err, body)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.calls++
	roll := rc.rnd.Float64()
	rc.mu.Unlock()
	if rc.chaos {
		switch {
		case roll < 0.20:
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		case roll < 0.23:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		case roll < 0.25:
			<-r.Context().Done() // hang past the caller's timeout
			return
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var poison []wireRecord
	for _, rec := range req.Records {
		rc.maxCount = max(rc.maxCount, rec.DeliveryCount)
		if string(rec.Value) == `"poison"` {
			poison = append(poison, rec)
		}
	}
	if len(req.Records) == 1 && len(poison) == 1 {
		rc.rejected[recordID{poison[0].Partition, poison[0].Offset}]++
		http.Error(w, "poison", http.StatusUnprocessableEntity)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if rc.keys[key]++; rc.keys[key] > 1 {
		rc.outcomeDup++
	}
	var results []map[string]any
	for _, rec := range req.Records {
		id := recordID{rec.Partition, rec.Offset}
		if string(rec.Value) == `"poison"` {
			rc.rejected[id]++
			results = append(results, map[string]any{"topic": rec.Topic, "partition": rec.Partition, "offset": rec.Offset, "result": "reject"})
			continue
		}
		rc.accepted[id]++
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"records": results})
}

// metric reads a push counter of group from the node's registry.
func metric(t *testing.T, n *nodetest.Node, name, group, label, value string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "group", group) && (label == "" || labelIs(m, label, value)) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// withDLQ creates the dead-letter topic dlq.hooks and names it group's, with more
// group config changes when given.
func withDLQ(t *testing.T, core *broker.Broker, group string, more ...broker.ConfigChange) {
	t.Helper()
	ctx := context.Background()
	if _, err := core.CreateTopic(ctx, broker.Anonymous, broker.CreateTopicRequest{Name: "dlq.hooks", Partitions: 1,
		Configs: map[string]string{catalog.TopicDLQGroupEnable: "true"}}); err != nil {
		t.Fatal(err)
	}
	changes := append([]broker.ConfigChange{{Name: catalog.ShareDLQTopic, Op: broker.ConfigSet, Value: "dlq.hooks"}}, more...)
	if err := core.AlterGroupConfigs(ctx, broker.Anonymous, group, broker.AlterConfigsRequest{Changes: changes}); err != nil {
		t.Fatal(err)
	}
}

// serveHook serves h on loopback as a webhook for the test's length and answers its
// base URL.
func serveHook(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func labelIs(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k {
			return l.GetValue() == v
		}
	}
	return false
}

// done answers whether the share group has nothing left: every record acknowledged
// or archived.
func done(t *testing.T, core *broker.Broker, group string) bool {
	offs, err := core.ShareOffsets(context.Background(), broker.Anonymous, group)
	if err != nil {
		return false
	}
	var lag int64
	for _, o := range offs {
		lag += o.Lag
	}
	return len(offs) == 3 && lag == 0
}

func records() int {
	if os.Getenv("STRATA_LONG") == "1" {
		return 50_000
	}
	return 5_000
}

// TestDeliveryUnderChaos is the first "done when": against a webhook that
// fails a fifth of its calls with 500, throttles with 429 and Retry-After and hangs
// past the timeout, every record is accepted once or, when the webhook rejects it,
// rejected once — and no failure used up a delivery (every call carried delivery
// count 1).
func TestDeliveryUnderChaos(t *testing.T) {
	n := pushNode(t)
	total := records()
	const poisonEvery = 97
	topic, group := setup(t, n.Broker, total, poisonEvery)
	rc := newReceiver(t, true)
	hookURL := serveHook(t, rc)

	res, err := n.Broker.PutPush(context.Background(), broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: hookURL + "/hook", BatchSize: 20, Timeout: time.Second,
		Retry: catalog.PushRetry{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, PauseAfter: 100_000}}})
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.secret = res.Secret
	rc.mu.Unlock()
	start := time.Now()
	testwait.Until(t, 10*time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	t.Logf("%d records in %v", total, time.Since(start))

	poison := (total + poisonEvery - 1) / poisonEvery
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.badSig != 0 {
		t.Fatalf("%d calls failed the signature check", rc.badSig)
	}
	if got := len(rc.accepted) + len(rc.rejected); got != total || len(rc.rejected) != poison {
		t.Fatalf("the webhook saw %d records (%d rejected), want %d (%d rejected)", got, len(rc.rejected), total, poison)
	}
	if rc.maxCount != 1 {
		t.Fatalf("a record was delivered with count %d: failed calls used up deliveries", rc.maxCount)
	}
	acc := metric(t, n, "strata_push_records_total", group, "result", "accept")
	rej := metric(t, n, "strata_push_records_total", group, "result", "reject")
	if int(acc) != total-poison || int(rej) != poison {
		t.Fatalf("acknowledged %v accepted and %v rejected, want %d and %d", acc, rej, total-poison, poison)
	}
	for id, c := range rc.accepted {
		if c != 1 && rc.outcomeDup == 0 {
			t.Fatalf("record %v answered 2xx %d times without a repeated call", id, c)
		}
	}
	for _, class := range []string{"fail", "throttle"} {
		if metric(t, n, "strata_push_calls_total", group, "class", class) == 0 {
			t.Fatalf("no call was classed %s: the webhook's chaos did not happen", class)
		}
	}
}

// TestOutageUsesNoDeliveries is the issue's "a 30-second outage of the webhook
// (connection refused) dead-letters nothing": the group has a dead-letter topic and a
// delivery limit of 2, so a failed call that used up a delivery would dead-letter its
// records after the second; the webhook's listener stays closed for 30 s of wall
// time (the outage's length is what is tested), during which nothing is rejected or
// dead-lettered; once it is back every record is accepted at delivery count 1 and the
// dead-letter topic is still empty.
func TestOutageUsesNoDeliveries(t *testing.T) {
	n := pushNode(t, nodeMutate(func(c *node.Config) { c.ShareDLQInterval = 50 * time.Millisecond }))
	const total = 600
	topic, group := setup(t, n.Broker, total, 0)
	ctx := context.Background()
	withDLQ(t, n.Broker, group, broker.ConfigChange{Name: catalog.ShareDeliveryLimit, Op: broker.ConfigSet, Value: "2"})
	dlq := func() int {
		res, err := n.Broker.Fetch(ctx, broker.Anonymous, broker.FetchRequest{Topic: "dlq.hooks", Partition: 0, MaxRecords: 10, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Records)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the outage: connection refused
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: "http://" + addr + "/hook", BatchSize: 10,
		Retry: catalog.PushRetry{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, PauseAfter: 1_000_000}}}); err != nil {
		t.Fatal(err)
	}
	outage := time.Now()
	testwait.Until(t, 2*time.Minute, "30 s of outage and 50 refused calls", func() bool {
		return time.Since(outage) >= 30*time.Second && metric(t, n, "strata_push_calls_total", group, "class", "fail") >= 50
	})
	fails := metric(t, n, "strata_push_calls_total", group, "class", "fail")
	if rej := metric(t, n, "strata_push_records_total", group, "result", "reject"); rej != 0 {
		t.Fatalf("%v records rejected during the outage", rej)
	}
	offs, err := n.Broker.ShareOffsets(ctx, broker.Anonymous, group)
	if err != nil {
		t.Fatal(err)
	}
	var lag int64
	for _, o := range offs {
		lag += o.Lag
	}
	if lag != total {
		t.Fatalf("after the outage %d records wait, want all %d: some were archived or dead-lettered", lag, total)
	}
	if got := dlq(); got != 0 {
		t.Fatalf("%d records dead-lettered during the outage", got)
	}
	t.Logf("%.0f refused calls in %v of outage", fails, time.Since(outage).Round(time.Second))
	rc := newReceiver(t, false)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: rc}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	testwait.Until(t, 2*time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.accepted) != total || len(rc.rejected) != 0 || rc.maxCount != 1 {
		t.Fatalf("after the outage: %d accepted, %d rejected, highest delivery count %d; want %d, 0, 1",
			len(rc.accepted), len(rc.rejected), rc.maxCount, total)
	}
	if got := dlq(); got != 0 {
		t.Fatalf("%d records dead-lettered", got)
	}
}

// TestMisconfiguredTargetPauses: a 404 pauses the subscription with the answer in its
// status, and nothing is rejected.
func TestMisconfiguredTargetPauses(t *testing.T) {
	n := pushNode(t)
	topic, group := setup(t, n.Broker, 10, 0)
	hookURL := serveHook(t, http.NotFoundHandler())
	ctx := context.Background()
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: hookURL + "/gone"}}); err != nil {
		t.Fatal(err)
	}
	var s catalog.PushSubscription
	testwait.Until(t, time.Minute, "the subscription paused", func() bool {
		var err error
		s, err = n.Broker.Push(ctx, broker.Anonymous, group)
		return err == nil && s.Paused
	})
	if !strings.Contains(s.LastError, "HTTP 404") {
		t.Fatalf("paused with %q, want the 404 in it", s.LastError)
	}
	if rej := metric(t, n, "strata_push_records_total", group, "result", "reject"); rej != 0 {
		t.Fatalf("%v records rejected for a misconfigured target", rej)
	}
	// Resumed against a working target, everything is delivered.
	rc := newReceiver(t, false)
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: serveHook(t, rc) + "/hook"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Broker.SetPushPaused(ctx, broker.Anonymous, group, false); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	if rc.maxCount != 1 {
		t.Fatalf("delivery count %d after a pause: the 404 used up deliveries", rc.maxCount)
	}
}
