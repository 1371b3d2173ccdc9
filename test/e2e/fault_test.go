package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/strata-io/strata/objstore/fault"
)

// TestStoreFailingPuts: while the object store refuses PUTs, every produce request is
// answered 503 store_unavailable with Retry-After, and nothing becomes visible; a PUT
// that took effect but whose answer was lost is refused the same way and commits
// nothing; once the store behaves, requests succeed with offsets from 0.
func TestStoreFailingPuts(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			s := newStack(t, stackOptions{backend: backend, fault: true})
			const topic, parts = "faulty", 3
			createTopic(t, s.url, topic, parts, nil)

			// Every PUT fails: nothing reaches the store, nothing commits.
			s.fault.FailAlways(fault.Put, nil)
			sendFaultyBatches(t, s.url, topic, "failing")
			nothingVisible(t, s.url, topic, "while PUTs fail")
			if keys := s.objects(t); len(keys) != 0 {
				t.Errorf("the store holds %d objects after failed PUTs: %v", len(keys), keys)
			}
			if s.fault.Injected(fault.Put) == 0 {
				t.Fatal("no PUT was attempted: the test proved nothing")
			}
			c := writerCounts(t, s.url)
			if c.commits != 0 {
				t.Errorf("%v commits while every PUT failed, want 0", c.commits)
			}

			// A PUT that is stored but whose answer is lost: the writer cannot know
			// the object exists, so it must not commit it either.
			s.fault.LoseNext(fault.Put, 1)
			res := do(t, http.MethodPost, s.url+"/v1/topics/"+topic+"/records", "application/json",
				produceBody([]map[string]any{{"value": "lost", "partition": 1}}))
			if p, _ := res.problem(); res.status != http.StatusServiceUnavailable || p.Code != "store_unavailable" || res.header.Get("Retry-After") == "" {
				t.Errorf("lost PUT answer: HTTP %d %s (Retry-After %q), want 503 store_unavailable with Retry-After",
					res.status, res.body, res.header.Get("Retry-After"))
			}
			nothingVisible(t, s.url, topic, "after a lost PUT answer")

			// The store behaves again: requests succeed, the log starts at 0.
			s.fault.ClearAll()
			answers := sendFaultyBatches(t, s.url, topic, "healthy")
			seen := map[producedOffset]bool{}
			for _, offs := range answers {
				for _, o := range offs {
					if seen[o] {
						t.Errorf("offset %d/%d acknowledged twice", o.Partition, o.Offset)
					}
					seen[o] = true
				}
			}
			total := 0
			for _, p := range partitions(t, s.url, topic) {
				recs := readPartition(t, s.url, topic, p)
				for _, r := range recs {
					if !seen[producedOffset{p.Partition, r.Offset}] {
						t.Errorf("partition %d offset %d (%s) was never acknowledged", p.Partition, r.Offset, r.Value)
					}
				}
				total += len(recs)
			}
			if want := faultyClients * faultyBatches * faultyPerBatch; total != want || len(seen) != want {
				t.Errorf("after the fault: %d records in the log, %d acknowledged, want %d", total, len(seen), want)
			}
		})
	}
}

