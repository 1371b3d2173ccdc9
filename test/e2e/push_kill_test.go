package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/testwait"
)

// pushHook is a webhook that accepts every record but the poison ones (value
// {"poison":true}), which it rejects one by one in its 200 answer, and counts per
// record the calls that delivered it.
type pushHook struct {
	mu    sync.Mutex
	seen  map[[2]int64]int // (partition, offset) → calls answered 200
	keys  map[string]int   // Idempotency-Key → calls
	calls int
}

func (h *pushHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req struct {
		Records []struct {
			Topic     string          `json:"topic"`
			Partition int32           `json:"partition"`
			Offset    int64           `json:"offset"`
			Value     json.RawMessage `json:"value"`
		} `json:"records"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Records) == 0 {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	h.keys[r.Header.Get("Idempotency-Key")]++
	var results []map[string]any
	for _, rec := range req.Records {
		h.seen[[2]int64{int64(rec.Partition), rec.Offset}]++
		if strings.Contains(string(rec.Value), "poison") {
			results = append(results, map[string]any{"topic": rec.Topic, "partition": rec.Partition, "offset": rec.Offset,
				"result": "reject", "reason": "poison"})
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"records": results})
}

func (h *pushHook) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// pushAccepted reads a node's strata_push_records_total{group,result="accept"} (0
// when the node has not delivered for the group).
func pushAccepted(t *testing.T, base, group string) float64 {
	t.Helper()
	var sum float64
	for series, v := range metrics(t, base) {
		if strings.HasPrefix(series, "strata_push_records_total{") && strings.Contains(series, `group="`+group+`"`) &&
			strings.Contains(series, `result="accept"`) {
			sum += v
		}
	}
	return sum
}

// TestPushHolderKilled is the issue's "the node holding the push lease is SIGKILLed
// mid-run": two `strata serve` processes run the push role on one catalog and
// bucket; the one delivering (its records counter moves) is killed with SIGKILL; the
// other takes the subscription over within the lease time (plus a scan and slack),
// and every record reaches the webhook — none lost — and is done in the share group,
// and each one the webhook rejects is in the dead-letter topic exactly once. A record
// may reach the webhook twice only if the dead node's call was answered and its
// acknowledgement died with it: at most what the dead node had in flight.
func TestPushHolderKilled(t *testing.T) {
	const (
		total       = 3000
		poisonEvery = 97
		leaseTTL    = 2 * time.Second
		batch       = 10
		concurrency = 2
	)
	hook := &pushHook{seen: map[[2]int64]int{}, keys: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: hook}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := newCluster(t)
	flags := []string{"--roles", "writer,reader,push", "--push-allow", "127.0.0.0/8", "--push-allow-insecure",
		"--push-lease-ttl", leaseTTL.String(), "--linger", "20ms"}
	nodes := []*serveProc{c.start(t, "node0", flags...), c.start(t, "node1", flags...)}
	for _, p := range nodes {
		p.waitReady(t)
	}
	base := nodes[0].url
	createTopic(t, base, "orders", 3, nil)
	for i := 0; i < total; i += 500 {
		var recs []map[string]any
		for j := i; j < i+500; j++ {
			v := map[string]any{"n": j}
			if j%poisonEvery == 0 {
				v["poison"] = true
			}
			recs = append(recs, map[string]any{"partition": j % 3, "value": v})
		}
		body, _ := json.Marshal(map[string]any{"records": recs})
		if res := do(t, http.MethodPost, base+"/v1/topics/orders/records", "application/json", body); res.status != http.StatusOK {
			t.Fatalf("produce: HTTP %d %s", res.status, res.body)
		}
	}
	// Records the dead node held come back at their lock's end (3 s), above the
	// calls' 1 s timeout (the rule push_timeout_lock).
	createTopic(t, base, "dlq.hooks", 1, map[string]string{"errors.deadletterqueue.group.enable": "true"})
	if res := do(t, http.MethodPut, base+"/v1/share-groups/hooks", "application/json",
		[]byte(`{"configs":{"share.auto.offset.reset":"earliest","share.record.lock.duration.ms":"3000","errors.deadletterqueue.topic.name":"dlq.hooks"}}`)); res.status != http.StatusOK {
		t.Fatalf("configure the share group: HTTP %d %s", res.status, res.body)
	}
	sub := fmt.Sprintf(`{"topics":["orders"],"url":"http://%s/hook","batch_size":%d,"concurrency":%d,"timeout_ms":1000,"linger_ms":0}`,
		ln.Addr(), batch, concurrency)
	if res := do(t, http.MethodPut, base+"/v1/share-groups/hooks/push", "application/json", []byte(sub)); res.status/100 != 2 {
		t.Fatalf("create the push subscription: HTTP %d %s", res.status, res.body)
	}

	testwait.Until(t, time.Minute, "a few hundred records delivered", func() bool { return hook.distinct() >= 300 })
	var holder, survivor *serveProc
	for i, p := range nodes {
		if pushAccepted(t, p.url, "hooks") > 0 {
			holder, survivor = p, nodes[1-i]
		}
	}
	if holder == nil || pushAccepted(t, survivor.url, "hooks") != 0 {
		t.Fatalf("want exactly one node delivering: node0 %v, node1 %v",
			pushAccepted(t, nodes[0].url, "hooks"), pushAccepted(t, nodes[1].url, "hooks"))
	}
	if err := holder.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	killed := time.Now()
	<-holder.done
	before := hook.distinct()
	if before >= total {
		t.Fatalf("the holder delivered everything (%d records) before it was killed: nothing left to take over", before)
	}
	testwait.Until(t, time.Minute, "the survivor to deliver", func() bool { return pushAccepted(t, survivor.url, "hooks") > 0 })
	took := time.Since(killed)
	// The lease expires leaseTTL after its last renewal; the survivor looks every
	// third of it; the rest is slack for a loaded machine.
	if limit := leaseTTL + leaseTTL/3 + 3*time.Second; took > limit {
		t.Fatalf("the survivor took over %v after the kill, want within %v (lease %v)", took, limit, leaseTTL)
	}
	testwait.Until(t, 2*time.Minute, "every record delivered and done", func() bool {
		if hook.distinct() < total {
			return false
		}
		var g struct {
			Partitions []struct {
				Lag int64 `json:"lag"`
			} `json:"partitions"`
		}
		res := do(t, http.MethodGet, survivor.url+"/v1/share-groups/hooks", "", nil)
		if res.status != http.StatusOK || json.Unmarshal(res.body, &g) != nil || len(g.Partitions) != 3 {
			return false
		}
		for _, p := range g.Partitions {
			if p.Lag != 0 {
				return false
			}
		}
		return true
	})
	poison := (total + poisonEvery - 1) / poisonEvery
	dead := map[string]int{} // "partition/offset" → copies
	testwait.Until(t, time.Minute, "every rejected record in the dead-letter topic", func() bool {
		clear(dead)
		var a struct {
			Records []struct {
				Headers []struct {
					Key   string `json:"key"`
					Value string `json:"value"`
				} `json:"headers"`
			} `json:"records"`
		}
		res := do(t, http.MethodGet, survivor.url+"/v1/topics/dlq.hooks/partitions/0/records?offset=0&max_records=1000", "", nil)
		if res.status != http.StatusOK || json.Unmarshal(res.body, &a) != nil {
			return false
		}
		for _, r := range a.Records {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = x.Value
			}
			if h["__dlq.errors.http.body"] != "poison" {
				t.Fatalf("a dead-letter copy's headers %v: want the webhook's reason", h)
			}
			dead[h["__dlq.errors.partition"]+"/"+h["__dlq.errors.offset"]]++
		}
		return len(a.Records) >= poison
	})
	if len(dead) != poison {
		t.Fatalf("%d records dead-lettered, want the %d rejected", len(dead), poison)
	}
	for id, n := range dead {
		if n != 1 {
			t.Fatalf("record %s dead-lettered %d times, want once", id, n)
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	twice := 0
	for id, n := range hook.seen {
		if id[0] < 0 || id[0] > 2 || id[1] < 0 || id[1] >= total/3 {
			t.Fatalf("the webhook got a record that was never produced: %v", id)
		}
		if n > 1 {
			twice++
		}
	}
	if len(hook.seen) != total {
		t.Fatalf("the webhook saw %d records, want %d", len(hook.seen), total)
	}
	if twice > batch*concurrency {
		t.Fatalf("%d records delivered more than once, want at most the %d the dead node had in flight", twice, batch*concurrency)
	}
	t.Logf("killed after %d records; survivor delivering %v later; %d calls, %d records delivered twice",
		before, took.Round(time.Millisecond), hook.calls, twice)
}
