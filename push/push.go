// Package push is the push role (issue 36): it hands the records of share groups with
// a push subscription to a webhook (or an AWS Lambda function), and acknowledges them
// by the answer. Any node can run it; each subscription is leased to one node at a
// time (catalog.PushSubscriptions' lease, with a fencing token), and moves to another
// when its holder stops renewing. Records are acquired through the broker core as the
// principal that wrote the subscription, so its ACLs are checked at each acquisition.
//
// Answers and what they do (docs in README.md "Push delivery"):
//   - 2xx: accepted — unless the body names records to reject or release one by one
//     ({"records":[{"topic":T,"partition":N,"offset":N,"result":"reject","reason":R}]});
//   - 400, 422: rejected (dead-lettered by the group's config, where it has one, with
//     the answer's status and body excerpt — or a per-record reject's reason — in the
//     copy's headers);
//   - 408, 429, 503: released without using up a delivery, the next call waits
//     Retry-After;
//   - 401, 403, 404, 410: released, and the subscription pauses with the error;
//   - other 5xx, connection errors, timeouts: released without using up a delivery,
//     with exponential backoff; Retry.PauseAfter of them in a row pause it.
package push

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/push/egress"
)

// Core is what the role asks of the broker core.
type Core interface {
	ShareRecords(ctx context.Context, who broker.Principal, req broker.ShareRecordsRequest) (broker.ShareRecordsResult, error)
	PushAckAcquisitions(ctx context.Context, who broker.Principal, group, member string, acks []broker.ShareAcquisitionAck, requeue bool) error
	LeaveShareGroup(ctx context.Context, who broker.Principal, group, member string) error
	ShareOffsets(ctx context.Context, who broker.Principal, group string) ([]catalog.ShareOffset, error)
	Fetch(ctx context.Context, who broker.Principal, req broker.FetchRequest) (broker.FetchResult, error)
}

// Store is the part of the catalog the role reads subscriptions and leases from.
type Store interface {
	PushSubscriptionList(ctx context.Context) ([]catalog.PushSubscription, error)
	PausePush(ctx context.Context, group string, seen time.Time, lastError string) (bool, error)
	AcquirePushLease(ctx context.Context, group, holder string, ttl time.Duration) (catalog.PushLease, bool, error)
	ReleasePushLease(ctx context.Context, l catalog.PushLease) error
}

