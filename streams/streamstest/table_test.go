package streamstest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/streamstest"
)

// The KTable-KTable join table of Kafka Streams' join semantics (one key; "-" a null
// value, a deletion): left 1:-, 3:A, 5:B, 7:-, 9:C, 12:-, 15:D; right 2:-, 4:a, 6:b,
// 8:-, 10:c, 11:-, 13:-, 14:d, in timestamp order. Each result below is what that
// update forwards ("tombstone": the key's result is deleted; nothing: no result
// before or after), timestamped with the later of the two values.
var tableScript = []struct {
	topic, value string // "" is a null value
	ts           int64
}{
	{"l", "", 1}, {"r", "", 2}, {"l", "A", 3}, {"r", "a", 4}, {"l", "B", 5}, {"r", "b", 6}, {"l", "", 7}, {"r", "", 8},
	{"l", "C", 9}, {"r", "c", 10}, {"r", "", 11}, {"l", "", 12}, {"r", "", 13}, {"r", "d", 14}, {"l", "D", 15},
}

func TestTableTableJoins(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want []string // per update
	}{
		{"inner", []string{"", "", "", "A/a@4", "B/a@5", "B/b@6", "tombstone@7", "", "", "C/c@10", "tombstone@11", "", "", "", "D/d@15"}},
		{"left", []string{"", "", "A/null@3", "A/a@4", "B/a@5", "B/b@6", "tombstone@7", "", "C/null@9", "C/c@10", "C/null@11", "tombstone@12", "", "", "D/d@15"}},
		{"outer", []string{"", "", "A/null@3", "A/a@4", "B/a@5", "B/b@6", "null/b@7", "tombstone@8", "C/null@9", "C/c@10", "C/null@11", "tombstone@12", "", "null/d@14", "D/d@15"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			b := streams.NewBuilder("app")
			l := streams.FromTable(b, "l", "left", str, str)
			r := streams.FromTable(b, "r", "right", str, str)
			var j streams.Table[string, string]
			switch tc.kind {
			case "inner":
				j = streams.JoinTables(l, r, "joined", func(_, a, b string) string { return a + "/" + b }, str)
			case "left":
				j = streams.LeftJoinTables(l, r, "joined", func(_, a string, b *string) string { return a + "/" + orNull(b) }, str)
			case "outer":
				j = streams.OuterJoinTables(l, r, "joined", func(_ string, a, b *string) string { return orNull(a) + "/" + orNull(b) }, str)
			}
			streams.MapValues(j.Changes(), func(c streams.Change[string]) string {
				if c.New == nil {
					return "tombstone"
				}
				return *c.New
			}).To("out", str, str)
			d := streamstest.New(t, b, streamstest.Config{})
			ins := map[string]*streamstest.Input[string, string]{"l": streamstest.NewInput(d, "l", str, str), "r": streamstest.NewInput(d, "r", str, str)}
			out := streamstest.NewOutput(d, "out", str, str)
			for i, s := range tableScript {
				var err error
				if s.value == "" {
					err = ins[s.topic].PipeRaw([]byte("k"), nil, time.UnixMilli(s.ts))
				} else {
					err = ins[s.topic].TryPipe("k", s.value, time.UnixMilli(s.ts))
				}
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				for _, r := range out.Read() {
					got += fmt.Sprintf("%s@%d", r.Value, r.Timestamp.UnixMilli())
				}
				if got != tc.want[i] {
					t.Errorf("after %s %q@%d: got %q, want %q", s.topic, s.value, s.ts, got, tc.want[i])
				}
			}
			if v, ok := streamstest.GetTable(d, "joined", str, str, "k"); !ok || v != "D/d" {
				t.Errorf("stored result %q %v", v, ok)
			}
		})
	}
}

// A stream joined with a table read from a topic, and a stream made a table.
func TestTablesFromTopicsAndStreams(t *testing.T) {
	b := streams.NewBuilder("app")
	prices := streams.FromTable(b, "prices", "prices", str, i64)
	orders := streams.From(b, "orders", str, i64)
	streams.LeftJoinTable(orders, prices, func(_ string, qty int64, p *int64) string {
		if p == nil {
			return "no price"
		}
		return fmt.Sprint(qty * *p)
	}).To("totals", str, str)
	last := streams.ToTable(orders, "last-order")
	streams.MapValues(last.Changes(), func(c streams.Change[int64]) string {
		if c.Old == nil {
			return fmt.Sprintf("nil->%d", *c.New)
		}
		return fmt.Sprintf("%d->%d", *c.Old, *c.New)
	}).To("last", str, str)
	d := streamstest.New(t, b, streamstest.Config{Partitions: map[string]int32{"prices": 2, "orders": 2}})
	pp, po := streamstest.NewInput(d, "prices", str, i64), streamstest.NewInput(d, "orders", str, i64)
	po.Pipe("apple", 2, at(0))
	pp.Pipe("apple", 10, at(1))
	po.Pipe("apple", 3, at(2))
	if err := pp.PipeRaw([]byte("apple"), nil, at(3)); err != nil { // the price is deleted
		t.Fatal(err)
	}
	po.Pipe("apple", 4, at(4))
	want(t, "totals", pairs(streamstest.NewOutput(d, "totals", str, str).Read()), []kv{{"apple", "no price"}, {"apple", "30"}, {"apple", "no price"}})
	want(t, "to table", pairs(streamstest.NewOutput(d, "last", str, str).Read()), []kv{{"apple", "nil->2"}, {"apple", "2->3"}, {"apple", "3->4"}})
	if v, ok := streamstest.GetTable(d, "last-order", str, i64, "apple"); !ok || v != 4 {
		t.Errorf("last-order[apple] = %d %v", v, ok)
	}
}
