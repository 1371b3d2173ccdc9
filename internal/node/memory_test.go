package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/security"
	"github.com/strata-io/strata/writer"
)

// The node's memory budget under what an outside review did to it: overload, clients
// that ask for 16 MiB and never read, thousands of streams. In each, the accounting
// never exceeds the budget, the budget is actually what refuses or shrinks the work
// (it is in the path), other clients are still served, and once the clients are gone
// every reservation has been released: the budget is back at its idle level (the
// cache's standing reservation).

// memNode serves a node with a small budget: a 16 MiB cache carved out, a 16 MiB
// writer buffer, and budget bytes in all.
type memNode struct {
	*Node
	url string
}

func startMemNode(t *testing.T, budget int64, stall time.Duration, apiCfg api.Config, opts ...func(*Config)) *memNode {
	t.Helper()
	cfg := newConfig(t)
	cfg.Compactor = false
	cfg.MemoryBudget = budget
	cfg.StallTimeout = stall
	cfg.WriterConfig = writer.Config{BufferBytes: 16 << 20, MaxFlushBytes: 4 << 20}
	cfg.ReaderConfig = reader.Config{CacheBytes: 16 << 20, MemoryWait: 200 * time.Millisecond}
	apiCfg.MemoryWait = 200 * time.Millisecond
	if apiCfg.MaxInflightProduceBytes == 0 {
		apiCfg.MaxInflightProduceBytes = 16 << 20
	}
	cfg.API = apiCfg
	for _, o := range opts {
		o(&cfg)
	}
	cfg.HTTP.Listen, cfg.ShutdownTimeout = "127.0.0.1:0", 10*time.Second
	n, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	t.Cleanup(func() {
		stop()
		<-served
	})
	return &memNode{Node: n, url: n.URL}
}

// settle waits for the budget to come back to its idle level and checks it never went
// past its limit nor was released twice.
func (n *memNode) settle(t *testing.T) {
	t.Helper()
	m := n.Memory
	testwait.Until(t, 20*time.Second, "the budget to return to its idle level", func() bool { return m.Used() == m.Idle() })
	if m.Peak() > m.Limit() || m.Overreleased() != 0 {
		t.Fatalf("peak %d of a %d budget, %d bytes released twice", m.Peak(), m.Limit(), m.Overreleased())
	}
}

// seed produces about mib MiB to partition 0 of topic t, in 512 KiB requests.
func (n *memNode) seed(t *testing.T, mib int) {
	t.Helper()
	body := produceBody(500, 1000)
	for range mib * 2 {
		code, b, err := post(n.url+"/v1/topics/t/records", body)
		if err != nil || code != 200 {
			t.Fatalf("seed: %d %s %v", code, b, err)
		}
	}
}