// sendFaultyBatches sends TestStoreFailingPuts' records: several concurrent requests, so
// that one flush holds several of them and several flushes fail. Tagged "failing",
// every request must be refused with 503 store_unavailable and Retry-After; otherwise
// acknowledged, and the offsets acknowledged are answered.
func sendFaultyBatches(t *testing.T, url, topic, tag string) [][]producedOffset {
	var mu sync.Mutex
	var answers [][]producedOffset
	var wg sync.WaitGroup
	for c := range faultyClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range faultyBatches {
				recs := make([]map[string]any, faultyPerBatch)
				for i := range recs {
					recs[i] = map[string]any{
						"key":   fmt.Sprintf("k%d", i),
						"value": map[string]any{"tag": tag, "c": c, "b": b, "i": i},
					}
				}
				out, offs, res, err := produceOnce(context.Background(), url, topic, produceBody(recs))
				if err != nil {
					t.Errorf("%s: client %d batch %d: %v", tag, c, b, err)
					return
				}
				mu.Lock()
				switch tag {
				case "failing":
					p, _ := res.problem()
					if out != refused || res.status != http.StatusServiceUnavailable || p.Code != "store_unavailable" {
						t.Errorf("%s: client %d batch %d: HTTP %d %s, want 503 store_unavailable", tag, c, b, res.status, res.body)
					}
					if ra := res.header.Get("Retry-After"); ra == "" {
						t.Errorf("%s: 503 without Retry-After", tag)
					}
				default:
					if out != acked {
						t.Errorf("%s: client %d batch %d: HTTP %d %s, want 200", tag, c, b, res.status, res.body)
					} else {
						answers = append(answers, offs)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return answers
}

// The load of sendFaultyBatches.
const faultyClients, faultyBatches, faultyPerBatch = 4, 3, 20

// nothingVisible fails unless every partition of topic is empty, by its watermark and
// bytes and by a fetch from 0.
func nothingVisible(t *testing.T, url, topic, when string) {
	t.Helper()
	for _, p := range partitions(t, url, topic) {
		if p.HighWatermark != 0 || p.Bytes != 0 {
			t.Errorf("%s: partition %d has high watermark %d and %d bytes, want 0 and 0", when, p.Partition, p.HighWatermark, p.Bytes)
		}
		if a := fetch(t, url, topic, p.Partition, 0, 100); len(a.Records) != 0 || a.HighWatermark != 0 {
			t.Errorf("%s: fetch of partition %d from 0 shows %d records, high watermark %d", when, p.Partition, len(a.Records), a.HighWatermark)
		}
	}
}

// TestStoreFailingReads: a fetch while the object store fails its reads is answered
// with a retryable 503 (as a produce is when PUTs fail), never a 200 that hides the
// records or a 500 that says "bug"; a corrupted read is an error, never wrong records;
// and neither failure stays in the block cache once the store behaves.
func TestStoreFailingReads(t *testing.T) {
	s := newStack(t, stackOptions{backend: embedded, fault: true})
	const topic = "reads"
	createTopic(t, s.url, topic, 1, nil)
	out, _, res, err := produceOnce(context.Background(), s.url, topic,
		produceBody([]map[string]any{{"value": "a"}, {"value": "b"}, {"value": "c"}}))
	if err != nil || out != acked {
		t.Fatalf("produce: HTTP %d %s %v", res.status, res.body, err)
	}
	u := s.url + "/v1/topics/" + topic + "/partitions/0/records?offset=0"
	wantRecords := func(when string) {
		t.Helper()
		res := do(t, http.MethodGet, u, "", nil)
		if res.status != http.StatusOK {
			t.Errorf("%s: fetch: HTTP %d %s", when, res.status, truncate(string(res.body), 300))
			return
		}
		a := fetch(t, s.url, topic, 0, 0, 100)
		if len(a.Records) != 3 || string(a.Records[0].Value) != `"a"` || string(a.Records[2].Value) != `"c"` {
			t.Errorf("%s: fetch shows %+v, want a, b, c", when, a.Records)
		}
	}

	t.Run("unavailable", func(t *testing.T) {
		s.fault.FailAlways(fault.GetRange, nil)
		s.fault.FailAlways(fault.Get, nil)
		res := do(t, http.MethodGet, u, "", nil)
		s.fault.ClearAll()
		p, _ := res.problem()
		if res.status != http.StatusServiceUnavailable || p.Code != "store_unavailable" || res.header.Get("Retry-After") == "" {
			t.Errorf("fetch while the store fails reads: HTTP %d %s (Retry-After %q), want 503 store_unavailable with Retry-After",
				res.status, truncate(string(res.body), 300), res.header.Get("Retry-After"))
		}
		wantRecords("after the store recovered")
	})
	t.Run("corrupt", func(t *testing.T) {
		// A fresh stack so the block is not cached yet.
		s2 := newStack(t, stackOptions{backend: embedded, fault: true})
		createTopic(t, s2.url, topic, 1, nil)
		out, _, res, err := produceOnce(context.Background(), s2.url, topic,
			produceBody([]map[string]any{{"value": "a"}, {"value": "b"}, {"value": "c"}}))
		if err != nil || out != acked {
			t.Fatalf("produce: HTTP %d %s %v", res.status, res.body, err)
		}
		// One flipped bit in transit: the reader finds the CRC wrong, drops the cached
		// block and reads it again, so the fetch answers the right records.
		s2.fault.Inject(fault.GetRange, fault.Fault{Times: 1, FlipBit: true})
		s2.fault.Inject(fault.Get, fault.Fault{Times: 1, FlipBit: true})
		a := fetch(t, s2.url, topic, 0, 0, 100)
		if len(a.Records) != 3 || string(a.Records[0].Value) != `"a"` || string(a.Records[2].Value) != `"c"` {
			t.Errorf("fetch through one corrupted read: %+v, want a, b, c", a.Records)
		}
		if n := s2.fault.Injected(fault.GetRange) + s2.fault.Injected(fault.Get); n != 1 {
			t.Errorf("corrupted reads injected: %d, want 1", n)
		}
		// Corrupt on every read of an object not cached yet: never wrong data, a 5xx
		// instead, and the right records once reads are healthy again.
		const topic2 = "reads2"
		createTopic(t, s2.url, topic2, 1, nil)
		out, _, res, err = produceOnce(context.Background(), s2.url, topic2,
			produceBody([]map[string]any{{"value": "a"}, {"value": "b"}, {"value": "c"}}))
		if err != nil || out != acked {
			t.Fatalf("produce: HTTP %d %s %v", res.status, res.body, err)
		}
		s2.fault.Inject(fault.GetRange, fault.Fault{Times: 1000, FlipBit: true})
		s2.fault.Inject(fault.Get, fault.Fault{Times: 1000, FlipBit: true})
		res = do(t, http.MethodGet, s2.url+"/v1/topics/"+topic2+"/partitions/0/records?offset=0", "", nil)
		if res.status < 500 {
			t.Errorf("fetch while every read is corrupted: HTTP %d %s, want a 5xx", res.status, truncate(string(res.body), 300))
		}
		s2.fault.ClearAll()
		a = fetch(t, s2.url, topic2, 0, 0, 100)
		if len(a.Records) != 3 || string(a.Records[0].Value) != `"a"` || string(a.Records[2].Value) != `"c"` {
			t.Errorf("after corrupted reads: fetch shows %+v, want a, b, c (a corrupt block must not stay cached)", a.Records)
		}
	})
}
