package broker

import (
	"context"
	"sort"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// NodeRegistry is the catalog's registry of live nodes (catalog.Cluster), read by
// Nodes.
type NodeRegistry interface {
	LiveNodes(ctx context.Context) ([]catalog.Node, error)
}

var _ NodeRegistry = catalog.Cluster(nil)

// Nodes lists the live nodes of the registry — the nodes serving the Kafka protocol,
// each with its listener's address and lease — by id. It needs describe on the
// cluster, as Kafka's DescribeCluster does.
func (b *Broker) Nodes(ctx context.Context, who Principal) ([]catalog.Node, error) {
	if e := b.check(CapNodes); e != nil {
		return nil, e
	}
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Cluster()); e != nil {
		return nil, e
	}
	ns, err := b.d.Nodes.LiveNodes(ctx)
	if err != nil {
		return nil, catalogError("list nodes", err)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].ID < ns[j].ID })
	return ns, nil
}
