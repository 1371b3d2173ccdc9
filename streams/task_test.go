package streams

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
)

func testTask(t *testing.T, b *Builder, maxRecords int) *task {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	env := &taskEnv{partitions: func(string) (int32, error) { return 1, nil }, maxRecords: maxRecords, maxBytes: 1 << 30,
		metrics: &Metrics{}, log: slog.New(slog.DiscardHandler)}
	tk := newTask(topo, topo.subs[0], 0, store.NewMemory(), env)
	if err := tk.init(map[client.TopicPartition]int64{{Topic: "in", Partition: 0}: 0}); err != nil {
		t.Fatal(err)
	}
	return tk
}

// A record that would overflow the open commit ends it before the record: the first
// unit holds the two earlier records' outputs and the position after them.
func TestProcessBoundedSplits(t *testing.T) {
	b := NewBuilder("app")
	FlatMapValues(From(b, "in", serde.String, serde.String), func(_, v string) []string { return []string{v, v, v, v} }).To("out", serde.String, serde.String)
	tk := testTask(t, b, 10)
	for i := range 3 {
		tk.processBounded(rawRecord{Topic: "in", Offset: int64(i), Key: []byte("k"), Value: []byte(fmt.Sprint(i)), TS: int64(i)})
	}
	if tk.err != nil {
		t.Fatal(tk.err)
	}
	u := tk.nextUnit()
	if len(u.outs) != 8 || u.b.positions[client.TopicPartition{Topic: "in"}] != 2 {
		t.Fatalf("first unit: %d outputs, position %v", len(u.outs), u.b.positions)
	}
	if err := tk.confirmed(u, nil); err != nil {
		t.Fatal(err)
	}
	u = tk.nextUnit()
	if len(u.outs) != 4 || string(u.outs[0].value) != "2" || u.b.positions[client.TopicPartition{Topic: "in"}] != 3 {
		t.Fatalf("second unit: %d outputs, position %v", len(u.outs), u.b.positions)
	}
	if err := tk.confirmed(u, nil); err != nil {
		t.Fatal(err)
	}
	if u := tk.nextUnit(); u != nil {
		t.Errorf("a third unit with nothing new: %+v", u)
	}
}

// Reads see uncommitted writes over the local store; a confirmed commit applies the
// last write per key and its checkpoint, and the changelog holds one record per key.
func TestPendingOverlay(t *testing.T) {
	b := NewBuilder("app")
	From(b, "in", serde.String, serde.String).To("out", serde.String, serde.String)
	tk := testTask(t, b, 100)
	if err := tk.db.Apply([]store.Write{{Store: "s", Key: []byte("a"), Value: []byte("base-a")}, {Store: "s", Key: []byte("c"), Value: []byte("base-c")}}, map[string]int64{"s": 9}); err != nil {
		t.Fatal(err)
	}
	tk.put("s", []byte("b"), []byte("1"))
	tk.put("s", []byte("b"), []byte("2"))
	tk.del("s", []byte("c"))
	tk.put("s", []byte("d"), []byte("x"))
	var got []string
	tk.rangeStore("s", nil, nil, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true })
	if s := strings.Join(got, ","); s != "a=base-a,b=2,d=x" {
		t.Errorf("range %s", s)
	}
	got = nil
	tk.rangeStore("s", []byte("b"), []byte("d"), func(k, v []byte) bool { got = append(got, string(k)); return true })
	if s := strings.Join(got, ","); s != "b" {
		t.Errorf("range [b,d) %s", s)
	}
	if v, ok, _ := tk.db.Get("s", []byte("b")); ok {
		t.Errorf("the local store ran ahead of the commit: b=%s", v)
	}
	u := tk.nextUnit()
	if len(u.changelog) != 3 {
		t.Errorf("changelog records %d, want 3 (b once, c's tombstone, d)", len(u.changelog))
	}
	// More writes while the commit is in flight stay pending after it is confirmed.
	tk.put("s", []byte("e"), []byte("later"))
	if err := tk.confirmed(u, map[string]int64{"s": 12}); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := tk.db.Get("s", []byte("b")); string(v) != "2" {
		t.Errorf("b = %q after the commit", v)
	}
	if _, ok, _ := tk.db.Get("s", []byte("e")); ok {
		t.Error("a write after the cut reached the local store")
	}
	if v, ok := tk.get("s", []byte("e")); !ok || string(v) != "later" {
		t.Errorf("pending e = %q %v", v, ok)
	}
	if cp, _ := tk.db.Checkpoints(); cp["s"] != 12 {
		t.Errorf("checkpoint %v", cp)
	}
}

// The determinism rule: wait while a partition is empty and not at its end; then the
// smallest (timestamp, topic, partition, offset).
func TestPick(t *testing.T) {
	a := &inputPart{tp: client.TopicPartition{Topic: "a"}, queue: []rawRecord{{Topic: "a", TS: 5, Offset: 0}}}
	b := &inputPart{tp: client.TopicPartition{Topic: "b"}}
	if _, ok := pick([]*inputPart{a, b}); ok {
		t.Error("picked while b may still have an earlier record")
	}
	b.atEnd = true
	if p, ok := pick([]*inputPart{a, b}); !ok || p != a {
		t.Error("did not pick a with b at its end")
	}
	b.queue = []rawRecord{{Topic: "b", TS: 5, Offset: 0}}
	c := &inputPart{tp: client.TopicPartition{Topic: "a", Partition: 1}, queue: []rawRecord{{Topic: "a", Partition: 1, TS: 4, Offset: 7}}}
	if p, _ := pick([]*inputPart{b, a, c}); p != c {
		t.Error("the earliest timestamp did not win")
	}
	c.queue[0].TS = 5
	if p, _ := pick([]*inputPart{b, c, a}); p != a {
		t.Error("equal timestamps: topic then partition should decide")
	}
}

// hammer writes one key fifty times per record.
type hammer struct {
	ctx *ProcessorContext[string, string]
	kv  *KeyValueStore[string, int64]
}

func (h *hammer) Init(ctx *ProcessorContext[string, string]) error {
	h.ctx = ctx
	var err error
	h.kv, err = KVStore(ctx, "hits", serde.String, serde.Int64)
	return err
}

func (h *hammer) Process(r Record[string, string]) error {
	for i := range 50 {
		if err := h.kv.Put(r.Key, int64(i)); err != nil {
			return err
		}
	}
	return nil
}

func (h *hammer) Close() error { return nil }

// Commit limits count a key's changelog record once, however often it was written:
// fifty writes of one key fit a commit of ten records.
func TestCommitLimitsCountKeysOnce(t *testing.T) {
	b := NewBuilder("app")
	Process(From(b, "in", serde.String, serde.String), "hammer", func() Processor[string, string, string, string] { return &hammer{} }, "hits")
	tk := testTask(t, b, 10)
	for i := range 3 {
		tk.processBounded(rawRecord{Topic: "in", Offset: int64(i), Key: []byte("k"), Value: []byte("v"), TS: int64(i)})
	}
	if tk.err != nil {
		t.Fatal(tk.err)
	}
	if u := tk.nextUnit(); len(u.changelog) != 1 || string(u.changelog[0].key) != "k" {
		t.Errorf("changelog records %+v, want the last write of k alone", u.changelog)
	}
}
