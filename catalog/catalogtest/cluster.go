package catalogtest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// ClusterCatalog is a catalog with the Kafka front end's cluster view.
type ClusterCatalog interface {
	catalog.Catalog
	catalog.Cluster
}

// runCluster runs the conformance suite of catalog.Cluster: node registry, cluster id,
// topic UUIDs. open returns a catalog for a subtest and arranges its Close with
// t.Cleanup; the node registry is one per database, so every subtest needs a fresh
// database, and calls within one subtest must return catalogs on that same database
// (as several nodes would have).
func runCluster(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) ClusterCatalog)
	}{
		{"nodes/ids_from_zero", testNodeIDsFromZero},
		{"nodes/restart_keeps_id", testNodeRestartKeepsID},
		{"nodes/live_lease_never_taken", testNodeLiveLeaseNeverTaken},
		{"nodes/expiry_and_takeover", testNodeExpiryAndTakeover},
		{"nodes/invalid", testNodeInvalid},
		{"nodes/concurrent_registrations", testNodeConcurrentRegistrations},
		{"cluster_id", testClusterID},
		{"topic_uuids", testTopicUUIDs},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func register(t *testing.T, c catalog.Cluster, addr string, ttl time.Duration) catalog.NodeLease {
	t.Helper()
	l, err := c.RegisterNode(t.Context(), addr, ttl)
	if err != nil {
		t.Fatalf("RegisterNode(%s): %v", addr, err)
	}
	if l.Addr != addr {
		t.Fatalf("RegisterNode(%s) = addr %s", addr, l.Addr)
	}
	return l
}

// wantLive asserts the live nodes, as "id=addr" strings in id order.
func wantLive(t *testing.T, c catalog.Cluster, want ...string) {
	t.Helper()
	nodes, err := c.LiveNodes(t.Context())
	if err != nil {
		t.Fatalf("LiveNodes: %v", err)
	}
	got := []string{}
	for _, n := range nodes {
		got = append(got, fmt.Sprintf("%d=%s", n.ID, n.Addr))
	}
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("LiveNodes = %v, want %v", got, want)
	}
}

func testNodeIDsFromZero(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	c := open(t)
	wantLive(t, c)
	var last catalog.NodeLease
	for i, addr := range []string{"10.0.0.1:9092", "10.0.0.2:9092", "10.0.0.3:9092"} {
		last = register(t, c, addr, time.Minute)
		if last.ID != int32(i) {
			t.Fatalf("node %d at %s got id %d, want %d", i, addr, last.ID, i)
		}
	}
	wantLive(t, c, "0=10.0.0.1:9092", "1=10.0.0.2:9092", "2=10.0.0.3:9092")
	now, err := c.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := last.LeaseUntil.Sub(now); d < 50*time.Second || d > 70*time.Second {
		t.Fatalf("a lease of 1m ends %v after the database clock's now, want about 1m", d)
	}
}

