package v1

import "time"

// Node is a live node of the cluster's registry: a node serving the Kafka protocol,
// registered with the address clients reach it at and a lease it renews.
type Node struct {
	// ID is the node's id, as Kafka clients see it in Metadata.
	ID int32 `json:"id"`
	// Address is host:port of its Kafka listener.
	Address string `json:"address"`
	// LeaseUntil is when its registration ends unless renewed (the catalog's clock).
	LeaseUntil time.Time `json:"lease_until"`
}

// NodeList is the answer of GET /v1/nodes, by id.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}
