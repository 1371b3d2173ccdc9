package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

func TestTopicCacheExpiry(t *testing.T) {
	c := &fakeCatalog{}
	if _, err := c.CreateTopic(context.Background(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	clock := testNow
	tc := newTopicCache(c, 2*time.Second, func() time.Time { return clock })
	ctx := context.Background()
	get := func() {
		t.Helper()
		if _, err := tc.get(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	get()
	clock = clock.Add(1999 * time.Millisecond)
	get()
	if c.reads != 1 {
		t.Errorf("reads %d within the TTL, want 1", c.reads)
	}
	clock = clock.Add(time.Millisecond)
	get()
	if c.reads != 2 {
		t.Errorf("reads %d after the TTL, want 2", c.reads)
	}
	if _, err := tc.get(ctx, "missing"); !errors.Is(err, catalog.ErrTopicNotFound) {
		t.Errorf("missing: %v", err)
	}
	if _, ok := tc.entries["missing"]; ok {
		t.Error("a miss was cached")
	}

	off := newTopicCache(c, -1, time.Now)
	for i := 0; i < 2; i++ {
		if _, err := off.get(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if c.reads != 5 {
		t.Errorf("reads %d with the cache off, want 5", c.reads)
	}
}

// gatedTopics is a catalog whose topic reads say they started, then wait for gate.
type gatedTopics struct {
	*fakeCatalog
	started chan struct{}
	gate    chan struct{}
}

func (g *gatedTopics) Topic(ctx context.Context, name string) (catalog.Topic, error) {
	g.started <- struct{}{}
	<-g.gate
	return g.fakeCatalog.Topic(ctx, name)
}

// An expired entry is re-read by one caller; the others use it meanwhile instead of
// each queueing the same catalog read (hundreds of SSE streams' fetch loops did, and
// requests behind them waited past their clients' patience).
func TestTopicCacheOneRefresh(t *testing.T) {
	c := &fakeCatalog{}
	if _, err := c.CreateTopic(context.Background(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := testNow
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	tc := newTopicCache(c, 2*time.Second, now)
	ctx := context.Background()
	if _, err := tc.get(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	g := &gatedTopics{fakeCatalog: c, started: make(chan struct{}, 10), gate: make(chan struct{})}
	tc.cat = g
	mu.Lock()
	clock = clock.Add(2 * time.Second)
	mu.Unlock()

	refreshed := make(chan error, 1)
	go func() {
		_, err := tc.get(ctx, "t")
		refreshed <- err
	}()
	<-g.started // the refresh is reading, and waits for the gate

	others := make(chan error, 1)
	go func() {
		for range 3 {
			if ti, err := tc.get(ctx, "t"); err != nil || ti.Name != "t" {
				others <- fmt.Errorf("during the refresh: %+v, %v", ti, err)
				return
			}
		}
		others <- nil
	}()
	select {
	case err := <-others:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("callers during a refresh waited for it")
	}
	if n := len(g.started); n != 0 {
		t.Fatalf("%d more reads of the topic during the refresh, want none", n)
	}

	close(g.gate)
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	reads := c.reads
	if _, err := tc.get(ctx, "t"); err != nil || c.reads != reads {
		t.Fatalf("after the refresh: %v; reads %d, want %d (the entry is fresh again)", err, c.reads, reads)
	}
	if len(tc.refreshing) != 0 {
		t.Fatalf("still marked refreshing: %v", tc.refreshing)
	}
}
