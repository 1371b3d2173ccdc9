package postgres

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

func TestTopics(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()

	a, err := c.CreateTopic(ctx, "orders", 3, map[string]string{"retention.ms": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "orders" || a.Partitions != 3 || !maps.Equal(a.Configs, map[string]string{"retention.ms": "1000"}) || a.ID == 0 {
		t.Errorf("created %+v", a)
	}
	if d := time.Since(a.CreatedAt); d < -time.Minute || d > time.Minute {
		t.Errorf("created at %v, not about now", a.CreatedAt)
	}
	for _, tc := range []struct {
		name       string
		partitions int32
		configs    map[string]string
		want       error
	}{
		{"orders", 1, nil, catalog.ErrTopicExists},
		{"bad name", 1, nil, catalog.ErrInvalidTopicName},
		{"..", 1, nil, catalog.ErrInvalidTopicName},
		{strings.Repeat("x", 250), 1, nil, catalog.ErrInvalidTopicName},
		{"p0", 0, nil, catalog.ErrInvalidPartitions},
		{"p1", catalog.MaxPartitions + 1, nil, catalog.ErrInvalidPartitions},
		{"c1", 1, map[string]string{"retention.ms": "soon"}, catalog.ErrInvalidConfig},
		{"c2", 1, map[string]string{"no.such.key": "1"}, catalog.ErrInvalidConfig},
	} {
		if _, err := c.CreateTopic(ctx, tc.name, tc.partitions, tc.configs); !errors.Is(err, tc.want) {
			t.Errorf("create %q/%d/%v: %v, want %v", tc.name, tc.partitions, tc.configs, err, tc.want)
		}
	}
	var ce *catalog.ConfigError
	if _, err := c.CreateTopic(ctx, "c3", 1, map[string]string{"retention.ms": "x"}); !errors.As(err, &ce) || ce.Key != "retention.ms" {
		t.Errorf("bad config: %v, want a *ConfigError for retention.ms", err)
	}

	got, err := c.Topic(ctx, "orders")
	if err != nil || got.ID != a.ID || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("topic orders: %+v, %v; want %+v", got, err, a)
	}
	if got, err := c.TopicByID(ctx, a.ID); err != nil || got.Name != "orders" {
		t.Errorf("topic by id: %+v, %v", got, err)
	}
	b := mustTopic(t, c, "audit", 1, nil)
	if b.Configs == nil || len(b.Configs) != 0 {
		t.Errorf("topic without configs: configs %#v, want empty", b.Configs)
	}
	ts, err := c.Topics(ctx)
	if err != nil || len(ts) != 2 || ts[0].Name != "audit" || ts[1].Name != "orders" {
		t.Errorf("topics: %+v, %v; want audit, orders", ts, err)
	}

	// Update: grow, set, remove; never shrink; validated as a whole.
	u, err := c.UpdateTopic(ctx, "orders", 5, map[string]string{"retention.ms": "", "cleanup.policy": "compact"})
	if err != nil {
		t.Fatal(err)
	}
	if u.Partitions != 5 || !maps.Equal(u.Configs, map[string]string{"cleanup.policy": "compact"}) || u.ID != a.ID {
		t.Errorf("updated %+v", u)
	}
	ps, err := c.Partitions(ctx, a.ID)
	if err != nil || len(ps) != 5 || ps[4].Partition != 4 || ps[4].HighWatermark != 0 {
		t.Errorf("partitions after growing: %+v, %v", ps, err)
	}
	if u, err := c.UpdateTopic(ctx, "orders", 0, nil); err != nil || u.Partitions != 5 {
		t.Errorf("update with nothing: %+v, %v", u, err)
	}
	for _, tc := range []struct {
		name       string
		partitions int32
		configs    map[string]string
		want       error
	}{
		{"orders", 4, nil, catalog.ErrInvalidPartitions},
		{"orders", catalog.MaxPartitions + 1, nil, catalog.ErrInvalidPartitions},
		{"orders", 0, map[string]string{"cleanup.policy": "sometimes"}, catalog.ErrInvalidConfig},
		{"orders", 0, map[string]string{"bogus": ""}, catalog.ErrInvalidConfig},
		{"nope", 9, nil, catalog.ErrTopicNotFound},
		{"bad name", 9, nil, catalog.ErrTopicNotFound},
	} {
		if _, err := c.UpdateTopic(ctx, tc.name, tc.partitions, tc.configs); !errors.Is(err, tc.want) {
			t.Errorf("update %q/%d/%v: %v, want %v", tc.name, tc.partitions, tc.configs, err, tc.want)
		}
	}
	if got, _ := c.Topic(ctx, "orders"); got.Partitions != 5 || !maps.Equal(got.Configs, u.Configs) {
		t.Errorf("a refused update changed the topic: %+v", got)
	}

	// Delete: gone by name and id; the name is free again under a new id.
	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"delete again": c.DeleteTopic(ctx, "orders"),
		"topic":        second(c.Topic(ctx, "orders")),
		"topic by id":  second(c.TopicByID(ctx, a.ID)),
		"partitions":   second(c.Partitions(ctx, a.ID)),
		"update":       second(c.UpdateTopic(ctx, "orders", 6, nil)),
	} {
		if !errors.Is(err, catalog.ErrTopicNotFound) {
			t.Errorf("%s after delete: %v, want ErrTopicNotFound", name, err)
		}
	}
	again := mustTopic(t, c, "orders", 1, nil)
	if again.ID == a.ID {
		t.Errorf("recreated topic reuses id %d", a.ID)
	}
	if ps, err := c.Partitions(ctx, again.ID); err != nil || len(ps) != 1 {
		t.Errorf("recreated topic's partitions: %+v, %v", ps, err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestTopicChangesAndCommits: a commit sees a topic's deletion and growth as they are
// once it holds its partition locks.
func TestTopicChangesAndCommits(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	tp := mustTopic(t, c, "t", 1, nil)

	seg := makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 1, 1, 1}})
	res, err := c.Commit(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, res, []catalog.Result{{Err: catalog.ErrPartitionOutOfRange}})
	if _, err := c.UpdateTopic(ctx, "t", 2, nil); err != nil {
		t.Fatal(err)
	}
	res, err = c.Commit(ctx, makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 1, 1, 1}}))
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, res, []catalog.Result{{BaseOffsets: []int64{0}}})

	// A delete waits for an in-flight commit holding the partition lock.
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seg = makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 0, 2, 1}})
	kt, _ := engine.KeyTime(seg.Key)
	sql, args, _ := c.commitArgs(seg, kt, nil)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- c.DeleteTopic(ctx, "t") }()
	select {
	case err := <-deleted:
		t.Fatalf("delete finished while a commit held the partition lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	res, err = c.Commit(ctx, makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 0, 1, 1}}))
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, res, []catalog.Result{{Err: catalog.ErrTopicNotFound}})
}
