package connect

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// BenchmarkCDCStream measures the CDC source's streaming rate into a one-partition
// topic on one `strata serve` (Postgres catalog, MinIO, --linger 20ms): with the
// connector paused, STRATA_CDC_BENCH_ROWS rows (default 200,000) are inserted in
// transactions of 100; from its resume until the topic holds them all. Snapshot rate:
// the same rows read by a new connector's initial snapshot.
//
//	go test -run '^$' -bench CDCStream -benchtime=1x ./test/connect
func BenchmarkCDCStream(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("STRATA_CDC_BENCH_ROWS")); err == nil && v > 0 {
		n = v
	}
	dsn, db := cdcDB(b)
	mustExec(b, db, `CREATE TABLE items (id bigint PRIMARY KEY, n int NOT NULL, s text)`)
	c := newCluster(b, 10*time.Second)
	w := c.start("bench")
	createTopic(b, w.url, "cdc.public.items", 1)
	rest(b, w.url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "items", "cdc_items", "max.batch.size", "5000")}, 201, nil)
	// Paused only once streaming, so that the rows inserted meanwhile are streamed on
	// its resume, not read by its snapshot.
	testwait.Until(b, time.Minute, "the CDC task streaming", func() bool { return strings.Contains(w.out.String(), "postgres source: streaming") })
	rest(b, w.url, "PUT", "/connectors/cdc/pause", nil, 202, nil)
	testwait.Until(b, time.Minute, "the CDC task paused", func() bool { st, _ := taskStatus(b, w.url, "cdc"); return st == "PAUSED" })
	for i := 0; i < n; i += 100 {
		mustExec(b, db, `INSERT INTO items SELECT g, g % 97, 'row ' || g FROM generate_series($1::bigint, $2::bigint) g`, i+1, i+100)
	}
	b.ResetTimer()
	start := time.Now()
	rest(b, w.url, "PUT", "/connectors/cdc/resume", nil, 202, nil)
	testwait.Until(b, 10*time.Minute, "the rows streamed", func() bool { return highWatermark(b, w.url, "cdc.public.items") >= int64(n) })
	d := time.Since(start)
	b.ReportMetric(float64(n)/d.Seconds(), "changes/s")
	b.Logf("streaming: %d row changes (transactions of 100) in %s: %.0f changes/s", n, d.Round(time.Millisecond), float64(n)/d.Seconds())

	createTopic(b, w.url, "snap.public.items", 1)
	start = time.Now()
	rest(b, w.url, "POST", "/connectors", map[string]any{"name": "snap", "config": cdcConfig(dsn, "items", "snap_items", "topic.prefix", "snap", "max.batch.size", "5000")}, 201, nil)
	testwait.Until(b, 10*time.Minute, "the snapshot", func() bool { return highWatermark(b, w.url, "snap.public.items") >= int64(n) })
	d = time.Since(start)
	b.ReportMetric(float64(n)/d.Seconds(), "snapshot-rows/s")
	b.Logf("snapshot: %d rows in %s: %.0f rows/s", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
}

// BenchmarkCDCLag measures end-to-end lag at a steady 200 single-row transactions/s
// for 15 s: from the row's insert in Postgres (clock_timestamp(), its transaction's
// commit a moment later) to readable in the topic (a reader polling the topic), and to
// written in the sink table (the sink table's own clock_timestamp() default).
//
//	go test -run '^$' -bench CDCLag -benchtime=1x ./test/connect
func BenchmarkCDCLag(b *testing.B) {
	dsn, db := cdcDB(b)
	dstDSN, dst := cdcDB(b)
	mustExec(b, db, `CREATE TABLE ev (id bigint PRIMARY KEY, at text NOT NULL)`)
	mustExec(b, dst, `CREATE TABLE ev (id bigint PRIMARY KEY, at text NOT NULL, written_at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	c := newCluster(b, 10*time.Second)
	w := c.start("bench")
	createTopic(b, w.url, "cdc.public.ev", 1)
	rest(b, w.url, "POST", "/connectors", map[string]any{"name": "cdc", "config": cdcConfig(dsn, "ev", "cdc_ev")}, 201, nil)
	rest(b, w.url, "POST", "/connectors", map[string]any{"name": "sink", "config": map[string]string{
		"connector.class": "PostgresSink", "connection.url": dstDSN, "topics": "cdc.public.ev", "table.name.format": "ev"}}, 201, nil)
	testwait.Until(b, time.Minute, "both tasks running", func() bool {
		st, _ := taskStatus(b, w.url, "sink")
		return st == "RUNNING" && strings.Contains(w.out.String(), "postgres source: streaming")
	})
	b.ResetTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var topicLag []time.Duration
	var seen atomic.Int64 // len(topicLag), for this goroutine to read
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl := client.New(w.url)
		off := int64(0)
		for ctx.Err() == nil {
			res, err := cl.FetchBinary(ctx, "cdc.public.ev", 0, client.FetchOptions{Offset: off, MaxRecords: 1000})
			if err != nil {
				continue
			}
			now := time.Now()
			for _, r := range res.Records {
				var v struct {
					After struct {
						At string `json:"at"`
					} `json:"after"`
				}
				if json.Unmarshal(r.Value, &v) == nil && v.After.At != "" {
					if at, err := time.Parse(time.RFC3339Nano, v.After.At); err == nil {
						topicLag = append(topicLag, now.Sub(at))
						seen.Add(1)
					}
				}
			}
			off = res.NextOffset
			time.Sleep(2 * time.Millisecond)
		}
	}()
	const rate, secs = 200, 15
	tick := time.NewTicker(time.Second / rate)
	for i := range rate * secs {
		<-tick.C
		mustExec(b, db, `INSERT INTO ev VALUES ($1, to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))`, i)
	}
	tick.Stop()
	testwait.Until(b, time.Minute, "the sink table", func() bool {
		var n int
		_ = dst.QueryRow(context.Background(), `SELECT count(*) FROM ev`).Scan(&n)
		return n >= rate*secs
	})
	// The reader is a poll behind: it has seen every record once it has caught up
	// (checked below, after it stops).
	testwait.Within(30*time.Second, func() bool { return seen.Load() >= rate*secs })
	cancel()
	<-done
	var p50, p99 float64
	if err := dst.QueryRow(context.Background(), `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)
		FROM (SELECT extract(epoch FROM written_at - at::timestamptz) * 1000 AS ms FROM ev) x`).Scan(&p50, &p99); err != nil {
		b.Fatal(err)
	}
	slices.Sort(topicLag)
	if len(topicLag) < rate*secs {
		b.Fatalf("the reader saw %d of %d records", len(topicLag), rate*secs)
	}
	q := func(p float64) time.Duration { return topicLag[int(p*float64(len(topicLag)-1))] }
	b.ReportMetric(float64(q(0.5).Milliseconds()), "topic-p50-ms")
	b.ReportMetric(float64(q(0.99).Milliseconds()), "topic-p99-ms")
	b.ReportMetric(p50, "sink-p50-ms")
	b.ReportMetric(p99, "sink-p99-ms")
	b.Logf("%d row changes at %d/s: insert → readable in the topic p50 %s p99 %s; → written in the sink table p50 %.0f ms p99 %.0f ms",
		len(topicLag), rate, q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), p50, p99)
}
