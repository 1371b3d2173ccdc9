package retail

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/strata-io/strata/client"
)

// Input is one input record as stored: what the generator produces and the oracle
// reads back.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
	SKU       string
	Qty       int64
	TS        int64 // ms
}

// Generate makes n sales and shipments over skus SKUs, deterministic for a seed:
// nominal times one step apart from start, each shuffled by up to ±5 minutes, in
// nominal order. About 85% are sales of 1–5 units, 15% shipments of 5–30.
func Generate(seed uint64, n, skus int, start time.Time, step time.Duration) []Input {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]Input, n)
	for i := range out {
		in := Input{SKU: fmt.Sprintf("sku-%04d", rng.IntN(skus))}
		if rng.IntN(100) < 85 {
			in.Topic, in.Qty = Sales, int64(1+rng.IntN(5))
		} else {
			in.Topic, in.Qty = Shipments, int64(5+rng.IntN(26))
		}
		jitter := time.Duration(rng.Int64N(int64(10*time.Minute))) - 5*time.Minute
		in.TS = start.Add(time.Duration(i)*step + jitter).UnixMilli()
		out[i] = in
	}
	return out
}

// Records renders inputs as records for their topics (partitions chosen by the
// producer from the keys).
func Records(ins []Input) map[string][]client.Record {
	out := map[string][]client.Record{}
	for _, in := range ins {
		v, _ := json.Marshal(Sale{SKU: in.SKU, Qty: in.Qty})
		out[in.Topic] = append(out[in.Topic], client.Record{Key: client.String(in.SKU), Value: v, Timestamp: time.UnixMilli(in.TS)})
	}
	return out
}

// Outputs are the retail outputs as comparable keys, sorted.
type Outputs struct {
	Reorders    []string
	Adjustments []string
	Stock       map[string]int64
	Late        int
}

// Oracle computes the outputs single-threaded in plain Go: per partition, the sales
// and shipments merged by the runtime's determinism rule (the smallest head by
// timestamp, topic, partition, offset), then the stock, the reorders, the hourly
// windows and their adjustments as the topology defines them.
func Oracle(ins []Input, partitions int32) Outputs {
	by := map[int32]map[string][]Input{}
	for _, in := range ins {
		if by[in.Partition] == nil {
			by[in.Partition] = map[string][]Input{}
		}
		by[in.Partition][in.Topic] = append(by[in.Partition][in.Topic], in)
	}
	out := Outputs{Stock: map[string]int64{}}
	for p := range partitions {
		queues := by[p]
		for _, q := range queues {
			sort.Slice(q, func(i, j int) bool { return q[i].Offset < q[j].Offset })
		}
		oracleTask(merge(queues[Sales], queues[Shipments]), &out)
	}
	slices.Sort(out.Reorders)
	slices.Sort(out.Adjustments)
	return out
}

// merge interleaves two offset-ordered queues by their heads.
func merge(a, b []Input) []Input {
	out := make([]Input, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && before(a[0], b[0]):
			out, a = append(out, a[0]), a[1:]
		default:
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
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

func oracleTask(recs []Input, out *Outputs) {
	type win struct {
		start int64
		sku   string
	}
	windows := map[win]int64{}
	var streamTime int64
	closedTo := int64(-1 << 63)
	for i, r := range recs {
		if i == 0 || r.TS > streamTime {
			streamTime = r.TS
		}
		old, ok := out.Stock[r.SKU]
		if !ok {
			old = InitialStock
		}
		delta := r.Qty
		if r.Topic == Sales {
			delta = -r.Qty
		}
		out.Stock[r.SKU] = old + delta
		if ro, ok := Reordered(old, old+delta); ok {
			ro.SKU = r.SKU
			out.Reorders = append(out.Reorders, ro.Key())
		}
		if r.Topic == Sales {
			w := Window.For(r.TS)[0]
			if Window.Closed(w, streamTime) {
				out.Late++
			} else {
				windows[win{w.Start, r.SKU}] += r.Qty
			}
		}
		upTo := Window.ClosedBefore(streamTime)
		if upTo <= closedTo {
			continue
		}
		closedTo = upTo
		for w, sold := range windows {
			if w.start > upTo {
				continue
			}
			delete(windows, w)
			if pct, ok := Policy(sold, out.Stock[w.sku]); ok {
				out.Adjustments = append(out.Adjustments, PriceAdjustment{SKU: w.sku, WindowStart: w.start, Sold: sold, Stock: out.Stock[w.sku], ChangePct: pct}.Key())
			}
		}
	}
}
