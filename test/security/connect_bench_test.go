package security_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/cputime"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// What a keyed request of the connect role costs in CPU: a Connect REST call and a
// source task's commit, made as a principal that is not a superuser, on a node with
// keys required. It compared the code before connector authorization with the code
// after (the node it starts is the same on both):
//
//	go test -run '^$' -bench BenchmarkConnectKeyed -count 6 ./test/security/
//
// cpu-us/op is the process's user and system CPU per operation (every goroutine of the
// node: API, core, catalog, writer), from getrusage.

const benchBootKey = "bench-bootstrap-0123456789abcdef01234"

type benchNode struct {
	url string
	n   *nodetest.Node
	cat catalog.Backend
	// fileDir is where the file connectors may read (with the connect role).
	fileDir string
}

// startBenchNode starts a node with keys required; with the connect role when withConnect.
func startBenchNode(b *testing.B, withConnect bool) *benchNode {
	b.Helper()
	opts := []nodetest.Option{
		nodetest.Keys(benchBootKey), nodetest.Log(slog.New(slog.DiscardHandler)),
		nodetest.Mutate(func(c *node.Config) {
			c.WriterConfig = writer.Config{Linger: time.Millisecond}
			c.ReaderConfig = reader.Config{PollInterval: 100 * time.Millisecond}
		}),
	}
	var fileDir string
	if withConnect {
		// The file connectors are refused unless the operator names directories.
		fileDir = b.TempDir()
		dirs, err := connect.NewFileDirs([]string{fileDir}, nil)
		if err != nil {
			b.Fatal(err)
		}
		opts = append(opts, nodetest.Connect(connect.WorkerConfig{Lease: 2 * time.Second,
			Plugins: connect.NewPlugins(connect.Source(connect.FileSourceConnector{Dirs: dirs}))}))
	}
	n := nodetest.Start(b, opts...)
	return &benchNode{url: n.URL, n: n, cat: n.Catalog, fileDir: fileDir}
}

func (bn *benchNode) do(b *testing.B, key, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, bn.url+path, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func (bn *benchNode) must(b *testing.B, want int, method, path, body string) string {
	b.Helper()
	code, out := bn.do(b, benchBootKey, method, path, body)
	if code != want {
		b.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	return out
}

// benchKey makes a key for principal with read and write on the bench topics and all
// on the bench connectors (a type the code before connector authorization refuses:
// there, nothing asks for it).
func (bn *benchNode) benchKey(b *testing.B, principal string) string {
	b.Helper()
	out := bn.must(b, http.StatusCreated, "POST", "/v1/keys", fmt.Sprintf(`{"principal":%q}`, principal))
	i := strings.Index(out, `"secret":"`)
	secret := out[i+len(`"secret":"`):]
	secret = secret[:strings.Index(secret, `"`)]
	for _, g := range []string{
		`"resource_type":"topic","resource_name":"bench-","pattern_type":"prefixed","operation":"all"`,
		`"resource_type":"group","resource_name":"connect-bench-","pattern_type":"prefixed","operation":"all"`,
		`"resource_type":"connector","resource_name":"bench-","pattern_type":"prefixed","operation":"all"`,
	} {
		bn.do(b, benchBootKey, "POST", "/v1/acls", fmt.Sprintf(`{"principal":%q,%s}`, principal, g))
	}
	if err := bn.n.Guard.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	return secret
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cputime.Self()-start).Microseconds())/float64(b.N), "cpu-us/op")
}

// BenchmarkConnectKeyed: GET /connectors/{name}/status, and a source task's commit of
// one record through the core, as a keyed principal with the grants they need.
func BenchmarkConnectKeyed(b *testing.B) {
	b.Run("rest-status", func(b *testing.B) {
		bn := startBenchNode(b, true)
		bn.must(b, http.StatusCreated, "POST", "/v1/topics", `{"name":"bench-t","partitions":1}`)
		key := bn.benchKey(b, "User:bench")
		bn.must(b, http.StatusCreated, "POST", "/connectors",
			fmt.Sprintf(`{"name":"bench-src","config":{"connector.class":"FileSource","file":%q,"topic":"bench-t"},"initial_state":"STOPPED"}`,
				filepath.Join(bn.fileDir, "bench")))
		if code, out := bn.do(b, key, "GET", "/connectors/bench-src/status", ""); code != http.StatusOK {
			b.Fatalf("status: %d %s", code, out)
		}
		start := cputime.Self()
		b.ResetTimer()
		for range b.N {
			if code, out := bn.do(b, key, "GET", "/connectors/bench-src/status", ""); code != http.StatusOK {
				b.Fatalf("status: %d %s", code, out)
			}
		}
		b.StopTimer()
		reportCPU(b, start)
	})

	b.Run("commit-source", func(b *testing.B) {
		// A node without the connect role: the benchmark's worker holds the task and
		// commits as its instance.
		bn := startBenchNode(b, false)
		bn.must(b, http.StatusCreated, "POST", "/v1/topics", `{"name":"bench-t","partitions":1}`)
		bn.benchKey(b, "User:bench")
		ctx := context.Background()
		spec := catalog.ConnectorSpec{Name: "bench-held", Type: catalog.ConnectorSource, Config: map[string]string{"connector.class": "none"},
			Tasks: []map[string]string{{}}, Principal: "User:bench"}
		if _, _, err := bn.cat.PutConnector(ctx, spec, false); err != nil {
			b.Fatal(err)
		}
		a, err := bn.cat.WorkerHeartbeat(ctx, catalog.WorkerBeat{Worker: "bench-worker", Lease: 30 * time.Minute})
		if err != nil || len(a.Tasks) != 1 {
			b.Fatalf("claim: %+v %v", a, err)
		}
		fence := a.Tasks[0].TaskFence
		who := broker.Principal{Name: "User:bench"}
		commit := func(i int) {
			req := broker.SourceRequest{
				Records: []broker.Record{{Topic: "bench-t", Partition: 0, Value: []byte(`{"n":1}`)}},
				Source:  catalog.SourceCommit{Fence: fence, Offsets: []catalog.SourceOffset{{Partition: `{"p":1}`, Offset: fmt.Sprintf(`{"o":%d}`, i)}}},
			}
			if _, err := bn.n.Broker.CommitSource(ctx, who, req); err != nil {
				b.Fatalf("commit: %v", err)
			}
		}
		commit(0)
		start := cputime.Self()
		b.ResetTimer()
		for i := range b.N {
			commit(i + 1)
		}
		b.StopTimer()
		reportCPU(b, start)
	})
}
