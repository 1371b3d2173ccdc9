// Package kafka is Strata's Kafka wire-protocol front end: a TCP listener that decodes
// requests with franz-go's kmsg, calls the broker core with the connection's principal
// and encodes the answers (errors.go maps the core's error codes to Kafka's, in one
// place). It owns the protocol's plumbing — frames, the per-connection pipeline that
// answers in order, limits, SASL (PLAIN, SCRAM, OAUTHBEARER), ApiVersions — and the
// cluster view Kafka clients need from a cluster without leaders: brokers are the live
// nodes of the catalog's registry, and a partition's "leader" is a rendezvous hash over
// them, identical on every node for the same membership. It holds no produce, fetch,
// offset or topic rule: those belong to the core, shared with the HTTP API.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/membudget"
)

// Defaults of Config.
const (
	DefaultMaxFrameBytes  = 100 << 20 // Kafka's socket.request.max.bytes
	DefaultMaxConnections = 10000
	DefaultMaxInflight    = 16
	DefaultIdleTimeout    = 10 * time.Minute // Kafka's connections.max.idle.ms
	DefaultWriteTimeout   = 30 * time.Second
	DefaultNodeLease      = 10 * time.Second
	DefaultShutdownGrace  = 5 * time.Second
	DefaultAuthTimeout    = 10 * time.Second
	// DefaultPreAuthMemoryBytes is the pool the frames of connections not yet
	// authenticated are reserved in (Config.PreAuthMemoryBytes): 64 frames of the
	// largest size allowed before authentication.
	DefaultPreAuthMemoryBytes = 64 * PreAuthMaxFrameBytes
	// PreAuthMaxFrameBytes bounds frames on a connection that has not authenticated
	// (keys on): ApiVersions, PLAIN and SCRAM are a few hundred bytes, an OAUTHBEARER
	// token a few KiB (tens with many group claims: TestOAuthBearerJWKS logs in with
	// 40 KiB), and a stranger must not make the node set aside 100 MiB.
	PreAuthMaxFrameBytes = 64 << 10
)

// Config configures the listener. Zero fields take the defaults above.
type Config struct {
	// MaxFrameBytes is the largest request frame accepted; a larger size prefix closes
	// the connection before anything is allocated.
	MaxFrameBytes int32
	// MaxConnections bounds open connections; beyond it new ones are closed at once.
	MaxConnections int
	// MaxInflight bounds the requests of one connection being served or waiting to be
	// answered; the connection is not read further until one is answered.
	MaxInflight int
	// IdleTimeout closes a connection that has had no request in flight for this long.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one response to a client that does not read.
	WriteTimeout time.Duration
	// ShutdownGrace is how long requests in flight may take to be answered once Serve's
	// context ends.
	ShutdownGrace time.Duration
	// TLS, when set, terminates TLS on the listener.
	TLS *tls.Config
	// Auth, when set, requires authentication before any request but ApiVersions and
	// the SASL ones: SASL/PLAIN, or a verified client certificate (with TLS whose
	// ClientCAs are set).
	Auth Authenticator
	// With Auth, a connection that has not authenticated (limits.go) is closed
	// AuthTimeout after it was accepted (default 10s); its frames are at most
	// PreAuthMaxFrameBytes and reserved in a pool of PreAuthMemoryBytes of their own
	// (default DefaultPreAuthMemoryBytes, carved out of Deps.Memory), never in the
	// node's budget, one address holding at most one such frame of it; and such
	// connections hold at most MaxUnauthenticated of the MaxConnections slots (default
	// half of them), and MaxUnauthenticatedPerHost from one address, or one IPv6 /64
	// (default a tenth of MaxUnauthenticated, at least 16 or MaxUnauthenticated):
	// beyond them a new connection is closed at once.
	AuthTimeout time.Duration
	// AuthOptional serves SASL (and client certificates) with Auth without requiring
	// them: a client may log in to act as its principal, or not and act as the
	// anonymous one; a failed login still closes its connection. The limits above
	// apply only when authentication is required.
	AuthOptional                                  bool
	PreAuthMemoryBytes                            int64
	MaxUnauthenticated, MaxUnauthenticatedPerHost int
	// AutoCreateTopics creates topics a Metadata request names, when the client allows
	// it (allow.auto.create.topics), with AutoCreatePartitions partitions (default
	// broker.DefaultPartitions, as a topic created without a count): the core's
	// DescribeTopic makes it, under the rules of every new topic.
	AutoCreateTopics     bool
	AutoCreatePartitions int32
	// SharedAddress, when set (host:port), is advertised as every broker's address:
	// deployments behind a network load balancer, where clients cannot reach nodes
	// directly. Node ids, and so partition leaders, are unchanged.
	SharedAddress string
	// MembershipRefresh bounds how stale the cached list of live nodes may be (default
	// 1s).
	MembershipRefresh time.Duration
	// AccessLogSample is the share of requests written to the access log (access.go), 0
	// to 1; refusals are always logged. Default 0: refusals only.
	AccessLogSample float64
}

