package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fault"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// stack is a whole Strata node in the test process — SQLite catalog, filesystem object
// store behind a fault injector, writer, reader and the HTTP API — served over a real
// listener, so the client is tested against the server it talks to in production.
type stack struct {
	url     string
	cat     catalog.Backend
	store   *fault.Store
	w       *writer.Writer
	reg     prometheus.Gatherer // the node's metrics
	handler http.Handler
}

type stackOptions struct {
	linger time.Duration // writer linger; default 5ms
	// wrap, when set, puts a handler in front of the node's API, served on a listener
	// of its own (url).
	wrap func(http.Handler) http.Handler
}

func newStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	if o.linger == 0 {
		o.linger = 5 * time.Millisecond
	}
	var store *fault.Store
	n := nodetest.Start(t,
		nodetest.WrapStore(func(st objstore.Store) objstore.Store { store = fault.New(st); return store }),
		nodetest.Mutate(func(c *node.Config) {
			c.WriterConfig = writer.Config{Linger: o.linger}
			c.ReaderConfig = reader.Config{PollInterval: 50 * time.Millisecond}
		}))
	s := &stack{url: n.URL, cat: n.Catalog, store: store, w: n.Writer, reg: n.Registry, handler: n.API.Handler()}
	if o.wrap != nil {
		srv := httptest.NewServer(o.wrap(s.handler))
		t.Cleanup(func() {
			srv.CloseClientConnections()
			srv.Close()
		})
		s.url = srv.URL
	}
	return s
}

// counter is the sum of the node's counter name over its labels (0 when absent).
func (s *stack) counter(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
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
