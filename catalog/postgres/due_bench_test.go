package postgres

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// BenchmarkCommitDue measures what keeping the compaction due time current (the one
// statement 0050_compaction_due.sql adds to strata_commit) costs a flush commit, in one
// run: every iteration commits one flush through strata_commit and one through a copy
// of the function as the migrations before 0050 left it, so that the machine's drift
// falls on both. The partitions are due already, as they are between two compactor
// visits; the statement then reads their rows and writes nothing.
func BenchmarkCommitDue(b *testing.B) {
	for _, parts := range []int{8, 64} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			ctx := context.Background()
			c := openDSN(b, newDatabase(b), catalog.Options{})
			if _, err := c.pool.Exec(ctx, commitBefore(b, 50, "strata_commit_before_due")); err != nil {
				b.Fatal(err)
			}
			tp, err := c.CreateTopic(ctx, "due", int32(parts), map[string]string{"retention.ms": "3600000"})
			if err != nil {
				b.Fatal(err)
			}
			commit := func(fn string) time.Duration {
				reqs := make([][]flushBatch, parts)
				for p := range reqs {
					reqs[p] = []flushBatch{{tp.ID, int32(p), 10, time.Now().UnixMilli()}}
				}
				plan, err := engine.PlanSegment(makeSegment(testKey(time.Now()), 1000, reqs...))
				if err != nil {
					b.Fatal(err)
				}
				kt, _ := engine.KeyTime(plan.Segment.Key)
				sql, args, _ := c.commitArgs(plan.Segment, kt, nil)
				start := time.Now()
				rows, err := c.pool.Query(ctx, strings.Replace(sql, "strata_commit(", fn+"(", 1), args...)
				if err == nil {
					for rows.Next() {
					}
					rows.Close()
					err = rows.Err()
				}
				if err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			var with, without time.Duration
			first := true
			for b.Loop() {
				// Each goes first every other time.
				if first {
					with += commit("strata_commit")
					without += commit("strata_commit_before_due")
				} else {
					without += commit("strata_commit_before_due")
					with += commit("strata_commit")
				}
				first = !first
			}
			b.ReportMetric(float64(with.Microseconds())/float64(b.N), "µs/commit")
			b.ReportMetric(float64(without.Microseconds())/float64(b.N), "µs/commit-before")
			b.ReportMetric(float64(with)/float64(without), "ratio")
		})
	}
}

// commitBefore returns the last definition of strata_commit among the migrations before
// version, renamed to name.
func commitBefore(tb testing.TB, version int, name string) string {
	tb.Helper()
	ms, err := migrations()
	if err != nil {
		tb.Fatal(err)
	}
	start := regexp.MustCompile(`CREATE (OR REPLACE )?FUNCTION strata_commit\(`)
	var def string
	for _, m := range ms {
		if m.version >= version {
			break
		}
		if loc := start.FindStringIndex(m.sql); loc != nil {
			body := m.sql[loc[0]:]
			end := strings.Index(body, "$fn$;")
			if end < 0 {
				tb.Fatalf("migration %s: strata_commit without a $fn$ body", m.name)
			}
			def = body[:end+len("$fn$;")]
		}
	}
	if def == "" {
		tb.Fatal("no strata_commit before the due time")
	}
	return start.ReplaceAllString(def, "CREATE FUNCTION "+name+"(")
}
