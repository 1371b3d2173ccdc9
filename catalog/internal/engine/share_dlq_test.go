package engine

import (
	"errors"
	"testing"
	"time"

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
