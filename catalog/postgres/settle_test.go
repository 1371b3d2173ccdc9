package postgres

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/internal/engine"
	"github.com/strata-io/strata/internal/testkit/testsvc"
)

// proxied returns dsn with its host replaced by addr.
func proxied(t testing.TB, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		testsvc.Unavailable(t, "the proxy test needs a URL DSN, not %s", redact(dsn))
	}
	u.Host = addr
	return u.String()
}

func proxyTarget(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		testsvc.Unavailable(t, "the proxy test needs a URL DSN, not %s", redact(dsn))
	}
	host := u.Host
	if u.Port() == "" {
		host += ":5432"
	}
	return host
}

func waitClosed(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestSettleAfterLostReply: the connection is cut right after the commit call reached
// the server, so Commit fails without knowing; Settle must find the commit and answer
// with its offsets, and the key stays committed.
func TestSettleAfterLostReply(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	direct := openDSN(t, dsn, catalog.Options{})
	proxy := newCutProxy(t, proxyTarget(t, dsn))
	c := openDSN(t, proxied(t, dsn, proxy.addr()), catalog.Options{})
	ctx := context.Background()
	tp := mustTopic(t, c, "t", 2, nil)

	// Something already committed, so offsets do not start at 0.
	if _, err := c.Commit(ctx, makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 0, 5, 1}})); err != nil {
		t.Fatal(err)
	}

	seg := makeSegment(testKey(time.Now()), 10,
		[]flushBatch{{tp.ID, 0, 3, 1}, {tp.ID, 1, 2, 1}},
		[]flushBatch{{tp.ID, 9, 1, 1}}, // refused: partition out of range
		[]flushBatch{{tp.ID, 0, 4, 1}},
	)
	proxy.arm(cutAfter)
	_, err := c.Commit(ctx, seg)
	if err == nil {
		t.Fatal("commit through a cut connection succeeded")
	}
	if errors.Is(err, catalog.ErrCommitAborted) || errors.Is(err, catalog.ErrCommitTooLate) || errors.Is(err, catalog.ErrInvalidSegment) {
		t.Fatalf("commit through a cut connection: a definite error %v, want an unknown outcome", err)
	}
	waitClosed(t, proxy.fired, "the cut")
	waitClosed(t, proxy.serverDone, "the server to finish the cut commit")

	want := []catalog.Result{
		{BaseOffsets: []int64{5, 0}},
		{Err: catalog.ErrCommitAborted}, // its own error is not recorded; a retry learns it
		{BaseOffsets: []int64{8}},
	}
	res, err := c.Settle(ctx, seg)
	if err != nil {
		proxy.mu.Lock()
		dropped := proxy.dropped
		proxy.mu.Unlock()
		t.Fatalf("settle: %v (the server's answers to the cut commit: %q)", err, dropped)
	}
	checkResults(t, res, want)

	// Settled is final: settling again, or committing the key again, answers the same
	// and writes nothing.
	res, err = direct.Settle(ctx, seg)
	if err != nil {
		t.Fatalf("settle again: %v", err)
	}
	checkResults(t, res, want)
	res, err = c.Commit(ctx, seg)
	if err != nil {
		t.Fatalf("commit again: %v", err)
	}
	checkResults(t, res, want)
	ps, err := direct.Partitions(ctx, tp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].HighWatermark != 12 || ps[1].HighWatermark != 2 {
		t.Errorf("high watermarks %d, %d, want 12, 2", ps[0].HighWatermark, ps[1].HighWatermark)
	}
	list, err := direct.Chunks(ctx, tp.ID, 0, 5, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Chunks) != 1 || list.Chunks[0].SegmentKey != seg.Key || list.Chunks[0].BaseOffset != 5 || list.Chunks[0].LastOffset != 11 {
		t.Errorf("chunks at 5: %+v, want one chunk [5, 11] of %s", list.Chunks, seg.Key)
	}
}

// TestSettleBeforeCommitArrives: the connection is cut before the commit call reaches
// the server; Settle wins, and the key can never commit afterwards.
func TestSettleBeforeCommitArrives(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	direct := openDSN(t, dsn, catalog.Options{})
	proxy := newCutProxy(t, proxyTarget(t, dsn))
	c := openDSN(t, proxied(t, dsn, proxy.addr()), catalog.Options{})
	ctx := context.Background()
	tp := mustTopic(t, c, "t", 1, nil)

	seg := makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 0, 3, 1}})
	proxy.arm(cutBefore)
	if _, err := c.Commit(ctx, seg); err == nil {
		t.Fatal("commit through a cut connection succeeded")
	}
	waitClosed(t, proxy.fired, "the cut")

	if res, err := c.Settle(ctx, seg); !errors.Is(err, catalog.ErrCommitAborted) {
		t.Fatalf("settle: %v, %+v; want ErrCommitAborted", err, res)
	}
	if res, err := direct.Settle(ctx, seg); !errors.Is(err, catalog.ErrCommitAborted) {
		t.Fatalf("settle again: %v, %+v; want ErrCommitAborted", err, res)
	}
	if res, err := direct.Commit(ctx, seg); !errors.Is(err, catalog.ErrCommitAborted) {
		t.Fatalf("commit after the fence: %v, %+v; want ErrCommitAborted", err, res)
	}
	ps, err := direct.Partitions(ctx, tp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].HighWatermark != 0 {
		t.Errorf("high watermark %d after a fenced commit, want 0", ps[0].HighWatermark)
	}
	var state string
	if err := direct.pool.QueryRow(ctx, `SELECT state FROM segments WHERE key = $1`, seg.Key).Scan(&state); err != nil || state != "aborted" {
		t.Errorf("segment row: state %q, %v; want aborted", state, err)
	}
}

