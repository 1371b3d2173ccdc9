package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/strata-io/strata/catalog"
)

// TestDLQPendingRules: with a dead-letter topic, reject and release at the limit make
// records pending (with their reason and count), which stop the start offset; without
// one they are archived and the start moves over them. checkPending accepts only
// wholly pending ranges.
func TestDLQPendingRules(t *testing.T) {
	for _, dlq := range []bool{false, true} {
		p := SharePart{Start: 0, DLQ: dlq}
		p.acquire("m", 1000, 4, 10)
		err := p.ack("m", 0, []catalog.AckBatch{{First: 0, Last: 3, Types: []int8{catalog.AckReject, catalog.AckRelease, catalog.AckAccept, catalog.AckAccept}}}, time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !dlq {
			if p.Start != 4 || len(p.Ranges) != 0 {
				t.Fatalf("without a dead-letter topic: %+v, want everything done", p)
			}
			continue
		}
		want := []ShareRange{
			{First: 0, Last: 0, State: RangeDLQPending, Count: 1, Reason: ReasonRejected},
			{First: 1, Last: 1, State: RangeDLQPending, Count: 1, Reason: ReasonDeliveryLimit},
			{First: 2, Last: 3, State: RangeAcked},
		}
		if p.Start != 0 || len(p.Ranges) != len(want) {
			t.Fatalf("with a dead-letter topic: %+v, want %+v", p, want)
		}
		for i := range want {
			if p.Ranges[i] != want[i] {
				t.Fatalf("range %d: %+v, want %+v", i, p.Ranges[i], want[i])
			}
		}
		q, err := DecodeSharePart(p.Start, p.Encode())
		if err != nil || len(q.Ranges) != 3 || q.Ranges[1].Reason != ReasonDeliveryLimit {
			t.Fatalf("round trip: %+v %v", q, err)
		}
		if err := p.checkPending([]catalog.ShareDLQRange{{First: 0, Last: 1}}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range [][2]int64{{0, 2}, {2, 2}, {1, 0}, {4, 4}} {
			if err := p.checkPending([]catalog.ShareDLQRange{{First: bad[0], Last: bad[1]}}); !errors.Is(err, catalog.ErrShareDLQNotPending) {
				t.Fatalf("checkPending %v: %v, want ErrShareDLQNotPending", bad, err)
			}
		}
		// Lock expiry at the limit is pending too.
		p.acquire("m", 1000, 1, 10)
		if !p.expire(2000, 1) || p.Ranges[len(p.Ranges)-1].State != RangeDLQPending {
			t.Fatalf("after an expiry at the limit: %+v", p)
		}
	}
}

// TestDLQRejectionKept: a reject that carries the target's answer keeps it (bounded
// to catalog.MaxRejectionBody bytes of valid UTF-8) with the pending records, through
// the stored form; records rejected by different answers stay apart; archiving them
// drops it.
func TestDLQRejectionKept(t *testing.T) {
	p := SharePart{DLQ: true}
	p.acquire("m", 1000, 4, 10)
	long := strings.Repeat("é", catalog.MaxRejectionBody) // 2 bytes each: cut mid-character
	err := p.ack("m", 0, []catalog.AckBatch{
		{First: 0, Last: 1, Types: []int8{catalog.AckReject}, Rejection: &catalog.ShareRejection{Status: 422, Body: "bad order"}},
		{First: 2, Last: 2, Types: []int8{catalog.AckReject}, Rejection: &catalog.ShareRejection{Status: 400, Body: long}},
		{First: 3, Last: 3, Types: []int8{catalog.AckReject}},
	}, time.Second, 5)
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodeSharePart(p.Start, p.Encode())
	if err != nil || len(q.Ranges) != 3 {
		t.Fatalf("after the rejects: %+v %v, want three pending ranges", q.Ranges, err)
	}
	if r := q.Ranges[0]; r.First != 0 || r.Last != 1 || r.Status != 422 || r.Body != "bad order" {
		t.Fatalf("range 0: %+v, want 0-1 with 422 and its body", r)
	}
	if r := q.Ranges[1]; r.Status != 400 || len(r.Body) > catalog.MaxRejectionBody || !utf8.ValidString(r.Body) || !strings.HasPrefix(long, r.Body) || len(r.Body) < catalog.MaxRejectionBody-1 {
		t.Fatalf("range 1: status %d, body of %d bytes (valid %v): want 400 and a prefix of at most %d valid bytes",
			r.Status, len(r.Body), utf8.ValidString(r.Body), catalog.MaxRejectionBody)
	}
	if r := q.Ranges[2]; r.Status != 0 || r.Body != "" {
		t.Fatalf("range 2 (no answer given): %+v", r)
	}
	q.normalize()
	for i := range q.Ranges {
		q.Ranges[i].State = RangeArchived
	}
	q.normalize()
	if q.Start != 4 || len(q.Ranges) != 0 {
		t.Fatalf("archived: %+v", q)
	}
}
