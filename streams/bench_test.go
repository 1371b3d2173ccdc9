package streams

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/streams/serde"
	"github.com/strata-io/strata/streams/store"
	"github.com/strata-io/strata/streams/window"
)

// benchTask runs b.N records through one task of the topology on a Pebble store,
// committing (applying to Pebble) every 500 records as the runtime does: the CPU cost
// of the operators and the store, without a server.
func benchTask(b *testing.B, build func(*Builder)) {
	bld := NewBuilder("bench")
	build(bld)
	topo, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	db, err := store.OpenPebble(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	env := &taskEnv{partitions: func(string) (int32, error) { return 1, nil }, maxRecords: DefaultMaxCommitRecords, maxBytes: DefaultMaxCommitBytes,
		metrics: &Metrics{}, log: slog.New(slog.DiscardHandler)}
	tk := newTask(topo, topo.subs[0], 0, db, env)
	pos := map[client.TopicPartition]int64{}
	for _, src := range topo.subs[0].sources {
		pos[client.TopicPartition{Topic: src.topic}] = 0
	}
	if err := tk.init(pos); err != nil {
		b.Fatal(err)
	}
	off := map[string]int64{}
	b.ResetTimer()
	for i := range b.N {
		topic := "l"
		if i%2 == 1 {
			topic = "r"
		}
		tk.processBounded(rawRecord{Topic: topic, Offset: int64(i / 2), Key: fmt.Appendf(nil, "k%03d", (i/2)%1000), Value: []byte("1234"),
			TS: 1_000_000 + int64(i)*10})
		if tk.err != nil {
			b.Fatal(tk.err)
		}
		if i%500 == 499 {
			for u := tk.nextUnit(); u != nil; u = tk.nextUnit() {
				cps := map[string]int64{}
				for _, w := range u.changelog {
					off[w.store]++
					cps[w.store] = off[w.store]
				}
				if err := tk.confirmed(u, cps); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkTaskStatelessMap(b *testing.B) {
	benchTask(b, func(bld *Builder) {
		MapValues(Merge(From(bld, "l", serde.String, serde.String), From(bld, "r", serde.String, serde.String)), func(v string) string { return v }).To("out", serde.String, serde.String)
	})
}

func BenchmarkTaskJoin(b *testing.B) {
	benchTask(b, func(bld *Builder) {
		Join(From(bld, "l", serde.String, serde.String), From(bld, "r", serde.String, serde.String), "j", window.Join(5*time.Second, time.Second),
			func(_ string, a, b string) string { return a + b }).To("out", serde.String, serde.String)
	})
}

func BenchmarkTaskSession(b *testing.B) {
	benchTask(b, func(bld *Builder) {
		in := Merge(From(bld, "l", serde.String, serde.String), From(bld, "r", serde.String, serde.String))
		SessionCount(GroupByKey(in), "s", window.Session(5*time.Second, time.Second), EmitOnWindowClose).To("out", serde.String, serde.JSON[window.Result[int64]]())
	})
}