// TestSettleWaitsForInFlightCommit holds a commit's transaction open: Settle must wait
// for it, then answer with its outcome — the offsets when it commits, a win when it
// rolls back.
func TestSettleWaitsForInFlightCommit(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	tp := mustTopic(t, c, "t", 1, nil)

	for _, commit := range []bool{true, false} {
		seg := makeSegment(testKey(time.Now()), 10, []flushBatch{{tp.ID, 0, 3, 1}})
		kt, err := engine.KeyTime(seg.Key)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := c.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sql, args, _ := c.commitArgs(seg, kt, nil)
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		var base *int64
		for rows.Next() {
			var i int32
			var code *string
			var dup bool
			var expected, grow *int32
			var gvalue *int64
			if err := rows.Scan(&i, &code, &base, &dup, &expected, &grow, &gvalue); err != nil {
				t.Fatal(err)
			}
		}
		if rows.Err() != nil || base == nil {
			t.Fatalf("in-flight commit: %v, base %v", rows.Err(), base)
		}

		type answer struct {
			res []catalog.Result
			err error
		}
		settled := make(chan answer, 1)
		go func() {
			res, err := c.Settle(ctx, seg)
			settled <- answer{res, err}
		}()
		select {
		case a := <-settled:
			t.Fatalf("settle answered while the commit was in flight: %+v", a)
		case <-time.After(300 * time.Millisecond):
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		a := <-settled
		if commit {
			if a.err != nil {
				t.Fatalf("settle after the commit: %v", a.err)
			}
			checkResults(t, a.res, []catalog.Result{{BaseOffsets: []int64{*base}}})
		} else if !errors.Is(a.err, catalog.ErrCommitAborted) {
			t.Fatalf("settle after a rollback: %v, %+v; want ErrCommitAborted", a.err, a.res)
		}
	}
}

func TestCommitRefusals(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{CommitTimeout: 2 * time.Second})
	ctx := context.Background()
	tp := mustTopic(t, c, "t", 1, nil)
	now, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Too late by the database clock: refused, nothing written, and Settle then fences.
	late := makeSegment(testKey(now.Add(-3*time.Second)), 10, []flushBatch{{tp.ID, 0, 1, 1}})
	if _, err := c.Commit(ctx, late); !errors.Is(err, catalog.ErrCommitTooLate) {
		t.Fatalf("late commit: %v, want ErrCommitTooLate", err)
	}
	if _, err := c.Settle(ctx, late); !errors.Is(err, catalog.ErrCommitAborted) {
		t.Fatalf("settle of a late commit: %v, want ErrCommitAborted", err)
	}
	// Within the timeout, and in the future: accepted.
	for _, kt := range []time.Time{now.Add(-time.Second), now.Add(time.Minute)} {
		if _, err := c.Commit(ctx, makeSegment(testKey(kt), 10, []flushBatch{{tp.ID, 0, 1, 1}})); err != nil {
			t.Fatalf("commit of a key made at %v (db now %v): %v", kt, now, err)
		}
	}

	// Malformed flushes and keys: ErrInvalidSegment, nothing written.
	overlap := makeSegment(testKey(now), 10, []flushBatch{{tp.ID, 0, 1, 1}}, []flushBatch{{tp.ID, 0, 1, 1}})
	overlap.Requests[1].Batches[0].Pos = 5
	badKey := makeSegment("segments/not-a-key", 10, []flushBatch{{tp.ID, 0, 1, 1}})
	for name, seg := range map[string]catalog.Segment{"overlap": overlap, "bad key": badKey, "empty": {Key: testKey(now), Size: 1}} {
		if _, err := c.Commit(ctx, seg); !errors.Is(err, catalog.ErrInvalidSegment) {
			t.Errorf("%s: commit: %v, want ErrInvalidSegment", name, err)
		}
	}
	var segments int
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM segments WHERE state = 'live'`).Scan(&segments); err != nil || segments != 2 {
		t.Errorf("%d live segment rows (%v), want 2", segments, err)
	}
	ps, err := c.Partitions(ctx, tp.ID)
	if err != nil || ps[0].HighWatermark != 2 {
		t.Errorf("high watermark %+v (%v), want 2", ps, err)
	}
}

// TestCommitAllRefused: a flush whose every request fails still records its segment, so
// the object is accounted for, and Settle then answers without offsets.
func TestCommitAllRefused(t *testing.T) {
	t.Parallel()
	c := openTest(t, catalog.Options{})
	ctx := context.Background()
	seg := makeSegment(testKey(time.Now()), 10, []flushBatch{{42, 0, 1, 1}})
	res, err := c.Commit(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, res, []catalog.Result{{Err: catalog.ErrTopicNotFound}})
	res, err = c.Settle(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, res, []catalog.Result{{Err: catalog.ErrCommitAborted}})
}
