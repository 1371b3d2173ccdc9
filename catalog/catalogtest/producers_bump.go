package catalogtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
)

// Kafka's idempotent-producer rules beyond the basic ones: a producer bumping its own
// epoch (engine.Plan.CheckProducers rule 3; Kafka clients do it after some errors
// without asking), and InitProducer bumping a producer without a transactional id that
// names its current identity (KIP-360). The Go rules and strata_commit's SQL twin must
// agree on every answer here.

func wantFenced(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, catalog.ErrProducerFenced) || engine.RequestErrorCode(err) != engine.CodeProducerFenced {
		t.Fatalf("%s: %v, want ErrProducerFenced", what, err)
	}
}

func testEpochBump(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "bump", 2, nil)
	p := MustInit(t, c, "")
	wantResult(t, "epoch 0 partition 0", commitOne(t, c, idem(t, tp.ID, 0, 2, p, 0))[0], []int64{0}, false)
	wantResult(t, "epoch 0 partition 1", commitOne(t, c, idem(t, tp.ID, 1, 3, p, 0))[0], []int64{0}, false)
	e1 := catalog.Producer{ID: p.ID, Epoch: 1}
	e2 := catalog.Producer{ID: p.ID, Epoch: 2}

	// A bump must start its sequences again.
	wantSequenceError(t, "epoch 1 continuing epoch 0's sequence", commitOne(t, c, idem(t, tp.ID, 0, 1, e1, 2))[0].Err, 0)
	wantSequenceError(t, "epoch 2 continuing epoch 0's sequence", commitOne(t, c, idem(t, tp.ID, 0, 1, e2, 2))[0].Err, 0)
	// The refusals changed nothing: epoch 0 carries on.
	wantResult(t, "epoch 0 after the refusals", commitOne(t, c, idem(t, tp.ID, 0, 1, p, 2))[0], []int64{2}, false)

	// The bump: accepted at sequence 0, and from now on the producer's epoch.
	bump := idem(t, tp.ID, 0, 2, e1, 0)
	wantResult(t, "epoch 1 at sequence 0", commitOne(t, c, bump)[0], []int64{3}, false)
	wantFenced(t, "epoch 0 after the bump", commitOne(t, c, idem(t, tp.ID, 0, 1, p, 3))[0].Err)
	wantFenced(t, "epoch 0 on another partition", commitOne(t, c, idem(t, tp.ID, 1, 1, p, 3))[0].Err)
	// Another partition's state is from epoch 0: it starts again at 0 too.
	wantSequenceError(t, "epoch 1 on partition 1 continuing", commitOne(t, c, idem(t, tp.ID, 1, 1, e1, 3))[0].Err, 0)
	wantResult(t, "epoch 1 on partition 1", commitOne(t, c, idem(t, tp.ID, 1, 1, e1, 0))[0], []int64{3}, false)
	wantResult(t, "epoch 1 continuing", commitOne(t, c, idem(t, tp.ID, 0, 1, e1, 2))[0], []int64{5}, false)
	// A retry of the bumping request is a duplicate with its original offsets.
	retry := bump
	retry.Key = NewKey(t)
	wantResult(t, "retry of the bump", commitOne(t, c, retry)[0], []int64{3}, true)
	// The next bump goes from the new epoch.
	wantResult(t, "epoch 2 at sequence 0", commitOne(t, c, idem(t, tp.ID, 0, 1, e2, 0))[0], []int64{6}, false)
	wantFenced(t, "epoch 1 after the second bump", commitOne(t, c, idem(t, tp.ID, 0, 1, e1, 3))[0].Err)
	// Ahead by more than one, as a client whose bumped requests were refused before
	// they committed sends: accepted at 0 too, or it would bump for ever.
	e5 := catalog.Producer{ID: p.ID, Epoch: 5}
	wantResult(t, "epoch 5 at sequence 0", commitOne(t, c, idem(t, tp.ID, 1, 1, e5, 0))[0], []int64{4}, false)
	wantFenced(t, "epoch 2 after the jump", commitOne(t, c, idem(t, tp.ID, 0, 1, e2, 1))[0].Err)
	wantWatermarks(t, c, tp.ID, 7, 5)
	CheckDense(t, c, tp.ID, 0)
	CheckDense(t, c, tp.ID, 1)

	// InitProducer knows the bumped epoch: KIP-360 from the current identity bumps it.
	next, err := c.InitProducer(t.Context(), "", &e5, "")
	if err != nil || next != (catalog.Producer{ID: p.ID, Epoch: 6}) {
		t.Fatalf("init from the bumped identity: %+v %v, want id %d epoch 6", next, err, p.ID)
	}
}