// Config tunes the role.
type Config struct {
	// Holder names this node in leases (and the share members it acquires as).
	Holder string
	// LeaseTTL is how long a lease lasts unrenewed: how soon another node takes a
	// subscription over after this one dies. Default 15s.
	LeaseTTL time.Duration
	// Scan is how often subscriptions are listed and leases renewed; default LeaseTTL/3.
	Scan time.Duration
	// Egress is the outbound policy every call is dialled under.
	Egress *egress.Policy
	// Lambda invokes Lambda targets; nil: they pause with an error.
	Lambda Invoker
	// Registerer takes the role's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Invoker invokes an AWS Lambda function with a payload: its status, its answer and,
// when the function failed, its error (FunctionError).
type Invoker interface {
	Invoke(ctx context.Context, arn string, payload []byte) (status int, answer []byte, functionError string, err error)
}

// Role is the push role. Run runs it.
type Role struct {
	core    Core
	store   Store
	cfg     Config
	log     *slog.Logger
	m       *metrics
	targets *targets
}

// New builds the role.
func New(core Core, store Store, cfg Config, log *slog.Logger) *Role {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.Scan <= 0 {
		cfg.Scan = cfg.LeaseTTL / 3
	}
	if cfg.Holder == "" {
		cfg.Holder = fmt.Sprintf("push-%08x", rand.Uint32())
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Role{core: core, store: store, cfg: cfg, log: log.With("role", "push"), m: newMetrics(cfg.Registerer),
		targets: newTargets(cfg.Egress, cfg.Lambda)}
}

// running is a subscription this node delivers: its lease, the settings it started
// with, and how to stop it.
type running struct {
	lease   catalog.PushLease
	updated time.Time
	cancel  context.CancelFunc
	done    chan struct{}
}

// Run leases and delivers subscriptions until ctx ends, then stops every delivery
// and releases its leases.
func (r *Role) Run(ctx context.Context) error {
	held := map[string]*running{}
	stop := func(group string, release bool) {
		h := held[group]
		h.cancel()
		<-h.done
		delete(held, group)
		// The gauges are the holder's: another node (or none, paused) reports them now.
		r.m.backlog.DeleteLabelValues(group)
		r.m.oldest.DeleteLabelValues(group)
		if release {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := r.store.ReleasePushLease(rctx, h.lease); err != nil {
				r.log.Warn("push: release lease", "group", group, "err", err)
			}
			cancel()
		}
	}
	defer func() {
		for g := range held {
			stop(g, true)
		}
	}()
	t := time.NewTicker(r.cfg.Scan)
	defer t.Stop()
	for {
		r.scan(ctx, held, stop)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scan lists the subscriptions once: leases (or renews the leases of) the active ones,
// starts delivering those newly held and stops those lost, paused, deleted or changed.
func (r *Role) scan(ctx context.Context, held map[string]*running, stop func(string, bool)) {
	subs, err := r.store.PushSubscriptionList(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("push: list subscriptions", "err", err)
		}
		return
	}
	seen := map[string]bool{}
	for _, s := range subs {
		seen[s.Group] = true
		h := held[s.Group]
		if s.Paused {
			if h != nil {
				stop(s.Group, true)
			}
			continue
		}
		l, ok, err := r.store.AcquirePushLease(ctx, s.Group, r.cfg.Holder, r.cfg.LeaseTTL)
		if err != nil {
			r.log.Warn("push: lease", "group", s.Group, "err", err)
			continue // a renewal that failed: keep going until the lease is lost for sure
		}
		if h != nil && (!ok || l.Token != h.lease.Token || !s.Updated.Equal(h.updated)) {
			stop(s.Group, ok && l.Token == h.lease.Token)
			h = nil
			if ok {
				// Changed settings: restart under the same lease.
				l, ok, err = r.store.AcquirePushLease(ctx, s.Group, r.cfg.Holder, r.cfg.LeaseTTL)
				if err != nil || !ok {
					continue
				}
			}
		}
		if !ok || h != nil {
			if ok {
				r.backlog(ctx, s)
			}
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		h = &running{lease: l, updated: s.Updated, cancel: cancel, done: make(chan struct{})}
		held[s.Group] = h
		r.log.Info("push: delivering", "group", s.Group, "token", l.Token, "target", s.URL+s.LambdaARN)
		go func() {
			defer close(h.done)
			r.deliver(sctx, s)
		}()
	}
	for g := range held {
		if !seen[g] {
			stop(g, false)
		}
	}
}

// backlog sets the backlog gauges of a subscription this node holds: the records not
// yet done, and the age of the oldest of them — the record at the start offset of
// each of its share-partitions with a backlog (one read of one record each), by its
// timestamp. A partition whose read fails counts as no age rather than a stale one.
func (r *Role) backlog(ctx context.Context, s catalog.PushSubscription) {
	who := broker.Principal{Name: s.Principal}
	offs, err := r.core.ShareOffsets(ctx, who, s.Group)
	if err != nil {
		return
	}
	var lag int64
	oldest := time.Duration(0)
	for _, o := range offs {
		lag += o.Lag
		if o.Lag <= 0 || !slices.Contains(s.Topics, o.Topic) {
			continue
		}
		res, err := r.core.Fetch(ctx, who, broker.FetchRequest{Topic: o.Topic, Partition: o.Partition, Offset: o.StartOffset,
			MaxRecords: 1, MaxBytes: 1 << 20})
		if err != nil || len(res.Records) == 0 {
			continue
		}
		oldest = max(oldest, time.Since(time.UnixMilli(res.Records[0].Timestamp)))
	}
	r.m.backlog.WithLabelValues(s.Group).Set(float64(lag))
	r.m.oldest.WithLabelValues(s.Group).Set(oldest.Seconds())
}

// sub is one subscription's delivery: its workers share the backoff and the run of
// failures.
type sub struct {
	r   *Role
	s   catalog.PushSubscription
	who broker.Principal
	// stop ends the delivery (a pause).
	stop   context.CancelFunc
	paused sync.Once

	mu        sync.Mutex
	notBefore time.Time
	failures  int // calls in a row that got no answer
}

// deliver runs s's workers until ctx ends or the subscription pauses, then leaves
// the share group with their members (what they held is released).
func (r *Role) deliver(ctx context.Context, s catalog.PushSubscription) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &sub{r: r, s: s, who: broker.Principal{Name: s.Principal}, stop: cancel}
	var wg sync.WaitGroup
	for i := range s.Concurrency {
		member := fmt.Sprintf("push-%s-%d", r.cfg.Holder, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.worker(ctx, member)
			lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer lcancel()
			if err := r.core.LeaveShareGroup(lctx, d.who, s.Group, member); err != nil {
				r.log.Debug("push: leave", "group", s.Group, "member", member, "err", err)
			}
		}()
	}
	wg.Wait()
}

// wait waits out the subscription's backoff.
func (d *sub) wait(ctx context.Context) error {
	d.mu.Lock()
	until := d.notBefore
	d.mu.Unlock()
	if dt := time.Until(until); dt > 0 {
		t := time.NewTimer(dt)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return ctx.Err()
}

// pause pauses the subscription with why, once, and stops its delivery. The pause
// is refused when the subscription changed since this delivery read it (a resume,
// new settings): the next scan delivers it as it is now.
func (d *sub) pause(ctx context.Context, why string) {
	d.paused.Do(func() {
		ok, err := d.r.store.PausePush(context.WithoutCancel(ctx), d.s.Group, d.s.Updated, why)
		if err != nil {
			d.r.log.Error("push: pause", "group", d.s.Group, "err", err)
		}
		if ok {
			d.r.m.pauses.WithLabelValues(d.s.Group).Inc()
			d.r.log.Warn("push: paused", "group", d.s.Group, "reason", why)
		}
		d.stop()
	})
}

// failed notes a call that got no answer: backoff doubles from MinBackoff (with
// jitter) to MaxBackoff; the PauseAfter'th in a row pauses.
func (d *sub) failed(ctx context.Context, why string) {
	d.mu.Lock()
	d.failures++
	n := d.failures
	back := d.s.Retry.MinBackoff << min(n-1, 30)
	if back <= 0 || back > d.s.Retry.MaxBackoff {
		back = d.s.Retry.MaxBackoff
	}
	back = back/2 + rand.N(back/2+1)
	if t := time.Now().Add(back); t.After(d.notBefore) {
		d.notBefore = t
	}
	d.mu.Unlock()
	if n >= d.s.Retry.PauseAfter {
		d.pause(ctx, fmt.Sprintf("%d calls in a row failed; the last: %s", n, why))
	}
}

// throttled notes an answer asking to wait (Retry-After, bounded by MaxBackoff).
func (d *sub) throttled(after time.Duration) {
	if after <= 0 {
		after = d.s.Retry.MinBackoff
	}
	after = min(after, d.s.Retry.MaxBackoff)
	d.mu.Lock()
	if t := time.Now().Add(after); t.After(d.notBefore) {
		d.notBefore = t
	}
	d.mu.Unlock()
}

func (d *sub) succeeded() {
	d.mu.Lock()
	d.failures = 0
	d.mu.Unlock()
}

// worker acquires batches and delivers them, one call at a time.
func (d *sub) worker(ctx context.Context, member string) {
	for ctx.Err() == nil {
		if d.wait(ctx) != nil {
			return
		}
		b, err := d.acquire(ctx, member)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var be *broker.Error
			if errors.As(err, &be) && !be.Retriable() && be.Code != broker.CodeUnknownMember {
				d.pause(ctx, "acquiring records: "+be.Error())
				return
			}
			d.r.log.Warn("push: acquire", "group", d.s.Group, "err", err)
			d.failed(ctx, "acquiring records: "+err.Error())
			continue
		}
		if b.empty() {
			continue
		}
		d.call(ctx, member, b)
	}
}

// acquire acquires up to a batch: waiting up to a second for a first record, then,
// when the batch is not full and the subscription lingers, once more after the
// linger for the rest.
func (d *sub) acquire(ctx context.Context, member string) (*batch, error) {
	b := &batch{}
	start := time.Now()
	res, err := d.r.core.ShareRecords(ctx, d.who, broker.ShareRecordsRequest{Group: d.s.Group, MemberID: member,
		Topics: d.s.Topics, MaxRecords: d.s.BatchSize, Wait: time.Second})
	if err != nil {
		return nil, err
	}
	b.add(start, res)
	if n := b.len(); n == 0 || n >= d.s.BatchSize || d.s.Linger <= 0 {
		return b, nil
	}
	t := time.NewTimer(d.s.Linger)
	select {
	case <-ctx.Done():
		t.Stop()
	case <-t.C:
	}
	start = time.Now()
	res, err = d.r.core.ShareRecords(ctx, d.who, broker.ShareRecordsRequest{Group: d.s.Group, MemberID: member,
		Topics: d.s.Topics, MaxRecords: d.s.BatchSize - b.len()})
	if err == nil {
		b.add(start, res)
	}
	return b, nil // the first acquisition's records go out regardless
}
