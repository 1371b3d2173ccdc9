package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
)

func members(ids ...int32) *membership {
	m := &membership{}
	for _, id := range ids {
		m.ids = append(m.ids, id)
		m.brokers = append(m.brokers, kbroker{id: id, host: "h", port: 1})
	}
	return m
}

// The hash is part of the protocol between nodes: during a rolling upgrade, old and new
// binaries must name the same leaders. These answers are pinned; a change to them must
// be deliberate (and leaves leaders split for the length of a rollout).
func TestRendezvousPinned(t *testing.T) {
	m := members(0, 1, 2, 3)
	var got []string
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"orders", 0}, {"orders", 1}, {"orders", 2}, {"payments", 0}, {"", 0}} {
		got = append(got, fmt.Sprintf("%s/%d=%d", tp.topic, tp.p, m.leader(tp.topic, tp.p)))
	}
	got = append(got, fmt.Sprintf("group billing=%d", m.coordinator(0, "billing")), fmt.Sprintf("txn billing=%d", m.coordinator(1, "billing")))
	want := fmt.Sprint(pinnedRendezvous)
	if fmt.Sprint(got) != want {
		t.Fatalf("rendezvous answers changed:\n got %v\nwant %v", got, want)
	}
}

var pinnedRendezvous = []string{"orders/0=0", "orders/1=2", "orders/2=0", "payments/0=3", "/0=1", "group billing=1", "txn billing=2"}

// Spread and minimal movement: with 4 nodes each leads about a quarter of the
// partitions; when one leaves, only its partitions move, and they spread over the rest.
func TestRendezvousSpreadAndMovement(t *testing.T) {
	const parts = 4000
	four, three := members(0, 1, 2, 3), members(0, 1, 3)
	count := map[int32]int{}
	movedTo := map[int32]int{}
	for p := range int32(parts) {
		topic := fmt.Sprintf("topic-%d", p%40)
		before, after := four.leader(topic, p), three.leader(topic, p)
		count[before]++
		if before != 2 && after != before {
			t.Fatalf("%s/%d moved from %d to %d though node %d stayed", topic, p, before, after, before)
		}
		if before == 2 {
			movedTo[after]++
		}
	}
	for id, n := range count {
		if n < parts/4*8/10 || n > parts/4*12/10 {
			t.Errorf("node %d leads %d of %d partitions, want about %d", id, n, parts, parts/4)
		}
	}
	for _, id := range []int32{0, 1, 3} {
		if movedTo[id] < count[2]/3*7/10 {
			t.Errorf("node %d took %d of the %d partitions of the node that left, want about a third", id, movedTo[id], count[2])
		}
	}
}

// The registrar against a real catalog: registered while running, renewed past its
// lease, deregistered on the way out.
func TestRegistrar(t *testing.T) {
	cat, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	r, err := NewRegistrar(cat, "127.0.0.1:19092", 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(time.Second) // three lease lengths
	live, err := cat.LiveNodes(t.Context())
	if err != nil || len(live) != 1 || live[0].Addr != "127.0.0.1:19092" || live[0].ID != r.Node().ID {
		t.Fatalf("live nodes while running: %+v, %v", live, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if live, err := cat.LiveNodes(t.Context()); err != nil || len(live) != 0 {
		t.Fatalf("live nodes after stopping: %+v, %v; want none", live, err)
	}
}

// lossyRegistry loses the lease on the first renewal.
type lossyRegistry struct {
	mu       sync.Mutex
	renewals int
	regs     []string
	nextID   int32
}

func (l *lossyRegistry) RegisterNode(_ context.Context, addr string, ttl time.Duration) (catalog.NodeLease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.regs = append(l.regs, addr)
	id := l.nextID
	l.nextID++
	return catalog.NodeLease{Node: catalog.Node{ID: id, Addr: addr}, Token: int64(id)}, nil
}

func (l *lossyRegistry) RenewNode(_ context.Context, lease catalog.NodeLease, _ time.Duration) (catalog.NodeLease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewals++
	if l.renewals == 1 {
		return catalog.NodeLease{}, fmt.Errorf("renew: %w", catalog.ErrNodeLeaseLost)
	}
	return lease, nil
}

func (l *lossyRegistry) DeregisterNode(context.Context, catalog.NodeLease) error { return nil }

func TestRegistrarRegistersAgainWhenLeaseLost(t *testing.T) {
	reg := &lossyRegistry{}
	r, err := NewRegistrar(reg, "127.0.0.1:19092", 150*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if len(reg.regs) != 2 || r.Node().ID != 1 {
		t.Fatalf("%d registrations, node id %d; want a second registration (id 1) after the lease was lost", len(reg.regs), r.Node().ID)
	}
}
