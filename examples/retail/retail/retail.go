// Package retail is the retail example of the Streams API (the seed's sentence: a
// retail application takes in streams of sales and shipments and outputs a stream of
// reorders and price adjustments computed off this data): its topology, a
// deterministic data generator, and a single-threaded oracle the tests compare the
// application's outputs with.
package retail

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/window"
)

// Topics.
const (
	Sales            = "sales"
	Shipments        = "shipments"
	Reorders         = "reorders"
	PriceAdjustments = "price-adjustments"
	Ticks            = "retail-ticks"
)

// The business rules.
const (
	InitialStock = 100 // a SKU's stock before its first sale or shipment
	ReorderPoint = 20  // a reorder goes out when stock falls below this
	TargetStock  = 150 // and asks for enough to reach this
	Grace        = 2 * time.Minute
)

// Window is the sales window price adjustments look at.
var Window = window.Tumbling(time.Hour, Grace)

// Sale is one sale of a SKU.
type Sale struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// Shipment is stock arriving for a SKU.
type Shipment struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// Reorder asks the supplier for Quantity of SKU, whose stock just fell to Stock.
type Reorder struct {
	SKU      string `json:"sku"`
	Stock    int64  `json:"stock"`
	Quantity int64  `json:"quantity"`
}

// PriceAdjustment changes SKU's price by ChangePct after an hour (starting at
// WindowStart, Unix ms) in which Sold units sold with Stock left.
type PriceAdjustment struct {
	SKU         string `json:"sku"`
	WindowStart int64  `json:"window_start"`
	Sold        int64  `json:"sold"`
	Stock       int64  `json:"stock"`
	ChangePct   int64  `json:"change_pct"`
}

// Tick is a wall-clock punctuator's record: proof of life of a task on an instance.
type Tick struct {
	Task     string `json:"task"`
	Instance string `json:"instance"`
	At       int64  `json:"at"`
	Seq      int64  `json:"seq"`
	// Incarnation is random per task instance: a task that moves away and comes back
	// ticks under a new one.
	Incarnation string `json:"incarnation"`
}

// Policy is the pricing rule: fast-selling SKUs running low go up, slow ones with
// plenty of stock go down, the rest stay.
func Policy(sold, stock int64) (int64, bool) {
	switch {
	case sold >= 20 && stock < 60:
		return 5, true
	case sold <= 3 && stock >= 120:
		return -5, true
	}
	return 0, false
}

// Reordered says whether a stock change from old to new crosses the reorder point
// downwards, and how much to order.
func Reordered(old, new int64) (Reorder, bool) {
	if old >= ReorderPoint && new < ReorderPoint {
		return Reorder{Stock: new, Quantity: TargetStock - new}, true
	}
	return Reorder{}, false
}

// Options tune the topology.
type Options struct {
	// Tick, when set, makes every task send a Tick to the topic retail-ticks at this
	// wall-clock interval, from Instance.
	Tick     time.Duration
	Instance string
}

// Build returns the retail topology for application id app.
func Build(app string, o Options) *streams.Builder {
	b := streams.NewBuilder(app)
	sales := streams.From(b, Sales, serde.String, serde.JSON[Sale]())
	ships := streams.From(b, Shipments, serde.String, serde.JSON[Shipment]())

	// Stock per SKU: shipments add, sales take away.
	delta := streams.Merge(
		streams.MapValues(sales, func(s Sale) int64 { return -s.Qty }),
		streams.MapValues(ships, func(s Shipment) int64 { return s.Qty }))
	stock := streams.Aggregate(streams.GroupByKey(delta), "stock",
		func() int64 { return InitialStock }, func(_ string, d, n int64) int64 { return n + d }, serde.Int64)

	// A reorder whenever stock falls through the reorder point.
	streams.FlatMapValues(stock.Changes(), func(sku string, c streams.Change[int64]) []Reorder {
		old := int64(InitialStock)
		if c.Old != nil {
			old = *c.Old
		}
		if r, ok := Reordered(old, *c.New); ok {
			r.SKU = sku
			return []Reorder{r}
		}
		return nil
	}).To(Reorders, serde.String, serde.JSON[Reorder]())

	// Hourly sales per SKU, final once the hour (plus grace) has passed, joined with
	// the stock at that moment.
	hourly := streams.WindowedAggregate(streams.GroupByKey(sales), "sales-per-hour", Window,
		func() int64 { return 0 }, func(_ string, s Sale, n int64) int64 { return n + s.Qty }, serde.Int64, streams.EmitOnWindowClose)
	adj := streams.JoinTable(hourly, stock, func(sku string, h window.Result[int64], onHand int64) *PriceAdjustment {
		pct, ok := Policy(h.Value, onHand)
		if !ok {
			return nil
		}
		return &PriceAdjustment{SKU: sku, WindowStart: h.Window.Start, Sold: h.Value, Stock: onHand, ChangePct: pct}
	})
	streams.FlatMapValues(adj, func(_ string, p *PriceAdjustment) []PriceAdjustment {
		if p == nil {
			return nil
		}
		return []PriceAdjustment{*p}
	}).To(PriceAdjustments, serde.String, serde.JSON[PriceAdjustment]())

	if o.Tick > 0 {
		streams.Process(sales, "ticker", func() streams.Processor[string, Sale, string, Tick] {
			return &ticker{every: o.Tick, instance: o.Instance}
		}).To(Ticks, serde.String, serde.JSON[Tick]())
	}
	return b
}

// ticker forwards nothing of its input; its wall-clock punctuator sends a Tick.
type ticker struct {
	every       time.Duration
	instance    string
	seq         int64
	incarnation string
}

func (t *ticker) Init(ctx *streams.ProcessorContext[string, Tick]) error {
	t.incarnation = fmt.Sprintf("%016x", rand.Uint64())
	return ctx.Schedule(t.every, streams.WallClock, func(now time.Time) error {
		t.seq++
		task := ctx.TaskID().String()
		ctx.Forward(streams.Record[string, Tick]{Key: task, Value: Tick{Task: task, Instance: t.instance, At: now.UnixMilli(), Seq: t.seq, Incarnation: t.incarnation}, Timestamp: now})
		return nil
	})
}

func (t *ticker) Process(streams.Record[string, Sale]) error { return nil }
func (t *ticker) Close() error                               { return nil }

// Key identifies an output for comparisons: reorders by SKU and stock, adjustments by
// SKU and window.
func (r Reorder) Key() string {
	return fmt.Sprintf("reorder %s stock=%d qty=%d", r.SKU, r.Stock, r.Quantity)
}
func (p PriceAdjustment) Key() string {
	return fmt.Sprintf("adjust %s window=%d sold=%d stock=%d pct=%d", p.SKU, p.WindowStart, p.Sold, p.Stock, p.ChangePct)
}
