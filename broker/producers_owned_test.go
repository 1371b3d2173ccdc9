package broker

import (
	"context"
	"testing"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/batchtest"
)

// legacySecurity is the real catalog, with some producer ids made to look as if an
// older node had handed them out (no owner recorded).
type legacySecurity struct {
	catalog.Security
	unowned map[int64]bool
}

func (l legacySecurity) ProducerOwner(ctx context.Context, id int64) (catalog.ProducerOwner, error) {
	if l.unowned[id] {
		return catalog.ProducerOwner{Unowned: true}, nil
	}
	return l.Security.ProducerOwner(ctx, id)
}

// TestProducerIDsAreOwned: with authorization on, a producer id is its creator's (or,
// with a transactional id, whoever may write to that); another principal's produce with
// it, or bump of it, is refused before anything is written, and the owner carries on.
// Without authorization everything is shared, as before; an id handed out before owners
// were recorded stays usable by all.
func TestProducerIDsAreOwned(t *testing.T) {
	b, cat := newRealCore(t)
	ctx := t.Context()
	alice, bob := Principal{Name: "User:alice"}, Principal{Name: "User:bob"}
	if _, err := b.CreateTopic(ctx, alice, CreateTopicRequest{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	produce := func(who Principal, p catalog.Producer, seq int32) (ProduceResult, error) {
		return b.Produce(ctx, who, ProduceRequest{Records: []Record{{Topic: "t", Partition: 0, Value: []byte("v"), Timestamp: -1}},
			Producer: &p, Sequences: map[string]map[int32]int32{"t": {0: seq}}})
	}
	batches := func(who Principal, p catalog.Producer, seq int32) error {
		body := batchtest.Batch(t, batchtest.Some(1, time.Now().UnixMilli()), 0, p.ID, p.Epoch, seq)
		_, err := b.ProduceBatches(ctx, who, BatchesRequest{Topic: "t", Partition: 0, Batches: body})
		return err
	}

	// Anonymous mode: shared, unchanged.
	shared, err := b.InitProducer(ctx, alice, InitProducerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := produce(bob, shared, 0); err != nil {
		t.Fatalf("without authorization, another's id: %v", err)
	}

	legacy := legacySecurity{Security: cat, unowned: map[int64]bool{}}
	auth := &countingAuthorizer{refused: map[acl.Resource]bool{}, asked: map[acl.Resource]int{}}
	b.d.Authorizer, b.d.Security = auth, legacy
	pa, err := b.InitProducer(ctx, alice, InitProducerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := produce(alice, pa, 0); err != nil {
		t.Fatal(err)
	}
	hw := func() int64 {
		t.Helper()
		off, err := b.ListOffset(ctx, alice, "t", 0, Latest)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	before := hw()
	wantOwned := func(what string, err error) {
		t.Helper()
		e := wantCode(t, err, CodeForbidden)
		if e.Details["resource_type"] != "cluster" || e.Details["operation"] != "idempotent-write" || e.Details["producer_id"] != pa.ID {
			t.Errorf("%s: details %v", what, e.Details)
		}
	}
	// The refusal comes from the catalog's record, not only from this node's memory.
	fresh := New(Config{}, b.d)
	for _, core := range []*Broker{b, fresh} {
		_, err := core.Produce(ctx, bob, ProduceRequest{Records: []Record{{Topic: "t", Partition: 0, Value: []byte("v"), Timestamp: -1}},
			Producer: &pa, Sequences: map[string]map[int32]int32{"t": {0: 1}}})
		wantOwned("produce", err)
	}
	wantOwned("produce at the next epoch", second(produce(bob, catalog.Producer{ID: pa.ID, Epoch: pa.Epoch + 1}, 0)))
	wantOwned("record batches", batches(bob, catalog.Producer{ID: pa.ID, Epoch: pa.Epoch + 1}, 0))
	wantOwned("KIP-360 bump", second(b.InitProducer(ctx, bob, InitProducerRequest{Current: &pa})))
	wantOwned("KIP-360 bump on a fresh node", second(fresh.InitProducer(ctx, bob, InitProducerRequest{Current: &pa})))
	if got := hw(); got != before {
		t.Fatalf("high watermark %d after the refusals, was %d", got, before)
	}
	if res, err := produce(alice, pa, 1); err != nil || res.Duplicate || res.Offsets[0].Offset != before {
		t.Fatalf("the owner's next produce: %+v %v", res, err)
	}
	// The owner bumps its own epoch.
	if np, err := fresh.InitProducer(ctx, alice, InitProducerRequest{Current: &pa}); err != nil || np.ID != pa.ID || np.Epoch != pa.Epoch+1 {
		t.Fatalf("the owner's bump: %+v %v", np, err)
	}

	// A transactional producer is whoever's may write to its transactional id.
	tid := "shared-tx"
	pt, err := b.InitProducer(ctx, alice, InitProducerRequest{TransactionalID: &tid})
	if err != nil {
		t.Fatal(err)
	}
	if err := batches(bob, pt, 0); err != nil {
		t.Fatalf("bob, with write on the transactional id: %v", err)
	}
	auth.refused[acl.TransactionalID(tid)] = true
	if e := wantCode(t, batches(bob, pt, 1), CodeForbidden); e.Details["resource_type"] != "transactional-id" {
		t.Errorf("without write on the transactional id: %v", e.Details)
	}

	// Unowned (an older node's) ids stay usable by all; unknown ids are the commit's.
	old, err := cat.InitProducer(ctx, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	legacy.unowned[old.ID] = true
	if _, err := produce(bob, old, 0); err != nil {
		t.Fatalf("an unowned id: %v", err)
	}
	wantCode(t, second(produce(bob, catalog.Producer{ID: old.ID + 1000}, 0)), CodeUnknownProducer)
}
