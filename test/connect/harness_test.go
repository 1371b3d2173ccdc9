// Package connect holds the connect runtime's process tests: real `strata serve --roles
// writer,reader,connect` processes on Postgres and MinIO (internal/testkit/testsvc), killed with
// SIGKILL at random moments and at each failure point, paused with SIGSTOP past their
// leases, while a file source feeds a topic that a file sink writes out. STRATA_LONG=1
// runs the full kill counts.
package connect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/gobin"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

func long() bool { return os.Getenv("STRATA_LONG") != "" }

func TestMain(m *testing.M) {
	code := m.Run()
	gobin.Cleanup()
	os.Exit(code)
}

// lockedBuffer keeps a process's output for assertions and failure reports.
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

// cluster is a database and a bucket that workers share.
type cluster struct {
	t      testing.TB
	dsn    string
	bucket string
	env    []string
	lease  time.Duration
	dir    string
	mu     sync.Mutex
	logs   []*worker // every worker started, for failure reports
}

func newCluster(t testing.TB, lease time.Duration) *cluster {
	t.Helper()
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
	c := &cluster{t: t, dsn: dsn, bucket: "s3://" + testsvc.BucketName() + "/connect?" + q.Encode(), env: env, lease: lease, dir: t.TempDir()}
	t.Cleanup(func() {
		if t.Failed() {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, w := range c.logs {
				out := w.out.String()
				if len(out) > 30000 {
					out = "…" + out[len(out)-30000:]
				}
				t.Logf("worker %s output:\n%s", w.name, out)
			}
		}
	})
	return c
}

