// Package inproc runs a node in this process, served on loopback ports: the
// reliability harness's in-process target (strata torture's store class) and the core
// of internal/node/nodetest, through which every test starts its nodes. The node is
// internal/node's, assembled as strata serve assembles it; what differs from one use
// to another is said by options that adjust its configuration, never by a
// configuration written out again.
package inproc

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/security"
)

// Loopback is the address the node's listeners take: a free port on loopback.
const Loopback = "127.0.0.1:0"

// Option adjusts the node's configuration.
type Option = func(*node.Config)

// Node is a node served in this process.
type Node struct {
	*node.Node
	cancel context.CancelFunc
	served chan error
}

// Start starts a node over cat and store — the writer and reader roles with their
// defaults, the HTTP API on a loopback port — adjusted by opts in order, and serves
// it until Close. The caller closes cat once the node is closed. On error nothing is
// left running.
func Start(ctx context.Context, cat catalog.Backend, store objstore.Store, opts ...Option) (*Node, error) {
	cfg := node.Config{
		Catalog: cat, Store: store,
		Writer: true, Reader: true,
		HTTP: node.HTTPConfig{Listen: Loopback},
	}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("inproc: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	in := &Node{Node: n, cancel: cancel, served: make(chan error, 1)}
	go func() { in.served <- n.Serve(sctx) }()
	return in, nil
}

// Close stops the node as a signal stops strata serve: the front ends and the HTTP
// server, then the roles (the writer drains). It returns why the node stopped: nil,
// or a role's or a front end's failure. It may be called more than once.
func (n *Node) Close() error {
	n.cancel()
	err := <-n.served
	n.served <- err
	return err
}

// Roles runs exactly these roles: "writer", "reader", "compactor", "connect".
func Roles(roles ...string) Option {
	return func(c *node.Config) {
		c.Writer, c.Reader, c.Compactor, c.Connect, c.Push = false, false, false, false, false
		for _, r := range roles {
			switch r {
			case "writer":
				c.Writer = true
			case "reader":
				c.Reader = true
			case "compactor":
				c.Compactor = true
			case "push":
				c.Push = true
			case "connect":
				c.Connect = true
			default:
				panic("inproc: unknown role " + r)
			}
		}
	}
}

// Keys turns authentication on with these static keys (superusers, as strata serve's
// --api-keys), the guard reloading keys and ACLs every poll.
func Keys(poll time.Duration, keys ...string) Option {
	return func(c *node.Config) {
		c.Security = security.Config{StaticKeys: keys, PollInterval: poll}
	}
}

// Kafka serves the Kafka protocol on a loopback port, registered in the catalog with
// the lease given (0: kafka.DefaultNodeLease), its listener adjusted by mutate.
func Kafka(lease time.Duration, mutate ...func(*kafka.Config)) Option {
	return func(c *node.Config) {
		c.Kafka.Listen, c.Kafka.NodeLease = Loopback, lease
		for _, m := range mutate {
			m(&c.Kafka.Server)
		}
	}
}
