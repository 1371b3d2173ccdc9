package catalogtest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The dead-letter part of the share-group suite (catalog.ShareDLQ): records rejected
// or over the delivery limit of a group with a dead-letter topic are pending, not
// archived; a flush's dead-letter request archives them in its transaction, under
// its lease, once.

func shareDLQGroup(t *testing.T, c ShareCatalog, records int32) (catalog.Topic, string) {
	t.Helper()
	tp := SeedTopic(t, c, "share", 1, nil)
	SeedRecords(t, c, tp.ID, 0, 1, records)
	g := Name(t, "sg")
	if err := c.SetGroupConfigs(t.Context(), g, map[string]string{catalog.ShareDLQTopic: "dlq." + g}); err != nil {
		t.Fatalf("set the dead-letter topic: %v", err)
	}
	shareJoin(t, c, g, "a", tp.Name)
	return tp, g
}

func dlqWork(t testing.TB, c ShareCatalog, group string) []catalog.ShareDLQRange {
	t.Helper()
	ws, err := c.ShareDLQPending(t.Context(), 0)
	if err != nil {
		t.Fatalf("dead-letter work: %v", err)
	}
	var out []catalog.ShareDLQRange
	for _, w := range ws {
		if w.Group == group {
			if w.DLQTopic != "dlq."+group || w.Partition != 0 {
				t.Fatalf("work %+v: want the group's dead-letter topic and partition 0", w)
			}
			out = append(out, w.Ranges...)
		}
	}
	return out
}

// dlqFlush commits a flush of one plain request to plain (when not 0) and one
// dead-letter request copying ranges of tp under l, and answers the results.
func dlqFlush(t *testing.T, c ShareCatalog, tp catalog.Topic, dlq catalog.Topic, l catalog.ShareDLQLease, rs ...catalog.ShareDLQRange) []catalog.Result {
	t.Helper()
	seg := Flush(NewKey(t), Req(B{TopicID: dlq.ID, Partition: 0, Records: int32(len(rs))}), Req(B{TopicID: dlq.ID, Partition: 0, Records: 1}))
	seg.Requests[0].ShareDLQ = &catalog.ShareDLQCommit{Lease: l, TopicID: tp.ID, Partition: 0, Ranges: rs}
	res, err := c.Commit(t.Context(), seg)
	if err != nil {
		t.Fatalf("commit the dead-letter flush: %v", err)
	}
	if res[1].Err != nil {
		t.Fatalf("the flush's plain request: %v", res[1].Err)
	}
	return res
}

// wantDeadLettered checks the group's running total of dead-lettered records.
func wantDeadLettered(t *testing.T, c ShareCatalog, g, when string, want int64) {
	t.Helper()
	d, err := c.DescribeShareGroup(t.Context(), g)
	if err != nil || d.DeadLettered != want {
		t.Fatalf("%s: %d records dead-lettered, %v; want %d", when, d.DeadLettered, err, want)
	}
}