func testNodeRestartKeepsID(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	c := open(t)
	a := register(t, c, "10.0.0.1:9092", time.Minute)
	b := register(t, c, "10.0.0.2:9092", time.Minute)
	for _, l := range []catalog.NodeLease{a, b} {
		if err := c.DeregisterNode(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	wantLive(t, c)
	// The second node restarts first: its own id (1), not the lowest free one (0).
	if l := register(t, c, "10.0.0.2:9092", time.Minute); l.ID != 1 {
		t.Fatalf("restarted node got id %d, want its old id 1", l.ID)
	}
	// A new address takes the lowest free id.
	if l := register(t, c, "10.0.0.9:9092", time.Minute); l.ID != 0 {
		t.Fatalf("new node got id %d, want the free id 0", l.ID)
	}
	wantLive(t, c, "0=10.0.0.9:9092", "1=10.0.0.2:9092")
	// And the node that used to be 0 gets a new one.
	if l := register(t, c, "10.0.0.1:9092", time.Minute); l.ID != 2 {
		t.Fatalf("node whose id was taken got id %d, want 2", l.ID)
	}
}

func testNodeLiveLeaseNeverTaken(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	c := open(t)
	a := register(t, c, "lb.example:9092", time.Minute)
	// Same address while the first lease runs: another node behind it, or this one's
	// previous life; either way a new id.
	b := register(t, c, "lb.example:9092", time.Minute)
	if a.ID != 0 || b.ID != 1 {
		t.Fatalf("two live registrations at one address got ids %d, %d, want 0, 1", a.ID, b.ID)
	}
	wantLive(t, c, "0=lb.example:9092", "1=lb.example:9092")
	if _, err := c.RenewNode(t.Context(), a, time.Minute); err != nil {
		t.Fatalf("RenewNode of a live lease: %v", err)
	}
}

func testNodeExpiryAndTakeover(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	c := open(t)
	const ttl = 300 * time.Millisecond
	a := register(t, c, "10.0.0.1:9092", ttl)
	wantLive(t, c, "0=10.0.0.1:9092")
	time.Sleep(ttl + 200*time.Millisecond)
	wantLive(t, c)
	// Not taken over yet: the lease is still this registration's, and renewing it
	// brings the node back.
	a, err := c.RenewNode(t.Context(), a, ttl)
	if err != nil {
		t.Fatalf("RenewNode after expiry, before any takeover: %v", err)
	}
	wantLive(t, c, "0=10.0.0.1:9092")
	time.Sleep(ttl + 200*time.Millisecond)
	b := register(t, c, "10.0.0.2:9092", time.Minute)
	if b.ID != 0 {
		t.Fatalf("registration after expiry got id %d, want the expired id 0", b.ID)
	}
	if _, err := c.RenewNode(t.Context(), a, time.Minute); !errors.Is(err, catalog.ErrNodeLeaseLost) {
		t.Fatalf("RenewNode of a lease taken over = %v, want ErrNodeLeaseLost", err)
	}
	// Deregistering the lost lease leaves the new holder alone.
	if err := c.DeregisterNode(t.Context(), a); err != nil {
		t.Fatalf("DeregisterNode of a lost lease: %v", err)
	}
	wantLive(t, c, "0=10.0.0.2:9092")
	if err := c.DeregisterNode(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RenewNode(t.Context(), b, time.Minute); err != nil {
		// Deregistered but not taken over: renewing is allowed and revives the node.
		t.Fatalf("RenewNode after deregistering: %v", err)
	}
}

func testNodeInvalid(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	c := open(t)
	if _, err := c.RegisterNode(t.Context(), "", time.Minute); err == nil {
		t.Error("RegisterNode with no address: no error")
	}
	if _, err := c.RegisterNode(t.Context(), "10.0.0.1:9092", 0); err == nil {
		t.Error("RegisterNode with no lease: no error")
	}
	wantLive(t, c)
}

func testNodeConcurrentRegistrations(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	const nodes = 16
	cats := []ClusterCatalog{open(t), open(t), open(t), open(t)}
	ids := make([]int32, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			l, err := cats[i%len(cats)].RegisterNode(t.Context(), fmt.Sprintf("10.0.1.%d:9092", i), time.Minute)
			ids[i], errs[i] = l.ID, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != int32(i) {
			t.Fatalf("%d nodes registering at once got ids %v, want 0..%d each once", nodes, ids, nodes-1)
		}
	}
	live, err := cats[0].LiveNodes(t.Context())
	if err != nil || len(live) != nodes {
		t.Fatalf("LiveNodes = %d nodes, %v; want %d", len(live), err, nodes)
	}
}

func testClusterID(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	cats := []ClusterCatalog{open(t), open(t), open(t)}
	ids := make([]string, 2*len(cats))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i], errs[i] = cats[i%len(cats)].ClusterID(t.Context()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(ids[0]) != 22 {
		t.Fatalf("cluster id %q: want Kafka's form, 22 characters of base64", ids[0])
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("first ClusterID calls at once disagree: %v", ids)
		}
	}
	again, err := open(t).ClusterID(t.Context())
	if err != nil || again != ids[0] {
		t.Fatalf("ClusterID later = %q, %v; want %q", again, err, ids[0])
	}
}

func testTopicUUIDs(t *testing.T, open func(t *testing.T) ClusterCatalog) {
	c := open(t)
	ctx := t.Context()
	name := Name(t, "uuid")
	a, err := c.CreateTopic(ctx, name, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CreateTopic(ctx, Name(t, "uuid"), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.UUID.IsZero() || other.UUID.IsZero() || a.UUID == other.UUID {
		t.Fatalf("topic UUIDs %s and %s: want two distinct non-zero UUIDs", a.UUID, other.UUID)
	}
	if v := a.UUID[6] >> 4; v != 4 {
		t.Errorf("topic UUID %s has version %d, want 4 (random)", a.UUID, v)
	}
	byName, err := c.Topic(ctx, name)
	if err != nil || byName.UUID != a.UUID {
		t.Fatalf("Topic(%s).UUID = %s, %v; want %s", name, byName.UUID, err, a.UUID)
	}
	byID, err := c.TopicByID(ctx, a.ID)
	if err != nil || byID.UUID != a.UUID {
		t.Fatalf("TopicByID.UUID = %s, %v; want %s", byID.UUID, err, a.UUID)
	}
	byUUID, err := c.TopicByUUID(ctx, a.UUID)
	if err != nil || byUUID.ID != a.ID || byUUID.Name != name || byUUID.Partitions != 2 {
		t.Fatalf("TopicByUUID = %+v, %v; want topic %d", byUUID, err, a.ID)
	}
	listed, err := c.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(listed, func(x catalog.Topic) bool { return x.ID == a.ID })
	if i < 0 || listed[i].UUID != a.UUID {
		t.Fatalf("Topics lists %s without its UUID %s", name, a.UUID)
	}
	grown, err := c.UpdateTopic(ctx, name, 3, nil)
	if err != nil || grown.UUID != a.UUID {
		t.Fatalf("UpdateTopic changed the UUID: %s, %v; want %s", grown.UUID, err, a.UUID)
	}
	if err := c.DeleteTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TopicByUUID(ctx, a.UUID); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Fatalf("TopicByUUID of a deleted topic = %v, want ErrTopicNotFound", err)
	}
	again, err := c.CreateTopic(ctx, name, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.UUID == a.UUID || again.UUID.IsZero() {
		t.Fatalf("recreated topic has UUID %s, the deleted one had %s: want a new one", again.UUID, a.UUID)
	}
	if _, err := c.TopicByUUID(ctx, catalog.NewUUID()); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Fatalf("TopicByUUID of an unknown UUID = %v, want ErrTopicNotFound", err)
	}
}

// WantDistinctUUIDs asserts that c has n live topics, each with a UUID of its own: what
// a migration that adds topic UUIDs must leave behind.
func WantDistinctUUIDs(t *testing.T, c catalog.Catalog, n int) {
	t.Helper()
	ts, err := c.Topics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[catalog.UUID]bool{}
	for _, tp := range ts {
		if tp.UUID.IsZero() || seen[tp.UUID] {
			t.Fatalf("topic %s has UUID %s: want a distinct non-zero UUID each", tp.Name, tp.UUID)
		}
		seen[tp.UUID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d topics, want %d", len(seen), n)
	}
}