// produceBody is a JSON produce of n records of size bytes to partition 0.
func produceBody(n, size int) string {
	var sb strings.Builder
	sb.WriteString(`{"records":[`)
	v := strings.Repeat("x", size)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"partition":0,"value":%q}`, v)
	}
	sb.WriteString(`]}`)
	return sb.String()
}

func TestMemoryOverload(t *testing.T) {
	t.Run("open", func(t *testing.T) { memoryOverload(t, "") })
	// With keys, every body comes from one principal, whose bodies still arriving may
	// hold only a share of the budget and of admission (membudget.OwnerShare): the
	// budget holds the same way.
	t.Run("keyed", func(t *testing.T) { memoryOverload(t, overloadKey) })
}

const overloadKey = "overload-0123456789abcdef0123456789"

func memoryOverload(t *testing.T, key string) {
	// The produce bodies admitted (48 MiB), the writer's buffer (16 MiB) and the cache
	// (17 MiB) would take more than the 64 MiB budget: the budget refuses.
	apiCfg := api.Config{MaxInflightProduceBytes: 48 << 20}
	var opts []func(*Config)
	if key != "" {
		apiCfg.Auth.PublicMetrics = true
		opts = append(opts, func(c *Config) { c.Security = security.Config{StaticKeys: []string{key}} })
	}
	n := startMemNode(t, 64<<20, time.Second, apiCfg, opts...)
	body := produceBody(1000, 1000) // ~1 MiB
	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for range 64 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest("POST", n.url+"/v1/topics/t/records", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := hc.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 429:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("overload: %d acknowledged, %d refused 429, %d other; peak %d MiB of the %d MiB budget", ok.Load(), refused.Load(), other.Load(), n.Memory.Peak()>>20, n.Memory.Limit()>>20)
	if ok.Load() == 0 || refused.Load() == 0 || other.Load() != 0 {
		t.Fatalf("want some produces acknowledged and some refused with 429, nothing else: %d, %d, %d", ok.Load(), refused.Load(), other.Load())
	}
	if n.Memory.Peak() < n.Memory.Idle()+32<<20 {
		t.Fatalf("peak %d: the produces were not accounted", n.Memory.Peak())
	}
	// A refusals or waits series appears with the budget's first refusal or wait: the
	// budget is in the produce path. (Which limit refuses first — the budget, the
	// admission cap or the writer's buffer — depends on the machine's speed.)
	m := metrics(t, n.url)
	inPath := false
	for _, s := range []string{"refusals", "waits", "share_waits"} {
		for _, use := range []string{"produce", "writer"} {
			inPath = inPath || strings.Contains(m, `strata_memory_`+s+`_total{use="`+use+`"}`)
		}
	}
	if !inPath {
		t.Fatalf("no produce was refused or held by the memory budget (it is not in the path):\n%s", m)
	}
	n.settle(t)
}

// rawGet sends a GET on its own connection and reads no more than the status line
// and headers (head false: nothing at all). The connection stays open until closed.
func rawGet(addr, path string, headers map[string]string, head bool) (net.Conn, string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n", path)
	for k, v := range headers {
		fmt.Fprintf(c, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(c, "\r\n")
	if !head {
		return c, "", nil
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(c, 512)
	status, err := br.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, "", err
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			break
		}
	}
	return c, strings.TrimSpace(status), nil
}

// The outside review's reproduction, doubled: 40 clients ask for 16 MiB answers (JSON
// and binary) and never read them. The node holds them within its budget, goes on
// serving another client meanwhile, and lets go of their memory once their writes
// stall out.
func TestMemorySlowReaders(t *testing.T) {
	n := startMemNode(t, 96<<20, time.Second, api.Config{})
	n.seed(t, 24)
	addr := strings.TrimPrefix(n.url, "http://")
	var conns []net.Conn
	for i := range 40 {
		h := map[string]string{}
		if i%2 == 1 {
			h["Accept"] = api.RecordBatchContentType
		}
		c, _, err := rawGet(addr, "/v1/topics/t/partitions/0/records?offset=0&max_records=10000&max_bytes=16777216", h, false)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	testwait.Until(t, 30*time.Second, "the slow readers' answers to be reserved", func() bool { // being answered, and not reading
		return n.Memory.Used() >= n.Memory.Idle()+32<<20
	})

	var lat []time.Duration
	var served int
	for i := range 40 {
		start := time.Now()
		resp, err := http.Get(fmt.Sprintf("%s/v1/topics/t/partitions/0/records?offset=%d&max_records=20", n.url, i*100))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(start))
		if resp.StatusCode == 200 {
			var res struct{ Records []json.RawMessage }
			if json.Unmarshal(b, &res) != nil || len(res.Records) == 0 {
				t.Fatalf("another client's fetch: %s", b)
			}
			served++
		}
	}
	slices.Sort(lat)
	t.Logf("while 40 clients do not read: %d of 40 other fetches served, p50 %s, p99 %s; budget peak %d MiB of %d MiB",
		served, lat[len(lat)/2], lat[len(lat)*99/100], n.Memory.Peak()>>20, n.Memory.Limit()>>20)
	if served < 36 {
		t.Fatalf("only %d of 40 fetches of another client were served while slow readers held their answers", served)
	}
	if n.Memory.Peak() < n.Memory.Idle()+32<<20 {
		t.Fatalf("peak %d: the slow readers' answers were not accounted", n.Memory.Peak())
	}
	// Their writes stall out (1s) and their reservations go, with the connections
	// still open.
	n.settle(t)
}

// 5,000 clients ask for Server-Sent Events streams from offset 0 of a partition with
// data and read only the response headers: at most MaxStreams are served (the rest
// answer 429 concurrency_limit), the budget holds, and once they close everything is
// released.
func TestMemoryManyStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 connections")
	}
	// Streams that stall out make room for others: a long stall timeout keeps the first
	// 500 for the count.
	n := startMemNode(t, 64<<20, time.Minute, api.Config{MaxStreams: 500, HeartbeatInterval: 200 * time.Millisecond})
	n.seed(t, 8)
	addr := strings.TrimPrefix(n.url, "http://")
	var mu sync.Mutex
	var conns []net.Conn
	statuses := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 200) // dials at once
	for range 5000 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, status, err := rawGet(addr, "/v1/topics/t/partitions/0/records?offset=0&max_bytes=1048576", map[string]string{"Accept": "text/event-stream"}, true)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				statuses["error: "+err.Error()]++
				return
			}
			statuses[status]++
			conns = append(conns, c)
		})
	}
	wg.Wait()
	t.Logf("5,000 stream attempts: %v; budget peak %d MiB of %d MiB", statuses, n.Memory.Peak()>>20, n.Memory.Limit()>>20)
	if statuses["HTTP/1.1 200 OK"] != 500 || statuses["HTTP/1.1 429 Too Many Requests"] != 4500 {
		t.Fatalf("want 500 streams served and 4,500 refused: %v", statuses)
	}
	for _, c := range conns {
		c.Close()
	}
	n.settle(t)
	waitGauge(t, n.url, `strata_http_reads_active{kind="streams"} 0`)
}

// metrics is the node's /metrics.
func metrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitGauge waits until /metrics shows line.
func waitGauge(t *testing.T, url, line string) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "/metrics to show "+line, func() bool {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), line)
	})
}