func testShareDLQPending(t *testing.T, c ShareCatalog) {
	tp, g := shareDLQGroup(t, c, 6)
	wantRanges(t, "first delivery", acquire(t, c, g, "a", tp.Name, acquireOpt{max: 4, limit: 1}), [3]int64{0, 3, 1})
	// The rejects carry a push target's answer, kept with them for the copies.
	first := batch(0, 3, catalog.AckReject, catalog.AckReject, catalog.AckRelease, catalog.AckAccept)
	first.Rejection = &catalog.ShareRejection{Status: 422, Body: "no such customer"}
	if err := ack(c, t.Context(), g, "a", tp.Name, 1, first); err != nil {
		t.Fatalf("reject, release at the limit, accept: %v", err)
	}
	s := sharePartition(t, c, g)
	if s.StartOffset != 0 || s.DeadLetterPending != 3 || s.Archived != 0 || s.Acknowledged != 1 {
		t.Fatalf("after the acknowledgements: %+v, want 3 pending below the start", s)
	}
	// A lock that expires at the limit is pending too, found by the next acquire.
	wantRanges(t, "offset 4", acquire(t, c, g, "a", tp.Name, acquireOpt{max: 1, limit: 1, lock: time.Millisecond}), [3]int64{4, 4, 1})
	deadline := time.Now().Add(30 * time.Second)
	for sharePartition(t, c, g).DeadLetterPending != 4 {
		if time.Now().After(deadline) {
			t.Fatal("an expired lock at the delivery limit never became pending")
		}
		for _, r := range acquire(t, c, g, "a", tp.Name, acquireOpt{max: 1, limit: 1}) {
			if r.First <= 4 {
				t.Fatalf("acquired %+v: a record pending dead-lettering was delivered again", r)
			}
		}
	}
	want := []catalog.ShareDLQRange{
		{First: 0, Last: 1, Count: 1, Reason: catalog.ShareDLQRejected, Rejection: catalog.ShareRejection{Status: 422, Body: "no such customer"}},
		{First: 2, Last: 2, Count: 1, Reason: catalog.ShareDLQDeliveryLimit},
		{First: 4, Last: 4, Count: 1, Reason: catalog.ShareDLQDeliveryLimit},
	}
	if got := dlqWork(t, c, g); !reflect.DeepEqual(got, want) {
		t.Fatalf("dead-letter work %+v, want %+v", got, want)
	}
	// Pending records are never delivered again, nor acknowledged.
	if err := ack(c, t.Context(), g, "a", tp.Name, 1, batch(0, 0, catalog.AckAccept)); !errors.Is(err, catalog.ErrShareRecordState) {
		t.Fatalf("accepting a pending record: %v, want ErrShareRecordState", err)
	}
	for _, r := range acquire(t, c, g, "a", tp.Name, acquireOpt{max: 10, limit: 1}) {
		if r.First <= 4 {
			t.Fatalf("acquired %+v: a record pending dead-lettering was delivered again", r)
		}
	}
}

