package shop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/strata-io/strata/client"
)

// Input is one input record as stored: what the generator produces (Partition and
// Offset unset) and the oracles read back.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	Value     []byte // JSON; nil: a deletion (customers only)
	TS        int64  // ms
}

// Generate makes about n inputs, deterministic for a seed, over span from start:
// orders (45%), most paid 0–14 minutes later (so some payments miss the 10-minute
// window: unpaid orders and orphan payments), a few amended (a second record of the
// same order, with another customer or amount), orphan payments for orders that never
// existed, and customer records — every customer first, then updates and a few
// deletions — with orders naming customers of which some never exist. Timestamps are
// jittered by ±2 minutes, and 1% of records come 20 minutes late (past grace).
// Records are in nominal-time order.
func Generate(seed uint64, n, customers int, start time.Time, span time.Duration) []Input {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	type ev struct {
		in      Input
		nominal int64
	}
	var evs []ev
	add := func(topic, key string, v any, nominal int64) {
		var b []byte
		if v != nil {
			b, _ = json.Marshal(v)
		}
		evs = append(evs, ev{Input{Topic: topic, Key: key, Value: b}, nominal})
	}
	t0 := start.UnixMilli()
	customer := func() string { return fmt.Sprintf("c%04d", rng.IntN(customers+customers/20+1)) } // some never exist
	for c := range customers {
		add(Customers, fmt.Sprintf("c%04d", c), Customer{Name: fmt.Sprintf("customer %d", c), Tier: "bronze"}, t0-int64(10*time.Minute/time.Millisecond)+int64(c))
	}
	nOrders := n * 45 / 100
	stepMs := max(span.Milliseconds()/int64(max(nOrders, 1)), 1)
	for i := range nOrders {
		id := fmt.Sprintf("o%07d", i)
		at := t0 + int64(i)*stepMs
		o := Order{Customer: customer(), Amount: int64(10 + rng.IntN(490))}
		add(Orders, id, o, at)
		if rng.IntN(100) < 85 {
			add(Payments, id, Payment{Amount: o.Amount}, at+rng.Int64N(14*60_000))
		}
		if rng.IntN(100) < 8 {
			add(Orders, id, Order{Customer: customer(), Amount: o.Amount + 1}, at+60_000+rng.Int64N(7*60_000))
		}
	}
	for i := range nOrders * 5 / 100 {
		add(Payments, fmt.Sprintf("x%07d", i), Payment{Amount: int64(1 + rng.IntN(99))}, t0+rng.Int64N(span.Milliseconds()))
	}
	tiers := []string{"bronze", "silver", "gold"}
	for i := range n * 10 / 100 {
		id := fmt.Sprintf("c%04d", rng.IntN(customers))
		var v any = Customer{Name: fmt.Sprintf("customer %s v%d", id, i), Tier: tiers[rng.IntN(3)]}
		if rng.IntN(100) < 3 {
			v = nil
		}
		add(Customers, id, v, t0+rng.Int64N(span.Milliseconds()))
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].nominal < evs[j].nominal })
	out := make([]Input, len(evs))
	for i, e := range evs {
		jitter := rng.Int64N(4*60_000) - 2*60_000
		if rng.IntN(100) == 0 {
			jitter = -20 * 60_000
		}
		e.in.TS = e.nominal + jitter
		out[i] = e.in
	}
	return out
}

// Records renders inputs as records for their topics (partitions chosen by the
// producer from the keys).
func Records(ins []Input) map[string][]client.Record {
	out := map[string][]client.Record{}
	for _, in := range ins {
		r := client.Record{Key: client.String(in.Key), Timestamp: time.UnixMilli(in.TS)}
		if in.Value != nil {
			r.Value = json.RawMessage(in.Value)
		}
		out[in.Topic] = append(out[in.Topic], r)
	}
	return out
}

// byPartition groups inputs of the topics by partition, each in offset order.
func byPartition(ins []Input, topics ...string) map[int32]map[string][]Input {
	by := map[int32]map[string][]Input{}
	for _, in := range ins {
		if !slices.Contains(topics, in.Topic) {
			continue
		}
		if by[in.Partition] == nil {
			by[in.Partition] = map[string][]Input{}
		}
		by[in.Partition][in.Topic] = append(by[in.Partition][in.Topic], in)
	}
	for _, m := range by {
		for _, q := range m {
			sort.Slice(q, func(i, j int) bool { return q[i].Offset < q[j].Offset })
		}
	}
	return by
}

