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

var (
	str = serde.String
	i64 = serde.Int64
	t0  = time.UnixMilli(1_000_000)
)

func at(msAfter int64) time.Time { return t0.Add(time.Duration(msAfter) * time.Millisecond) }

type kv struct {
	K string
	V string
}

func pairs[V any](recs []streams.Record[string, V]) []kv {
	out := make([]kv, len(recs))
	for i, r := range recs {
		out[i] = kv{r.Key, fmt.Sprint(r.Value)}
	}
	return out
}

func want(t *testing.T, what string, got, want []kv) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func TestStatelessOperators(t *testing.T) {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	in.Filter(func(k, v string) bool { return v != "drop" }).To("filtered", str, str)
	br := in.Branch(func(k, v string) bool { return strings.HasPrefix(v, "a") }, func(k, v string) bool { return strings.HasPrefix(v, "b") })
	br[0].To("as", str, str)
	br[1].To("bs", str, str)
	var peeked []string
	in.Peek(func(k, v string) { peeked = append(peeked, v) }).To("peeked", str, str)
	streams.MapValues(in, func(v string) int64 { return int64(len(v)) }).To("lens", str, i64)
	streams.MapValuesWithKey(in, func(k, v string) string { return k + ":" + v }).To("kv", str, str)
	streams.Map(in, func(k, v string) (string, string) { return v, k }).To("swapped", str, str)
	streams.FlatMap(in, func(k, v string) []streams.KeyValue[string, string] {
		return []streams.KeyValue[string, string]{{Key: k + "1", Value: v}, {Key: k + "2", Value: v}}
	}).To("flat", str, str)
	streams.FlatMapValues(in, func(k, v string) []string { return strings.Split(v, ",") }).To("split", str, str)
	other := streams.From(b, "other", str, str)
	streams.Merge(in, other).To("merged", str, str)

	d := streamstest.New(t, b, streamstest.Config{})
	pin := streamstest.NewInput(d, "in", str, str)
	pother := streamstest.NewInput(d, "other", str, str)
	pin.Pipe("k1", "a1", at(0))
	pin.Pipe("k2", "drop", at(1))
	pother.Pipe("k3", "o", at(2))
	pin.Pipe("k4", "b,c", at(3))

	read := func(topic string) []kv { return pairs(streamstest.NewOutput(d, topic, str, str).Read()) }
	want(t, "filter", read("filtered"), []kv{{"k1", "a1"}, {"k4", "b,c"}})
	want(t, "branch a", read("as"), []kv{{"k1", "a1"}})
	want(t, "branch b", read("bs"), []kv{{"k4", "b,c"}})
	want(t, "peek", read("peeked"), []kv{{"k1", "a1"}, {"k2", "drop"}, {"k4", "b,c"}})
	if !slices.Equal(peeked, []string{"a1", "drop", "b,c"}) {
		t.Errorf("peek saw %v", peeked)
	}
	want(t, "mapValues", pairs(streamstest.NewOutput(d, "lens", str, i64).Read()), []kv{{"k1", "2"}, {"k2", "4"}, {"k4", "3"}})
	want(t, "mapValuesWithKey", read("kv"), []kv{{"k1", "k1:a1"}, {"k2", "k2:drop"}, {"k4", "k4:b,c"}})
	want(t, "map", read("swapped"), []kv{{"a1", "k1"}, {"drop", "k2"}, {"b,c", "k4"}})
	want(t, "flatMap", read("flat"), []kv{{"k11", "a1"}, {"k12", "a1"}, {"k21", "drop"}, {"k22", "drop"}, {"k41", "b,c"}, {"k42", "b,c"}})
	want(t, "flatMapValues", read("split"), []kv{{"k1", "a1"}, {"k2", "drop"}, {"k4", "b"}, {"k4", "c"}})
	want(t, "merge", read("merged"), []kv{{"k1", "a1"}, {"k2", "drop"}, {"k3", "o"}, {"k4", "b,c"}})
	// Timestamps travel with records.
	if got := streamstest.NewOutput(d, "merged", str, str); got != nil {
		if recs := d.Output("merged"); !recs[2].Timestamp.Equal(at(2)) {
			t.Errorf("timestamp %v, want %v", recs[2].Timestamp, at(2))
		}
	}
}

