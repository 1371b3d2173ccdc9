package node

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/security"
)

// KafkaConfig is the node's Kafka listener: it needs the writer and reader roles on
// the node (clients produce and fetch on whichever node Metadata names).
type KafkaConfig struct {
	// Listen is the address to serve the Kafka protocol on, host:port (port 0 picks a
	// free one). Empty: no listener.
	Listen string
	// Advertise is the host:port clients reach this node at, registered in the
	// catalog. Empty: the listen address, with this machine's host name when it
	// listens on every interface.
	Advertise string
	// NodeLease is how long the node stays listed as a broker after its last renewal
	// (default kafka.DefaultNodeLease).
	NodeLease time.Duration
	// BusyWarning, when set, turns the listener off with this warning, rather than
	// failing Start, when its address is already in use (strata dev's default port: a
	// second dev server on one machine still runs).
	BusyWarning string
	// Server configures the listener. Its Auth is the node's guard, required when
	// Config.Security is on (the node sets both), and it reserves its frames in the
	// node's memory budget.
	Server kafka.Config
}

// startKafka listens, registers the node in the catalog and serves the Kafka protocol
// until the node stops (nothing without Config.Kafka.Listen).
func (n *Node) startKafka(ctx context.Context) error {
	kc := n.cfg.Kafka
	if kc.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", kc.Listen)
	if err != nil {
		if kc.BusyWarning != "" && errors.Is(err, syscall.EADDRINUSE) {
			n.log.Warn(kc.BusyWarning, "addr", kc.Listen)
			return nil
		}
		return &ListenError{Front: "Kafka", Addr: kc.Listen, Err: err}
	}
	advertise := kc.Advertise
	if advertise == "" {
		advertise = defaultAdvertise(ln.Addr())
	}
	sc := kc.Server
	// SASL is served whether or not the node requires authentication: a client may
	// log in as its principal (a SCRAM user, a token's subject), and a failed login
	// closes its connection either way. (An embedder's own Authenticator is kept on a
	// node without security.)
	switch {
	case n.Guard.Enabled():
		sc.Auth, sc.AuthOptional = n.Guard, false
	case sc.Auth == nil:
		sc.Auth, sc.AuthOptional = n.Guard, true
	}
	// Built before the node registers, so that a listener that cannot be built leaves
	// no registration behind (it would be listed until its lease ran out).
	r, err := kafka.NewRegistrar(n.cfg.Catalog, advertise, kc.NodeLease, n.log)
	var srv *kafka.Server
	if err == nil {
		srv, err = kafka.New(sc, kafka.Deps{Core: n.Broker, Membership: n.cfg.Catalog, Self: r, Memory: n.Memory}, n.log, n.Registry)
	}
	if err == nil {
		err = r.Register(ctx)
	}
	if err != nil {
		ln.Close()
		return err
	}
	// The listener serves until the node stops it (Serve's shutdown, or Stop), not
	// until ctx, which bounds only the start.
	runCtx, cancel := context.WithCancel(context.Background())
	f := &front{name: "kafka", failed: make(chan error, 1)}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(runCtx, ln); err != nil {
			f.failed <- err
		}
	})
	wg.Go(func() { _ = r.Run(runCtx) }) // deregisters when runCtx ends
	f.stop = func() { cancel(); wg.Wait() }
	n.fronts = append(n.fronts, f)
	n.KafkaAddr, n.KafkaNodeID = displayAddr(ln.Addr()), r.Node().ID
	n.log.Info("serving Kafka protocol", "addr", n.KafkaAddr, "advertised", advertise, "node_id", n.KafkaNodeID, "sasl_required", !sc.AuthOptional, "tls", sc.TLS != nil)
	if keys := n.cfg.Security.StaticKeys; len(keys) > 0 {
		ids := make([]string, len(keys))
		for i, key := range keys {
			ids[i] = security.StaticKeyID(key)
		}
		n.log.Info("Kafka SASL/PLAIN: the username of a key is its id (catalog keys: key-…; the static keys: these)", "key_ids", ids)
	}
	return nil
}

// defaultAdvertise is the address clients are told when KafkaConfig.Advertise is not
// given: the listen address, with this machine's host name in place of a wildcard
// host. Loopback stays an IPv4 literal: librdkafka may resolve "localhost" to ::1.
func defaultAdvertise(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port)
}
