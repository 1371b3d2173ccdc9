package kafka_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/postgres"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/kafka"
)

// The figures for Kafka transactions, measured on demand (they are
// measurements, not checks):
//
//	STRATA_TXN_FIGURES=1 go test ./kafka -run TestTxnFigures -v -count=1
//
// Each backend (SQLite and Postgres catalogs, filesystem store) gets one node; every
// figure is measured in the same run as its baseline.

// roundTrips counts a catalog's round trips to Postgres — a query, or a pipelined
// batch — by what they did: coordinator calls touch the transaction tables, a flush's
// commit calls strata_commit*.
type roundTrips struct {
	mu    sync.Mutex
	kinds map[string]int
	all   atomic.Int64
}

func (r *roundTrips) count(sql string) {
	r.all.Add(1)
	kind := "other"
	switch {
	case strings.Contains(sql, "strata_commit"):
		kind = "flush"
	case strings.Contains(sql, "txn_") || strings.Contains(sql, "transactions"):
		kind = "coordinator"
	}
	r.mu.Lock()
	r.kinds[kind]++
	r.mu.Unlock()
}

func (r *roundTrips) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.kinds {
		out[k] = v
	}
	return out
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.count(d.SQL)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var b strings.Builder
	if d.Batch != nil {
		for _, q := range d.Batch.QueuedQueries {
			b.WriteString(q.SQL)
		}
	}
	r.count(b.String())
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func TestTxnFigures(t *testing.T) {
	if os.Getenv("STRATA_TXN_FIGURES") == "" {
		t.Skip("figures on demand: STRATA_TXN_FIGURES=1")
	}
	backends := []struct {
		name string
		open func(t *testing.T) (nodeCatalog, *roundTrips)
	}{
		{"sqlite", func(t *testing.T) (nodeCatalog, *roundTrips) { return openSQLite(t), nil }},
		{"postgres", func(t *testing.T) (nodeCatalog, *roundTrips) {
			cfg, err := pgxpool.ParseConfig(testsvc.PostgresDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			rt := &roundTrips{kinds: map[string]int{}}
			cfg.ConnConfig.Tracer = rt
			c, err := postgres.OpenConfig(t.Context(), cfg, catalog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c, rt
		}},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			cat, rt := be.open(t)
			for _, name := range []string{"idem", "txn1", "txn10", "txn100", "fetch"} {
				if _, err := cat.CreateTopic(t.Context(), name, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
			n := startNode(t, cat, kafka.Config{})
			produceFigures(t, n, rt)
			fetchFigures(t, n)
		})
	}
}

// produceFigures: 1,000 one-record batches, one at a time, by an idempotent producer
// and by transactional ones committing every 1, 10 and 100 batches.
func produceFigures(t *testing.T, n *node, rt *roundTrips) {
	const batches = 1000
	ctx := ctxFor(t, 10*time.Minute)
	value := []byte(strings.Repeat("v", 100))
	for _, per := range []int{0, 1, 10, 100} {
		topic, opts := "idem", []kgo.Opt{kgo.SeedBrokers(n.addr), kgo.ProducerLinger(0)}
		if per > 0 {
			topic = fmt.Sprintf("txn%d", per)
			opts = append(opts, kgo.TransactionalID(topic))
		}
		cl := client(t, append(opts, kgo.DefaultProduceTopic(topic))...)
		// Warm up: the producer id, metadata, the first transaction.
		if per == 0 {
			if err := cl.ProduceSync(ctx, kgo.SliceRecord(value)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, kgo.SliceRecord(value)).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
		var before map[string]int
		var all0 int64
		if rt != nil {
			before, all0 = rt.snapshot(), rt.all.Load()
		}
		var txnTimes []time.Duration
		start := time.Now()
		for i := 0; i < batches; {
			t0 := time.Now()
			if per > 0 {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
			}
			for j := 0; j < max(per, 1); j++ {
				if err := cl.ProduceSync(ctx, kgo.SliceRecord(value)).FirstErr(); err != nil {
					t.Fatal(err)
				}
				i++
			}
			if per > 0 {
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
			}
			txnTimes = append(txnTimes, time.Since(t0))
		}
		elapsed := time.Since(start)
		sort.Slice(txnTimes, func(i, j int) bool { return txnTimes[i] < txnTimes[j] })
		label := "idempotent"
		if per > 0 {
			label = fmt.Sprintf("transactional, %d batches per txn", per)
		}
		line := fmt.Sprintf("%-38s %6.0f batches/s  %6.2f ms/batch  txn p50 %7.2f ms p99 %7.2f ms", label,
			float64(batches)/elapsed.Seconds(), float64(elapsed.Microseconds())/1000/batches,
			float64(txnTimes[len(txnTimes)/2].Microseconds())/1000, float64(txnTimes[len(txnTimes)*99/100].Microseconds())/1000)
		if rt != nil {
			after, all1 := rt.snapshot(), rt.all.Load()
			units := float64(len(txnTimes))
			line += fmt.Sprintf("  catalog round trips per %s: %.2f (coordinator %.2f, flush %.2f, other %.2f)",
				map[bool]string{true: "txn", false: "batch"}[per > 0], float64(all1-all0)/units,
				float64(after["coordinator"]-before["coordinator"])/units, float64(after["flush"]-before["flush"])/units,
				float64(after["other"]-before["other"])/units)
		}
		t.Log(line)
	}
}

// fetchFigures: a log of 200 transactions of 500 records (one in ten aborted), read
// whole by franz-go at each isolation level, three times each, alternating.
func fetchFigures(t *testing.T, n *node) {
	ctx := ctxFor(t, 10*time.Minute)
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.TransactionalID("fill"), kgo.DefaultProduceTopic("fetch"), kgo.ProducerLinger(5*time.Millisecond))
	value := []byte(strings.Repeat("v", 100))
	const txns, per = 200, 500
	for i := range txns {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range per {
			wg.Add(1)
			cl.Produce(ctx, kgo.SliceRecord(value), func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(i%10 != 9)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(iso kgo.IsolationLevel, want int) time.Duration {
		c := client(t, kgo.SeedBrokers(n.addr), kgo.ConsumeTopics("fetch"), kgo.FetchIsolationLevel(iso),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(4<<20))
		start := time.Now()
		got := 0
		for got < want {
			fs := c.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			got += fs.NumRecords()
		}
		d := time.Since(start)
		if got != want {
			t.Fatalf("read %d records, want %d", got, want)
		}
		c.Close()
		return d
	}
	committed := txns / 10 * 9 * per
	var rc, ru []time.Duration
	for range 3 {
		rc = append(rc, read(kgo.ReadCommitted(), committed))
		ru = append(ru, read(kgo.ReadUncommitted(), txns*per))
	}
	best := func(ds []time.Duration) time.Duration { return min(ds[0], ds[1], ds[2]) }
	t.Logf("fetch %d records (%d committed) in %d transactions: read_uncommitted best %v (%.0f records/s), read_committed best %v (%.0f committed records/s, %.0f offsets/s)",
		txns*per, committed, txns, best(ru), float64(txns*per)/best(ru).Seconds(), best(rc),
		float64(committed)/best(rc).Seconds(), float64(txns*per+txns)/best(rc).Seconds())
}