// Merge interleaves offset-ordered queues by their heads, the smallest (timestamp,
// topic, partition, offset) first: the order a task processes its inputs in.
func Merge(queues ...[]Input) []Input {
	var out []Input
	for {
		best := -1
		for i, q := range queues {
			if len(q) > 0 && (best < 0 || before(q[0], queues[best][0])) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		out = append(out, queues[best][0])
		queues[best] = queues[best][1:]
	}
}

func before(x, y Input) bool {
	if x.TS != y.TS {
		return x.TS < y.TS
	}
	if x.Topic != y.Topic {
		return x.Topic < y.Topic
	}
	if x.Partition != y.Partition {
		return x.Partition < y.Partition
	}
	return x.Offset < y.Offset
}

// StatusKey renders an order-status output for comparisons.
func StatusKey(key string, s Status, ts int64) string {
	b, _ := json.Marshal(s)
	return fmt.Sprintf("%s %s @%d", key, b, ts)
}

// OracleStatuses computes the order-status outputs single-threaded, as the outer join
// defines them, per partition over the orders and payments merged by the runtime's
// determinism rule: budget is how many closed unmatched records one record may emit
// (the runtime's max(16, MaxCommitRecords/16)). It returns them sorted, and how many
// records were late.
func OracleStatuses(ins []Input, budget int) ([]string, int) {
	w, g := Window.Milliseconds(), Grace.Milliseconds()
	var out []string
	late := 0
	for _, queues := range byPartition(ins, Orders, Payments) {
		type rec struct {
			left bool
			key  string
			ts   int64
			seq  int
			val  []byte
		}
		stores := map[bool]map[string][]rec{true: {}, false: {}}
		var outer []rec // sorted: time, left first, key, seq
		less := func(a, b rec) int {
			switch {
			case a.ts != b.ts:
				return int(a.ts - b.ts)
			case a.left != b.left:
				if a.left {
					return -1
				}
				return 1
			case a.key != b.key:
				return bytes.Compare([]byte(a.key), []byte(b.key))
			}
			return a.seq - b.seq
		}
		emit := func(key string, o, p []byte, ts int64) {
			var op *Order
			var pp *Payment
			if o != nil {
				op = new(Order)
				_ = json.Unmarshal(o, op)
			}
			if p != nil {
				pp = new(Payment)
				_ = json.Unmarshal(p, pp)
			}
			out = append(out, StatusKey(key, Settle(op, pp), ts))
		}
		var st int64
		has := false
		for _, in := range Merge(queues[Orders], queues[Payments]) {
			left := in.Topic == Orders
			if !has || in.TS > st {
				st, has = in.TS, true
			}
			if in.TS+w+g < st {
				late++
				continue
			}
			if in.TS == st { // closed unmatched records, within the budget
				n := 0
				for len(outer) > 0 && n < budget && outer[0].ts+w+g < st {
					r := outer[0]
					outer = outer[1:]
					if r.left {
						emit(r.key, r.val, nil, r.ts)
					} else {
						emit(r.key, nil, r.val, r.ts)
					}
					n++
				}
			}
			seq := 0
			for _, r := range stores[left][in.Key] {
				if r.ts == in.TS {
					seq = max(seq, r.seq+1)
				}
			}
			me := rec{left, in.Key, in.TS, seq, in.Value}
			stores[left][in.Key] = append(stores[left][in.Key], me)
			var partners []rec
			for _, r := range stores[!left][in.Key] {
				if r.ts >= in.TS-w && r.ts <= in.TS+w {
					partners = append(partners, r)
				}
			}
			slices.SortFunc(partners, less)
			for _, p := range partners {
				if i, ok := slices.BinarySearchFunc(outer, p, less); ok {
					outer = slices.Delete(outer, i, i+1)
				}
				if left {
					emit(in.Key, in.Value, p.val, max(in.TS, p.ts))
				} else {
					emit(in.Key, p.val, in.Value, max(in.TS, p.ts))
				}
			}
			if len(partners) == 0 {
				i, _ := slices.BinarySearchFunc(outer, me, less)
				outer = slices.Insert(outer, i, me)
			}
		}
	}
	slices.Sort(out)
	return out, late
}

// OracleEnriched is the final enriched-orders table: each order's latest version
// with its customer's latest record, for orders whose customer exists.
func OracleEnriched(ins []Input) map[string]EnrichedOrder {
	last := func(topic string) map[string][]byte {
		m := map[string][]byte{}
		for _, q := range byPartition(ins, topic) {
			for _, in := range q[topic] {
				m[in.Key] = in.Value
			}
		}
		return m
	}
	orders, customers := last(Orders), last(Customers)
	out := map[string]EnrichedOrder{}
	for id, ob := range orders {
		var o Order
		_ = json.Unmarshal(ob, &o)
		cb := customers[o.Customer]
		if cb == nil {
			continue
		}
		var c Customer
		_ = json.Unmarshal(cb, &c)
		out[id] = Enrich(o, c)
	}
	return out
}
