package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

func TestOpenConcurrentOnFreshDatabase(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	const nodes = 8
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	cats := make([]*Catalog, nodes)
	for i := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cats[i], errs[i] = Open(ctx, dsn, catalog.Options{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		defer cats[i].Close()
	}
	if t.Failed() {
		return
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var applied, distinct int
	if err := cats[0].pool.QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	if applied != len(ms) || distinct != len(ms) {
		t.Errorf("schema_migrations has %d rows (%d versions), want %d", applied, distinct, len(ms))
	}
	// Every node can use the schema.
	for i, c := range cats {
		if _, err := c.CreateTopic(context.Background(), fmt.Sprintf("t%d", i), 1, nil); err != nil {
			t.Errorf("node %d: create topic: %v", i, err)
		}
	}
}

func TestCommitBasics(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	a := mustTopic(t, c, "a", 2, nil)
	b := mustTopic(t, c, "b", 1, nil)

	now := time.Now()
	seg := makeSegment(testKey(now), 10,
		[]flushBatch{{a.ID, 0, 3, 100}, {b.ID, 0, 2, 200}},
		[]flushBatch{{a.ID, 0, 4, 150}},
		[]flushBatch{{a.ID, 5, 1, 100}}, // partition out of range
		[]flushBatch{{999, 0, 1, 100}},  // topic not found
		[]flushBatch{{a.ID, 1, 2, 50}},
	)
	res, err := c.Commit(ctx, seg)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	want := []catalog.Result{
		{BaseOffsets: []int64{0, 0}},
		{BaseOffsets: []int64{3}},
		{Err: catalog.ErrPartitionOutOfRange},
		{Err: catalog.ErrTopicNotFound},
		{BaseOffsets: []int64{0}},
	}
	checkResults(t, res, want)

	// A second flush continues from the watermarks.
	seg2 := makeSegment(testKey(now), 10, []flushBatch{{a.ID, 0, 1, 10}, {a.ID, 1, 1, 10}})
	res, err = c.Commit(ctx, seg2)
	if err != nil {
		t.Fatalf("commit 2: %v", err)
	}
	checkResults(t, res, []catalog.Result{{BaseOffsets: []int64{7, 2}}})

	ps, err := c.Partitions(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int64{ps[0].HighWatermark, ps[1].HighWatermark}; !slices.Equal(got, []int64{8, 3}) {
		t.Errorf("high watermarks %v, want [8 3]", got)
	}
	if got := []int64{ps[0].Bytes, ps[1].Bytes}; !slices.Equal(got, []int64{30, 20}) {
		t.Errorf("bytes %v, want [30 20]", got)
	}
}

// checkResults compares results: errors by sentinel, offsets exactly.
func checkResults(t *testing.T, got, want []catalog.Result) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if (g.Err == nil) != (w.Err == nil) || (w.Err != nil && !errors.Is(g.Err, w.Err)) {
			t.Errorf("result %d: err %v, want %v", i, g.Err, w.Err)
		}
		if !slices.Equal(g.BaseOffsets, w.BaseOffsets) {
			t.Errorf("result %d: base offsets %v, want %v", i, g.BaseOffsets, w.BaseOffsets)
		}
		if g.Duplicate != w.Duplicate {
			t.Errorf("result %d: duplicate %v, want %v", i, g.Duplicate, w.Duplicate)
		}
	}
}

var _ = pgx.ErrNoRows
var _ = rand.IntN

// TestCommitMatchesSharedRules commits random flushes — refused requests of every kind,
// several requests per partition, gaps in the object — and checks that the SQL answers
// exactly as the shared Go rules (engine.Plan.CheckRequests and Plan.Assign) do on the
// state before the commit: results, chunk rows and partition state.
func TestCommitMatchesSharedRules(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	a := mustTopic(t, c, "a", 3, nil)
	b := mustTopic(t, c, "b", 2, map[string]string{"message.timestamp.type": "LogAppendTime"})
	d := mustTopic(t, c, "d", 2, nil)
	if err := c.DeleteTopic(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	topicIDs := []int64{a.ID, a.ID, a.ID, a.ID, a.ID, a.ID, a.ID, a.ID, a.ID, a.ID, a.ID, a.ID, b.ID, b.ID, b.ID, d.ID, 9999}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]int{}

	for iter := range 60 {
		now, err := c.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var reqs [][]flushBatch
		for range 1 + rng.IntN(6) {
			var r []flushBatch
			for range 1 + rng.IntN(3) {
				ts := now.Add(-time.Duration(rng.IntN(3600)) * time.Second).UnixMilli()
				if rng.IntN(10) == 0 {
					ts = now.Add(time.Hour).UnixMilli() // refused on LogAppendTime topics
				}
				fb := flushBatch{
					topic:     topicIDs[rng.IntN(len(topicIDs))],
					partition: int32(rng.IntN(2)), // in range on a and b

					records: 1 + int32(rng.IntN(5)),
					maxTS:   ts,
				}
				if rng.IntN(20) == 0 {
					fb.partition = []int32{-1, 3, 7}[rng.IntN(3)]
				}
				r = append(r, fb)
			}
			reqs = append(reqs, r)
		}
		seg := makeSegment(testKey(now), 10+int64(rng.IntN(10)), reqs...)
		addGaps(rng, &seg)

		// The shared rules on the state before the commit.
		plan, err := engine.PlanSegment(seg)
		if err != nil {
			t.Fatalf("iteration %d: plan: %v", iter, err)
		}
		topics := map[int64]engine.TopicState{}
		for _, tp := range []catalog.Topic{a, b} {
			topics[tp.ID] = engine.TopicState{Partitions: tp.Partitions, LogAppendTime: tp.Configs["message.timestamp.type"] == "LogAppendTime"}
		}
		before := partitionStates(t, c)
		errs := plan.CheckRequests(topics, now)
		want, err := plan.Assign(errs, before)
		if err != nil {
			t.Fatalf("iteration %d: assign: %v", iter, err)
		}

		got, err := c.Commit(ctx, seg)
		if err != nil {
			t.Fatalf("iteration %d: commit: %v", iter, err)
		}
		wantResults := make([]catalog.Result, len(want.Results))
		for i, r := range want.Results {
			wantResults[i] = catalog.Result{BaseOffsets: r.BaseOffsets, Err: sentinel(r.Err)}
			seen[fmt.Sprint(sentinel(r.Err))]++
		}
		perPart := map[catalog.TopicPartition]int{}
		for _, ch := range want.Chunks {
			if perPart[catalog.TopicPartition{TopicID: ch.TopicID, Partition: ch.Partition}]++; perPart[catalog.TopicPartition{TopicID: ch.TopicID, Partition: ch.Partition}] == 2 {
				seen["split run"]++
			}
		}
		checkResults(t, got, wantResults)
		if rows := chunkRows(t, c, seg.Key); !slices.Equal(rows, want.Chunks) {
			t.Errorf("iteration %d: chunk rows\n got %+v\nwant %+v", iter, rows, want.Chunks)
		}
		after := partitionStates(t, c)
		for _, adv := range want.Advances {
			st := after[adv.TopicPartition]
			if st.HighWatermark != adv.HighWatermark || st.MaxTimestamp != adv.MaxTimestamp {
				t.Errorf("iteration %d: %+v: state %+v, want %+v", iter, adv.TopicPartition, st, adv)
			}
		}
		if t.Failed() {
			t.Fatalf("iteration %d: flush %+v", iter, seg)
		}
	}
	// The random flushes must have exercised every rule.
	for _, k := range []string{"<nil>", catalog.ErrTopicNotFound.Error(), catalog.ErrPartitionOutOfRange.Error(), catalog.ErrTimestampOutOfRange.Error(), "split run"} {
		if seen[k] == 0 {
			t.Errorf("no flush exercised %q: %v", k, seen)
		}
	}
	t.Logf("exercised: %v", seen)
}

// addGaps moves batches apart at random where a chunk may end anyway: between batches of
// different requests or partitions.
func addGaps(rng *rand.Rand, seg *catalog.Segment) {
	type ref struct{ r, b int }
	var refs []ref
	for ri, r := range seg.Requests {
		for bi := range r.Batches {
			refs = append(refs, ref{ri, bi})
		}
	}
	at := func(x ref) *catalog.Batch { return &seg.Requests[x.r].Batches[x.b] }
	slices.SortFunc(refs, func(x, y ref) int { return int(at(x).Pos - at(y).Pos) })
	var shift int64
	for i, x := range refs {
		if i > 0 && (refs[i-1].r != x.r || at(refs[i-1]).Partition != at(x).Partition || at(refs[i-1]).TopicID != at(x).TopicID) && rng.IntN(4) == 0 {
			shift += 1 + int64(rng.IntN(7))
		}
		at(x).Pos += shift
	}
	seg.Size += shift
}

// sentinel returns the catalog sentinel an expected request error wraps.
func sentinel(err error) error {
	for _, s := range []error{catalog.ErrTopicNotFound, catalog.ErrPartitionOutOfRange, catalog.ErrTimestampOutOfRange, catalog.ErrCommitAborted} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

func partitionStates(t *testing.T, c *Catalog) map[catalog.TopicPartition]engine.PartitionState {
	t.Helper()
	rows, err := c.pool.Query(context.Background(), `SELECT topic_id, partition, high_watermark, max_timestamp FROM partitions`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[catalog.TopicPartition]engine.PartitionState{}
	var tp catalog.TopicPartition
	var st engine.PartitionState
	if _, err := pgx.ForEachRow(rows, []any{&tp.TopicID, &tp.Partition, &st.HighWatermark, &st.MaxTimestamp}, func() error {
		out[tp] = st
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// chunkRows reads a segment's chunk rows in partition order, then offset order.
func chunkRows(t *testing.T, c *Catalog, key string) []catalog.ChunkRow {
	t.Helper()
	rows, err := c.pool.Query(context.Background(), `
		SELECT c.topic_id, c.partition, c.base_offset, c.last_offset, c.pos, c.len, c.max_timestamp, c.running_max_timestamp
		FROM chunks c JOIN segments s ON s.id = c.segment_id
		WHERE s.key = $1 ORDER BY c.topic_id, c.partition, c.base_offset`, key)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[catalog.ChunkRow])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
