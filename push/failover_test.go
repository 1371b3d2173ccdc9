package push_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/push"
	"github.com/strata-io/strata/push/egress"
)

var errKilled = errors.New("killed")

// killableCore is a role's way to the core that, once killed, answers nothing: the
// acknowledgements, leaves and acquisitions of a process that was SIGKILLed.
type killableCore struct {
	push.Core
	dead *atomic.Bool
}

func (k killableCore) ShareRecords(ctx context.Context, who broker.Principal, req broker.ShareRecordsRequest) (broker.ShareRecordsResult, error) {
	if k.dead.Load() {
		return broker.ShareRecordsResult{}, errKilled
	}
	return k.Core.ShareRecords(ctx, who, req)
}

func (k killableCore) PushAckAcquisitions(ctx context.Context, who broker.Principal, group, member string, acks []broker.ShareAcquisitionAck, requeue bool) error {
	if k.dead.Load() {
		return errKilled
	}
	return k.Core.PushAckAcquisitions(ctx, who, group, member, acks, requeue)
}

func (k killableCore) LeaveShareGroup(ctx context.Context, who broker.Principal, group, member string) error {
	if k.dead.Load() {
		return errKilled
	}
	return k.Core.LeaveShareGroup(ctx, who, group, member)
}

// killableStore is the same for the catalog: a killed role's lease is never released.
type killableStore struct {
	push.Store
	dead *atomic.Bool
}

func (k killableStore) AcquirePushLease(ctx context.Context, group, holder string, ttl time.Duration) (catalog.PushLease, bool, error) {
	if k.dead.Load() {
		return catalog.PushLease{}, false, errKilled
	}
	return k.Store.AcquirePushLease(ctx, group, holder, ttl)
}

func (k killableStore) ReleasePushLease(ctx context.Context, l catalog.PushLease) error {
	if k.dead.Load() {
		return errKilled
	}
	return k.Store.ReleasePushLease(ctx, l)
}

// TestLeaseFailover: the role holding a subscription dies mid-run (it acknowledges,
// leaves and releases nothing more); the other takes the subscription over within
// the lease time, and every record is still accepted exactly once.
func TestLeaseFailover(t *testing.T) {
	n := nodetest.Start(t, nodetest.Mutate(func(c *node.Config) {
		c.PushConfig = node.PushConfig{Allow: []string{"127.0.0.0/8"}, AllowInsecure: true}
	}))
	const total = 3000
	topic, group := setup(t, n.Broker, total, 0)
	ctx := context.Background()
	// Records held by the dead role come back at their lock's end.
	if err := n.Broker.AlterGroupConfigs(ctx, broker.Anonymous, group, broker.AlterConfigsRequest{Changes: []broker.ConfigChange{
		{Name: catalog.ShareAutoOffsetReset, Op: broker.ConfigSet, Value: "earliest"},
		{Name: catalog.ShareLockDurationMs, Op: broker.ConfigSet, Value: "2000"}}}); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, false)
	hookURL := serveHook(t, rc)
	if _, err := n.Broker.PutPush(ctx, broker.Anonymous, broker.PushRequest{PushSubscription: catalog.PushSubscription{
		Group: group, Topics: []string{topic}, URL: hookURL + "/", Concurrency: 2,
		Timeout: time.Second}}); err != nil { // below the 2 s lock
		t.Fatal(err)
	}
	policy, err := egress.Parse([]string{"127.0.0.0/8"}, true)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	type role struct {
		dead   atomic.Bool
		reg    *prometheus.Registry
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(holder string) *role {
		r := &role{reg: prometheus.NewRegistry(), done: make(chan struct{})}
		pr := push.New(killableCore{n.Broker, &r.dead}, killableStore{n.Catalog, &r.dead},
			push.Config{Holder: holder, LeaseTTL: ttl, Egress: policy, Registerer: r.reg}, slog.New(slog.DiscardHandler))
		rctx, cancel := context.WithCancel(ctx)
		r.cancel = cancel
		go func() { defer close(r.done); _ = pr.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	accepted := func(r *role) float64 {
		return testutil.ToFloat64(pushRecords(t, r.reg, group, "accept"))
	}
	a := start("a")
	testwait.Until(t, time.Minute, "a to deliver", func() bool { return accepted(a) >= 200 })
	b := start("b")
	a.dead.Store(true) // SIGKILL: from now on a acknowledges, leaves and releases nothing
	killed := time.Now()
	a.cancel()
	<-a.done
	testwait.Until(t, time.Minute, "b to take over", func() bool { return accepted(b) > 0 })
	if took := time.Since(killed); took > 3*ttl {
		t.Fatalf("b took over %v after a died; the lease is %v", took, ttl)
	}
	testwait.Until(t, 2*time.Minute, "every record done", func() bool { return done(t, n.Broker, group) })
	if got := accepted(a) + accepted(b); int(got) != total {
		t.Fatalf("%v records accepted (a %v, b %v), want each of %d once", got, accepted(a), accepted(b), total)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.accepted) != total {
		t.Fatalf("the webhook saw %d records, want %d", len(rc.accepted), total)
	}
}

// pushRecords finds strata_push_records_total{group,result} in reg.
func pushRecords(t *testing.T, reg *prometheus.Registry, group, result string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var v float64
		for _, mf := range mfs {
			if mf.GetName() != "strata_push_records_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if labelIs(m, "group", group) && labelIs(m, "result", result) {
					v += m.GetCounter().GetValue()
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("x", "x", nil, nil), prometheus.CounterValue, v)
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc("x", "x", nil, nil)
}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }
