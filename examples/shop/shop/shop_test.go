package shop_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/shop/shop"
	"github.com/strata-io/strata/streams/streamstest"
)

// Place assigns inputs the partitions and offsets a producer would give them.
func place(ins []shop.Input, partitions map[string]int32) []shop.Input {
	next := map[string]map[int32]int64{}
	out := make([]shop.Input, len(ins))
	for i, in := range ins {
		in.Partition = client.KeyPartition([]byte(in.Key), partitions[in.Topic])
		if next[in.Topic] == nil {
			next[in.Topic] = map[int32]int64{}
		}
		in.Offset = next[in.Topic][in.Partition]
		next[in.Topic][in.Partition]++
		out[i] = in
	}
	return out
}

// The topology, run in-process over generated data in the order the runtime takes it,
// equals the oracles: every order-status output (none missing, none extra), and the
// final enriched-orders table.
func TestShopEqualsOracle(t *testing.T) {
	parts := map[string]int32{shop.Orders: 4, shop.Payments: 4, shop.Customers: 3, shop.Statuses: 4, shop.Enriched: 4}
	ins := place(shop.Generate(7, 20_000, 300, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 3*time.Hour), parts)
	d := streamstest.New(t, shop.Build("shop"), streamstest.Config{Partitions: parts, MaxCommitRecords: 400})
	queues := map[[2]any][]shop.Input{}
	for _, in := range ins {
		k := [2]any{in.Topic, in.Partition}
		queues[k] = append(queues[k], in)
	}
	var qs [][]shop.Input
	for _, k := range slices.SortedFunc(maps.Keys(queues), func(a, b [2]any) int {
		if a[0] != b[0] {
			return map[bool]int{true: -1, false: 1}[a[0].(string) < b[0].(string)]
		}
		return int(a[1].(int32) - b[1].(int32))
	}) {
		qs = append(qs, queues[k])
	}
	for _, in := range shop.Merge(qs...) {
		var v []byte
		if in.Value != nil {
			v = in.Value
		}
		if err := d.Pipe(in.Topic, in.Partition, []byte(in.Key), v, time.UnixMilli(in.TS), nil); err != nil {
			t.Fatal(err)
		}
	}
	want, late := shop.OracleStatuses(ins, 25)
	var got []string
	for _, r := range d.Output(shop.Statuses) {
		var s shop.Status
		if err := json.Unmarshal(r.Value, &s); err != nil {
			t.Fatal(err)
		}
		got = append(got, shop.StatusKey(string(r.Key), s, r.Timestamp.UnixMilli()))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("statuses: %d, oracle %d", len(got), len(want))
		for i := 0; i < len(got) && i < len(want); i++ {
			if got[i] != want[i] {
				t.Fatalf("first difference at %d: got %s, want %s", i, got[i], want[i])
			}
		}
	}
	if d.Metrics().LateRecordsDropped != int64(late) || late == 0 {
		t.Errorf("late records %d, oracle %d (want some)", d.Metrics().LateRecordsDropped, late)
	}
	counts := map[string]int{}
	for _, s := range want {
		for _, st := range []string{"paid", "unpaid", "orphan"} {
			if strings.Contains(s, `"status":"`+st+`"`) {
				counts[st]++
			}
		}
	}
	t.Logf("%d inputs, %d statuses %v, %d late", len(ins), len(want), counts, late)
	final := map[string]shop.EnrichedOrder{}
	for _, r := range d.Output(shop.Enriched) {
		var e shop.EnrichedOrder
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if e.Deleted {
			delete(final, string(r.Key))
		} else {
			final[string(r.Key)] = e
		}
	}
	oracle := shop.OracleEnriched(ins)
	if !maps.Equal(final, oracle) {
		diff := 0
		for k, v := range oracle {
			if final[k] != v {
				diff++
			}
		}
		t.Errorf("enriched orders: %d, oracle %d, %d differ", len(final), len(oracle), diff)
	}
	if len(oracle) < 1000 || len(oracle) == len(ins) {
		t.Errorf("%d enriched orders: the data proves little", len(oracle))
	}
}
