package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadValue is every load record's value: unique per (client, seq), so the log can be
// matched record by record against what each producer was told.
type loadValue struct {
	C   int    `json:"c"`
	S   int    `json:"s"`
	Pad string `json:"pad"`
}

type recordID struct{ c, s int }

// fate is what a producer knows about a record after its last attempt.
type fate struct {
	outcome   produceOutcome
	partition int32 // acked only
	offset    int64 // acked only
	why       string
}

// ledger records every record's fate across all producers.
type ledger struct {
	mu    sync.Mutex
	fates map[recordID]fate
	// codes counts the answers by code ("ok", a problem code, or "transport").
	codes map[string]int
}

func newLedger() *ledger {
	return &ledger{fates: map[recordID]fate{}, codes: map[string]int{}}
}

func (l *ledger) count(code string) {
	l.mu.Lock()
	l.codes[code]++
	l.mu.Unlock()
}

func (l *ledger) codeCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.codes))
	for k, v := range l.codes {
		out[k] = v
	}
	return out
}

// loadConfig describes a load: clients producing keyed batches until told to stop.
type loadConfig struct {
	topic     string
	clients   int
	batchSize int
	// target returns the node a client sends its next attempt to.
	target func(client, attempt int) string
	// more says whether a client should send another batch, given how many of its
	// batches were acknowledged so far.
	more func(client, acked int) bool
	// retryFor bounds how long one batch is retried on 429/503 before it is given up
	// (its records then stay refused).
	retryFor time.Duration
	// poisonEvery, when positive, makes every poisonEvery-th batch of a client carry,
	// in its middle, one record for a partition that does not exist: the request must
	// be refused whole (404 partition_out_of_range) and none of its records written.
	poisonEvery int
}

// runLoad runs the producers and returns once each has stopped. A 429/503 problem
// (nothing written, by the API's contract) is retried with the same records; an
// unknown outcome (commit_outcome_unknown, a broken connection) is not, and the next
// batch carries new records; anything else is a test failure.
func runLoad(t *testing.T, ctx context.Context, cfg loadConfig, l *ledger) {
	t.Helper()
	if cfg.retryFor == 0 {
		cfg.retryFor = 90 * time.Second
	}
	pad := strings.Repeat("p", 200)
	var wg sync.WaitGroup
	for c := range cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq, ackedBatches, attempt, sent := 0, 0, 0, 0
			for cfg.more(c, ackedBatches) && ctx.Err() == nil {
				sent++
				poisoned := cfg.poisonEvery > 0 && sent%cfg.poisonEvery == 0
				ids := make([]recordID, cfg.batchSize)
				recs := make([]map[string]any, cfg.batchSize)
				for i := range recs {
					ids[i] = recordID{c, seq}
					recs[i] = map[string]any{
						"key":   fmt.Sprintf("key-%d", seq%37),
						"value": loadValue{C: c, S: seq, Pad: pad},
					}
					seq++
				}
				if poisoned {
					recs[len(recs)/2]["partition"] = 99
				}
				body := produceBody(recs)
				deadline := time.Now().Add(cfg.retryFor)
				var final fate
				for {
					attempt++
					out, offs, res, err := produceOnce(ctx, cfg.target(c, attempt), cfg.topic, body)
					code := "ok"
					if p, ok := res.problem(); ok {
						code = p.Code
					} else if err != nil {
						code = "transport"
					}
					l.count(code)
					if out == acked && len(offs) != len(recs) {
						t.Errorf("client %d: %d offsets for %d records", c, len(offs), len(recs))
						return
					}
					if out == acked && poisoned {
						t.Errorf("client %d: a request with a record for partition 99 was acknowledged: %s", c, truncate(string(res.body), 300))
					}
					if out == acked {
						final = fate{outcome: acked}
						ackedBatches++
						l.mu.Lock()
						for i, id := range ids {
							l.fates[id] = fate{outcome: acked, partition: offs[i].Partition, offset: offs[i].Offset}
						}
						l.mu.Unlock()
						break
					}
					if out == unknown {
						why := code
						if err != nil {
							why = err.Error()
						}
						final = fate{outcome: unknown, why: why}
						break
					}
					// A definite refusal.
					retryable := res.status == http.StatusServiceUnavailable || res.status == http.StatusTooManyRequests
					if poisoned && code == "partition_out_of_range" {
						final = fate{outcome: refused, why: code}
						break
					}
					if poisoned && !retryable {
						t.Errorf("client %d: a request with a record for partition 99 answered HTTP %d %s, want 404 partition_out_of_range",
							c, res.status, truncate(string(res.body), 300))
						final = fate{outcome: refused, why: code}
						break
					}
					if !retryable {
						t.Errorf("client %d: produce refused for good: HTTP %d %s", c, res.status, truncate(string(res.body), 300))
						final = fate{outcome: refused, why: code}
						break
					}
					if time.Now().After(deadline) || ctx.Err() != nil {
						final = fate{outcome: refused, why: "gave up after " + code}
						break
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
				if final.outcome != acked {
					l.mu.Lock()
					for _, id := range ids {
						l.fates[id] = final
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
}

// verify reads every partition of topic through base and checks the log against the
// ledger: offsets dense from 0, no record twice, every acknowledged record at its
// acknowledged offset, no definitely refused record anywhere, nothing never sent.
// It returns how many records the log holds.
func (l *ledger) verify(t *testing.T, base, topic string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := make(map[recordID]bool, len(l.fates))
	total, unknownSeen := 0, 0
	for _, p := range partitions(t, base, topic) {
		for _, r := range readPartition(t, base, topic, p) {
			total++
			var v loadValue
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("%d/%d: value %s: %v", p.Partition, r.Offset, truncate(string(r.Value), 100), err)
			}
			id := recordID{v.C, v.S}
			if seen[id] {
				t.Errorf("%d/%d: record %v is in the log twice", p.Partition, r.Offset, id)
				continue
			}
			seen[id] = true
			f, ok := l.fates[id]
			switch {
			case !ok:
				t.Errorf("%d/%d: record %v was never produced", p.Partition, r.Offset, id)
			case f.outcome == refused:
				t.Errorf("%d/%d: record %v is visible although its produce was refused (%s)", p.Partition, r.Offset, id, f.why)
			case f.outcome == acked && (f.partition != p.Partition || f.offset != r.Offset):
				t.Errorf("record %v acknowledged at %d/%d is at %d/%d", id, f.partition, f.offset, p.Partition, r.Offset)
			case f.outcome == unknown:
				unknownSeen++
			}
		}
	}
	ackedN, unknownN, refusedN := 0, 0, 0
	for id, f := range l.fates {
		switch f.outcome {
		case acked:
			ackedN++
			if !seen[id] {
				t.Errorf("record %v acknowledged at %d/%d is missing from the log", id, f.partition, f.offset)
			}
		case unknown:
			unknownN++
		case refused:
			refusedN++
		}
	}
	t.Logf("log holds %d records: %d acknowledged, %d of %d with unknown outcome; %d refused for good; answers: %v",
		total, ackedN, unknownSeen, unknownN, refusedN, l.codes)
	return total
}

// acked counts the acknowledged records.
func (l *ledger) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.fates {
		if f.outcome == acked {
			n++
		}
	}
	return n
}

// phase lets producers and the test agree on where a scenario stands.
type phase struct{ v atomic.Int32 }

func (p *phase) get() int32  { return p.v.Load() }
func (p *phase) set(v int32) { p.v.Store(v) }
