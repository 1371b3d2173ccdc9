// Package shop is the joins example of the Streams API: orders and payments joined
// within a time window (a stream-stream outer join), and orders enriched with their
// customers (a foreign-key table-table join) — its topology, a deterministic data
// generator, and single-threaded oracles the tests compare the application's outputs
// with.
package shop

import (
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/window"
)

// Topics. Orders and payments are keyed by order id and co-partitioned; customers
// are keyed by customer id, partitioned as they like.
const (
	Orders    = "orders"
	Payments  = "payments"
	Customers = "customers"
	Statuses  = "order-status"
	Enriched  = "enriched-orders"
)

// The join window: a payment settles an order placed at most Window before or after
// it; records later than Grace (in stream time) past their window are dropped.
const (
	Window = 10 * time.Minute
	Grace  = 3 * time.Minute
)

// Order is an order (a later record of the same order id amends it).
type Order struct {
	Customer string `json:"customer"`
	Amount   int64  `json:"amount"`
}

// Payment pays for an order.
type Payment struct {
	Amount int64 `json:"amount"`
}

// Customer is a customer record.
type Customer struct {
	Name string `json:"name"`
	Tier string `json:"tier"`
}

// Status is the outcome of the orders-payments join: "paid" (an order and a payment
// within the window), "unpaid" (an order no payment met) or "orphan" (a payment no
// order met).
type Status struct {
	Status string `json:"status"`
	Amount int64  `json:"amount"`
	Paid   int64  `json:"paid"`
}

// EnrichedOrder is an order with its customer's name and tier, or Deleted when the
// order no longer has a result (its customer is gone).
type EnrichedOrder struct {
	Customer string `json:"customer,omitempty"`
	Name     string `json:"name,omitempty"`
	Tier     string `json:"tier,omitempty"`
	Amount   int64  `json:"amount,omitempty"`
	Deleted  bool   `json:"deleted,omitempty"`
}

// Settle is the outer join's joiner.
func Settle(o *Order, p *Payment) Status {
	switch {
	case o != nil && p != nil:
		return Status{Status: "paid", Amount: o.Amount, Paid: p.Amount}
	case o != nil:
		return Status{Status: "unpaid", Amount: o.Amount}
	default:
		return Status{Status: "orphan", Paid: p.Amount}
	}
}

// Enrich is the foreign-key join's joiner.
func Enrich(o Order, c Customer) EnrichedOrder {
	return EnrichedOrder{Customer: o.Customer, Name: c.Name, Tier: c.Tier, Amount: o.Amount}
}

// Build returns the shop topology for application id app.
func Build(app string) *streams.Builder {
	b := streams.NewBuilder(app)
	orders := streams.From(b, Orders, serde.String, serde.JSON[Order]())
	payments := streams.From(b, Payments, serde.String, serde.JSON[Payment]())
	customers := streams.FromTable(b, Customers, "customers", serde.String, serde.JSON[Customer]())

	// Every order and every payment settles once: paid, unpaid or orphan.
	streams.OuterJoin(orders, payments, "settle", window.Join(Window, Grace), func(_ string, o *Order, p *Payment) Status {
		return Settle(o, p)
	}).To(Statuses, serde.String, serde.JSON[Status]())

	// The latest version of each order, with its customer.
	orderTable := streams.ToTable(orders, "order-table")
	enriched := streams.JoinForeignKey(orderTable, customers, "order-customer", func(o Order) string { return o.Customer }, Enrich, serde.JSON[EnrichedOrder]())
	streams.MapValues(enriched.Changes(), func(c streams.Change[EnrichedOrder]) EnrichedOrder {
		if c.New == nil {
			return EnrichedOrder{Deleted: true}
		}
		return *c.New
	}).To(Enriched, serde.String, serde.JSON[EnrichedOrder]())
	return b
}
