package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/catalog"
)

// kbroker is a node as Kafka clients see it.
type kbroker struct {
	id   int32
	host string
	port int32
}

// membership is one snapshot of the cluster as clients see it.
type membership struct {
	clusterID  string
	brokers    []kbroker // by id
	ids        []int32   // the brokers' ids, for rendezvous
	controller int32     // the lowest live id: Kafka wants a live node there
}

// leader is the partition's "leader": the rendezvous hash of (topic, partition) over
// the live ids. Every node computes the same answer from the same membership, and a
// membership change moves only the partitions of the nodes that came or went.
func (m *membership) leader(topic string, partition int32) int32 {
	return rendezvous(m.ids, hashString(topic)^mix64(uint64(uint32(partition))+0x9e3779b97f4a7c15))
}

// coordinator is the node answering for a group or transactional id.
func (m *membership) coordinator(keyType int8, key string) int32 {
	return rendezvous(m.ids, hashString(key)^mix64(uint64(uint8(keyType))+1))
}

func (m *membership) broker(id int32) (kbroker, bool) {
	for _, b := range m.brokers {
		if b.id == id {
			return b, true
		}
	}
	return kbroker{}, false
}

// rendezvous returns the id with the highest score for key (ties: the lowest id).
func rendezvous(ids []int32, key uint64) int32 {
	best, bestScore := int32(-1), uint64(0)
	for _, id := range ids {
		s := mix64(key ^ mix64(uint64(uint32(id))))
		if best < 0 || s > bestScore || (s == bestScore && id < best) {
			best, bestScore = id, s
		}
	}
	return best
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// mix64 is SplitMix64's finaliser: every input bit moves every output bit, so scores of
// nearby ids and partitions are unrelated.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// clusterView caches the membership for at most refresh. When the registry cannot be
// read it keeps answering from the last snapshot (or from this node alone), so a
// catalog hiccup does not make brokers vanish from clients' view.
type clusterView struct {
	reg     Membership
	self    Self
	refresh time.Duration
	shared  string // SharedAddress
	log     *slog.Logger

	mu   sync.Mutex
	last *membership
	at   time.Time
}

func newClusterView(reg Membership, self Self, refresh time.Duration, shared string, log *slog.Logger) *clusterView {
	return &clusterView{reg: reg, self: self, refresh: refresh, shared: shared, log: log}
}

func (v *clusterView) get(ctx context.Context) *membership {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.last != nil && time.Since(v.at) < v.refresh {
		return v.last
	}
	m, err := v.load(ctx)
	if err != nil {
		v.log.Warn("reading live nodes: answering from the last view", "err", err)
		if v.last != nil {
			return v.last
		}
		return v.build("", []catalog.Node{v.self.Node()})
	}
	v.last, v.at = m, time.Now()
	return m
}

func (v *clusterView) load(ctx context.Context) (*membership, error) {
	id, err := v.reg.ClusterID(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := v.reg.LiveNodes(ctx)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		// This node serves, so at least it is alive (its registration may be
		// lapsing and being renewed).
		nodes = []catalog.Node{v.self.Node()}
	}
	return v.build(id, nodes), nil
}

func (v *clusterView) build(clusterID string, nodes []catalog.Node) *membership {
	m := &membership{clusterID: clusterID, controller: -1}
	// By id, whatever order the registry gave: every node's answer is the same bytes.
	nodes = slices.SortedFunc(slices.Values(nodes), func(a, b catalog.Node) int { return cmp.Compare(a.ID, b.ID) })
	for _, n := range nodes {
		addr := n.Addr
		if v.shared != "" {
			addr = v.shared
		}
		host, port, err := splitHostPort(addr)
		if err != nil {
			v.log.Warn("skipping a registered node with a bad address", "node", n.ID, "addr", n.Addr, "err", err)
			continue
		}
		m.brokers = append(m.brokers, kbroker{id: n.ID, host: host, port: port})
		m.ids = append(m.ids, n.ID)
		if m.controller < 0 || n.ID < m.controller {
			m.controller = n.ID
		}
	}
	if v.shared != "" && len(m.brokers) > 1 {
		// Behind a load balancer every connection may reach any node, so the cluster is
		// one broker: the lowest live id, leading every partition and coordinating every
		// group. Several broker ids at one address would not do: librdkafka keeps one
		// connection per address and takes it for whichever id it saw last, and never
		// fetches the partitions the other ids lead.
		m.brokers, m.ids = m.brokers[:1], m.ids[:1]
	}
	return m
}

// Registry is the catalog's node registry, written by the Registrar.
type Registry interface {
	RegisterNode(ctx context.Context, addr string, ttl time.Duration) (catalog.NodeLease, error)
	RenewNode(ctx context.Context, l catalog.NodeLease, ttl time.Duration) (catalog.NodeLease, error)
	DeregisterNode(ctx context.Context, l catalog.NodeLease) error
}

// Registrar keeps this node registered while it serves the Kafka protocol: it
// registers, renews the lease every third of its length, registers again if the lease
// was lost, and deregisters on the way out so clients move on at once.
type Registrar struct {
	reg   Registry
	addr  string
	ttl   time.Duration
	log   *slog.Logger
	lease atomic.Pointer[catalog.NodeLease]
}

// NewRegistrar returns a Registrar for the node reachable at addr (host:port).
func NewRegistrar(reg Registry, addr string, ttl time.Duration, log *slog.Logger) (*Registrar, error) {
	if _, _, err := splitHostPort(addr); err != nil {
		return nil, fmt.Errorf("kafka: advertised address: %w", err)
	}
	if ttl <= 0 {
		ttl = DefaultNodeLease
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registrar{reg: reg, addr: addr, ttl: ttl, log: log.With("component", "kafka-registry")}, nil
}

// Register takes this node's id; call it before serving.
func (r *Registrar) Register(ctx context.Context) error {
	l, err := r.reg.RegisterNode(ctx, r.addr, r.ttl)
	if err != nil {
		return fmt.Errorf("kafka: register node: %w", err)
	}
	r.lease.Store(&l)
	r.log.Info("registered", "node_id", l.ID, "addr", l.Addr, "lease", r.ttl)
	return nil
}

// Node is this node's current registration (the zero Node before Register).
func (r *Registrar) Node() catalog.Node {
	if l := r.lease.Load(); l != nil {
		return l.Node
	}
	return catalog.Node{Addr: r.addr}
}

// Run renews the lease until ctx ends, then deregisters. It returns nil when ctx ends.
func (r *Registrar) Run(ctx context.Context) error {
	t := time.NewTicker(r.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.deregister()
			return nil
		case <-t.C:
		}
		r.renew(ctx)
	}
}

func (r *Registrar) renew(ctx context.Context) {
	cur := r.lease.Load()
	if cur == nil {
		if err := r.Register(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("register node", "err", err)
		}
		return
	}
	l, err := r.reg.RenewNode(ctx, *cur, r.ttl)
	switch {
	case err == nil:
		r.lease.Store(&l)
	case errors.Is(err, catalog.ErrNodeLeaseLost):
		r.log.Warn("node lease lost: registering again", "node_id", cur.ID)
		if err := r.Register(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("register node", "err", err)
		}
	case ctx.Err() == nil:
		// Keep the lease: the next tick retries, and a renewal after expiry still
		// succeeds unless another node took the id.
		r.log.Warn("renew node lease", "node_id", cur.ID, "err", err)
	}
}

func (r *Registrar) deregister() {
	l := r.lease.Load()
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.reg.DeregisterNode(ctx, *l); err != nil {
		r.log.Warn("deregister node", "node_id", l.ID, "err", err)
	}
}
