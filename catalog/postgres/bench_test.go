package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// BenchmarkCommit8Partitions measures commits per second of flushes that touch 8
// partitions (8 requests of one batch each): one writer at a time, and many at once
// contending for the same partition rows as the writers of one topic do; under the
// default statement cache and under exec mode (for transaction-pooling proxies). The
// baseline is a bare transaction locking and updating the same 8 partition rows, so a
// ratio can be quoted from one run (absolute figures drift with the machine and its
// load).
func BenchmarkCommit8Partitions(b *testing.B) {
	dsn := newDatabase(b)
	for _, mode := range []string{"cache_statement", "exec"} {
		c := openDSN(b, withParam(b, dsn, "default_query_exec_mode", mode), catalog.Options{})
		tp, err := c.CreateTopic(context.Background(), "bench-"+mode, 8, nil)
		if err != nil {
			b.Fatal(err)
		}
		commit := func(ctx context.Context) error {
			reqs := make([][]flushBatch, 8)
			for p := range reqs {
				reqs[p] = []flushBatch{{tp.ID, int32(p), 10, time.Now().UnixMilli()}}
			}
			res, err := c.Commit(ctx, makeSegment(testKey(time.Now()), 1000, reqs...))
			if err == nil {
				for _, r := range res {
					if r.Err != nil {
						return r.Err
					}
				}
			}
			return err
		}
		baseline := func(ctx context.Context) error {
			// Rows locked in order first, as the commit does: unordered, parallel
			// updaters of the same rows deadlock.
			_, err := c.pool.Exec(ctx, `
				UPDATE partitions p SET high_watermark = p.high_watermark + 10
				FROM (SELECT partition FROM partitions WHERE topic_id = $1 ORDER BY partition FOR UPDATE) l
				WHERE p.topic_id = $1 AND p.partition = l.partition`, tp.ID)
			return err
		}
		if mode != "cache_statement" {
			baseline = nil
		}
		for _, op := range []struct {
			name string
			fn   func(context.Context) error
		}{{"baseline-update-8-rows", baseline}, {"commit", commit}} {
			if op.fn == nil {
				continue
			}
			b.Run(mode+"/"+op.name+"/serial", func(b *testing.B) {
				ctx := context.Background()
				for b.Loop() {
					if err := op.fn(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
			b.Run(mode+"/"+op.name+"/parallel", func(b *testing.B) {
				b.SetParallelism(4) // 4 × GOMAXPROCS writers on a pool of max(4, CPUs)
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						if err := op.fn(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}
