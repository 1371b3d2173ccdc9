package streamstest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/streamstest"
)

// A stream joined with a global table by a key derived from its value: the stream
// is keyed by order id on 4 partitions, the table by customer on 1, so no
// co-partitioning holds; every order sees the table as it is when the order is
// processed, updates and deletions included.
func TestGlobalTableJoin(t *testing.T) {
	b := streams.NewBuilder("app")
	orders := streams.From(b, "orders", str, str) // value: customer id
	cust := streams.FromGlobalTable(b, "customers", "customers", str, str)
	streams.JoinGlobal(orders, cust, func(_, c string) string { return c }, func(id, c, name string) string { return id + "=" + name }).To("inner", str, str)
	streams.LeftJoinGlobal(orders, cust, func(_, c string) string { return c }, func(id, c string, name *string) string {
		return id + "=" + orNull(name)
	}).To("left", str, str)
	d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"orders": 4, "inner": 4, "left": 4}})
	in := streamstest.NewInput(d, "orders", str, str)
	tab := streamstest.NewInput(d, "customers", str, str)
	inner := streamstest.NewOutput(d, "inner", str, str)
	left := streamstest.NewOutput(d, "left", str, str)
	at := time.UnixMilli(1000)
	values := func(rs []streams.Record[string, string]) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Value)
		}
		return out
	}
	check := func(wantInner, wantLeft []string) {
		t.Helper()
		if got := values(inner.Read()); !slices.Equal(got, wantInner) {
			t.Errorf("inner = %v, want %v", got, wantInner)
		}
		if got := values(left.Read()); !slices.Equal(got, wantLeft) {
			t.Errorf("left = %v, want %v", got, wantLeft)
		}
	}
	in.Pipe("o1", "c1", at)
	check(nil, []string{"o1=null"})
	tab.Pipe("c1", "Ann", at)
	in.Pipe("o2", "c1", at)
	check([]string{"o2=Ann"}, []string{"o2=Ann"})
	tab.Pipe("c1", "Anne", at) // an update while the stream runs
	in.Pipe("o3", "c1", at)
	check([]string{"o3=Anne"}, []string{"o3=Anne"})
	if err := tab.PipeRaw([]byte("c1"), nil, at); err != nil { // deleted
		t.Fatal(err)
	}
	in.Pipe("o4", "c1", at)
	check(nil, []string{"o4=null"})
	if err := tab.PipeRaw(nil, []byte("x"), at); err != nil { // no key: skipped
		t.Fatal(err)
	}
	in.Pipe("o5", "", at)
	check(nil, []string{"o5=null"})
}

func TestGlobalTableRefusals(t *testing.T) {
	b := streams.NewBuilder("app")
	streams.From(b, "in", str, str)
	streams.FromGlobalTable(b, "g", "in-store", str, str)
	streams.FromGlobalTable(b, "g", "other", str, str)                     // topic twice
	streams.FromGlobalTable(b, "h", "in-store", str, str)                  // name twice
	streams.FromGlobalTable[string, string](b, "k", "no-serdes", nil, nil) // serdes
	if _, err := b.Build(); err == nil {
		t.Fatal("Build accepted a topic read twice as a global table, a name used twice and missing serdes")
	}
	var zero streams.GlobalTable[string, string]
	b2 := streams.NewBuilder("app")
	streams.JoinGlobal(streams.From(b2, "in", str, str), zero, func(k, _ string) string { return k }, func(_, v, g string) string { return v })
	if _, err := b2.Build(); err == nil {
		t.Fatal("Build accepted a join with a zero GlobalTable")
	}
}
