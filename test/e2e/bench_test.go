package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// The produce load of the benchmark and of TestFlushCost: clients sending batches of
// 1 KiB JSON records concurrently, each waiting for its answer before the next batch.
const (
	costClients   = 4   // TestFlushCost's, and the benchmark's first setting
	costBatches   = 4   // per client per benchmark op
	costBatch     = 500 // records per request
	costValueSize = 1024
)

// benchBodies returns one produce body per client: costBatch keyed records whose JSON
// values are costValueSize bytes each.
func benchBodies(tb testing.TB, clients int) [][]byte {
	tb.Helper()
	bodies := make([][]byte, clients)
	for c := range bodies {
		recs := make([]map[string]any, costBatch)
		for i := range recs {
			v := fmt.Sprintf(`{"client":%d,"i":%4d,"payload":""}`, c, i)
			v = strings.Replace(v, `""`, `"`+strings.Repeat("x", costValueSize-len(v))+`"`, 1)
			if len(v) != costValueSize || !json.Valid([]byte(v)) {
				tb.Fatalf("value of %d bytes, want %d", len(v), costValueSize)
			}
			recs[i] = map[string]any{"key": fmt.Sprintf("key-%d", i%64), "value": json.RawMessage(v)}
		}
		bodies[c] = produceBody(recs)
	}
	return bodies
}

// benchHTTP keeps one connection per client alive between requests.
var benchHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// produceRound sends costBatches requests from every client (one per body) at once
// and returns once all are answered.
func produceRound(tb testing.TB, base, topic string, bodies [][]byte) {
	var wg sync.WaitGroup
	errs := make(chan error, len(bodies))
	for c := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range costBatches {
				resp, err := benchHTTP.Post(base+"/v1/topics/"+topic+"/records", "application/json", bytes.NewReader(bodies[c]))
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("client %d: HTTP %d %s", c, resp.StatusCode, truncate(string(body), 300))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// BenchmarkProduceJSON measures produce throughput over HTTP for 1 KiB JSON records,
// in batches of 500 from concurrent clients that each wait for their answer before
// sending again (4 clients, then 16). One op is one round: every client sends 4
// batches (8,000 records, about 8 MiB, with 4 clients). It reports the cost model
// alongside: PUTs and catalog commits per flush, which must be 1 and 1, read from the
// node's /metrics.
//
//	go test -run '^$' -bench ProduceJSON -benchtime 5x ./test/e2e
func BenchmarkProduceJSON(b *testing.B) {
	for _, backend := range backends {
		for _, clients := range []int{costClients, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d", backend, clients), func(b *testing.B) {
				s := newStack(b, stackOptions{backend: backend})
				const topic = "bench"
				createTopic(b, s.url, topic, 8, nil)
				bodies := benchBodies(b, clients)
				produceRound(b, s.url, topic, bodies) // warm up: connections, caches, statements
				before := writerCounts(b, s.url)
				b.SetBytes(int64(len(bodies[0]) * clients * costBatches))
				b.ResetTimer()
				for b.Loop() {
					produceRound(b, s.url, topic, bodies)
				}
				b.StopTimer()
				after := writerCounts(b, s.url)
				flushes := after.flushes - before.flushes
				puts := after.puts - before.puts
				commits := after.commits - before.commits
				records := float64(b.N * clients * costBatches * costBatch)
				b.ReportMetric(records/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(records/flushes, "records/flush")
				b.ReportMetric(puts/flushes, "PUTs/flush")
				b.ReportMetric(commits/flushes, "commits/flush")
				if puts != flushes || commits != flushes {
					b.Errorf("%v flushes, %v PUTs, %v commits: want one PUT and one commit per flush", flushes, puts, commits)
				}
			})
		}
	}
}

// TestFlushCost checks the cost model under a concurrent load: exactly one PUT and one
// catalog commit per flush, none failed, and flushes shared between requests.
func TestFlushCost(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			s := newStack(t, stackOptions{backend: backend})
			const topic = "cost"
			createTopic(t, s.url, topic, 8, nil)
			bodies := benchBodies(t, costClients)
			const rounds = 2
			for range rounds {
				produceRound(t, s.url, topic, bodies)
			}
			m := metrics(t, s.url)
			c := writerCounts(t, s.url)
			requests := float64(rounds * costClients * costBatches)
			t.Logf("%v requests: %v flushes, %v PUTs, %v commits", requests, c.flushes, c.puts, c.commits)
			if c.flushes == 0 || c.puts != c.flushes || c.commits != c.flushes {
				t.Errorf("%v flushes, %v PUTs, %v commits: want one PUT and one commit per flush", c.flushes, c.puts, c.commits)
			}
			if ok := m[`strata_writer_puts_total{result="ok"}`]; ok != c.puts {
				t.Errorf("%v of %v PUTs succeeded", ok, c.puts)
			}
			if ok := m[`strata_writer_commits_total{result="ok"}`]; ok != c.commits {
				t.Errorf("%v of %v commits succeeded", ok, c.commits)
			}
			// The store saw exactly those PUTs: the writer's count is not the only
			// witness.
			if st := m[`strata_objstore_requests_total{op="put",result="ok"}`]; st != c.puts {
				t.Errorf("the object store counted %v PUTs, the writer %v", st, c.puts)
			}
			if n := len(s.objects(t)); float64(n) != c.puts {
				t.Errorf("the store holds %d objects after %v PUTs", n, c.puts)
			}
			if c.flushes >= requests {
				t.Errorf("%v flushes for %v concurrent requests: the writer does not batch across requests", c.flushes, requests)
			}
			var total int64
			for _, p := range partitions(t, s.url, topic) {
				total += p.HighWatermark
			}
			if want := int64(requests) * costBatch; total != want {
				t.Errorf("%d records committed, want %d", total, want)
			}
		})
	}
}
