package push_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
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
