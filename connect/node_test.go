package connect_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// testNode is a whole node with the connect role, in-process: a SQLite catalog, the
// filesystem store, the writer, the reader, the worker and the REST API on a port.
type testNode struct {
	url string
	cat catalog.Backend
	n   *nodetest.Node
	// dir is where the file connectors may read and write (unless the test gave its
	// own plugins); data holds the node's catalog and objects, which they may not.
	dir, data string
}

func startNode(t *testing.T, wc connect.WorkerConfig, mutate ...func(*node.Config)) *testNode {
	t.Helper()
	root := t.TempDir()
	dir, data := filepath.Join(root, "files"), filepath.Join(root, "node")
	for _, d := range []string{dir, data} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if wc.Plugins == nil {
		dirs, err := connect.NewFileDirs([]string{dir}, []connect.OwnDir{{Path: data, What: "the test node's data directory"}})
		if err != nil {
			t.Fatal(err)
		}
		wc.Plugins = connect.NewPlugins(connect.Source(connect.FileSourceConnector{Dirs: dirs}), connect.Sink(connect.FileSinkConnector{Dirs: dirs}))
	}
	n := nodetest.Start(t, nodetest.InDir(data), nodetest.Connect(wc), nodetest.Mutate(func(c *node.Config) {
		c.WriterConfig = writer.Config{Linger: 5 * time.Millisecond}
		c.ReaderConfig = reader.Config{PollInterval: 20 * time.Millisecond}
	}), nodetest.Mutate(mutate...))
	return &testNode{url: n.URL, cat: n.Catalog, n: n, dir: dir, data: data}
}

// do sends a request and returns the status and body.
func (tn *testNode) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tn.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// want checks a request's status and, when want is not empty, its JSON body exactly
// (after normalising both): Kafka Connect's shapes.
func (tn *testNode) want(t *testing.T, method, path, body string, status int, want string) any {
	t.Helper()
	g, err := tn.check(t, method, path, body, status, want)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// eventuallyWant is want for what the runtime records after the fact (a source's
// topics are recorded once its commit has answered): it retries until the answer is
// the one wanted.
func (tn *testNode) eventuallyWant(t *testing.T, method, path, body string, status int, want string) {
	t.Helper()
	testwait.NoError(t, 10*time.Second, method+" "+path, func() error {
		_, err := tn.check(t, method, path, body, status, want)
		return err
	})
}

func (tn *testNode) check(t *testing.T, method, path, body string, status int, want string) (any, error) {
	t.Helper()
	got, b := tn.do(t, method, path, body)
	if got != status {
		return nil, fmt.Errorf("%s %s: status %d, want %d; body %s", method, path, got, status, b)
	}
	if want == "" {
		if status == http.StatusNoContent && b != "" {
			return nil, fmt.Errorf("%s %s: 204 with a body %q", method, path, b)
		}
		return nil, nil
	}
	var g, w any
	if err := json.Unmarshal([]byte(b), &g); err != nil {
		return nil, fmt.Errorf("%s %s: body %q is not JSON: %v", method, path, b, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	if !jsonEqual(g, w) {
		return nil, fmt.Errorf("%s %s:\n got %s\nwant %s", method, path, canon(g), canon(w))
	}
	return g, nil
}

// jsonEqual compares decoded JSON, with "*" in want matching any value.
func jsonEqual(got, want any) bool {
	if s, ok := want.(string); ok && s == "*" {
		return true
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, v := range w {
			if gv, ok := g[k]; !ok || !jsonEqual(gv, v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !jsonEqual(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

func canon(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (tn *testNode) status(t *testing.T, name string) map[string]any {
	t.Helper()
	code, b := tn.do(t, "GET", "/connectors/"+name+"/status", "")
	if code != 200 {
		t.Fatalf("status of %s: %d %s", name, code, b)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitState waits until the connector and every one of its tasks (want tasks of them)
// show state.
func (tn *testNode) waitState(t *testing.T, name, state string, tasks int) map[string]any {
	t.Helper()
	var st map[string]any
	testwait.NoError(t, 20*time.Second, name+" to be "+state, func() error {
		st = tn.status(t, name)
		want := state
		if state == "FAILED" {
			want = "RUNNING" // a connector runs on while its tasks fail, as in Kafka Connect
		}
		if c := st["connector"].(map[string]any)["state"]; c != want {
			return fmt.Errorf("connector %v", c)
		}
		ts := st["tasks"].([]any)
		if len(ts) != tasks {
			return fmt.Errorf("%d tasks, want %d", len(ts), tasks)
		}
		for _, x := range ts {
			if s := x.(map[string]any)["state"]; s != state {
				return fmt.Errorf("task %v", x)
			}
		}
		return nil
	})
	return st
}

func (tn *testNode) createTopic(t *testing.T, name string, partitions int32) {
	t.Helper()
	if _, err := tn.n.Broker.CreateTopic(t.Context(), broker.Anonymous, broker.CreateTopicRequest{Name: name, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
}

// readAll reads every record of a topic's partition.
func (tn *testNode) readAll(t *testing.T, topic string, partition int32) []broker.FetchResult {
	t.Helper()
	var out []broker.FetchResult
	off := int64(0)
	for {
		res, err := tn.n.Broker.Fetch(t.Context(), broker.Anonymous, broker.FetchRequest{Topic: topic, Partition: partition, Offset: off, MaxRecords: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) == 0 {
			return out
		}
		out = append(out, res)
		off = res.NextOffset
	}
}

func values(rs []broker.FetchResult) []string {
	var out []string
	for _, r := range rs {
		for _, x := range r.Records {
			out = append(out, string(x.Value))
		}
	}
	return out
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
