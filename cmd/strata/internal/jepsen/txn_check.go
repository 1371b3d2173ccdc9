package jepsen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The transactional workload's anomalies (txn.go). Every one breaks Kafka's
// exactly-once promise for consume-transform-produce.
const (
	// TxnAbortedRead: a read_committed read returned an output of a transaction the
	// client aborted, or one no transaction produced.
	TxnAbortedRead Kind = "txn_aborted_read"
	// TxnTorn: the final read_committed read holds part of a transaction's outputs and
	// not the rest; or an output whose input offset the group never committed (the
	// outputs and the offsets were not one decision).
	TxnTorn Kind = "txn_torn"
	// TxnLost: a transaction whose commit was answered has none of its outputs in the
	// final read.
	TxnLost Kind = "txn_lost"
	// TxnDuplicate: one input's output is in the final read more than once.
	TxnDuplicate Kind = "txn_duplicate_output"
	// TxnOffsetsWithoutOutputs: an input offset below the group's final committed
	// offset has no output in the final read.
	TxnOffsetsWithoutOutputs Kind = "txn_offsets_without_outputs"
)

// txnOutput is an output value taken apart.
type txnOutput struct {
	label string
	input pos
}

func parseOutput(v string) (txnOutput, bool) {
	f := strings.SplitN(v, txnSep, 4)
	if len(f) != 4 {
		return txnOutput{}, false
	}
	p, err1 := strconv.ParseInt(f[1], 10, 32)
	o, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return txnOutput{}, false
	}
	return txnOutput{label: f[0], input: pos{int32(p), o}}, true
}

// checkTxns checks the transactional workload: what read_committed readers saw of the
// output topic against each transaction's outcome, and the final read against the
// group's committed offsets on the input topic (v: what the input's reads saw).
func checkTxns(r *Report, h *History, v *seen) {
	if h.TxnTopic == "" {
		return
	}
	txns := make(map[string]*Txn, len(h.Txns))
	outputs := make(map[string]bool)
	for i := range h.Txns {
		t := &h.Txns[i]
		txns[t.Label] = t
		for _, o := range t.Outputs {
			outputs[o.Value] = true
		}
		switch t.Outcome {
		case OK:
			r.TxnCommitted++
		case Aborted:
			r.TxnAborted++
		default:
			r.TxnUnknown++
		}
	}
	for _, f := range h.TxnFinal {
		if !f.Complete {
			r.add(Anomaly{FinalIncomplete, f.Partition, f.HWM, "", "the final read of the output topic " + h.TxnTopic + " did not reach its high watermark: " + f.Err})
		}
	}
	// Every read_committed read: nothing aborted, nothing made up. The final read's
	// outputs, by transaction and by input, with where they were read.
	visible := make(map[string]map[string]bool) // label: output values in the final read
	byInput := make(map[pos]map[pos]string)     // input: output positions (partition/offset of the output topic) and values
	for i := range h.TxnReads {
		rd := &h.TxnReads[i]
		if rd.Err != "" {
			continue
		}
		for _, rec := range rd.Records {
			out, ok := parseOutput(rec.Value)
			t := txns[out.label]
			switch {
			case !ok || t == nil || !outputs[rec.Value]:
				r.add(Anomaly{TxnAbortedRead, rd.Partition, rec.Offset, rec.Value, fmt.Sprintf("%s read of %s: no transaction produced this", rd.Mode, h.TxnTopic)})
				continue
			case t.Outcome == Aborted:
				r.add(Anomaly{TxnAbortedRead, rd.Partition, rec.Offset, rec.Value, fmt.Sprintf("%s read of %s: transaction %s was aborted", rd.Mode, h.TxnTopic, t.Label)})
			}
			if rd.Mode != ReadFinal {
				continue
			}
			if visible[t.Label] == nil {
				visible[t.Label] = make(map[string]bool)
			}
			visible[t.Label][rec.Value] = true
			if byInput[out.input] == nil {
				byInput[out.input] = make(map[pos]string)
			}
			byInput[out.input][pos{rd.Partition, rec.Offset}] = rec.Value
		}
	}
	if len(h.TxnFinal) == 0 {
		return
	}
	for _, label := range sortedKeys(txns) {
		t := txns[label]
		n := len(visible[label])
		switch {
		case n == 0 && t.Outcome == OK:
			r.add(Anomaly{TxnLost, -1, -1, label, fmt.Sprintf("committed (%d outputs), none in the final read", len(t.Outputs))})
		case n > 0 && n < len(t.Outputs):
			r.add(Anomaly{TxnTorn, -1, -1, label, fmt.Sprintf("%s: %d of its %d outputs in the final read", t.Outcome, n, len(t.Outputs))})
		}
	}
	inputs := make([]pos, 0, len(byInput))
	for in := range byInput {
		inputs = append(inputs, in)
	}
	sort.Slice(inputs, func(i, j int) bool { return less(inputs[i], inputs[j]) })
	for _, in := range inputs {
		if outs := byInput[in]; len(outs) > 1 {
			r.add(Anomaly{TxnDuplicate, in.partition, in.offset, "", fmt.Sprintf("%d outputs of this input in the final read: %s", len(outs), posList(keysOf(outs)))})
		}
	}
	// The group's final committed offsets on the input topic against the outputs.
	committed := make(map[int32]int64)
	observed := false
	for _, g := range h.Groups {
		if g.Group == h.TxnGroup && g.Final {
			observed = true
			for p, off := range g.Offsets {
				committed[p] = off
			}
		}
	}
	if !observed {
		// Never observed (a group that never committed is answered as empty, so this
		// is a failed observation): the offsets cannot be judged.
		if len(inputs) > 0 {
			r.add(Anomaly{FinalIncomplete, -1, -1, "", "the group " + h.TxnGroup + "'s final committed offsets were not read"})
		}
		return
	}
	logStart := make(map[int32]int64)
	for _, f := range h.Final {
		logStart[f.Partition] = f.LogStart
	}
	for _, in := range inputs {
		if in.offset >= committed[in.partition] {
			r.add(Anomaly{TxnTorn, in.partition, in.offset, "", fmt.Sprintf("an output of this input is in the final read, but the group %s committed only up to %d", h.TxnGroup, committed[in.partition])})
		}
	}
	parts := make([]int32, 0, len(committed))
	for p := range committed {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		n, first := 0, int64(-1)
		for o := logStart[p]; o < committed[p]; o++ {
			in := pos{p, o}
			if _, isRecord := v.at[in]; !isRecord || len(byInput[in]) > 0 {
				continue
			}
			if n == 0 {
				first = o
			}
			n++
		}
		if n > 0 {
			r.add(Anomaly{TxnOffsetsWithoutOutputs, p, first, "", fmt.Sprintf("group %s committed up to %d: %d inputs below it have no output in the final read (first %d)", h.TxnGroup, committed[p], n, first)})
		}
	}
}

func less(a, b pos) bool {
	return a.partition < b.partition || a.partition == b.partition && a.offset < b.offset
}

func keysOf(m map[pos]string) map[pos]bool {
	out := make(map[pos]bool, len(m))
	for p := range m {
		out[p] = true
	}
	return out
}
