package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/examples/retail/retail"
	"github.com/strata-io/strata/internal/testkit/gobin"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

func long() bool { return os.Getenv("STRATA_LONG") != "" }

func TestMain(m *testing.M) {
	code := m.Run()
	gobin.Cleanup()
	os.Exit(code)
}

// proc is a child process whose output is kept for failure reports.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func start(t testing.TB, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.signal(syscall.SIGCONT)
		p.stop(30 * time.Second)
		if t.Failed() {
			out := p.out.String()
			if len(out) > 20000 {
				out = "…" + out[len(out)-20000:]
			}
			t.Logf("%s output:\n%s", name, out)
		}
	})
	return p
}

func (p *proc) signal(s syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(s)
	}
}

// stop sends SIGTERM and waits; SIGKILL after timeout.
func (p *proc) stop(timeout time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// node is a `strata serve` process on a fresh database and bucket.
type node struct {
	*proc
	url string
}

func startNode(t testing.TB) *node {
	t.Helper()
	strata := gobin.Build(t, "cmd/strata")
	dsn := testsvc.PostgresDSN(t)
	m := testsvc.MinIO(t)
	q := url.Values{"endpoint": {m.Endpoint}, "path_style": {"true"}}
	if m.Region != "" {
		q.Set("region", m.Region)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_ACCESS_KEY_ID="+m.AccessKey, "AWS_SECRET_ACCESS_KEY="+m.SecretKey)
	addr := fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))
	p := start(t, "strata", env, strata, "serve", "--catalog", dsn, "--bucket", "s3://"+testsvc.BucketName()+"/streams?"+q.Encode(),
		"--create-bucket", "--listen", addr, "--log-level", "warn", "--linger", "20ms")
	n := &node{proc: p, url: "http://" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(n.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return n
			}
		}
		select {
		case <-p.done:
			t.Fatalf("strata exited before it was ready: %v\n%s", p.err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata not ready after 60s\n%s", p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retailProc starts an instance of the retail example against server.
func retailProc(t testing.TB, server, name string, args ...string) *proc {
	t.Helper()
	bin := gobin.Build(t, "examples/retail")
	base := []string{"--server", server, "--instance", name, "--log-level", "info"}
	return start(t, name, os.Environ(), bin, append(base, args...)...)
}

func createTopics(t testing.TB, c *client.Client, partitions int32, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tp := range topics {
		if _, err := c.CreateTopic(ctx, tp, partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// produceInputs sends the generated inputs, each topic's records in order, with the
// idempotent producer.
func produceInputs(t testing.TB, c *client.Client, ins []retail.Input) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := c.NewProducer(ctx, client.ProducerConfig{Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for topic, recs := range retail.Records(ins) {
		if _, err := p.Produce(ctx, topic, recs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// readAll fetches every record of every partition of topic up to its high watermark.
func readAll(t testing.TB, c *client.Client, topic string) []client.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	parts, err := c.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Record
	for _, p := range parts {
		for off := p.LogStartOffset; off < p.HighWatermark; {
			res, err := c.Fetch(ctx, topic, p.Partition, client.FetchOptions{Offset: off, MaxRecords: 5000, Base64: true})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Records...)
			if res.NextOffset <= off {
				t.Fatalf("fetch %s/%d at %d made no progress", topic, p.Partition, off)
			}
			off = res.NextOffset
		}
	}
	return out
}

// inputsBack reads the inputs as stored, with their partitions and offsets: what the
// oracle merges.
func inputsBack(t testing.TB, c *client.Client) []retail.Input {
	t.Helper()
	var ins []retail.Input
	for _, topic := range []string{retail.Sales, retail.Shipments} {
		for _, r := range readAll(t, c, topic) {
			v, _ := r.ValueBytes()
			var s retail.Sale
			if err := json.Unmarshal(v, &s); err != nil {
				t.Fatal(err)
			}
			ins = append(ins, retail.Input{Topic: topic, Partition: *r.Partition, Offset: r.Offset, SKU: s.SKU, Qty: s.Qty, TS: r.Timestamp.UnixMilli()})
		}
	}
	return ins
}

// waitDrained waits until the group has committed the end of every input partition.
func waitDrained(t testing.TB, c *client.Client, group string, within time.Duration, alive ...*proc) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lag, err := c.GroupLag(ctx, group)
		cancel()
		done := err == nil && len(lag.Partitions) > 0
		if done {
			for _, p := range lag.Partitions {
				if (p.Topic == retail.Sales || p.Topic == retail.Shipments) && (p.CommittedOffset == nil || *p.CommittedOffset != p.HighWatermark) {
					done = false
				}
			}
		}
		if done {
			return
		}
		for _, p := range alive {
			select {
			case <-p.done:
				t.Fatalf("%s exited: %v", p.name, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not drained after %s: %+v (err %v)", group, within, lag, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// outputs reads the retail outputs as the oracle's keys, and checks that each
// output's input-position header is unique.
func outputs(t *testing.T, c *client.Client) retail.Outputs {
	t.Helper()
	out, dups := outputsCounting(t, c)
	if dups > 0 {
		t.Errorf("%d outputs repeat an input-position header", dups)
	}
	return out
}

// outputsCounting reads the outputs and counts repeated input-position headers.
func outputsCounting(t *testing.T, c *client.Client) (retail.Outputs, int) {
	t.Helper()
	var out retail.Outputs
	dups := 0
	seen := map[string]bool{}
	for _, topic := range []string{retail.Reorders, retail.PriceAdjustments} {
		for _, r := range readAll(t, c, topic) {
			pos := header(r, "strata-input")
			if pos == "" {
				t.Errorf("%s/%d@%d: no input-position header", topic, *r.Partition, r.Offset)
			}
			if seen[pos] {
				dups++
			}
			seen[pos] = true
			v, _ := r.ValueBytes()
			if topic == retail.Reorders {
				var ro retail.Reorder
				_ = json.Unmarshal(v, &ro)
				out.Reorders = append(out.Reorders, ro.Key())
			} else {
				var pa retail.PriceAdjustment
				_ = json.Unmarshal(v, &pa)
				out.Adjustments = append(out.Adjustments, pa.Key())
			}
		}
	}
	sortStrings(out.Reorders)
	sortStrings(out.Adjustments)
	return out, dups
}

func header(r client.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// compare reports the differences between the app's outputs and the oracle's as
// missing and duplicated counts.
func compare(t *testing.T, what string, got, want []string) (missing, extra int) {
	t.Helper()
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	var ex []string
	for k, n := range count {
		switch {
		case n > 0:
			missing += n
			ex = append(ex, fmt.Sprintf("missing %dx %s", n, k))
		case n < 0:
			extra += -n
			ex = append(ex, fmt.Sprintf("extra %dx %s", -n, k))
		}
	}
	if len(ex) > 10 {
		ex = ex[:10]
	}
	if missing+extra > 0 {
		t.Logf("%s: %d missing, %d extra of %d expected; e.g. %v", what, missing, extra, len(want), ex)
	}
	return missing, extra
}

// changelogTable is the latest value per key of the stock changelog.
func changelogTable(t *testing.T, c *client.Client, app string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	recs := readAll(t, c, app+"-stock-changelog")
	for _, r := range recs {
		k, _ := r.KeyBytes()
		v, _ := r.ValueBytes()
		if v == nil {
			delete(out, string(k))
			continue
		}
		var n int64
		for _, b := range v {
			n = n<<8 | int64(b)
		}
		out[string(k)] = n
	}
	return out
}

func sortStrings(s []string) { slices.Sort(s) }

// lagOf is the group's total lag on the inputs.
func lagOf(t testing.TB, c *client.Client, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lag, err := c.GroupLag(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range lag.Partitions {
		if p.Topic == retail.Sales || p.Topic == retail.Shipments {
			n += p.Lag
		}
	}
	return n
}
