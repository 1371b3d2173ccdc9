package jepsen

import (
	"fmt"
	"testing"
	"time"
)

// txnHist builds a transactional history over an input partition 0 holding in0..in3
// (offsets 0-3) and the output topic "out".
type txnHist struct{ *hist }

func newTxnHist() *txnHist {
	b := &txnHist{newHist()}
	b.h.TxnTopic, b.h.TxnGroup = "out", "tg"
	b.send("in0", 0, OK, 0).send("in1", 0, OK, 1).send("in2", 0, OK, 2).send("in3", 0, OK, 3)
	b.final(0, "in0", "in1", "in2", "in3")
	b.final(1)
	return b
}

// out is the output value of label's transaction for input offset o.
func out(label string, o int64) string { return fmt.Sprintf("%s|0|%d|in%d", label, o, o) }

// txn records a transaction of label consuming input offsets from..to of partition 0,
// one output each, on output partition 0.
func (b *txnHist) txn(label string, outcome Outcome, from, to int64) *txnHist {
	t := Txn{Transactor: "t0", Label: label, Outcome: outcome, Start: time.Now(), End: time.Now()}
	var polled []string
	for o := from; o <= to; o++ {
		polled = append(polled, fmt.Sprintf("in%d", o))
	}
	b.gread("tg", 0, from, polled...) // the transactor's poll
	for o := from; o <= to; o++ {
		t.Inputs = append(t.Inputs, TxnInput{Partition: 0, Offset: o})
		t.Outputs = append(t.Outputs, TxnOutput{Partition: 0, Value: out(label, o)})
	}
	b.h.AddTxn(t)
	return b
}

// outRead records a read of the output topic's partition 0 returning values at offsets
// from first (mode ReadFinal for the final read).
func (b *txnHist) outRead(mode string, first int64, values ...string) *txnHist {
	rd := Read{Consumer: "r", Mode: mode, Topic: "out", Partition: 0, From: first, Next: first + int64(len(values)), At: time.Now()}
	for i, v := range values {
		rd.Records = append(rd.Records, ReadRecord{Offset: first + int64(i), Value: v})
	}
	b.h.AddTxnRead(rd)
	return b
}

func (b *txnHist) done(committed int64) *txnHist {
	b.h.AddTxnFinal(FinalState{Topic: "out", Partition: 0, HWM: 100, Complete: true})
	b.group("tg", true, map[int32]int64{0: committed})
	return b
}

// TestCheckTxns: each transactional anomaly is found, and a clean history has none.
func TestCheckTxns(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *txnHist
		want map[Kind]int
	}{
		{"clean", newTxnHist().txn("a", OK, 0, 1).txn("b", Aborted, 2, 3).txn("c", OK, 2, 3).
			outRead(ReadAssign, 0, out("a", 0)).outRead(ReadFinal, 0, out("a", 0), out("a", 1), out("c", 2), out("c", 3)).done(4), nil},
		{"unknown outcome, committed", newTxnHist().txn("a", Unknown, 0, 1).
			outRead(ReadFinal, 0, out("a", 0), out("a", 1)).done(2), nil},
		{"unknown outcome, aborted", newTxnHist().txn("a", Unknown, 0, 1).txn("b", OK, 0, 1).
			outRead(ReadFinal, 0, out("b", 0), out("b", 1)).done(2), nil},
		{"aborted read during the run", newTxnHist().txn("a", Aborted, 0, 1).txn("b", OK, 0, 1).
			outRead(ReadAssign, 0, out("a", 0)).outRead(ReadFinal, 0, out("b", 0), out("b", 1)).done(2),
			map[Kind]int{TxnAbortedRead: 1}},
		{"phantom output", newTxnHist().txn("a", OK, 0, 0).
			outRead(ReadFinal, 0, out("a", 0), out("zz", 1)).done(1), map[Kind]int{TxnAbortedRead: 1}},
		{"torn", newTxnHist().txn("a", OK, 0, 1).outRead(ReadFinal, 0, out("a", 0)).done(2),
			map[Kind]int{TxnTorn: 1, TxnOffsetsWithoutOutputs: 1}},
		{"lost", newTxnHist().txn("a", OK, 0, 1).outRead(ReadFinal, 0).done(2),
			map[Kind]int{TxnLost: 1, TxnOffsetsWithoutOutputs: 1}},
		{"duplicate", newTxnHist().txn("a", OK, 0, 1).txn("b", Unknown, 1, 1).
			outRead(ReadFinal, 0, out("a", 0), out("a", 1), out("b", 1)).done(2), map[Kind]int{TxnDuplicate: 1}},
		{"outputs without the offset commit", newTxnHist().txn("a", OK, 0, 1).
			outRead(ReadFinal, 0, out("a", 0), out("a", 1)).done(1), map[Kind]int{TxnTorn: 1}},
		{"incomplete final read", func() *txnHist {
			b := newTxnHist().txn("a", OK, 0, 0).outRead(ReadFinal, 0, out("a", 0))
			b.h.AddTxnFinal(FinalState{Topic: "out", Partition: 0, HWM: 5, Err: "stuck"})
			b.group("tg", true, map[int32]int64{0: 1})
			return b
		}(), map[Kind]int{FinalIncomplete: 1}},
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