// worker is one `strata serve` process.
type worker struct {
	name string
	url  string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

// start starts a worker and waits until it is ready; extraEnv arms failpoints, and an
// armed worker may also return having already exited.
func (c *cluster) start(name string, extraEnv ...string) *worker {
	t := c.t
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))
	w := &worker{name: name, url: "http://" + addr, out: &lockedBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(gobin.Build(t, "cmd/strata"), "serve", "--roles", "writer,reader,connect", "--catalog", c.dsn, "--bucket", c.bucket,
		"--create-bucket", "--listen", addr, "--log-level", "info", "--linger", "20ms",
		"--connect-lease", c.lease.String(), "--connect-worker-name", name, "--shutdown-timeout", "10s",
		"--connect-file-dirs", c.dir)
	w.cmd.Env = append(append([]string(nil), c.env...), extraEnv...)
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = w.cmd.Wait(); close(w.done) }()
	c.mu.Lock()
	c.logs = append(c.logs, w)
	c.mu.Unlock()
	t.Cleanup(func() {
		w.signal(syscall.SIGCONT)
		w.signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			w.kill()
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(w.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return w
			}
		}
		select {
		case <-w.done:
			if len(extraEnv) > 0 {
				return w // an armed worker may reach its failpoint before /readyz is first asked; its caller reads the exit
			}
			t.Fatalf("worker %s exited before it was ready: %v\n%s", name, w.err, w.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s not ready after 60s\n%s", name, w.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *worker) signal(s syscall.Signal) {
	select {
	case <-w.done:
	default:
		_ = w.cmd.Process.Signal(s)
	}
}

func (w *worker) kill() {
	w.signal(syscall.SIGKILL)
	<-w.done
}

// exitCode waits for the worker to exit by itself (a failpoint) within d.
func (w *worker) exitCode(d time.Duration) (int, bool) {
	select {
	case <-w.done:
		return w.cmd.ProcessState.ExitCode(), true
	case <-time.After(d):
		return 0, false
	}
}

// rest calls a worker's REST API and decodes the answer into out (when not nil).
func rest(t testing.TB, base, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type status struct {
	Connector struct {
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
	} `json:"connector"`
	Tasks []struct {
		ID       int    `json:"id"`
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
	} `json:"tasks"`
}

// appender writes JSON lines to files at a steady pace until stopped, and remembers
// every line.
type appender struct {
	files []string
	mu    sync.Mutex
	lines [][]string // per file
	stop  chan struct{}
	done  chan struct{}
}

// line is the canonical JSON line number i of file f: written in canonical form (keys
// sorted, compact), so that the pipeline's JSON round trip gives the same bytes.
func line(f, i int, at time.Time) string {
	return fmt.Sprintf(`{"at":%d,"file":%d,"n":%d,"pad":"%s"}`, at.UnixMicro(), f, i, strings.Repeat("x", 40))
}

func startAppender(t testing.TB, files []string, perTick int, tick time.Duration) *appender {
	a := &appender{files: files, lines: make([][]string, len(files)), stop: make(chan struct{}), done: make(chan struct{})}
	fhs := make([]*os.File, len(files))
	for i, p := range files {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fhs[i] = f
	}
	go func() {
		defer close(a.done)
		defer func() {
			for _, f := range fhs {
				f.Close()
			}
		}()
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			for fi, f := range fhs {
				var b strings.Builder
				a.mu.Lock()
				for range perTick {
					l := line(fi, len(a.lines[fi]), time.Now())
					a.lines[fi] = append(a.lines[fi], l)
					b.WriteString(l)
					b.WriteByte('\n')
				}
				a.mu.Unlock()
				if _, err := f.WriteString(b.String()); err != nil {
					panic(err)
				}
			}
			select {
			case <-a.stop:
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(a.halt)
	return a
}

func (a *appender) halt() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

func (a *appender) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, ls := range a.lines {
		out = append(out, ls...)
	}
	return out
}

func (a *appender) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ls := range a.lines {
		n += len(ls)
	}
	return n
}

// sinkLines reads the sink's files of topic, partition by partition, in name order.
func sinkLines(t testing.TB, dir string) (map[int][]string, int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".jsonl") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	out := map[int][]string{}
	total := 0
	for _, n := range names {
		base := strings.TrimSuffix(n, ".jsonl")
		i := strings.LastIndexByte(base, '-')
		j := strings.LastIndexByte(base[:i], '-')
		var p int
		fmt.Sscan(base[j+1:i], &p)
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			continue // removed meanwhile by a task reopening its partition
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			out[p] = append(out[p], sc.Text())
			total++
		}
		f.Close()
	}
	return out, total
}

// topicValues reads every record value of a topic's partitions.
func topicValues(t testing.TB, base, topic string, partitions int32) map[int32][]string {
	t.Helper()
	c := client.New(base)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[int32][]string{}
	for p := range partitions {
		off := int64(0)
		for {
			res, err := c.FetchBinary(ctx, topic, p, client.FetchOptions{Offset: off, MaxRecords: 10000})
			if err != nil {
				t.Fatalf("fetch %s/%d at %d: %v", topic, p, off, err)
			}
			for _, r := range res.Records {
				out[p] = append(out[p], string(r.Value))
			}
			if res.NextOffset >= res.HighWatermark || len(res.Records) == 0 {
				break
			}
			off = res.NextOffset
		}
	}
	return out
}

func createTopic(t testing.TB, base, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.New(base).CreateTopic(ctx, name, partitions, nil); err != nil {
		t.Fatal(err)
	}
}

// exactlyOnce compares what arrived with what was written: every line once, nothing
// else; it reports duplicates and gaps by count.
func exactlyOnce(what string, want, got []string) error {
	seen := make(map[string]int, len(got))
	for _, g := range got {
		seen[g]++
	}
	dups, missing, extra := 0, 0, 0
	wantSet := make(map[string]bool, len(want))
	for _, w := range want {
		wantSet[w] = true
		switch seen[w] {
		case 0:
			missing++
		case 1:
		default:
			dups += seen[w] - 1
		}
	}
	for g := range seen {
		if !wantSet[g] {
			extra++
		}
	}
	if dups+missing+extra > 0 || len(got) != len(want) {
		return fmt.Errorf("%s: %d lines for %d written: %d duplicates, %d missing, %d unknown", what, len(got), len(want), dups, missing, extra)
	}
	return nil
}
