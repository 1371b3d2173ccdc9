package node

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/compactor"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/writer"
)

func newConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	cat, err := sqlite.Open(t.Context(), filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	store, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateTopic(t.Context(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	return Config{Catalog: cat, Store: store, Writer: true, Reader: true, Compactor: true,
		CompactorConfig: compactor.Config{Interval: time.Hour}}
}

func post(url, body string) (int, string, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestServeDrains: a produce waiting for its flush when the node is told to stop gets
// its answer — requests finish before the writer stops — and the node then stops.
func TestServeDrains(t *testing.T) {
	cfg := newConfig(t)
	cfg.WriterConfig = writer.Config{Linger: 700 * time.Millisecond}
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx, ln, nil, 10*time.Second) }()

	resp, err := http.Get(url + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", err, resp)
	}
	resp.Body.Close()
	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		s, b, err := post(url+"/v1/topics/t/records", `{"records":[{"value":1}]}`)
		done <- answer{s, b, err}
	}()
	time.Sleep(200 * time.Millisecond) // the produce waits for its linger
	stop()
	a := <-done
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, `"offset":0`) {
		t.Fatalf("a produce in flight at shutdown: %d %s %v", a.status, a.body, a.err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the node did not stop")
	}
	if _, _, err := post(url+"/v1/topics/t/records", `{"records":[{"value":1}]}`); err == nil {
		t.Error("the node still serves after stopping")
	}
}

// TestLambda: no background loop runs between invocations; the compactor is built for
// scheduled passes, and a pass runs.
func TestLambda(t *testing.T) {
	cfg := newConfig(t)
	cfg.Lambda = true
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())
	if n.Compactor == nil || n.Reader == nil || n.Writer == nil {
		t.Fatalf("roles: compactor %v reader %v writer %v", n.Compactor, n.Reader, n.Writer)
	}
	if err := n.Compactor.Pass(t.Context()); err != nil {
		t.Fatalf("a scheduled pass: %v", err)
	}
	stream := n.NewAPI(n.API.Config())
	if stream == n.API || stream.Handler() == nil {
		t.Fatal("no second API")
	}
}

func TestStartNeedsCatalogAndStore(t *testing.T) {
	if _, err := Start(Config{}); err == nil {
		t.Fatal("a node without a catalog or a store started")
	}
	cfg := newConfig(t)
	cfg.CompactorConfig = compactor.Config{Interval: 50 * time.Millisecond}
	if _, err := Start(cfg); err == nil {
		t.Fatal("a node with an invalid compactor configuration started")
	}
}