func (c Config) withDefaults() Config {
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.AutoCreatePartitions <= 0 {
		c.AutoCreatePartitions = broker.DefaultPartitions
	}
	if c.MembershipRefresh <= 0 {
		c.MembershipRefresh = time.Second
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.PreAuthMemoryBytes <= 0 {
		c.PreAuthMemoryBytes = DefaultPreAuthMemoryBytes
	}
	if c.MaxUnauthenticated <= 0 {
		c.MaxUnauthenticated = max(1, c.MaxConnections/2)
	}
	c.MaxUnauthenticated = min(c.MaxUnauthenticated, c.MaxConnections)
	if c.MaxUnauthenticatedPerHost <= 0 {
		c.MaxUnauthenticatedPerHost = max(c.MaxUnauthenticated/10, min(16, c.MaxUnauthenticated))
	}
	c.MaxUnauthenticatedPerHost = min(c.MaxUnauthenticatedPerHost, c.MaxUnauthenticated)
	return c
}

// Membership is the registry read side: the live nodes and the cluster id.
type Membership interface {
	LiveNodes(ctx context.Context) ([]catalog.Node, error)
	ClusterID(ctx context.Context) (string, error)
}

// Self says which node this is: its registration, which may change id when a lost lease
// is registered again. *Registrar is one.
type Self interface {
	Node() catalog.Node
}

// Deps are what the listener serves from.
type Deps struct {
	// Core serves every request but the cluster view's: the listener decodes, calls the
	// core with the connection's principal, and encodes its answer.
	Core       *broker.Broker
	Membership Membership
	Self       Self
	// Memory is the node's memory budget (docs/design.md "Memory"): each request frame
	// of an authenticated connection (or of any, without Config.Auth) is reserved
	// there before its body is read, counted against its principal's share of bytes
	// still arriving until it has been read (membudget.OwnerShare) — a connection whose
	// frame finds no room is not read further until there is, so TCP pushes back on its
	// client — and its answer joins the frame's hold (a Fetch's batches, their copy and
	// the framed response) until it is written. Frames before authentication are
	// reserved in a pool carved out of it (Config.PreAuthMemoryBytes). Nil: not
	// accounted (the pool still is).
	Memory *membudget.Budget
}

// Server is the Kafka listener.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	metrics *metrics
	view    *clusterView
	apis    map[int16]api

	// preAuth is the pool of frames read before authentication (with Config.Auth).
	preAuth *membudget.Budget

	mu    sync.Mutex
	conns map[*conn]struct{}
	// Connections not yet authenticated (with Config.Auth), in all and by host key.
	unauth       int
	unauthByHost map[string]int

	// stopping ends when Serve begins to stop: held group requests end with it.
	stopping  context.Context
	stopHolds context.CancelFunc

	// shares are this node's share sessions (share.go).
	shares shareSessions
}

