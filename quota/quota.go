// Package quota is a node's enforcement of the catalog's client quotas (catalog.Quotas):
// Kafka's byte rates, request-time share and controller mutation rate per user and
// client id, resolved in Kafka's precedence order, measured over a sliding window
// (Meter) and answered as a throttle time — how long the caller must pause for its
// rate to come back to its quota — and Strata's caps per principal, which the catalog
// checks in the creation's own transaction. The rules are here once; the broker core
// calls them for every front end, and each front end only says the answer in its own
// terms (Kafka: throttle_time_ms and a muted connection; HTTP: a delayed answer or 429).
//
// Each node enforces a quota divided by the number of live nodes (the node registry),
// so a client spread over N nodes gets about its quota in total; Kafka's quotas are per
// broker instead. The view follows the catalog as keys and ACLs do: refreshed on the
// security notifications, with the security version polled as the fallback.
//
// The meters (Meter, Meters) are the one counting mechanism for usage too: a set keyed
// by whatever is counted (principals here; topics for per-topic usage), added to once
// per request or flush.
package quota

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/catalog"
)

// Kind is what a rate quota meters.
type Kind int

// The metered kinds.
const (
	Produce  Kind = iota // bytes produced: producer_byte_rate
	Fetch                // bytes fetched: consumer_byte_rate
	Request              // handler wall time in ns: request_percentage
	Mutation             // partitions created or deleted: controller_mutation_rate
	numKinds
)

var kindKeys = [numKinds]string{catalog.QuotaProducerByteRate, catalog.QuotaConsumerByteRate, catalog.QuotaRequestPercentage, catalog.QuotaControllerMutationRate}
var kindNames = [numKinds]string{"produce", "fetch", "request", "mutation"}

func (k Kind) String() string { return kindNames[k] }

// Anonymous is the user quotas name a caller without identity by, as Kafka does.
const Anonymous = "User:ANONYMOUS"

// Catalog is what the enforcer reads (catalog.Backend has it).
type Catalog interface {
	QuotaEntries(ctx context.Context) ([]catalog.QuotaEntry, error)
	SecurityVersion(ctx context.Context) (int64, time.Time, error)
	WatchSecurity(ctx context.Context, fn func()) error
}

// Nodes counts the live nodes a quota is shared by (catalog.Cluster has it).
type Nodes interface {
	LiveNodes(ctx context.Context) ([]catalog.Node, error)
}

// Config configures an Enforcer.
type Config struct {
	// Window is the sliding window rates are measured over; default DefaultWindow.
	Window Window
	// PollInterval bounds how stale the view may get when notifications are lost;
	// default 250ms.
	PollInterval time.Duration
	// NodesInterval is how often the live node count is read; default 2s.
	NodesInterval time.Duration
	// MaxDelay bounds how long an HTTP answer is held back for its caller's quota;
	// owing more, the caller is refused with a retry time. Default 1s.
	MaxDelay time.Duration
	// Now is the clock; nil: time.Now.
	Now        func() time.Time
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Enforcer is a node's quota view and meters. Its methods are safe for concurrent use;
// a nil *Enforcer enforces nothing.
type Enforcer struct {
	cfg   Config
	cat   Catalog
	nodes Nodes
	log   *slog.Logger
	now   func() time.Time

	view    atomic.Pointer[view]
	live    atomic.Int64 // live nodes, at least 1
	refresh sync.Mutex

	mu      sync.RWMutex
	callers map[callerKey]*caller
	meters  *Meters[meterKey]

	bytes, throttle, refusals *prometheus.CounterVec
}

type view struct {
	version int64
	values  map[catalog.QuotaEntity]map[string]float64
}

type callerKey struct{ user, client string }

type meterKey struct {
	kind         Kind
	user, client string
}

// caller is a (user, client id)'s resolved limits, for the view it was resolved in.
type caller struct {
	view   *view
	limits [numKinds]limit
	bytes  [numKinds]prometheus.Counter
	thr    [numKinds]prometheus.Counter
}

type limit struct {
	value float64 // per second, whole cluster; 0: none
	meter *Meter
}

// New returns an enforcer over cat (nil: no quotas) and nodes (nil: one node).
func New(cfg Config, cat Catalog, nodes Nodes) *Enforcer {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.NodesInterval <= 0 {
		cfg.NodesInterval = 2 * time.Second
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = time.Second
	}
	cfg.Window = cfg.Window.orDefault()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Enforcer{cfg: cfg, cat: cat, nodes: nodes, log: log.With("component", "quota"), now: cfg.Now,
		callers: map[callerKey]*caller{}, meters: NewMeters[meterKey](cfg.Window),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_quota_bytes_total",
			Help: "Bytes produced and fetched, by principal (kind: produce, fetch)."}, []string{"principal", "kind"}),
		throttle: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_quota_throttle_seconds_total",
			Help: "Throttle time answered to callers over a quota, by principal and kind (produce, fetch, request, mutation)."}, []string{"principal", "kind"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_quota_refusals_total",
			Help: "Requests refused for a quota, by principal and kind (produce, fetch: an HTTP caller owing more than the bounded delay; mutation; topic_count; connector_count)."}, []string{"principal", "kind"}),
	}
	e.view.Store(&view{version: -1})
	e.live.Store(1)
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{e.bytes, e.throttle, e.refusals} {
			if err := cfg.Registerer.Register(c); err != nil {
				e.log.Warn("register quota metrics", "err", err)
			}
		}
	}
	return e
}