// testEpochBumpInFlush: within one flush, requests after a bump at the old epoch are
// fenced, and those before it are not, on the bumped partition and elsewhere.
func testEpochBumpInFlush(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "bumpflush", 3, nil)
	p := MustInit(t, c, "")
	e1 := catalog.Producer{ID: p.ID, Epoch: 1}
	seg := Flush(NewKey(t),
		Req(B{TopicID: tp.ID, Partition: 0, Records: 1}), // epoch 0: before the bump
		Req(B{TopicID: tp.ID, Partition: 0, Records: 2}), // epoch 1 at 0: the bump
		Req(B{TopicID: tp.ID, Partition: 1, Records: 1}), // epoch 0: after it, fenced
		Req(B{TopicID: tp.ID, Partition: 0, Records: 1}), // epoch 1 continuing
		Req(B{TopicID: tp.ID, Partition: 2, Records: 1}), // epoch 1 elsewhere, from 0
	)
	Idempotent(&seg, 0, p, 0)
	Idempotent(&seg, 1, e1, 0)
	Idempotent(&seg, 2, p, 0)
	Idempotent(&seg, 3, e1, 2)
	Idempotent(&seg, 4, e1, 0)
	res := commitOne(t, c, seg)
	wantResult(t, "epoch 0 before the bump", res[0], []int64{0}, false)
	wantResult(t, "the bump", res[1], []int64{1}, false)
	wantFenced(t, "epoch 0 after the bump", res[2].Err)
	wantResult(t, "epoch 1 continuing", res[3], []int64{3}, false)
	wantResult(t, "epoch 1 on another partition", res[4], []int64{0}, false)
	wantWatermarks(t, c, tp.ID, 4, 0, 1)
	wantFenced(t, "epoch 0 in the next flush", commitOne(t, c, idem(t, tp.ID, 1, 1, p, 0))[0].Err)
	// The state kept is epoch 1's alone: its batches are recognised, and it continues.
	retry := Flush(NewKey(t), Req(B{TopicID: tp.ID, Partition: 0, Records: 2}))
	Idempotent(&retry, 0, e1, 0)
	wantResult(t, "retry of the bump", commitOne(t, c, retry)[0], []int64{1}, true)
	wantResult(t, "epoch 1 next", commitOne(t, c, idem(t, tp.ID, 0, 1, e1, 3))[0], []int64{4}, false)
	CheckDense(t, c, tp.ID, 0)
}

// testInitIdempotentBump is KIP-360's InitProducerId with the current identity and no
// transactional id.
func testInitIdempotentBump(t *testing.T, c ProducerCatalog) {
	tp := SeedTopic(t, c, "kip360", 1, nil)
	p := MustInit(t, c, "")
	wantResult(t, "epoch 0", commitOne(t, c, idem(t, tp.ID, 0, 2, p, 0))[0], []int64{0}, false)
	bumped, err := c.InitProducer(t.Context(), "", &p, "")
	if err != nil || bumped.ID != p.ID || bumped.Epoch != 1 {
		t.Fatalf("init from the current identity: %+v %v, want id %d epoch 1", bumped, err, p.ID)
	}
	wantFenced(t, "epoch 0 after the bump", commitOne(t, c, idem(t, tp.ID, 0, 1, p, 2))[0].Err)
	wantResult(t, "epoch 1 from 0", commitOne(t, c, idem(t, tp.ID, 0, 1, bumped, 0))[0], []int64{2}, false)

	// Anything else gets a new id at epoch 0, as Kafka answers: a stale epoch, an
	// unknown id, a transactional producer's id.
	txn := MustInit(t, c, Name(t, "txn"))
	for _, cur := range []catalog.Producer{p, {ID: p.ID + 1_000_000, Epoch: 0}, txn} {
		got, err := c.InitProducer(t.Context(), "", &cur, "")
		if err != nil || got.Epoch != 0 || got.ID == p.ID || got.ID == txn.ID || got.ID == cur.ID {
			t.Fatalf("init from %+v: %+v %v, want a new id at epoch 0", cur, got, err)
		}
	}
	// The transactional producer was not touched.
	again := MustInit(t, c, "")
	wantResult(t, "a new producer", commitOne(t, c, idem(t, tp.ID, 0, 1, again, 0))[0], []int64{3}, false)
	if cur, err := c.InitProducer(t.Context(), "", &bumped, ""); err != nil || cur != (catalog.Producer{ID: p.ID, Epoch: 2}) {
		t.Fatalf("second bump: %+v %v, want id %d epoch 2", cur, err, p.ID)
	}
}

// testConcurrentBumps: two catalogs (two nodes) commit, at the same time, flushes that
// each bump the same producer on their own partition — what a Kafka client does after a
// local epoch bump, its partitions led by different nodes. Both must commit: neither may
// deadlock on the producer's registry row.
func testConcurrentBumps(t *testing.T, open func(t *testing.T, opts catalog.Options) ProducerCatalog) {
	const rounds = 10
	cats := []ProducerCatalog{open(t, catalog.Options{}), open(t, catalog.Options{})}
	tp := SeedTopic(t, cats[0], "conc-bump", 2, nil)
	p := MustInit(t, cats[0], "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for round := range rounds {
		pe := catalog.Producer{ID: p.ID, Epoch: int16(round + 1)}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				seg := idem(t, tp.ID, int32(i), 1, pe, 0)
				res, err := cats[i].Commit(ctx, seg)
				switch {
				case err != nil:
					errs[i] = err
				case res[0].Err != nil:
					errs[i] = res[0].Err
				}
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: partition %d's bump to epoch %d: %v", round, i, pe.Epoch, err)
			}
		}
	}
	wantWatermarks(t, cats[0], tp.ID, rounds, rounds)
	cur, err := cats[0].InitProducer(ctx, "", &catalog.Producer{ID: p.ID, Epoch: rounds}, "")
	if err != nil || cur != (catalog.Producer{ID: p.ID, Epoch: rounds + 1}) {
		t.Fatalf("after %d bumps: %+v %v, want epoch %d", rounds, cur, err, rounds+1)
	}
}
