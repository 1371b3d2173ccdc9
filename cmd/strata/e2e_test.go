package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/murmur2"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// devServer is one `strata dev` process.
type devServer struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

// lockedBuffer lets the test read a process's output while it is still writing it.
type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

func buildStrata(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "strata")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// cleanEnv is the test's environment without STRATA_ variables, which would change the
// server's flags.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			out = append(out, kv)
		}
	}
	return out
}

func startDev(t *testing.T, bin, data string) *devServer {
	t.Helper()
	addr := freeAddr(t)
	s, out := startStrata(t, bin, nil, addr, "dev", "--data", data, "--listen", addr, "--log-level", "warn")
	// The banner follows the listeners, so /readyz may answer before it is written:
	// wait for it (under load that took long enough for a single look to miss it).
	banner := func() bool {
		return strings.Contains(out.String(), "curl -X POST "+s.url+"/v1/topics") && strings.Contains(out.String(), "Web console: "+s.url+"/ui/\n")
	}
	for deadline := time.Now().Add(10 * time.Second); !banner() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out.String(), s.url) || !strings.Contains(out.String(), "curl -X POST "+s.url+"/v1/topics") {
		t.Errorf("the banner does not show the URL and a first command:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Web console: "+s.url+"/ui/\n") {
		t.Errorf("the banner does not show the console's URL:\n%s", out.String())
	} else if resp, err := http.Get(s.url + "/ui/"); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("the console's URL: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	return s
}

// startStrata runs the binary with args (listening on addr) and waits until /readyz
// answers 200.
func startStrata(t *testing.T, bin string, extraEnv []string, addr string, args ...string) (*devServer, *lockedBuffer) {
	t.Helper()
	out := &lockedBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), extraEnv...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &devServer{cmd: cmd, url: "http://" + addr, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("strata %s output:\n%s", args[0], out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-s.done:
			t.Fatalf("strata %s exited before it was ready: %v\n%s", args[0], err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata %s not ready after 60s (last: %v)\n%s", args[0], err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s, out
}

// stop interrupts the server as Ctrl-C would and expects a clean exit.
func (s *devServer) stop(t *testing.T) { s.signal(t, os.Interrupt) }

func (s *devServer) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("strata exited with %v after %v, want 0", err, sig)
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("strata did not stop within 45s of %v", sig)
	}
}

const (
	e2eTopic      = "orders"
	e2ePartitions = 3
	e2eClients    = 4
	e2ePerClient  = 2500 // 10,000 records in all
	e2eBatch      = 500
	e2eKeys       = 50 // keys shared by all clients, so their records interleave
)

// e2eValue is what every produced record carries, so the consumer can tell who sent it
// and in what order.
type e2eValue struct {
	Client int `json:"client"`
	Seq    int `json:"seq"`
}

type produced struct {
	key       string
	partition int32
	offset    int64
}

// produceAll sends every client's records and returns where the server said each
// landed, by (client, seq).
func produceAll(t *testing.T, url string) map[e2eValue]produced {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	got := make(map[e2eValue]produced, e2eClients*e2ePerClient)
	errs := make(chan error, e2eClients)
	var wg sync.WaitGroup
	for c := range e2eClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each client is its own Client, with its own connections. 429 and 503
			// mean nothing was written, so retrying them keeps exactly-once.
			cl := client.New(url, client.WithRetries(100, 20*time.Millisecond))
			for start := 0; start < e2ePerClient; start += e2eBatch {
				recs := make([]client.Record, 0, e2eBatch)
				for seq := start; seq < start+e2eBatch; seq++ {
					v, _ := client.JSON(e2eValue{c, seq})
					recs = append(recs, client.Record{Key: client.String(fmt.Sprintf("key-%d", seq%e2eKeys)), Value: v})
				}
				// Waiting for each answer before the next batch is what keeps a
				// producer's order across requests.
				offs, err := cl.Produce(ctx, e2eTopic, recs)
				if err != nil {
					errs <- fmt.Errorf("client %d batch at %d: %w", c, start, err)
					return
				}
				mu.Lock()
				for i, o := range offs {
					seq := start + i
					got[e2eValue{c, seq}] = produced{fmt.Sprintf("key-%d", seq%e2eKeys), o.Partition, o.Offset}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return got
}

// checkLog reads every partition from offset 0 and checks the invariants against what
// the producers were told.
func checkLog(t *testing.T, url string, want map[e2eValue]produced) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cl := client.New(url)
	parts, err := cl.Partitions(ctx, e2eTopic)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != e2ePartitions {
		t.Fatalf("%d partitions, want %d", len(parts), e2ePartitions)
	}
	seen := make(map[e2eValue]bool, len(want))
	total := 0
	for _, p := range parts {
		if p.LogStartOffset != 0 {
			t.Errorf("partition %d: log start %d, want 0 (nothing is deleted)", p.Partition, p.LogStartOffset)
		}
		lastSeq := map[string]int{} // per client and key: the last seq seen
		next := int64(0)
		for next < p.HighWatermark {
			res, err := cl.Fetch(ctx, e2eTopic, p.Partition, client.FetchOptions{Offset: next, MaxRecords: 1000})
			if err != nil {
				t.Fatalf("fetch %d/%d: %v", p.Partition, next, err)
			}
			if len(res.Records) == 0 {
				t.Fatalf("fetch %d/%d below high watermark %d returned no records", p.Partition, next, p.HighWatermark)
			}
			for _, r := range res.Records {
				if r.Offset != next {
					t.Fatalf("partition %d: offset %d follows %d: offsets must be dense", p.Partition, r.Offset, next-1)
				}
				next++
				var v e2eValue
				if err := json.Unmarshal(r.Value, &v); err != nil {
					t.Fatalf("partition %d offset %d: value %s: %v", p.Partition, r.Offset, r.Value, err)
				}
				w, ok := want[v]
				switch {
				case !ok:
					t.Fatalf("partition %d offset %d: %+v was never produced", p.Partition, r.Offset, v)
				case seen[v]:
					t.Fatalf("partition %d offset %d: %+v seen twice", p.Partition, r.Offset, v)
				}
				seen[v] = true
				total++
				key, err := r.KeyBytes()
				if err != nil || string(key) != w.key {
					t.Fatalf("partition %d offset %d: key %q (%v), want %q", p.Partition, r.Offset, key, err, w.key)
				}
				if kp := murmur2.Partition(key, e2ePartitions); kp != p.Partition {
					t.Errorf("key %q is in partition %d; Kafka's murmur2 puts it in %d", key, p.Partition, kp)
				}
				if w.partition != p.Partition || w.offset != r.Offset {
					t.Errorf("%+v: produce answered %d/%d, found at %d/%d", v, w.partition, w.offset, p.Partition, r.Offset)
				}
				ck := fmt.Sprintf("%d/%s", v.Client, key)
				if last, ok := lastSeq[ck]; ok && v.Seq <= last {
					t.Errorf("partition %d: client %d key %s: seq %d after %d: order lost", p.Partition, v.Client, key, v.Seq, last)
				}
				lastSeq[ck] = v.Seq
			}
			if res.NextOffset != next {
				t.Fatalf("partition %d: next_offset %d after reading to %d", p.Partition, res.NextOffset, next)
			}
		}
	}
	if total != len(want) {
		t.Errorf("read %d records, want %d", total, len(want))
	}
}

// TestDevEndToEnd runs the real binary in embedded mode: 4 concurrent producers, then
// reads everything back, then restarts on the same data and reads it again.
func TestDevEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildStrata(t)
	data := filepath.Join(t.TempDir(), "data")

	srv := startDev(t, bin, data)
	cl := client.New(srv.url)
	topic, err := cl.CreateTopic(t.Context(), e2eTopic, e2ePartitions, nil)
	if err != nil {
		t.Fatal(err)
	}
	if topic.Partitions != e2ePartitions {
		t.Fatalf("created %+v", topic)
	}
	want := produceAll(t, srv.url)
	if len(want) != e2eClients*e2ePerClient {
		t.Fatalf("%d records acknowledged, want %d", len(want), e2eClients*e2ePerClient)
	}
	checkLog(t, srv.url, want)
	srv.stop(t)

	srv = startDev(t, bin, data)
	checkLog(t, srv.url, want)

	// The restarted node carries on where the log ended.
	cl = client.New(srv.url)
	parts, err := cl.Partitions(t.Context(), e2eTopic)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := cl.Produce(t.Context(), e2eTopic, []client.Record{{Value: client.String("after restart"), Partition: client.Int32(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if offs[0].Partition != 1 || offs[0].Offset != parts[1].HighWatermark {
		t.Errorf("after restart a record landed at %d/%d, want 1/%d", offs[0].Partition, offs[0].Offset, parts[1].HighWatermark)
	}
	srv.stop(t)
}

// TestServeEndToEnd is the same run against Postgres and MinIO through `strata serve`,
// stopped with SIGTERM as an orchestrator would.
func TestServeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dsn := os.Getenv("STRATA_TEST_POSTGRES")
	endpoint := os.Getenv("STRATA_TEST_S3_ENDPOINT")
	if dsn == "" || endpoint == "" {
		testsvc.Unavailable(t, "set STRATA_TEST_POSTGRES and STRATA_TEST_S3_* (eval \"$(scripts/services.sh)\") to run against Postgres and MinIO")
	}
	catalogURL := testDatabase(t, dsn)
	bucket := fmt.Sprintf("strata-cmd-%d", time.Now().UnixNano())
	bucketURL := fmt.Sprintf("s3://%s/e2e?endpoint=%s&path_style=true&region=%s", bucket, endpoint, os.Getenv("STRATA_TEST_S3_REGION"))
	creds := []string{
		"AWS_ACCESS_KEY_ID=" + os.Getenv("STRATA_TEST_S3_ACCESS_KEY"),
		"AWS_SECRET_ACCESS_KEY=" + os.Getenv("STRATA_TEST_S3_SECRET_KEY"),
	}
	bin := buildStrata(t)
	serve := func() *devServer {
		addr := freeAddr(t)
		s, _ := startStrata(t, bin, creds, addr, "serve", "--catalog", catalogURL, "--bucket", bucketURL,
			"--create-bucket", "--listen", addr, "--log-level", "warn")
		return s
	}

	srv := serve()
	if _, err := client.New(srv.url).CreateTopic(t.Context(), e2eTopic, e2ePartitions, nil); err != nil {
		t.Fatal(err)
	}
	want := produceAll(t, srv.url)
	checkLog(t, srv.url, want)
	srv.signal(t, syscall.SIGTERM)

	srv = serve()
	checkLog(t, srv.url, want)
	srv.signal(t, syscall.SIGTERM)
}

// testDatabase creates a database of its own for the test and returns its URL.
func testDatabase(t *testing.T, dsn string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("strata_cmd_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