// Set replaces the view with entries (what Refresh reads; tests call it directly).
func (e *Enforcer) Set(version int64, entries []catalog.QuotaEntry) {
	v := &view{version: version, values: make(map[catalog.QuotaEntity]map[string]float64, len(entries))}
	for _, en := range entries {
		v.values[en.Entity] = en.Values
	}
	e.view.Store(v)
}

// SetLiveNodes sets the node count quotas are divided by (Run reads it from the
// registry).
func (e *Enforcer) SetLiveNodes(n int) { e.live.Store(int64(max(n, 1))) }

// LiveNodes is the node count quotas are divided by.
func (e *Enforcer) LiveNodes() int {
	if e == nil {
		return 1
	}
	return int(e.live.Load())
}

// Refresh reads the quotas from the catalog now.
func (e *Enforcer) Refresh(ctx context.Context) error {
	if e == nil || e.cat == nil {
		return nil
	}
	e.refresh.Lock()
	defer e.refresh.Unlock()
	return e.load(ctx, -1)
}

func (e *Enforcer) load(ctx context.Context, known int64) error {
	version, _, err := e.cat.SecurityVersion(ctx)
	if err != nil || version == known {
		return err
	}
	entries, err := e.cat.QuotaEntries(ctx)
	if err != nil {
		return err
	}
	e.Set(version, entries)
	return nil
}

func (e *Enforcer) countNodes(ctx context.Context) {
	if e.nodes == nil {
		return
	}
	ns, err := e.nodes.LiveNodes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Debug("count live nodes", "err", err)
		}
		return
	}
	e.SetLiveNodes(len(ns))
}

