package quota_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/quota"
)

// TestQuotasReachEveryNode: a quota set through one node is enforced by another node on
// the same catalog within a second, and with two live nodes each enforces half of it.
func TestQuotasReachEveryNode(t *testing.T) {
	a := start(t)
	b := nodetest.Start(t, nodetest.On(a.node.Catalog, a.node.Store), nodetest.Keys(bootKey), nodetest.Kafka(),
		nodetest.Mutate(func(c *node.Config) { c.Security.Superusers = principals }))
	before := b.Quotas.Version()
	set := time.Now()
	r := a.do(bootKey, "PUT", "/v1/quotas", []byte(`{"entity":{"user":"User:alice"},"quotas":{"producer_byte_rate":1048576,"topic_count":7}}`))
	if r.status != http.StatusOK {
		t.Fatalf("PUT /v1/quotas: %d %s", r.status, r.body)
	}
	if !testwait.Within(time.Second-time.Since(set), func() bool { return b.Quotas.Caps("User:alice").TopicCap == 7 }) {
		t.Fatalf("the other node still enforces %+v a second later (version %d → %d)", b.Quotas.Caps("User:alice"), before, b.Quotas.Version())
	}
	t.Logf("the other node enforces the change %v after it was made", time.Since(set).Round(time.Millisecond))
	// Both nodes registered (their Kafka listeners): each counts two live nodes.
	if !testwait.Within(15*time.Second, func() bool { return b.Quotas.LiveNodes() == 2 }) {
		t.Fatalf("the node counts %d live nodes, want 2", b.Quotas.LiveNodes())
	}
	// 512 KiB at once against half of 1 MiB/s: about a second owed.
	if d := b.Quotas.Record(quota.Produce, "User:alice", "", 512<<10); d < 900*time.Millisecond || d > time.Second {
		t.Errorf("512 KiB on one of two nodes under 1 MiB/s: owes %v, want about 1s", d)
	}
}
