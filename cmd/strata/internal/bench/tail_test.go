package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// A record committed on a node reaches that node's Server-Sent Events tail and
// long-polls without a GET: the writer hands the object it put to the reader's cache
// before the commit. Issue 32's tail regression was the tail's GET of every fresh
// object (tens to hundreds of ms at p99 under load); this counts GETs rather than
// timing them, so it fails whenever the path needs one, however fast the store.
func TestTailReadsFreshRecordsWithoutGet(t *testing.T) {
	for _, backend := range []struct {
		name string
		opts []nodetest.Option
	}{
		{"sqlite", nil},
		{"postgres", []nodetest.Option{nodetest.OnServices()}},
	} {
		t.Run(backend.name, func(t *testing.T) {
			n := nodetest.Start(t, append(backend.opts, nodetest.Mutate(func(c *node.Config) {
				c.WriterConfig = writer.Config{Linger: 5 * time.Millisecond}
				c.ReaderConfig = reader.Config{CacheBytes: 64 << 20, NoPrefetch: true}
			}))...)
			topic := createTopic(t, n.URL)
			first, _ := produceOne(t, n.URL, topic)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			got := make(chan time.Time, 1)
			errc := make(chan error, 2)
			go func() { errc <- sseDelivery(ctx, n.URL, topic, first, got) }()
			lp := make(chan time.Time, 1)
			go func() { errc <- longPollDelivery(ctx, n.URL, topic, first, lp) }()
			// The first record, committed before they started (it may take a GET),
			// shows both have long-polled: from then on the writer hands its objects
			// to the cache. The next ones are counted.
			var before samples
			for i := range 4 {
				if i > 0 {
					produceOne(t, n.URL, topic)
				}
				for _, ch := range []chan time.Time{got, lp} {
					select {
					case <-ch:
					case err := <-errc:
						t.Fatalf("record %d: follower: %v", i, err)
					case <-time.After(30 * time.Second):
						t.Fatalf("record %d not delivered within 30s", i)
					}
				}
				if i == 0 {
					var err error
					if before, err = scrape(ctx, http.DefaultClient, []string{n.URL}); err != nil {
						t.Fatal(err)
					}
				}
			}
			after, err := scrape(ctx, http.DefaultClient, []string{n.URL})
			if err != nil {
				t.Fatal(err)
			}
			if gets := delta(before, after).sum("strata_objstore_requests_total", `op="get`); gets != 0 {
				t.Errorf("the tail and the long-poll sent %v GETs for records committed on their node", gets)
			}
		})
	}
}
