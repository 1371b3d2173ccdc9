package connect

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// BenchmarkFileSource measures a file source's throughput into a one-partition topic on
// one `strata serve` (Postgres, MinIO, --linger 20ms): a file of lines written
// beforehand (STRATA_CONNECT_BENCH_LINES, default 200,000, of about 100 bytes), from
// the connector's creation until the topic's high watermark holds them all; by batch
// size (lines per transaction), and with four files read by four tasks.
//
//	go test -run '^$' -bench FileSource -benchtime=1x ./test/connect
func BenchmarkFileSource(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("STRATA_CONNECT_BENCH_LINES")); err == nil && v > 0 {
		n = v
	}
	c := newCluster(b, 10*time.Second)
	w := c.start("bench")
	for _, tc := range []struct {
		name  string
		files int
		batch string
	}{{"batch=2000", 1, "2000"}, {"batch=10000", 1, "10000"}, {"files=4,tasks=4,batch=10000", 4, "10000"}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("src-%d-%d", time.Now().UnixNano(), i)
				var files []string
				for f := range tc.files {
					p := filepath.Join(c.dir, fmt.Sprintf("%s-%d.jsonl", name, f))
					fh, err := os.Create(p)
					if err != nil {
						b.Fatal(err)
					}
					bw := bufio.NewWriter(fh)
					for j := range n / tc.files {
						fmt.Fprintln(bw, line(f, j, time.Unix(0, 0)))
					}
					bw.Flush()
					fh.Close()
					files = append(files, p)
				}
				createTopic(b, w.url, name, 1)
				b.ResetTimer()
				start := time.Now()
				rest(b, w.url, "POST", "/connectors", map[string]any{"name": name, "config": map[string]string{
					"connector.class": "FileSource", "files": strings.Join(files, ","), "topic": name,
					"batch.size": tc.batch, "tasks.max": strconv.Itoa(tc.files)}}, 201, nil)
				cl := client.New(w.url)
				for {
					ps, err := cl.Partitions(context.Background(), name)
					if err != nil {
						b.Fatal(err)
					}
					if ps[0].HighWatermark >= int64(n/tc.files*tc.files) {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				el := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(n)/el.Seconds(), "records/s")
				rest(b, w.url, "DELETE", "/connectors/"+name, nil, 204, nil)
			}
		})
	}
}

// BenchmarkEndToEndLag measures the lag from a line's append to a source file until the
// file sink has written it out, through the topic, on one `strata serve` (Postgres,
// MinIO, --linger 20ms): 1,000 lines/s for 10 s, each stamped with its append time;
// the output directory is watched every 5 ms. Reported: p50 and p99 in ms, for the
// connectors' default intervals (poll.interval.ms 100, offset.flush.interval.ms 1000)
// and for tuned ones (10, 100).
//
//	go test -run '^$' -bench EndToEndLag -benchtime=1x ./test/connect
func BenchmarkEndToEndLag(b *testing.B) {
	c := newCluster(b, 10*time.Second)
	w := c.start("bench")
	for _, tc := range []struct {
		name        string
		poll, flush string
	}{{"defaults", "100", "1000"}, {"poll=10ms,flush=100ms", "10", "100"}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				lags := runLag(b, c, w, fmt.Sprintf("lag-%d-%d", time.Now().UnixNano(), i), tc.poll, tc.flush)
				slices.Sort(lags)
				q := func(p float64) float64 { return float64(lags[int(p*float64(len(lags)-1))]) / 1e3 }
				b.ReportMetric(q(0.5), "p50-ms")
				b.ReportMetric(q(0.99), "p99-ms")
				b.ReportMetric(float64(len(lags)), "lines")
			}
		})
	}
}

// runLag runs one lag measurement and returns each line's lag in µs.
func runLag(b *testing.B, c *cluster, w *worker, name, poll, flush string) []int64 {
	in, out := filepath.Join(c.dir, name+".jsonl"), filepath.Join(c.dir, name+"-out")
	createTopic(b, w.url, name, 1)
	rest(b, w.url, "POST", "/connectors", map[string]any{"name": name + "-sink", "config": map[string]string{
		"connector.class": "FileSink", "directory": out, "topics": name, "offset.flush.interval.ms": flush}}, 201, nil)
	rest(b, w.url, "POST", "/connectors", map[string]any{"name": name + "-src", "config": map[string]string{
		"connector.class": "FileSource", "file": in, "topic": name, "poll.interval.ms": poll}}, 201, nil)
	testwait.Until(b, time.Minute, "both tasks running", func() bool {
		src, _ := taskStatus(b, w.url, name+"-src")
		sink, _ := taskStatus(b, w.url, name+"-sink")
		return src == "RUNNING" && sink == "RUNNING"
	})
	app := startAppender(b, []string{in}, 10, 10*time.Millisecond)
	seen := map[string]bool{}
	var lags []int64
	deadline := time.Now().Add(10 * time.Second)
	stopped := false
	for {
		if !stopped && time.Now().After(deadline) {
			app.halt()
			stopped = true
		}
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			if seen[e.Name()] || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			seen[e.Name()] = true
			data, err := os.ReadFile(filepath.Join(out, e.Name()))
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now().UnixMicro()
			for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var v struct {
					At int64 `json:"at"`
				}
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					b.Fatalf("%s: %v", l, err)
				}
				lags = append(lags, now-v.At)
			}
		}
		if stopped && len(lags) >= app.count() {
			break
		}
		if stopped && time.Since(deadline) > 30*time.Second {
			b.Fatalf("%d of %d lines came out", len(lags), app.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	rest(b, w.url, "DELETE", "/connectors/"+name+"-src", nil, 204, nil)
	rest(b, w.url, "DELETE", "/connectors/"+name+"-sink", nil, 204, nil)
	return lags
}
