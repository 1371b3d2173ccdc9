package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/gobin"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

func TestMain(m *testing.M) {
	code := m.Run()
	gobin.Cleanup()
	os.Exit(code)
}

// serveProc is one `strata serve` process.
type serveProc struct {
	name string
	cmd  *exec.Cmd
	url  string
	out  *lockedBuffer
	done chan struct{} // closed when the process has exited; err is then set
	err  error
}

// cluster is what several `strata serve` processes share: one catalog database and one
// bucket.
type cluster struct {
	bin, catalog, bucket string
	env                  []string
}

// newCluster makes a fresh Postgres database and a fresh MinIO bucket (created here,
// so the nodes start without --create-bucket, as in production).
func newCluster(t *testing.T) *cluster {
	t.Helper()
	dsn := testsvc.PostgresDSN(t)
	m := testsvc.MinIO(t)
	bucket := testsvc.BucketName()
	openMinIOBucket(t, bucket, slog.New(slog.DiscardHandler)) // creates it
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
	return &cluster{
		bin:     gobin.Build(t, "cmd/strata"),
		catalog: dsn,
		bucket:  "s3://" + bucket + "/e2e?" + q.Encode(),
		env:     env,
	}
}

// start starts a node, with more flags when given; it is killed when the test ends
// if it still runs.
func (c *cluster) start(t *testing.T, name string, flags ...string) *serveProc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))
	out := &lockedBuffer{}
	cmd := exec.Command(c.bin, append([]string{"serve", "--catalog", c.catalog, "--bucket", c.bucket,
		"--listen", addr, "--log-level", "warn"}, flags...)...)
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{name: name, cmd: cmd, url: "http://" + addr, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return p
}

// stop sends SIGTERM, as an orchestrator does, and expects a clean exit: requests in
// flight answered, the writer drained.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want 0", p.name, p.err)
		}
	case <-time.After(45 * time.Second):
		t.Errorf("%s did not stop within 45s of SIGTERM", p.name)
	}
}

// waitReady waits until the node's /readyz answers 200.
func (p *serveProc) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := tryDo(context.Background(), http.MethodGet, p.url+"/readyz", "", nil)
		if err == nil && res.status == http.StatusOK {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready: %v\n%s", p.name, p.err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60s (%v)\n%s", p.name, err, p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startNodes starts n nodes at once (their migrations race, under the advisory lock)
// and waits until all are ready.
func (c *cluster) startNodes(t *testing.T, n int) []*serveProc {
	t.Helper()
	nodes := make([]*serveProc, n)
	for i := range nodes {
		nodes[i] = c.start(t, fmt.Sprintf("node%d", i))
	}
	for _, p := range nodes {
		p.waitReady(t)
	}
	return nodes
}

// TestTwoNodesSamePartitions: two `strata serve` processes on one catalog and one
// bucket take produce requests for the same partitions at once, from several clients
// that alternate between them: offsets dense, no gap, no duplicate, and every
// acknowledged offset holds the acknowledged record — read through either node.
func TestTwoNodesSamePartitions(t *testing.T) {
	c := newCluster(t)
	nodes := c.startNodes(t, 2)
	const topic, clients, batches, batch = "shared", 4, 10, 100
	createTopic(t, nodes[0].url, topic, 3, nil)

	l := newLedger()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runLoad(t, ctx, loadConfig{
		topic: topic, clients: clients, batchSize: batch,
		target:      func(c, attempt int) string { return nodes[(c+attempt)%2].url },
		more:        func(_, acked int) bool { return acked < batches },
		poisonEvery: 4,
	}, l)
	if got, want := l.acked(), clients*batches*batch; got != want {
		t.Errorf("%d records acknowledged, want %d (answers %v)", got, want, l.codeCounts())
	}
	for _, n := range nodes {
		if total := l.verify(t, n.url, topic); total != clients*batches*batch {
			t.Errorf("through %s the log holds %d records, want %d", n.name, total, clients*batches*batch)
		}
	}
	// Both nodes wrote: otherwise the test proved nothing about two writers.
	for _, n := range nodes {
		if fc := writerCounts(t, n.url); fc.commits == 0 {
			t.Errorf("%s committed nothing", n.name)
		}
	}
	for _, n := range nodes {
		n.stop(t)
	}
}

// TestKillNodeUnderLoad: `kill -9` of one of two nodes while both take produce
// requests. Afterwards, through the survivor, every acknowledged record is at its
// acknowledged offset, offsets are dense, and nothing whose produce was refused with a
// definite error is visible; records whose outcome is unknown (the connection died with
// the node) may be either.
func TestKillNodeUnderLoad(t *testing.T) {
	c := newCluster(t)
	nodes := c.startNodes(t, 2)
	victim, survivor := nodes[0], nodes[1]
	const topic, clients, batch = "killed", 4, 100
	createTopic(t, survivor.url, topic, 3, nil)

	l := newLedger()
	var ph phase // 0 both nodes, 1 victim killed, 2 stop
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runLoad(t, ctx, loadConfig{
			topic: topic, clients: clients, batchSize: batch,
			target: func(c, attempt int) string {
				if ph.get() > 0 {
					return survivor.url
				}
				return nodes[(c+attempt)%2].url
			},
			more:        func(int, int) bool { return ph.get() < 2 },
			poisonEvery: 5,
		}, l)
	}()

	if !testwait.Within(60*time.Second, func() bool { return l.acked() >= 8*batch }) {
		t.Fatalf("no load before the kill: %d acknowledged", l.acked())
	}
	if fc := writerCounts(t, victim.url); fc.commits == 0 {
		t.Fatalf("the victim has committed nothing yet: killing it would prove nothing")
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ph.set(1)
	<-victim.done
	atKill := l.acked()
	if !testwait.Within(60*time.Second, func() bool { return l.acked() >= atKill+8*batch }) {
		ph.set(2)
		<-done
		t.Fatalf("the survivor did not carry on: %d acknowledged since the kill; answers %v", l.acked()-atKill, l.codeCounts())
	}
	ph.set(2)
	<-done
	l.verify(t, survivor.url, topic)

	// A node started after the kill sees the same log.
	late := c.start(t, "node2")
	late.waitReady(t)
	l.verify(t, late.url, topic)
}
