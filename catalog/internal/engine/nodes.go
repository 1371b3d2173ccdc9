package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The node registry's rules (catalog.Cluster): which id a registration takes, what a
// lease may be, and the random tokens and cluster id the backends store.

// NodeRow is a row of the registry as ChooseNodeID sees it.
type NodeRow struct {
	ID         int32
	Addr       string
	LeaseUntil time.Time
}

// ChooseNodeID picks the id a registration at addr takes, given every row of the
// registry (read under the registration lock) and the database clock. In order of
// preference:
//
//  1. the lowest expired id last held at addr: a restarted node keeps its id, so clients
//     see the same broker and the same partition leaders;
//  2. the lowest expired id: ids stay few and small when nodes come and go under new
//     addresses (containers), as Kafka's broker ids do;
//  3. one above the highest id (0 for the first node).
//
// A row whose lease has not ended is never taken, even at the same address: that may be
// another node behind the same address, or this node's previous life whose lease will
// lapse; its id frees itself then.
func ChooseNodeID(rows []NodeRow, addr string, now time.Time) int32 {
	sameAddr, anyExpired, next := int32(-1), int32(-1), int32(0)
	for _, r := range rows {
		if r.ID >= next {
			next = r.ID + 1
		}
		if r.LeaseUntil.After(now) {
			continue
		}
		if r.Addr == addr && (sameAddr < 0 || r.ID < sameAddr) {
			sameAddr = r.ID
		}
		if anyExpired < 0 || r.ID < anyExpired {
			anyExpired = r.ID
		}
	}
	switch {
	case sameAddr >= 0:
		return sameAddr
	case anyExpired >= 0:
		return anyExpired
	}
	return next
}

// ValidateNodeLease checks RegisterNode's and RenewNode's arguments.
func ValidateNodeLease(addr string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("node lease of %v: want at least 1ms", ttl)
	}
	if addr == "" || len(addr) > 1024 {
		return fmt.Errorf("node address %q: want host:port", addr)
	}
	return nil
}

// NewNodeToken returns a random registration token.
func NewNodeToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	var v int64
	for _, c := range b {
		v = v<<8 | int64(c)
	}
	return v
}

// NewClusterID returns a new cluster id in Kafka's form: a random 16-byte UUID in
// unpadded URL-safe base64 (22 characters).
func NewClusterID() string {
	u := catalog.NewUUID()
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// NodeStmts are the statements of a node registration, in one write transaction that
// no other registration runs beside.
type NodeStmts interface {
	// LockNodes takes the registry's lock (where registrations could otherwise run at
	// once) and answers the database clock.
	LockNodes(ctx context.Context) (time.Time, error)
	// Nodes reads every node row.
	Nodes(ctx context.Context) ([]NodeRow, error)
	// PutNode writes node id's row with a lease of ttl from now on the database clock
	// and answers the lease's end as stored.
	PutNode(ctx context.Context, id int32, addr string, token int64, now time.Time, ttl time.Duration) (time.Time, error)
}

// NodeBackend runs node registrations.
type NodeBackend interface {
	// Name is the backend's name, for errors ("postgres", "sqlite").
	Name() string
	// NodeTx runs fn in a write transaction and commits it when fn returns nil.
	NodeTx(ctx context.Context, fn func(NodeStmts) error) error
}

// RegisterNode takes an id for the node at addr (ChooseNodeID) with a new token and a
// lease of ttl on the database clock (catalog.Cluster.RegisterNode).
func RegisterNode(ctx context.Context, db NodeBackend, addr string, ttl time.Duration) (catalog.NodeLease, error) {
	if err := ValidateNodeLease(addr, ttl); err != nil {
		return catalog.NodeLease{}, fmt.Errorf("%s: register node %s: %w", db.Name(), addr, err)
	}
	var l catalog.NodeLease
	err := db.NodeTx(ctx, func(q NodeStmts) error {
		now, err := q.LockNodes(ctx)
		if err != nil {
			return err
		}
		nodes, err := q.Nodes(ctx)
		if err != nil {
			return err
		}
		l = catalog.NodeLease{Node: catalog.Node{ID: ChooseNodeID(nodes, addr, now), Addr: addr}, Token: NewNodeToken()}
		l.LeaseUntil, err = q.PutNode(ctx, l.ID, addr, l.Token, now, ttl)
		return err
	})
	if err != nil {
		return catalog.NodeLease{}, fmt.Errorf("%s: register node %s: %w", db.Name(), addr, err)
	}
	l.LeaseUntil = l.LeaseUntil.UTC()
	return l, nil
}