func TestAggregationsAndChanges(t *testing.T) {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, i64)
	sum := streams.Aggregate(streams.GroupByKey(in), "sum", func() int64 { return 100 }, func(_ string, v, acc int64) int64 { return acc + v }, i64)
	streams.MapValues(sum.Changes(), func(c streams.Change[int64]) string {
		if c.Old == nil {
			return fmt.Sprintf("nil->%d", *c.New)
		}
		return fmt.Sprintf("%d->%d", *c.Old, *c.New)
	}).To("sum-changes", str, str)
	maxT := streams.Reduce(streams.GroupByKey(in), "max", func(a, b int64) int64 { return max(a, b) }, i64)
	streams.MapValues(maxT.Changes(), func(c streams.Change[int64]) int64 { return *c.New }).To("max", str, i64)
	cnt := streams.Count(streams.GroupByKey(in), "count")
	streams.MapValues(cnt.Changes(), func(c streams.Change[int64]) int64 { return *c.New }).To("count", str, i64)

	d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"in": 3}})
	p := streamstest.NewInput(d, "in", str, i64)
	p.Pipe("a", 5, at(0))
	p.Pipe("b", 1, at(1))
	p.Pipe("a", 3, at(2))
	p.Pipe("a", 3, at(3)) // same value again: Changes still reports it (no de-duplication)
	p.Pipe("a", -10, at(4))

	want(t, "changes", pairs(streamstest.NewOutput(d, "sum-changes", str, str).Read()),
		[]kv{{"a", "nil->105"}, {"b", "nil->101"}, {"a", "105->108"}, {"a", "108->111"}, {"a", "111->101"}})
	want(t, "reduce", pairs(streamstest.NewOutput(d, "max", str, i64).Read()), []kv{{"a", "5"}, {"b", "1"}, {"a", "5"}, {"a", "5"}, {"a", "5"}})
	want(t, "count", pairs(streamstest.NewOutput(d, "count", str, i64).Read()), []kv{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"a", "3"}, {"a", "4"}})
	if v, ok := streamstest.Get(d, "sum", str, i64, "a"); !ok || v != 101 {
		t.Errorf("store sum[a] = %d %v", v, ok)
	}
	if v, ok := streamstest.Get(d, "count", str, i64, "b"); !ok || v != 1 {
		t.Errorf("store count[b] = %d %v", v, ok)
	}
	// The changelog holds one record per key per commit (the driver commits after each
	// input), keyed by the encoded key, with the committed value.
	log := d.Changelog("sum")
	if len(log) != 5 || string(log[4].Key) != "a" {
		t.Fatalf("changelog %v", log)
	}
	if v, _ := i64.Decode(log[4].Value); v != 101 {
		t.Errorf("changelog last value %d", v)
	}
}

// A re-keyed stream is repartitioned before its aggregation: the count per new key
// is right although the inputs sit in different partitions.
func TestGroupByRepartitions(t *testing.T) {
	b := streams.NewBuilder("app")
	in := streams.From(b, "in", str, str)
	byValue := streams.Count(streams.GroupBy(in, func(_, v string) string { return v }, streams.With(str, str)), "by-value")
	streams.MapValues(byValue.Changes(), func(c streams.Change[int64]) int64 { return *c.New }).To("out", str, i64)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := topo.Describe(); !strings.Contains(d, "writes app-by-value-repartition") || !strings.Contains(d, "source app-by-value-repartition") {
		t.Errorf("topology:\n%s", d)
	}
	d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"in": 4}})
	p := streamstest.NewInput(d, "in", str, str)
	for i := range 12 {
		p.Pipe(fmt.Sprintf("k%d", i), []string{"x", "y", "z"}[i%3], at(int64(i)))
	}
	for _, v := range []string{"x", "y", "z"} {
		if n, ok := streamstest.Get(d, "by-value", str, i64, v); !ok || n != 4 {
			t.Errorf("count[%s] = %d %v, want 4", v, n, ok)
		}
	}
	got := streamstest.NewOutput(d, "out", str, i64).Read()
	if len(got) != 12 {
		t.Errorf("%d updates, want 12", len(got))
	}
}

func TestJoinTable(t *testing.T) {
	b := streams.NewBuilder("app")
	prices := streams.From(b, "prices", str, i64)
	orders := streams.From(b, "orders", str, i64)
	latest := streams.Reduce(streams.GroupByKey(prices), "price", func(_, v int64) int64 { return v }, i64)
	streams.JoinTable(orders, latest, func(k string, qty, price int64) int64 { return qty * price }).To("totals", str, i64)
	streams.LeftJoinTable(orders, latest, func(k string, qty int64, price *int64) string {
		if price == nil {
			return "no price"
		}
		return fmt.Sprint(qty * *price)
	}).To("left", str, str)
	d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"prices": 2, "orders": 2}})
	pp := streamstest.NewInput(d, "prices", str, i64)
	po := streamstest.NewInput(d, "orders", str, i64)
	po.Pipe("apple", 2, at(0)) // no price yet
	pp.Pipe("apple", 10, at(1))
	po.Pipe("apple", 3, at(2))
	pp.Pipe("apple", 20, at(3))
	po.Pipe("apple", 1, at(4))
	want(t, "join", pairs(streamstest.NewOutput(d, "totals", str, i64).Read()), []kv{{"apple", "30"}, {"apple", "20"}})
	want(t, "left join", pairs(streamstest.NewOutput(d, "left", str, str).Read()), []kv{{"apple", "no price"}, {"apple", "30"}, {"apple", "20"}})
}
