package catalogtest

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// runPush runs the conformance suite of catalog.PushSubscriptions (issue 36) and of the
// requeueing release the push role acknowledges failed calls with. open returns a
// fresh catalog for each subtest.
func runPush(t *testing.T, open func(t *testing.T) catalog.Backend) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c catalog.Backend)
	}{
		{"subscription_lifecycle", testPushLifecycle},
		{"bad_settings_change_nothing", testPushBadSettings},
		{"leases", testPushLeases},
		{"requeue_keeps_delivery_count", testPushRequeue},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func testPushLifecycle(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	if _, err := c.PushSubscription(ctx, "g"); !errors.Is(err, catalog.ErrPushNotFound) {
		t.Fatalf("read before create: %v, want ErrPushNotFound", err)
	}
	s, created, err := c.PutPushSubscription(ctx, catalog.PushSubscription{Group: "g", Topics: []string{"t"},
		URL: "https://example.com/hook", Principal: "User:alice", Secret: "s1"})
	if err != nil || !created {
		t.Fatalf("create: created %v err %v", created, err)
	}
	if s.BatchSize != catalog.DefaultPushBatchSize || s.Linger != catalog.DefaultPushLinger || s.Concurrency != catalog.DefaultPushConcurrency ||
		s.Timeout != catalog.DefaultPushTimeout || s.Secret != "s1" || s.Principal != "User:alice" || s.Paused {
		t.Fatalf("created %+v, want the defaults, the secret and the principal", s)
	}
	s2, created, err := c.PutPushSubscription(ctx, catalog.PushSubscription{Group: "g", Topics: []string{"t", "u"},
		URL: "https://example.com/other", BatchSize: 50, Principal: "User:alice", Secret: "ignored"})
	if err != nil || created {
		t.Fatalf("replace: created %v err %v", created, err)
	}
	if s2.BatchSize != 50 || len(s2.Topics) != 2 || s2.URL != "https://example.com/other" || s2.Secret != "s1" {
		t.Fatalf("replaced %+v, want the new settings and the old secret", s2)
	}
	if err := c.SetPushState(ctx, "g", false, ""); err != nil {
		t.Fatal(err)
	}
	cur, err := c.PushSubscription(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.PausePush(ctx, "g", s2.Updated, "stale"); err != nil || ok {
		t.Fatalf("a pause by a reader of older settings: ok %v err %v, want refused", ok, err)
	}
	if ok, err := c.PausePush(ctx, "g", cur.Updated, "500s"); err != nil || !ok {
		t.Fatalf("a pause by a reader of the current settings: ok %v err %v", ok, err)
	}
	if err := c.RotatePushSecret(ctx, "g", "s2"); err != nil {
		t.Fatal(err)
	}
	got, err := c.PushSubscription(ctx, "g")
	if err != nil || !got.Paused || got.LastError != "500s" || got.Secret != "s2" {
		t.Fatalf("after pause and rotation: %+v %v", got, err)
	}
	if _, _, err := c.PutPushSubscription(ctx, catalog.PushSubscription{Group: "h", Topics: []string{"t"},
		LambdaARN: "arn:aws:lambda:us-east-1:123456789012:function:f", Secret: "x"}); err != nil {
		t.Fatal(err)
	}
	list, err := c.PushSubscriptionList(ctx)
	if err != nil || len(list) != 2 || list[0].Group != "g" || list[1].Group != "h" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.DeletePushSubscription(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{c.DeletePushSubscription(ctx, "g"), c.SetPushState(ctx, "g", false, ""), c.RotatePushSecret(ctx, "g", "s")} {
		if !errors.Is(err, catalog.ErrPushNotFound) {
			t.Fatalf("after delete: %v, want ErrPushNotFound", err)
		}
	}
}

func testPushBadSettings(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	good := catalog.PushSubscription{Group: "g", Topics: []string{"t"}, URL: "https://example.com/", Secret: "s"}
	if _, _, err := c.PutPushSubscription(ctx, good); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*catalog.PushSubscription){
		"no topics":        func(s *catalog.PushSubscription) { s.Topics = nil },
		"two targets":      func(s *catalog.PushSubscription) { s.LambdaARN = "arn:aws:lambda:us-east-1:1:function:f" },
		"no target":        func(s *catalog.PushSubscription) { s.URL = "" },
		"batch too large":  func(s *catalog.PushSubscription) { s.BatchSize = catalog.MaxPushBatchSize + 1 },
		"batch negative":   func(s *catalog.PushSubscription) { s.BatchSize = -1 },
		"concurrency":      func(s *catalog.PushSubscription) { s.Concurrency = catalog.MaxPushConcurrency + 1 },
		"timeout too long": func(s *catalog.PushSubscription) { s.Timeout = time.Hour },
		"topic twice":      func(s *catalog.PushSubscription) { s.Topics = []string{"t", "t"} },
	} {
		s := good
		s.URL = "https://example.com/changed"
		mut(&s)
		if _, _, err := c.PutPushSubscription(ctx, s); !errors.Is(err, catalog.ErrInvalidPushSubscription) {
			t.Fatalf("%s: %v, want ErrInvalidPushSubscription", name, err)
		}
	}
	if got, err := c.PushSubscription(ctx, "g"); err != nil || got.URL != good.URL {
		t.Fatalf("after bad puts: %+v %v, want it unchanged", got, err)
	}
}

func testPushLeases(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	if _, ok, err := c.AcquirePushLease(ctx, "g", "a", time.Minute); err != nil || ok {
		t.Fatalf("lease of no subscription: ok %v err %v", ok, err)
	}
	if _, _, err := c.PutPushSubscription(ctx, catalog.PushSubscription{Group: "g", Topics: []string{"t"}, URL: "https://example.com/", Secret: "s"}); err != nil {
		t.Fatal(err)
	}
	a, ok, err := c.AcquirePushLease(ctx, "g", "a", time.Minute)
	if err != nil || !ok || a.Token != 1 {
		t.Fatalf("first lease: %+v ok %v err %v", a, ok, err)
	}
	if _, ok, _ := c.AcquirePushLease(ctx, "g", "b", time.Minute); ok {
		t.Fatal("b took a lease a holds")
	}
	if again, ok, _ := c.AcquirePushLease(ctx, "g", "a", time.Minute); !ok || again.Token != a.Token {
		t.Fatalf("extension: %+v ok %v, want the token kept", again, ok)
	}
	if err := c.ReleasePushLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, ok, err := c.AcquirePushLease(ctx, "g", "b", time.Millisecond)
	if err != nil || !ok || b.Token != 2 {
		t.Fatalf("after release: %+v ok %v err %v, want token 2", b, ok, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a2, ok, err := c.AcquirePushLease(ctx, "g", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if a2.Token != 3 {
				t.Fatalf("takeover of an expired lease: token %d, want 3", a2.Token)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an expired lease was never taken over")
		}
	}
	if err := c.ReleasePushLease(ctx, b); err != nil { // stale: changes nothing
		t.Fatal(err)
	}
	if _, ok, _ := c.AcquirePushLease(ctx, "g", "b", time.Minute); ok {
		t.Fatal("a stale release freed the new holder's lease")
	}
}

// testPushRequeue: a release with Requeue gives back the delivery it counted, so
// releases that way never reach the delivery limit; a plain release still does.
func testPushRequeue(t *testing.T, c catalog.Backend) {
	tp, g := shareSetup(t, c, 1, 2, "a")
	const limit = 2
	for i := 0; i < 2*limit; i++ {
		got := acquire(t, c, g, "a", tp.Name, acquireOpt{limit: limit, max: 1})
		wantRanges(t, "requeued delivery", got, [3]int64{0, 0, 1})
		res, err := c.ShareAcknowledge(t.Context(), catalog.ShareAck{Group: g, MemberID: "a", DeliveryLimit: limit, Requeue: true,
			Partitions: []catalog.ShareAckPartition{{ShareTP: catalog.ShareTP{Topic: tp.Name}, Batches: []catalog.AckBatch{
				{First: 0, Last: 0, Types: []int8{catalog.AckRelease}, DeliveryCount: 1}}}}})
		if err != nil || res[0] != nil {
			t.Fatalf("requeue %d: %v %v", i, err, res)
		}
	}
	if s := sharePartition(t, c, g); s.StartOffset != 0 || s.Archived != 0 {
		t.Fatalf("after requeues: %+v, want nothing archived", s)
	}
	for i := 1; i <= limit; i++ {
		wantRanges(t, "counted delivery", acquire(t, c, g, "a", tp.Name, acquireOpt{limit: limit, max: 1}), [3]int64{0, 0, int64(i)})
		if err := ack(c, t.Context(), g, "a", tp.Name, limit, batch(0, 0, catalog.AckRelease)); err != nil {
			t.Fatal(err)
		}
	}
	if s := sharePartition(t, c, g); s.StartOffset != 1 {
		t.Fatalf("after %d counted releases: %+v, want offset 0 archived", limit, s)
	}
}
