package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// Cluster is what the Kafka front end needs of the catalog beyond topics and commits:
// the registry of the nodes that serve the protocol, the cluster id, and topics by
// UUID. Kafka clients need brokers with ids and addresses; Strata has no leaders, so
// each node registers itself with a lease on the database clock, renews it, and every
// node answers Metadata from the same list of live nodes. Implemented by both backends
// and proved by catalogtest (its "cluster" suite).
type Cluster interface {
	// RegisterNode gives the node at addr (host:port, as clients should reach it) an id
	// and a lease of ttl on the database clock. The id is chosen under a lock, so nodes
	// starting at once get distinct ids (engine.ChooseNodeID): a node restarting at the same
	// address after its lease ended gets its old id back, so clients' cached brokers and
	// the partitions it leads stay where they were.
	RegisterNode(ctx context.Context, addr string, ttl time.Duration) (NodeLease, error)
	// RenewNode extends the lease by ttl from now. A lease whose id was taken over by
	// another registration (after it expired), or that was deregistered, is lost:
	// ErrNodeLeaseLost, and the node must register again.
	RenewNode(ctx context.Context, l NodeLease, ttl time.Duration) (NodeLease, error)
	// DeregisterNode ends the lease now (a clean shutdown): the node leaves the live
	// list at once and its id is free. A lease already lost is not an error.
	DeregisterNode(ctx context.Context, l NodeLease) error
	// LiveNodes lists the nodes whose lease has not ended on the database clock, by id.
	LiveNodes(ctx context.Context) ([]Node, error)
	// ClusterID is the cluster's id: made once (engine.NewClusterID) by whichever call comes
	// first, then the same for every node and every call.
	ClusterID(ctx context.Context) (string, error)
	// TopicByUUID returns the live topic whose UUID is id (ErrTopicNotFound for a
	// deleted topic's: UUIDs are never reused).
	TopicByUUID(ctx context.Context, id UUID) (Topic, error)
}

// ErrNodeLeaseLost: the node's lease was taken over or ended; register again.
var ErrNodeLeaseLost = errors.New("node lease lost")

// Node is a registered node.
type Node struct {
	ID         int32
	Addr       string // host:port
	LeaseUntil time.Time
}

// NodeLease is a node's hold on its id. Token tells this registration from a later one
// of the same id, so a node whose lease was taken over cannot renew it.
type NodeLease struct {
	Node
	Token int64
}

// UUID is a topic's UUID: random (version 4) and never reused, made when the topic is
// created. Kafka clients name topics by it from Metadata v10 on.
type UUID [16]byte

// NewUUID returns a random version-4 UUID.
func NewUUID() UUID {
	var u UUID
	_, _ = rand.Read(u[:]) // never fails (crypto/rand)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// IsZero says whether u is the zero UUID, which Kafka reads as "no topic id".
func (u UUID) IsZero() bool { return u == UUID{} }

// String is the canonical 8-4-4-4-12 hex form.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}
