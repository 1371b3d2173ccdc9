package catalogtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// runTables runs the conformance suite of catalog.Tables (the table topics' state).
// open returns a fresh catalog for each subtest.
func runTables(t *testing.T, open func(t *testing.T) catalog.Backend) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c catalog.Backend)
	}{
		{"leases", testTableLeases},
		{"leases/first_race", testTableFirstLeaseRace},
		{"commit/exactly_once", testTableCommit},
		{"commit/racing_workers", testTableRace},
		{"commit/invalid", testTableInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func mustLease(t *testing.T, c catalog.Tables, topic int64, p int32, holder string, ttl time.Duration) catalog.TableLease {
	t.Helper()
	l, ok, err := c.AcquireTableLease(context.Background(), topic, p, holder, ttl)
	if err != nil || !ok {
		t.Fatalf("lease topic %d partition %d for %s: ok %v err %v", topic, p, holder, ok, err)
	}
	return l
}

func testTableLeases(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	a := mustLease(t, c, 7, 0, "a", time.Minute)
	if a.Token != 1 {
		t.Fatalf("first lease token %d, want 1", a.Token)
	}
	if _, ok, err := c.AcquireTableLease(ctx, 7, 0, "b", time.Minute); err != nil || ok {
		t.Fatalf("b leased a held partition: ok %v err %v", ok, err)
	}
	if again := mustLease(t, c, 7, 0, "a", time.Minute); again.Token != a.Token {
		t.Fatalf("renewal changed the token: %d, want %d", again.Token, a.Token)
	}
	mustLease(t, c, 7, 1, "b", time.Minute) // another partition is free
	if err := c.ReleaseTableLease(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := mustLease(t, c, 7, 0, "b", time.Millisecond)
	if b.Token != 2 {
		t.Fatalf("new holder's token %d, want 2", b.Token)
	}
	// An expired lease is anyone's (the database clock moves on).
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, ok, err := c.AcquireTableLease(ctx, 7, 0, "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if l.Token != 3 {
				t.Fatalf("token after expiry %d, want 3", l.Token)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an expired lease was never handed over")
		}
	}
	// Releasing a lease taken over frees nothing.
	if err := c.ReleaseTableLease(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.AcquireTableLease(ctx, 7, 0, "b", time.Minute); ok {
		t.Fatal("a stale release freed the new holder's lease")
	}
}

// testTableFirstLeaseRace: workers asking for a partition's first lease at once (no
// row yet, so none to lock): one gets it, the others are told it is held — no error.
func testTableFirstLeaseRace(t *testing.T, c catalog.Backend) {
	for p := range int32(20) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for w := range 4 {
			wg.Go(func() {
				_, ok, err := c.AcquireTableLease(context.Background(), 9, p, "w"+string(rune('a'+w)), time.Minute)
				if err != nil {
					t.Errorf("partition %d, worker %d: %v", p, w, err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("partition %d: %d workers got its first lease, want 1", p, won)
		}
	}
}

func testTableCommit(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	s, err := c.TableState(ctx, 9)
	if err != nil || s.MetadataLocation != "" || s.NextOffset(0) != 0 {
		t.Fatalf("state before any commit: %+v %v", s, err)
	}
	if err := c.CommitTable(ctx, catalog.TableCommit{TopicID: 9, Metadata: "m0"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := c.CommitTable(ctx, catalog.TableCommit{TopicID: 9, Metadata: "m0b"}); !errors.Is(err, catalog.ErrTableConflict) {
		t.Fatalf("second creation: %v, want ErrTableConflict", err)
	}
	l0 := mustLease(t, c, 9, 0, "w", time.Minute)
	l1 := mustLease(t, c, 9, 1, "w", time.Minute)
	ok := catalog.TableCommit{TopicID: 9, Prev: "m0", Metadata: "m1", Leases: []catalog.TableLease{l0, l1},
		Ranges: []catalog.TableRange{{Partition: 0, From: 0, To: 10}, {Partition: 1, From: 0, To: 4}}}
	if err := c.CommitTable(ctx, ok); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// The same commit again (a crash after the commit, a retry): refused, nothing moves.
	again := ok
	again.Prev, again.Metadata = "m1", "m1b"
	if err := c.CommitTable(ctx, again); !errors.Is(err, catalog.ErrTableConflict) {
		t.Fatalf("the same ranges twice: %v, want ErrTableConflict", err)
	}
	// A gap (skipping offsets 10..12): refused.
	gap := catalog.TableCommit{TopicID: 9, Prev: "m1", Metadata: "m2", Leases: []catalog.TableLease{l0},
		Ranges: []catalog.TableRange{{Partition: 0, From: 12, To: 20}}}
	if err := c.CommitTable(ctx, gap); !errors.Is(err, catalog.ErrTableConflict) {
		t.Fatalf("a gap: %v, want ErrTableConflict", err)
	}
	// Built on a stale metadata location: refused.
	stale := catalog.TableCommit{TopicID: 9, Prev: "m0", Metadata: "m2", Leases: []catalog.TableLease{l0},
		Ranges: []catalog.TableRange{{Partition: 0, From: 10, To: 20}}}
	if err := c.CommitTable(ctx, stale); !errors.Is(err, catalog.ErrTableConflict) {
		t.Fatalf("stale metadata: %v, want ErrTableConflict", err)
	}
	// A lost lease (taken over after release): refused.
	if err := c.ReleaseTableLease(ctx, l0); err != nil {
		t.Fatal(err)
	}
	l0b := mustLease(t, c, 9, 0, "other", time.Minute)
	lost := catalog.TableCommit{TopicID: 9, Prev: "m1", Metadata: "m2", Leases: []catalog.TableLease{l0},
		Ranges: []catalog.TableRange{{Partition: 0, From: 10, To: 20}}}
	if err := c.CommitTable(ctx, lost); !errors.Is(err, catalog.ErrTableConflict) {
		t.Fatalf("a lost lease: %v, want ErrTableConflict", err)
	}
	s, err = c.TableState(ctx, 9)
	if err != nil || s.MetadataLocation != "m1" || s.NextOffset(0) != 10 || s.NextOffset(1) != 4 {
		t.Fatalf("state after refusals: %+v %v, want m1, 0→10, 1→4", s, err)
	}
	lost.Leases = []catalog.TableLease{l0b}
	if err := c.CommitTable(ctx, lost); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}
	if s, _ = c.TableState(ctx, 9); s.MetadataLocation != "m2" || s.NextOffset(0) != 20 {
		t.Fatalf("state: %+v, want m2, 0→20", s)
	}
}

// testTableRace: workers racing to commit the same range of one partition (each
// holding the lease it was given, as after a takeover) — exactly one wins.
func testTableRace(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	if err := c.CommitTable(ctx, catalog.TableCommit{TopicID: 11, Metadata: "m0"}); err != nil {
		t.Fatal(err)
	}
	prev := "m0"
	for round := range 5 {
		l := mustLease(t, c, 11, 0, "w", time.Minute)
		from := int64(round * 100)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		for w := range 4 {
			meta := prev + "-" + string(rune('a'+w))
			wg.Go(func() {
				err := c.CommitTable(ctx, catalog.TableCommit{TopicID: 11, Prev: prev, Metadata: meta, Leases: []catalog.TableLease{l},
					Ranges: []catalog.TableRange{{Partition: 0, From: from, To: from + 100}}})
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, meta)
					mu.Unlock()
				case !errors.Is(err, catalog.ErrTableConflict):
					t.Errorf("racing commit: %v", err)
				}
			})
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: %d commits won (%v), want exactly 1", round, len(wins), wins)
		}
		s, err := c.TableState(ctx, 11)
		if err != nil || s.MetadataLocation != wins[0] || s.NextOffset(0) != from+100 {
			t.Fatalf("round %d: state %+v %v, want %s and %d", round, s, err, wins[0], from+100)
		}
		prev = wins[0]
	}
}

func testTableInvalid(t *testing.T, c catalog.Backend) {
	ctx := context.Background()
	l := catalog.TableLease{TopicID: 13, Partition: 0, Holder: "w", Token: 1}
	for _, tc := range []catalog.TableCommit{
		{TopicID: 13, Metadata: ""},
		{TopicID: 13, Metadata: "m", Ranges: []catalog.TableRange{{Partition: 0, From: 0, To: 1}}, Leases: []catalog.TableLease{l}},
		{TopicID: 13, Prev: "a", Metadata: "b", Ranges: []catalog.TableRange{{Partition: 0, From: 5, To: 4}}, Leases: []catalog.TableLease{l}},
		{TopicID: 13, Prev: "a", Metadata: "b", Ranges: []catalog.TableRange{{Partition: 1, From: 0, To: 4}}, Leases: []catalog.TableLease{l}},
		{TopicID: 13, Prev: "a", Metadata: "b", Ranges: []catalog.TableRange{{Partition: 0, From: 0, To: 4}, {Partition: 0, From: 4, To: 5}}, Leases: []catalog.TableLease{l}},
	} {
		if err := c.CommitTable(ctx, tc); !errors.Is(err, catalog.ErrInvalidTableCommit) {
			t.Errorf("CommitTable(%+v) = %v, want ErrInvalidTableCommit", tc, err)
		}
	}
	if s, err := c.TableState(ctx, 13); err != nil || s.MetadataLocation != "" {
		t.Fatalf("state after invalid commits: %+v %v", s, err)
	}
}
