package streamstest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/streamstest"
)

type order struct {
	Customer string `json:"customer"`
	Amount   int64  `json:"amount"`
}

// The foreign-key join of orders (order id → customer, amount) with customers
// (customer id → name), the tables partitioned differently (3 and 2), each step's
// outputs hand-derived: a result follows both tables, is timestamped with the later
// of the updates involved, and an order that moves to another customer stops
// following the first.
func TestForeignKeyJoin(t *testing.T) {
	orderJSON := serde.JSON[order]()
	steps := []struct {
		topic, key string
		value      any // nil: deletion
		ts         int64
		inner      []string
		left       []string
	}{
		{"customers", "c1", "Ann", 1, nil, nil},
		{"orders", "o1", order{"c1", 10}, 2, []string{"o1=Ann:10@2"}, []string{"o1=Ann:10@2"}},
		{"orders", "o2", order{"c2", 5}, 3, nil, []string{"o2=null:5@3"}},
		{"customers", "c2", "Bob", 4, []string{"o2=Bob:5@4"}, []string{"o2=Bob:5@4"}},
		{"customers", "c1", "Anna", 5, []string{"o1=Anna:10@5"}, []string{"o1=Anna:10@5"}},
		{"orders", "o1", order{"c2", 11}, 6, []string{"o1=Bob:11@6"}, []string{"o1=Bob:11@6"}},
		{"customers", "c1", "Annie", 7, nil, nil}, // o1 no longer follows c1
		{"customers", "c2", nil, 8, []string{"o1=tombstone@8", "o2=tombstone@8"}, []string{"o1=null:11@8", "o2=null:5@8"}},
		{"orders", "o2", nil, 9, nil, []string{"o2=tombstone@9"}},
		{"orders", "o3", order{"c9", 1}, 10, nil, []string{"o3=null:1@10"}},
		{"customers", "c9", "Cy", 11, []string{"o3=Cy:1@11"}, []string{"o3=Cy:1@11"}},
	}
	for _, left := range []bool{false, true} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			b := streams.NewBuilder("app")
			orders := streams.FromTable(b, "orders", "orders", str, orderJSON)
			customers := streams.FromTable(b, "customers", "customers", str, str)
			byCustomer := func(o order) string { return o.Customer }
			var j streams.Table[string, string]
			if left {
				j = streams.LeftJoinForeignKey(orders, customers, "enriched", byCustomer, func(o order, name *string) string {
					return fmt.Sprintf("%s:%d", orNull(name), o.Amount)
				}, str)
			} else {
				j = streams.JoinForeignKey(orders, customers, "enriched", byCustomer, func(o order, name string) string {
					return fmt.Sprintf("%s:%d", name, o.Amount)
				}, str)
			}
			streams.MapValues(j.Changes(), func(c streams.Change[string]) string {
				if c.New == nil {
					return "tombstone"
				}
				return *c.New
			}).To("out", str, str)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			desc := topo.Describe()
			for _, want := range []string{"writes app-enriched-subscription", "source app-enriched-subscription", "writes app-enriched-response", "store enriched-subscriptions"} {
				if !strings.Contains(desc, want) {
					t.Errorf("topology lacks %q:\n%s", want, desc)
				}
			}
			d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"orders": 3, "customers": 2, "out": 3}})
			ins := map[string]*streamstest.Input[string, []byte]{
				"orders": streamstest.NewInput(d, "orders", str, serde.Bytes), "customers": streamstest.NewInput(d, "customers", str, serde.Bytes)}
			out := streamstest.NewOutput(d, "out", str, str)
			for _, s := range steps {
				var v []byte
				switch x := s.value.(type) {
				case order:
					v, _ = orderJSON.Encode(x)
				case string:
					v = []byte(x)
				}
				if err := ins[s.topic].PipeRaw([]byte(s.key), v, time.UnixMilli(s.ts)); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, r := range out.Read() {
					got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp.UnixMilli()))
				}
				slices.Sort(got)
				want := s.inner
				if left {
					want = s.left
				}
				if !slices.Equal(got, want) {
					t.Errorf("after %s %s=%v@%d: got %v, want %v", s.topic, s.key, s.value, s.ts, got, want)
				}
			}
			// The subscriptions left: o1 → c2, o3 → c9 (o2 was deleted).
			subs, err := d.Entries("enriched-subscriptions")
			if err != nil {
				t.Fatal(err)
			}
			if len(subs) != 2 {
				t.Errorf("%d subscriptions stored, want 2", len(subs))
			}
		})
	}
}