func testShareDLQCommit(t *testing.T, c ShareCatalog) {
	ctx := t.Context()
	tp, g := shareDLQGroup(t, c, 4)
	dlq := SeedTopic(t, c, "dlq", 1, nil)
	acquire(t, c, g, "a", tp.Name, acquireOpt{max: 4})
	if err := ack(c, ctx, g, "a", tp.Name, 0, batch(0, 3, catalog.AckReject)); err != nil {
		t.Fatal(err)
	}
	l1, ok, err := c.AcquireShareDLQLease(ctx, g, "m1", time.Minute)
	if err != nil || !ok || l1.Token < 1 {
		t.Fatalf("m1's lease: %+v %v %v", l1, ok, err)
	}
	if again, ok, err := c.AcquireShareDLQLease(ctx, g, "m1", time.Minute); err != nil || !ok || again.Token != l1.Token {
		t.Fatalf("m1 renews: %+v %v %v, want token %d", again, ok, err, l1.Token)
	}
	if _, ok, err := c.AcquireShareDLQLease(ctx, g, "m2", time.Minute); err != nil || ok {
		t.Fatalf("m2 while m1 holds the lease: ok %v err %v, want refused", ok, err)
	}

	// The copy of 0-1 archives them in its flush: the start moves over them.
	res := dlqFlush(t, c, tp, dlq, l1, catalog.ShareDLQRange{First: 0, Last: 1})
	if res[0].Err != nil {
		t.Fatalf("the dead-letter request: %v", res[0].Err)
	}
	if s := sharePartition(t, c, g); s.StartOffset != 2 || s.DeadLetterPending != 2 {
		t.Fatalf("after the copy of 0-1: %+v, want start 2 and 2 pending", s)
	}
	wantDeadLettered(t, c, g, "after the first copy", 1) // its request's batch: one record
	hw := Partition(t, c, dlq.ID, 0).HighWatermark

	// Never twice: a second copy of 0-1 is refused, its records not stored.
	res = dlqFlush(t, c, tp, dlq, l1, catalog.ShareDLQRange{First: 1, Last: 2})
	if !errors.Is(res[0].Err, catalog.ErrShareDLQNotPending) {
		t.Fatalf("copying 1-2 again: %v, want ErrShareDLQNotPending", res[0].Err)
	}
	if got := Partition(t, c, dlq.ID, 0).HighWatermark; got != hw+1 {
		t.Fatalf("the dead-letter topic's high watermark %d, want %d (only the plain request)", got, hw+1)
	}
	hw++
	wantDeadLettered(t, c, g, "after a refused copy", 1)

	// Fenced: m2 takes the lease over; m1's copy is refused, and nothing changes.
	if err := c.ReleaseShareDLQLease(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2, ok, err := c.AcquireShareDLQLease(ctx, g, "m2", time.Minute)
	if err != nil || !ok || l2.Token <= l1.Token {
		t.Fatalf("m2's lease after m1 released: %+v %v %v, want a greater token than %d", l2, ok, err, l1.Token)
	}
	res = dlqFlush(t, c, tp, dlq, l1, catalog.ShareDLQRange{First: 2, Last: 3})
	if !errors.Is(res[0].Err, catalog.ErrShareDLQFenced) {
		t.Fatalf("m1's copy after m2 took over: %v, want ErrShareDLQFenced", res[0].Err)
	}
	if s := sharePartition(t, c, g); s.StartOffset != 2 || s.DeadLetterPending != 2 {
		t.Fatalf("after the fenced copy: %+v, want start 2 and 2 pending", s)
	}
	if got := Partition(t, c, dlq.ID, 0).HighWatermark; got != hw+1 {
		t.Fatalf("the dead-letter topic's high watermark %d, want %d", got, hw+1)
	}
	// A flush of nothing but a refused copy commits nothing.
	alone := Flush(NewKey(t), Req(B{TopicID: dlq.ID, Partition: 0, Records: 2}))
	alone.Requests[0].ShareDLQ = &catalog.ShareDLQCommit{Lease: l1, TopicID: tp.ID, Partition: 0, Ranges: []catalog.ShareDLQRange{{First: 2, Last: 3}}}
	if res, err := c.Commit(ctx, alone); err != nil || !errors.Is(res[0].Err, catalog.ErrShareDLQFenced) {
		t.Fatalf("a flush of one fenced copy: %+v, %v; want it refused as fenced", res, err)
	}
	if got := Partition(t, c, dlq.ID, 0).HighWatermark; got != hw+1 {
		t.Fatalf("the dead-letter topic's high watermark %d, want %d", got, hw+1)
	}
	res = dlqFlush(t, c, tp, dlq, l2, catalog.ShareDLQRange{First: 2, Last: 3})
	if res[0].Err != nil {
		t.Fatalf("m2's copy: %v", res[0].Err)
	}
	if s := sharePartition(t, c, g); s.StartOffset != 4 || s.DeadLetterPending != 0 {
		t.Fatalf("after every copy: %+v, want start 4, nothing pending", s)
	}
	// The total outlives a change of holder, and counted nothing refused.
	wantDeadLettered(t, c, g, "after m2's copy", 2)
	if got := dlqWork(t, c, g); len(got) != 0 {
		t.Fatalf("dead-letter work left: %+v", got)
	}
}

func testShareDLQArchive(t *testing.T, c ShareCatalog) {
	ctx := t.Context()
	tp, g := shareDLQGroup(t, c, 2)
	acquire(t, c, g, "a", tp.Name, acquireOpt{max: 2})
	if err := ack(c, ctx, g, "a", tp.Name, 0, batch(0, 1, catalog.AckReject)); err != nil {
		t.Fatal(err)
	}
	l, ok, err := c.AcquireShareDLQLease(ctx, g, "m1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	stale := l
	stale.Token--
	rs := []catalog.ShareDLQRange{{First: 0, Last: 1}}
	if err := c.ArchiveShareDLQ(ctx, catalog.ShareDLQCommit{Lease: stale, TopicID: tp.ID, Partition: 0, Ranges: rs}); !errors.Is(err, catalog.ErrShareDLQFenced) {
		t.Fatalf("archive under a stale token: %v, want ErrShareDLQFenced", err)
	}
	if s := sharePartition(t, c, g); s.DeadLetterPending != 2 {
		t.Fatalf("after the fenced archive: %+v, want 2 pending", s)
	}
	if err := c.ArchiveShareDLQ(ctx, catalog.ShareDLQCommit{Lease: l, TopicID: tp.ID, Partition: 0, Ranges: rs}); err != nil {
		t.Fatal(err)
	}
	if s := sharePartition(t, c, g); s.DeadLetterPending != 0 || s.StartOffset != 2 {
		t.Fatalf("after the archive: %+v, want start 2, nothing pending", s)
	}
	wantDeadLettered(t, c, g, "after an archive without copies", 0)
	if err := c.ArchiveShareDLQ(ctx, catalog.ShareDLQCommit{Lease: l, TopicID: tp.ID, Partition: 0, Ranges: rs}); !errors.Is(err, catalog.ErrShareDLQNotPending) {
		t.Fatalf("archive again: %v, want ErrShareDLQNotPending", err)
	}
}