// New returns a listener; Serve runs it. Metrics go to reg (nil: none).
func New(cfg Config, deps Deps, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	if deps.Core == nil || deps.Membership == nil || deps.Self == nil {
		return nil, errors.New("kafka: new listener: Core, Membership and Self are required")
	}
	cfg = cfg.withDefaults()
	if cfg.SharedAddress != "" {
		if _, _, err := splitHostPort(cfg.SharedAddress); err != nil {
			return nil, fmt.Errorf("kafka: shared address: %w", err)
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:          cfg,
		deps:         deps,
		log:          log.With("component", "kafka"),
		metrics:      newMetrics(reg),
		conns:        map[*conn]struct{}{},
		unauthByHost: map[string]int{},
	}
	if cfg.Auth != nil && !cfg.AuthOptional {
		// One address may hold one frame of the largest size: filling the pool takes
		// as many addresses (or IPv6 /64s) as it holds such frames.
		share := float64(PreAuthMaxFrameBytes) / float64(cfg.PreAuthMemoryBytes)
		pool, err := deps.Memory.Pool(cfg.PreAuthMemoryBytes, share, "the Kafka listener's frames before authentication", reg)
		if err != nil {
			return nil, fmt.Errorf("kafka: new listener: %w", err)
		}
		s.preAuth = pool
	}
	s.stopping, s.stopHolds = context.WithCancel(context.Background())
	s.view = newClusterView(deps.Membership, deps.Self, cfg.MembershipRefresh, cfg.SharedAddress, s.log)
	s.apis = s.apiTable()
	return s, nil
}

// Serve accepts connections on ln until ctx ends, then stops accepting and reading,
// gives requests in flight Config.ShutdownGrace to be answered, closes every connection
// and returns once all of its goroutines have ended. It closes ln. The error is nil
// when ctx ended, otherwise why accepting failed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	// Requests run under reqCtx, which outlives ctx by the grace period so answers in
	// flight can still be given.
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close(); s.stopHolds() })
	defer stop()
	defer s.stopHolds()

	var acceptErr error
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				acceptErr = fmt.Errorf("kafka: accept: %w", err)
			}
			break
		}
		c, ok := s.admit(reqCtx, nc)
		if !ok {
			continue
		}
		wg.Go(func() {
			defer s.forget(c)
			c.serve()
		})
	}
	ln.Close()

	// Stop reading; let the pipelines drain, then cut what is left.
	s.each(func(c *conn) { c.stopReading() })
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(s.cfg.ShutdownGrace):
		cancelRequests()
		s.each(func(c *conn) { c.close() })
		<-drained
	}
	return acceptErr
}

// admit registers a new connection, or closes it when the connection limit, or (with
// authentication) the share of connections not yet authenticated, is reached
// (limits.go).
func (s *Server) admit(ctx context.Context, nc net.Conn) (*conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	host := hostKey(nc.RemoteAddr())
	if why := s.refusalLocked(host); why != "" {
		s.metrics.refused.WithLabelValues(why).Inc()
		s.log.Debug("connection refused", "remote", nc.RemoteAddr().String(), "limit", why)
		nc.Close()
		return nil, false
	}
	c := newConn(ctx, s, nc)
	s.conns[c] = struct{}{}
	if s.authRequired() {
		c.addrKey, c.unauthCounted = host, true
		s.unauth++
		s.unauthByHost[host]++
	}
	s.metrics.connections.Inc()
	s.metrics.accepted.Inc()
	return c, true
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.leaveUnauthLocked(c)
	s.mu.Unlock()
	s.metrics.connections.Dec()
}

func (s *Server) each(fn func(*conn)) {
	s.mu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		fn(c)
	}
}

// splitHostPort parses host:port into what Kafka's broker entries carry.
func splitHostPort(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q: want host:port", addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("%q: port %q is not between 1 and 65535", addr, port)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q: no host: clients need a host name or address to connect to", addr)
	}
	return host, int32(p), nil
}
