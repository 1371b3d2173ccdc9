package main

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/tlsreload"
	"github.com/strata-io/strata/kafka"
)

// kafkaFlags configure the Kafka listener of dev and serve (Lambda cannot take TCP).
type kafkaFlags struct {
	listen, defaultListen string
	advertise, shared     string
	tlsCert, tlsKey       string
	autoCreate            bool
	maxConnections        int
	maxUnauth, unauthHost int
	authTimeout           time.Duration
	maxFrameBytes         byteSize
	idleTimeout           time.Duration
	nodeLease             time.Duration
}

func addKafkaFlags(c *command, listen string, autoCreate bool) *kafkaFlags {
	defer c.shared()()
	k := &kafkaFlags{defaultListen: listen, maxFrameBytes: kafka.DefaultMaxFrameBytes}
	c.fs.StringVar(&k.listen, "kafka-listen", listen, "`address` to serve the Kafka protocol on, host:port; empty turns the listener off")
	c.fs.StringVar(&k.advertise, "kafka-advertise", "", "`host:port` Kafka clients reach this node at, registered in the catalog (default: the listen address, with this machine's host name when it listens on every interface)")
	c.fs.StringVar(&k.shared, "kafka-shared-address", "", "`host:port` of a network load balancer in front of every node: advertised as the one broker clients see, leading every partition (whichever node a connection reaches serves it)")
	c.fs.StringVar(&k.tlsCert, "kafka-tls-cert", "", "PEM `file` of the Kafka listener's TLS certificate chain (with --kafka-tls-key): clients then connect with TLS")
	c.fs.StringVar(&k.tlsKey, "kafka-tls-key", "", "PEM `file` of the Kafka listener's TLS private key")
	c.fs.BoolVar(&k.autoCreate, "kafka-auto-create-topics", autoCreate, "create a topic (1 partition) when a Kafka client's metadata request names one that does not exist and allows it")
	c.fs.IntVar(&k.maxConnections, "kafka-max-connections", kafka.DefaultMaxConnections, "open Kafka connections at most; beyond it new ones are closed")
	c.fs.DurationVar(&k.authTimeout, "kafka-auth-timeout", kafka.DefaultAuthTimeout, "with authentication on: close a Kafka connection that has not authenticated (SASL, or a TLS client certificate) this long after it was accepted")
	c.fs.IntVar(&k.maxUnauth, "kafka-max-unauthenticated", 0, "with authentication on: Kafka connections not yet authenticated at most; beyond it new ones are closed (default half of --kafka-max-connections)")
	c.fs.IntVar(&k.unauthHost, "kafka-max-unauthenticated-per-host", 0, "with authentication on: Kafka connections not yet authenticated from one address (an IPv6 /64) at most (default a tenth of --kafka-max-unauthenticated, at least 16)")
	c.fs.Var(&k.maxFrameBytes, "kafka-max-frame-bytes", "largest Kafka request `size` accepted; a larger one closes the connection before anything is allocated")
	c.fs.DurationVar(&k.idleTimeout, "kafka-idle-timeout", kafka.DefaultIdleTimeout, "close a Kafka connection with no request in flight for this long")
	c.fs.DurationVar(&k.nodeLease, "kafka-node-lease", kafka.DefaultNodeLease, "how long this node stays listed as a broker after its last renewal: a dead node leaves clients' view within it")
	return k
}

