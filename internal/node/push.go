package node

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/push"
	"github.com/strata-io/strata/push/egress"
)

// PushConfig is the push role's (issue 36) and every node's outbound policy for push
// targets: a node that runs no push role still checks targets when a subscription is
// written through it.
type PushConfig struct {
	// Allow lists the hosts, wildcard domains and CIDRs targets may be at
	// (--push-allow); AllowInsecure allows plain http:// (--push-allow-insecure).
	Allow         []string
	AllowInsecure bool
	// LeaseTTL is how long a subscription's lease lasts unrenewed (0: 15s).
	LeaseTTL time.Duration
	// Holder names the node in leases ("": a random name).
	Holder string
	// Lambda invokes Lambda targets (nil: they pause with an error).
	Lambda push.Invoker
}

// pushDeps sets the core's push dependencies: the store and the egress policy.
func (n *Node) pushDeps(cat catalog.Backend, bd *broker.Deps) error {
	p, err := egress.Parse(n.cfg.PushConfig.Allow, n.cfg.PushConfig.AllowInsecure)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	bd.Push, bd.PushEgress = cat, p
	n.pushEgress = p
	return nil
}

// startPush builds and starts the push role (Config.Push) over the node's core.
func (n *Node) startPush(cat catalog.Backend, start func(string, func(context.Context) error)) {
	if !n.cfg.Push {
		return
	}
	c := n.cfg.PushConfig
	n.Push = push.New(n.Broker, cat, push.Config{Holder: c.Holder, LeaseTTL: c.LeaseTTL, Egress: n.pushEgress,
		Lambda: c.Lambda, Registerer: n.Registry}, n.log)
	start("push", n.Push.Run)
}
