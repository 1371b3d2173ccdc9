package jepsen

import "testing"

// shareHist builds a share-group history over partition 0 holding v0..v2 (offsets
// 0-2), delivery-count limit 3.
type shareHist struct{ *hist }

func newShareHist() *shareHist {
	b := &shareHist{newHist()}
	b.h.ShareGroup, b.h.ShareLimit, b.h.ShareDrained = "sg", 3, true
	b.send("v0", 0, OK, 0).send("v1", 0, OK, 1).send("v2", 0, OK, 2)
	b.final(0, "v0", "v1", "v2")
	b.final(1)
	return b
}

// d records a delivery of offset o (value vo) to member m with count n, acknowledged
// with action and answered with outcome.
func (b *shareHist) d(m string, o int64, n int, action string, outcome Outcome) *shareHist {
	b.h.AddShares(ShareDelivery{Member: m, Via: ViaHTTP, Partition: 0, Offset: o, Value: "v" + string(rune('0'+o)),
		DeliveryCount: n, Action: action, Outcome: outcome})
	return b
}

// all accepts every record at its first delivery.
func (b *shareHist) all() *shareHist {
	return b.d("a", 0, 1, ShareAccept, OK).d("a", 1, 1, ShareAccept, OK).d("b", 2, 1, ShareAccept, OK)
}

// TestCheckShares: each share-group anomaly is found, and clean histories have none.
func TestCheckShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *shareHist
		want map[Kind]int
	}{
		{"clean", newShareHist().all(), nil},
		{"released, then accepted by another", newShareHist().d("a", 0, 1, ShareRelease, OK).d("b", 0, 2, ShareAccept, OK).
			d("a", 1, 1, ShareAccept, OK).d("a", 2, 1, ShareAccept, OK), nil},
		{"an acceptance refused, delivered again", newShareHist().all().d("b", 0, 2, ShareAccept, OK).
			d("c", 0, 3, ShareAccept, Failed), map[Kind]int{ShareRedelivered: 2, ShareAcceptedTwice: 1}},
		{"an acceptance lost, delivered again", newShareHist().d("a", 0, 1, ShareAccept, Unknown).d("b", 0, 2, ShareAccept, OK).
			d("a", 1, 1, ShareAccept, OK).d("a", 2, 1, ShareAccept, OK), nil},
		{"accepted twice", newShareHist().all().d("b", 1, 2, ShareAccept, OK), map[Kind]int{ShareAcceptedTwice: 1, ShareRedelivered: 1}},
		{"held twice", newShareHist().all().d("b", 0, 1, ShareRelease, Failed), map[Kind]int{ShareHeldTwice: 1}},
		{"over the limit", newShareHist().all().d("a", 0, 4, ShareAccept, Failed), map[Kind]int{ShareOverLimit: 1, ShareRedelivered: 1}},
		{"never accepted", newShareHist().d("a", 0, 1, ShareAccept, OK).d("a", 1, 1, ShareRelease, OK), map[Kind]int{ShareNotAccepted: 2}},
		{"archived at the limit", newShareHist().d("a", 0, 1, ShareAccept, OK).d("a", 1, 1, ShareAccept, OK).
			d("a", 2, 1, ShareRelease, OK).d("a", 2, 2, ShareRelease, OK).d("a", 2, 3, ShareRelease, OK), nil},
		{"not drained", func() *shareHist { b := newShareHist().all(); b.h.ShareDrained = false; return b }(), map[Kind]int{ShareNotDrained: 1}},
		{"redelivered after acceptance", newShareHist().all().d("a", 1, 2, ShareRelease, OK).d("a", 1, 3, ShareRelease, OK), map[Kind]int{ShareRedelivered: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h.h)
			for _, k := range Kinds {
				if r.Counts[k] != tc.want[k] {
					t.Errorf("%s: %d, want %d\n%s", k, r.Counts[k], tc.want[k], r.Summary())
				}
			}
		})
	}
}

// TestCheckSharesValue: a delivery whose value differs from the log's is inconsistent.
func TestCheckSharesValue(t *testing.T) {
	b := newShareHist().all()
	b.h.AddShares(ShareDelivery{Member: "x", Via: ViaKafka, Partition: 0, Offset: 2, Value: "other", DeliveryCount: 2, Action: ShareRelease, Outcome: Unknown})
	r := Check(b.h)
	if r.Counts[Inconsistent] != 1 || r.Counts[ShareRedelivered] != 1 {
		t.Fatalf("%v", r.Counts)
	}
}

// dlq gives the history a dead-letter topic read after the drain, holding copies of
// the offsets of partition 0 given.
func (b *shareHist) dlq(offsets ...int64) *shareHist {
	b.h.ShareDLQTopic, b.h.ShareDLQRead = "dlq.t", true
	for i, o := range offsets {
		b.h.ShareDLQ = append(b.h.ShareDLQ, ShareDLQRecord{Offset: int64(i), Partition: 0, Orig: o, Reason: "rejected", Value: "v" + string(rune('0'+o))})
	}
	return b
}

// TestCheckSharesDLQ: each dead-letter anomaly is found, and a clean history has none.
func TestCheckSharesDLQ(t *testing.T) {
	rejected := func() *shareHist {
		return newShareHist().d("a", 0, 1, ShareAccept, OK).d("a", 1, 1, ShareReject, OK).d("b", 2, 1, ShareAccept, OK)
	}
	for _, tc := range []struct {
		name string
		h    *shareHist
		want map[Kind]int
	}{
		{"clean", rejected().dlq(1), nil},
		{"a rejection whose answer was lost", newShareHist().d("a", 0, 1, ShareAccept, OK).d("a", 1, 1, ShareReject, Unknown).d("b", 2, 1, ShareAccept, OK).dlq(1), nil},
		{"copied twice", rejected().dlq(1, 1), map[Kind]int{ShareDLQDuplicate: 1}},
		{"missing", rejected().dlq(), map[Kind]int{ShareDLQMissing: 1}},
		{"accepted and dead-lettered", rejected().dlq(1, 2), map[Kind]int{ShareDLQAccepted: 1}},
		{"not read", func() *shareHist { b := rejected().dlq(1); b.h.ShareDLQRead = false; return b }(), map[Kind]int{ShareNotDrained: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.h.h)
			for _, k := range Kinds {
				if r.Counts[k] != tc.want[k] {
					t.Errorf("%s: %d, want %d\n%s", k, r.Counts[k], tc.want[k], r.Summary())
				}
			}
		})
	}
}