// Run keeps the view and the live node count fresh until ctx ends: the view on every
// security notification and every PollInterval (when the version moved), the node
// count every NodesInterval. It returns nil when ctx ends.
func (e *Enforcer) Run(ctx context.Context) error {
	if e == nil || e.cat == nil {
		<-ctx.Done()
		return nil
	}
	changed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	wg.Go(func() {
		err := e.cat.WatchSecurity(watchCtx, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
		if err != nil && watchCtx.Err() == nil {
			e.log.Warn("quota notifications ended; polling only", "err", err)
		}
	})
	e.countNodes(ctx)
	poll := time.NewTicker(e.cfg.PollInterval)
	defer poll.Stop()
	nodes := time.NewTicker(e.cfg.NodesInterval)
	defer nodes.Stop()
	for {
		known := e.view.Load().version
		select {
		case <-ctx.Done():
			return nil
		case <-nodes.C:
			e.countNodes(ctx)
			continue
		case <-changed:
			known = -1
		case <-poll.C:
		}
		e.refresh.Lock()
		err := e.load(ctx, known)
		e.refresh.Unlock()
		if err != nil && ctx.Err() == nil {
			e.log.Warn("refresh quotas: keeping the last view", "err", err)
		}
	}
}

// Resolve answers key's value for (user, clientID) and the entity it comes from, by
// Kafka's precedence; ok false when no entity sets it.
func Resolve(values map[catalog.QuotaEntity]map[string]float64, user, clientID, key string) (float64, catalog.QuotaEntity, bool) {
	if len(values) == 0 {
		return 0, catalog.QuotaEntity{}, false
	}
	for _, en := range catalog.ResolveOrder(user, clientID) {
		if v, ok := values[en][key]; ok {
			return v, en, true
		}
	}
	return 0, catalog.QuotaEntity{}, false
}

func userOf(principal string) string {
	if principal == "" {
		return Anonymous
	}
	return principal
}

// callerFor returns (user, clientID)'s limits under the current view.
func (e *Enforcer) callerFor(user, clientID string) *caller {
	v := e.view.Load()
	k := callerKey{user, clientID}
	e.mu.RLock()
	c := e.callers[k]
	e.mu.RUnlock()
	if c != nil && c.view == v {
		return c
	}
	c = &caller{view: v}
	for kind := Kind(0); kind < numKinds; kind++ {
		c.bytes[kind] = e.bytes.WithLabelValues(user, kind.String())
		c.thr[kind] = e.throttle.WithLabelValues(user, kind.String())
		val, en, ok := Resolve(v.values, user, clientID, kindKeys[kind])
		if !ok {
			continue
		}
		// The meter is the matched entity's: a quota on a user is shared by all its
		// client ids; a default applies to each user (or client id) apart, as Kafka's.
		mk := meterKey{kind: kind}
		if en.User != "" {
			mk.user = user
		}
		if en.ClientID != "" {
			mk.client = clientID
		}
		c.limits[kind] = limit{value: val, meter: e.meters.Get(mk)}
	}
	e.mu.Lock()
	if len(e.callers) >= maxCallers {
		// Client ids are the clients' to choose: the cache is dropped rather than let
		// grow without bound (the meters stay; only resolutions are redone).
		clear(e.callers)
	}
	e.callers[k] = c
	e.mu.Unlock()
	return c
}

// maxCallers bounds the cache of resolved callers.
const maxCallers = 1 << 16

// maxThrottle bounds a throttle time, as Kafka bounds it by its window.
func (e *Enforcer) maxThrottle() time.Duration {
	return time.Duration(e.cfg.Window.Slots) * e.cfg.Window.Slot
}

// nodeLimit is a cluster-wide limit's share on this node.
func (e *Enforcer) nodeLimit(l limit) float64 { return l.value / float64(e.live.Load()) }

// Record counts n of kind (bytes; ns of handler time for Request) for principal and
// clientID — once per request — and answers how long the caller must now pause to
// keep to its quota (0 when it has none or is within it).
func (e *Enforcer) Record(kind Kind, principal, clientID string, n int64) time.Duration {
	if e == nil || n <= 0 {
		return 0
	}
	c := e.callerFor(userOf(principal), clientID)
	if kind == Produce || kind == Fetch {
		c.bytes[kind].Add(float64(n))
	}
	l := c.limits[kind]
	if l.meter == nil {
		return 0
	}
	now := e.now()
	l.meter.Add(now, n)
	lim := e.nodeLimit(l)
	if kind == Request {
		lim = lim / 100 * float64(time.Second) // percent of one handler's time, in ns per second
	}
	d := min(l.meter.Delay(now, lim), e.maxThrottle())
	if d > 0 {
		c.thr[kind].Add(d.Seconds())
	}
	return d
}

// Owed answers how long the caller would have to pause now for kind, without counting
// anything.
func (e *Enforcer) Owed(kind Kind, principal, clientID string) time.Duration {
	if e == nil {
		return 0
	}
	c := e.callerFor(userOf(principal), clientID)
	l := c.limits[kind]
	if l.meter == nil {
		return 0
	}
	lim := e.nodeLimit(l)
	if kind == Request {
		lim = lim / 100 * float64(time.Second)
	}
	return min(l.meter.Delay(e.now(), lim), e.maxThrottle())
}

// MaxDelay is how long an HTTP answer may be held back for a quota.
func (e *Enforcer) MaxDelay() time.Duration {
	if e == nil {
		return time.Second
	}
	return e.cfg.MaxDelay
}

// Mutate asks to create or delete n partitions: refused (ok false) while the caller's
// controller mutation rate is over its quota, with the time to wait; else counted —
// the one request may take the rate over, as Kafka lets it — and answered with the
// throttle that leaves (KIP-599).
func (e *Enforcer) Mutate(principal, clientID string, n int64) (throttle time.Duration, ok bool) {
	if e == nil {
		return 0, true
	}
	user := userOf(principal)
	c := e.callerFor(user, clientID)
	l := c.limits[Mutation]
	if l.meter == nil {
		return 0, true
	}
	now := e.now()
	lim := e.nodeLimit(l)
	if d := l.meter.Delay(now, lim); d > 0 {
		e.refusals.WithLabelValues(user, "mutation").Inc()
		c.thr[Mutation].Add(d.Seconds())
		return min(d, e.maxThrottle()), false
	}
	l.meter.Add(now, n)
	return min(l.meter.Delay(now, lim), e.maxThrottle()), true
}

// Refused counts a refusal of kind ("produce", "fetch", "topic_count",
// "connector_count") for principal.
func (e *Enforcer) Refused(principal, kind string) {
	if e != nil {
		e.refusals.WithLabelValues(userOf(principal), kind).Inc()
	}
}

// Caps answers principal's topic_count and connector_count (-1: none).
func (e *Enforcer) Caps(principal string) catalog.Owner {
	o := catalog.Owner{Principal: userOf(principal), TopicCap: -1, ConnectCap: -1}
	if e == nil {
		return o
	}
	v := e.view.Load()
	if val, _, ok := Resolve(v.values, o.Principal, "", catalog.QuotaTopicCount); ok {
		o.TopicCap = int64(min(val, math.MaxInt64/2))
	}
	if val, _, ok := Resolve(v.values, o.Principal, "", catalog.QuotaConnectorCount); ok {
		o.ConnectCap = int64(min(val, math.MaxInt64/2))
	}
	return o
}

// Version is the security version of the view (-1 before the first refresh).
func (e *Enforcer) Version() int64 {
	if e == nil {
		return -1
	}
	return e.view.Load().version
}
