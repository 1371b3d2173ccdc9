package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// stack is a whole Strata node in the test process — SQLite catalog, filesystem object
// store behind a fault injector, writer, reader and the HTTP API — served over a real
// listener, so the client is tested against the server it talks to in production.
type stack struct {
	url     string
	cat     *sqlite.Catalog
	store   *fault.Store
	w       *writer.Writer
	handler http.Handler
	srv     *httptest.Server
}

type stackOptions struct {
	linger time.Duration // writer linger; default 5ms
	wrap   func(http.Handler) http.Handler
}

func newStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	dir := t.TempDir()
	cat, err := sqlite.Open(context.Background(), filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	store := fault.New(inner)
	if o.linger == 0 {
		o.linger = 5 * time.Millisecond
	}
	n, err := node.Start(node.Config{
		Catalog: cat, Store: store,
		Writer: true, WriterConfig: writer.Config{Linger: o.linger},
		Reader: true, ReaderConfig: reader.Config{PollInterval: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := n.API.Handler()
	if o.wrap != nil {
		h = o.wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = n.Stop(context.Background())
		cat.Close()
	})
	return &stack{url: srv.URL, cat: cat, store: store, w: n.Writer, handler: n.API.Handler(), srv: srv}
}

// readAll fetches every record of a partition from offset 0.
func readAll(t testing.TB, c *Client, topic string, partition int32) []Record {
	t.Helper()
	var out []Record
	off := int64(0)
	for {
		res, err := c.Fetch(t.(interface{ Context() context.Context }).Context(), topic, partition, FetchOptions{Offset: off, MaxRecords: 1000})
		if err != nil {
			t.Fatalf("fetch %s/%d at %d: %v", topic, partition, off, err)
		}
		out = append(out, res.Records...)
		if res.NextOffset >= res.HighWatermark {
			return out
		}
		off = res.NextOffset
	}
}