// validate checks the flags and says, per problem, how to fix it.
func (k *kafkaFlags) validate() []string {
	if k.listen == "" {
		return nil
	}
	var bad []string
	if _, port, err := net.SplitHostPort(k.listen); err != nil {
		bad = append(bad, fmt.Sprintf("--kafka-listen %q: want host:port, e.g. 127.0.0.1:9092 or :9092 (empty turns Kafka off)", k.listen))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		bad = append(bad, fmt.Sprintf("--kafka-listen %q: port %q is not a number between 0 and 65535", k.listen, port))
	}
	for _, f := range []struct{ name, val string }{{"--kafka-advertise", k.advertise}, {"--kafka-shared-address", k.shared}} {
		if f.val == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(f.val); err != nil || host == "" {
			bad = append(bad, fmt.Sprintf("%s %q: want host:port that clients can reach, e.g. broker-1.internal:9092", f.name, f.val))
		} else if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			bad = append(bad, fmt.Sprintf("%s %q: port %q is not between 1 and 65535", f.name, f.val, port))
		}
	}
	if (k.tlsCert == "") != (k.tlsKey == "") {
		bad = append(bad, "--kafka-tls-cert and --kafka-tls-key go together: give both PEM files, or neither")
	}
	if k.maxConnections < 1 {
		bad = append(bad, fmt.Sprintf("--kafka-max-connections %d: want at least 1 (default %d)", k.maxConnections, kafka.DefaultMaxConnections))
	}
	if k.authTimeout < 100*time.Millisecond || k.authTimeout > 10*time.Minute {
		bad = append(bad, fmt.Sprintf("--kafka-auth-timeout %s: want between 100ms and 10m (default %s)", k.authTimeout, kafka.DefaultAuthTimeout))
	}
	if k.maxUnauth < 0 || k.maxUnauth > k.maxConnections {
		bad = append(bad, fmt.Sprintf("--kafka-max-unauthenticated %d: want between 1 and --kafka-max-connections %d, or 0 for half of it", k.maxUnauth, k.maxConnections))
	}
	if k.unauthHost < 0 || (k.maxUnauth > 0 && k.unauthHost > k.maxUnauth) {
		bad = append(bad, fmt.Sprintf("--kafka-max-unauthenticated-per-host %d: want between 1 and --kafka-max-unauthenticated, or 0 for the default", k.unauthHost))
	}
	if k.maxFrameBytes < 64<<10 || k.maxFrameBytes > 1<<30 {
		bad = append(bad, fmt.Sprintf("--kafka-max-frame-bytes %s: want between 64KiB and 1GiB (default 100MiB)", &k.maxFrameBytes))
	}
	if k.idleTimeout < time.Second {
		bad = append(bad, fmt.Sprintf("--kafka-idle-timeout %s: want at least 1s (default %s)", k.idleTimeout, kafka.DefaultIdleTimeout))
	}
	if k.nodeLease < time.Second || k.nodeLease > 10*time.Minute {
		bad = append(bad, fmt.Sprintf("--kafka-node-lease %s: want between 1s and 10m (default %s)", k.nodeLease, kafka.DefaultNodeLease))
	}
	return bad
}

// config is the node's Kafka listener the flags describe. On strata dev, a default
// port already in use turns the listener off with a warning (a second dev server on
// one machine still runs); anywhere else it fails the start.
func (k *kafkaFlags) config(spec nodeSpec, log *slog.Logger) (node.KafkaConfig, error) {
	kc := node.KafkaConfig{
		Listen: k.listen, Advertise: k.advertise, NodeLease: k.nodeLease,
		Server: kafka.Config{
			MaxFrameBytes:  int32(k.maxFrameBytes),
			MaxConnections: k.maxConnections,
			IdleTimeout:    k.idleTimeout,
			AuthTimeout:    k.authTimeout,
			// Config's defaults (0) derive them from MaxConnections.
			MaxUnauthenticated:        k.maxUnauth,
			MaxUnauthenticatedPerHost: k.unauthHost,
			SharedAddress:             k.shared,
			AutoCreateTopics:          k.autoCreate,
			AccessLogSample:           spec.auth.accessSample,
		},
	}
	if spec.dev && k.listen == k.defaultListen {
		kc.BusyWarning = "Kafka listener off: its default address is in use (another strata dev?); choose one with --kafka-listen"
	}
	if k.tlsCert != "" {
		// Reloaded when the files change, as the HTTP listener's certificate is.
		r, err := tlsreload.New(k.tlsCert, k.tlsKey, tlsreload.Options{Log: log})
		if err != nil {
			return node.KafkaConfig{}, fmt.Errorf("kafka TLS: %w (check --kafka-tls-cert and --kafka-tls-key)", err)
		}
		pool, err := spec.flags.tls.clientCAs()
		if err != nil {
			return node.KafkaConfig{}, fmt.Errorf("kafka TLS: %w (check --tls-client-ca)", err)
		}
		kc.Server.TLS = withClientCAs(r.ServerConfig(), pool)
	}
	return kc, nil
}
