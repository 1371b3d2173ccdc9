package push_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestTimeoutBelowLock: a subscription whose timeout plus linger is not below the
// group's lock duration is refused with the rule push_timeout_lock, and so is a lock
// duration lowered to a subscription's; neither refusal changes the subscription or
// the group's configs.
func TestTimeoutBelowLock(t *testing.T) {
	n := pushNode(t)
	topic, group := setup(t, n.Broker, 1, 0)
	ctx := context.Background()
	wantRule := func(what string, err error) {
		t.Helper()
		var be *broker.Error
		if !errors.As(err, &be) || be.Code != broker.CodeInvalidConfig || be.Details["rule"] != broker.PushLockRule {
			t.Fatalf("%s: %v, want invalid_config with rule %s", what, err, broker.PushLockRule)
		}
	}
	configs := func() map[string]string {
		c, _, err := n.Broker.GroupConfigs(ctx, broker.Anonymous, group)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sub := catalog.PushSubscription{Group: group, Topics: []string{topic}, URL: "http://127.0.0.1:1/hook"}
	if err := n.Broker.AlterGroupConfigs(ctx, broker.Anonymous, group, broker.AlterConfigsRequest{Changes: []broker.ConfigChange{
		{Name: catalog.ShareLockDurationMs, Op: broker.ConfigSet, Value: "5000"}}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		timeout, linger time.Duration
	}{{5 * time.Second, 0}, {4950 * time.Millisecond, 50 * time.Millisecond}, {10 * time.Second, 0}} {
		s := sub
		s.Timeout, s.Linger = bad.timeout, bad.linger
		if s.Linger == 0 {
			s.Linger = time.Millisecond
		}
		_, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: s})
		wantRule("timeout "+bad.timeout.String(), err)
		if _, err := n.Broker.Push(ctx, broker.Anonymous, group); !errors.Is(err, catalog.ErrPushNotFound) {
			t.Fatalf("after a refused subscription: %v, want none", err)
		}
	}
	sub.Timeout, sub.Linger = 4*time.Second, 100*time.Millisecond
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: sub}); err != nil {
		t.Fatal(err)
	}
	before, _ := n.Broker.Push(ctx, broker.Anonymous, group)
	was := configs()
	err := n.Broker.AlterGroupConfigs(ctx, broker.Anonymous, group, broker.AlterConfigsRequest{Changes: []broker.ConfigChange{
		{Name: catalog.ShareLockDurationMs, Op: broker.ConfigSet, Value: "4100"}}})
	wantRule("lowering the lock to the call's 4.1 s", err)
	if now := configs(); !reflect.DeepEqual(now, was) {
		t.Fatalf("a refused lock change changed the configs: %v, was %v", now, was)
	}
	if after, _ := n.Broker.Push(ctx, broker.Anonymous, group); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused lock change changed the subscription: %+v, was %+v", after, before)
	}
	// Above the call's time it is allowed.
	if err := n.Broker.AlterGroupConfigs(ctx, broker.Anonymous, group, broker.AlterConfigsRequest{Changes: []broker.ConfigChange{
		{Name: catalog.ShareLockDurationMs, Op: broker.ConfigSet, Value: "4101"}}}); err != nil {
		t.Fatal(err)
	}
}

// TestCallCutAtLock: a subscription whose group's lock was lowered under its timeout
// behind the rule's back (the catalog written directly, as a subscription older than
// the rule would be) still never calls past its records' lock: a webhook that hangs
// has its calls cut before the lock passes, the records come back at delivery count 1
// (released without using up a delivery, never expired to another member mid-call),
// and no acknowledgement is refused.
func TestCallCutAtLock(t *testing.T) {
	n := pushNode(t)
	const total = 30
	topic, group := setup(t, n.Broker, total, 0)
	ctx := context.Background()
	var mu sync.Mutex
	hangs, longest := 0, time.Duration(0)
	var maxCount int16
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Records []wireRecord `json:"records"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		for _, rec := range req.Records {
			maxCount = max(maxCount, rec.DeliveryCount)
		}
		hang := hangs < 10
		hangs++
		mu.Unlock()
		if !hang {
			return
		}
		start := time.Now()
		<-r.Context().Done()
		mu.Lock()
		longest = max(longest, time.Since(start))
		mu.Unlock()
	})
	hookURL := serveHook(t, hook)
	configs, err := n.Catalog.GroupConfigs(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	configs[catalog.ShareLockDurationMs] = "1500"
	if err := n.Catalog.SetGroupConfigs(ctx, group, configs); err != nil {
		t.Fatal(err)
	}
	// Written straight to the catalog too: the broker would refuse a 5 s timeout.
	if _, _, err := n.Catalog.PutPushSubscription(ctx, catalog.PushSubscription{Group: group, Topics: []string{topic},
		URL: hookURL + "/hook", Timeout: 5 * time.Second, Concurrency: 4, Principal: "User:ANONYMOUS",
		Secret: "whsec_test", Retry: catalog.PushRetry{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, PauseAfter: 1000}}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	mu.Lock()
	defer mu.Unlock()
	if hangs < 10 {
		t.Fatalf("only %d calls: the webhook's hangs did not all happen", hangs)
	}
	if longest >= 1500*time.Millisecond || maxCount != 1 {
		t.Fatalf("the longest hung call lasted %v (lock 1.5 s) and the highest delivery count was %d: want under the lock and 1", longest, maxCount)
	}
	if e := metric(t, n, "strata_push_ack_errors_total", group, "", ""); e != 0 {
		t.Fatalf("%v acknowledgements refused: a lock passed mid-call", e)
	}
}
