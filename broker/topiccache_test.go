package broker

import (
	"context"
	"errors"
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
