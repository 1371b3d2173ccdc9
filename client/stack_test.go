package client

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
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
	ctx, cancel := context.WithCancel(context.Background())
	cat, err := sqlite.Open(ctx, filepath.Join(dir, "catalog.db"), catalog.Options{})
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
	log := slog.New(slog.DiscardHandler)
	w := writer.New(store, cat, writer.Config{Linger: o.linger}, log, nil)
	rd := reader.New(store, cat, reader.Config{PollInterval: 50 * time.Millisecond}, log, nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.Run(ctx) }()
	go func() { defer wg.Done(); rd.Run(ctx) }()
	core := broker.New(broker.Config{}, broker.Deps{Catalog: cat, Writer: w, Reader: rd, Batches: rd, Producers: cat, Records: cat, Groups: cat})
	a := api.New(api.Config{}, api.Deps{Core: core, Log: log})
	h := a.Handler()
	if o.wrap != nil {
		h = o.wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		wg.Wait()
		cat.Close()
	})
	return &stack{url: srv.URL, cat: cat, store: store, w: w, handler: a.Handler(), srv: srv}
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
