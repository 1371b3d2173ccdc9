package jepsen

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Kind names one class of anomaly the checker reports. Every kind but the counters of
// Report is a broken promise of the log.
type Kind string

const (
	// Lost: a produce was acknowledged and its record was never read, by anyone.
	Lost Kind = "lost"
	// Unseen: a record acknowledged, or read during the run, is missing from the final
	// catch-up read.
	Unseen Kind = "unseen_after_final"
	// Inconsistent: one offset holds two values (two reads disagree, an
	// acknowledgement names an offset that holds another value, two acknowledgements
	// name one offset, or a value was read at another offset than acknowledged).
	Inconsistent Kind = "inconsistent_offset"
	// Duplicate: one value was read at two offsets. With idempotence on this breaks
	// exactly-once; without it, this workload never resends a value, so it breaks the
	// writer's own promise not to commit a flush twice.
	Duplicate Kind = "duplicate"
	// Nonmonotonic: a poll returned offsets out of order, or a next offset before its
	// last record.
	Nonmonotonic Kind = "nonmonotonic_read"
	// Skipping: a poll started after the offset asked for, left a gap between records,
	// or answered a next offset beyond its last record + 1.
	Skipping Kind = "skipping_read"
	// RefusedVisible: a record whose produce was refused (definitely not written) was
	// read.
	RefusedVisible Kind = "refused_but_visible"
	// Phantom: a value was read that no producer ever sent.
	Phantom Kind = "phantom"
	// FinalIncomplete: the final read could not read a partition to its high
	// watermark after every fault was healed.
	FinalIncomplete Kind = "final_incomplete"
	// GroupRegressed: a group's committed offset moved backwards (the workload never
	// seeks).
	GroupRegressed Kind = "group_offset_regressed"
	// GroupBeyondHWM: a group's committed offset is above the partition's high
	// watermark.
	GroupBeyondHWM Kind = "group_offset_beyond_hwm"
	// GroupSkipped: an offset below the group's final committed offset was never
	// handed to any member of the group (at-least-once broken).
	GroupSkipped Kind = "group_skipped"
)

// Kinds lists every anomaly kind, in report order.
var Kinds = []Kind{Lost, Unseen, Inconsistent, Duplicate, Nonmonotonic, Skipping, RefusedVisible, Phantom,
	FinalIncomplete, GroupRegressed, GroupBeyondHWM, GroupSkipped,
	TxnAbortedRead, TxnTorn, TxnLost, TxnDuplicate, TxnOffsetsWithoutOutputs,
	ShareAcceptedTwice, ShareRedelivered, ShareHeldTwice, ShareOverLimit, ShareNotAccepted, ShareNotDrained,
	ShareDLQDuplicate, ShareDLQMissing, ShareDLQAccepted}

// Anomaly is one finding.
type Anomaly struct {
	Kind      Kind
	Partition int32
	Offset    int64
	Value     string
	Detail    string
}

func (a Anomaly) String() string {
	return fmt.Sprintf("%s: partition %d offset %d value %q: %s", a.Kind, a.Partition, a.Offset, a.Value, a.Detail)
}

// Report is what the checker found.
type Report struct {
	// Records produced, by outcome (one request may carry several records).
	OK, Failed, Unknown int
	// UnknownSeen is how many unknown records turned out written (read somewhere).
	UnknownSeen int
	// IdempotentRecords is how many records were sent by idempotent producers.
	IdempotentRecords int
	// DuplicatesIdempotent counts the Duplicate anomalies of idempotent producers'
	// values.
	DuplicatesIdempotent int
	// Polls and FailedPolls count reads; RecordsRead the records they returned.
	Polls, FailedPolls, RecordsRead int
	// GroupBatches counts batches handed to group members.
	GroupBatches int
	// Transactions of the transactional workload, by outcome.
	TxnCommitted, TxnAborted, TxnUnknown int
	// ShareDeliveries counts the share-group workload's deliveries; ShareAccepted
	// the records whose acceptance was answered ok.
	ShareDeliveries, ShareAccepted int
	// ShareDeadLettered counts the copies in the share group's dead-letter topic.
	ShareDeadLettered int
	// Counts per kind; Examples keeps the first few of each.
	Counts   map[Kind]int
	Examples map[Kind][]Anomaly
}

// maxExamples bounds the anomalies kept per kind.
const maxExamples = 10

func (r *Report) add(a Anomaly) {
	r.Counts[a.Kind]++
	if len(r.Examples[a.Kind]) < maxExamples {
		r.Examples[a.Kind] = append(r.Examples[a.Kind], a)
	}
}

// Valid reports whether no anomaly was found.
func (r *Report) Valid() bool {
	for _, n := range r.Counts {
		if n > 0 {
			return false
		}
	}
	return true
}

// Anomalies returns every kept example, in report order.
func (r *Report) Anomalies() []Anomaly {
	var out []Anomaly
	for _, k := range Kinds {
		out = append(out, r.Examples[k]...)
	}
	return out
}

// Summary is one line: the counts that matter.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "records ok=%d failed=%d unknown=%d (unknown seen %d); polls=%d failed=%d read=%d;",
		r.OK, r.Failed, r.Unknown, r.UnknownSeen, r.Polls, r.FailedPolls, r.RecordsRead)
	if r.TxnCommitted+r.TxnAborted+r.TxnUnknown > 0 {
		fmt.Fprintf(&b, " transactions committed=%d aborted=%d unknown=%d;", r.TxnCommitted, r.TxnAborted, r.TxnUnknown)
	}
	for _, k := range Kinds {
		fmt.Fprintf(&b, " %s=%d", k, r.Counts[k])
	}
	return b.String()
}

// WriteText writes the report for a person: the counts, then the examples.
func (r *Report) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "records\tok %d\tfailed %d\tunknown %d\t(unknown later seen: %d; idempotent: %d)\n",
		r.OK, r.Failed, r.Unknown, r.UnknownSeen, r.IdempotentRecords)
	fmt.Fprintf(tw, "polls\t%d\tfailed %d\trecords %d\t(group batches: %d)\n", r.Polls, r.FailedPolls, r.RecordsRead, r.GroupBatches)
	if r.TxnCommitted+r.TxnAborted+r.TxnUnknown > 0 {
		fmt.Fprintf(tw, "transactions\tcommitted %d\taborted %d\tunknown %d\n", r.TxnCommitted, r.TxnAborted, r.TxnUnknown)
	}
	for _, k := range Kinds {
		extra := ""
		if k == Duplicate {
			extra = fmt.Sprintf("\t(idempotent: %d)", r.DuplicatesIdempotent)
		}
		fmt.Fprintf(tw, "%s\t%d%s\n", k, r.Counts[k], extra)
	}
	tw.Flush()
	for _, a := range r.Anomalies() {
		fmt.Fprintf(w, "  %s\n", a)
	}
}

type pos struct {
	partition int32
	offset    int64
}

// Check checks a history. It needs no knowledge of the faults: every rule holds
// whatever happened.
func Check(h *History) *Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &Report{Counts: map[Kind]int{}, Examples: map[Kind][]Anomaly{}}
	sends, acked := checkSends(r, h)
	v := checkReads(r, h)
	checkValues(r, v, sends, acked)
	checkFinal(r, h, v)
	checkGroups(r, h)
	checkTxns(r, h, v)
	checkShares(r, h, v)
	return r
}

// seen is what the reads of a history saw.
type seen struct {
	at     map[pos]string          // the value at each offset
	where  map[string]map[pos]bool // every offset of each value
	final  map[string]bool         // the values the final read held
	during map[string]pos          // where each value was first read during the run
}

// checkSends counts the sends by outcome and indexes them by value and by acknowledged
// offset: two acknowledged at one offset are inconsistent.
func checkSends(r *Report, h *History) (sends map[string]*Send, acked map[pos]*Send) {
	sends = make(map[string]*Send, len(h.Sends))
	acked = make(map[pos]*Send)
	for i := range h.Sends {
		s := &h.Sends[i]
		sends[s.Value] = s
		if s.Idempotent {
			r.IdempotentRecords++
		}
		switch s.Outcome {
		case OK:
			r.OK++
			p := pos{s.Partition, s.Offset}
			if o, dup := acked[p]; dup {
				r.add(Anomaly{Inconsistent, s.Partition, s.Offset, s.Value,
					fmt.Sprintf("acknowledged at the offset already acknowledged for %q", o.Value)})
			} else {
				acked[p] = s
			}
		case Failed:
			r.Failed++
		default:
			r.Unknown++
		}
	}
	return sends, acked
}

// checkReads gathers what every read saw: the value at each offset, every offset of
// each value; two values read at one offset are inconsistent.
func checkReads(r *Report, h *History) *seen {
	v := &seen{at: map[pos]string{}, where: map[string]map[pos]bool{}, final: map[string]bool{}, during: map[string]pos{}}
	for i := range h.Reads {
		rd := &h.Reads[i]
		r.Polls++
		if rd.Mode == ReadGroup {
			r.GroupBatches++
		}
		if rd.Err != "" {
			r.FailedPolls++
			continue
		}
		r.RecordsRead += len(rd.Records)
		checkPoll(r, rd)
		for _, rec := range rd.Records {
			p := pos{rd.Partition, rec.Offset}
			if was, ok := v.at[p]; !ok {
				v.at[p] = rec.Value
			} else if was != rec.Value {
				r.add(Anomaly{Inconsistent, rd.Partition, rec.Offset, rec.Value,
					fmt.Sprintf("read as %q by an earlier poll (%s %s)", was, rd.Mode, rd.Consumer)})
				v.at[p] = rec.Value // report each disagreement once per change
			}
			if v.where[rec.Value] == nil {
				v.where[rec.Value] = make(map[pos]bool, 1)
			}
			v.where[rec.Value][p] = true
			if rd.Mode == ReadFinal {
				v.final[rec.Value] = true
			} else if _, ok := v.during[rec.Value]; !ok {
				v.during[rec.Value] = p
			}
		}
	}
	return v
}

// checkValues checks each value read: read at one place, the place acknowledged, sent
// by someone; and each acknowledged offset against what was read there.
func checkValues(r *Report, v *seen, sends map[string]*Send, acked map[pos]*Send) {
	values := make([]string, 0, len(v.where))
	for val := range v.where {
		values = append(values, val)
	}
	sort.Strings(values)
	for _, val := range values {
		ps := v.where[val]
		s := sends[val]
		first := firstPos(ps)
		if s == nil {
			r.add(Anomaly{Phantom, first.partition, first.offset, val, "no producer sent this value"})
			continue
		}
		if len(ps) > 1 {
			r.add(Anomaly{Duplicate, first.partition, first.offset, val, fmt.Sprintf("read at %d offsets: %s", len(ps), posList(ps))})
			if s.Idempotent {
				r.DuplicatesIdempotent++
			}
		}
		switch s.Outcome {
		case Failed:
			r.add(Anomaly{RefusedVisible, first.partition, first.offset, val, "produce refused (" + s.Err + ") but the record was read"})
		case OK:
			if !ps[pos{s.Partition, s.Offset}] {
				r.add(Anomaly{Inconsistent, s.Partition, s.Offset, val, fmt.Sprintf("acknowledged at this offset, read at %s", posList(ps))})
			}
		default:
			r.UnknownSeen++
		}
	}
	for p, s := range acked {
		if val, ok := v.at[p]; ok && val != s.Value && len(v.where[s.Value]) == 0 {
			r.add(Anomaly{Inconsistent, p.partition, p.offset, s.Value, fmt.Sprintf("acknowledged here, but the offset holds %q", val)})
		}
	}
}

// checkFinal checks the final read: complete, and holding everything acknowledged or
// seen; and that nothing acknowledged went unread.
func checkFinal(r *Report, h *History, v *seen) {
	complete := make(map[int32]bool)
	for _, f := range h.Final {
		complete[f.Partition] = f.Complete
		if !f.Complete {
			r.add(Anomaly{FinalIncomplete, f.Partition, f.HWM, "", "the final read did not reach the high watermark: " + f.Err})
		}
	}
	for i := range h.Sends {
		s := &h.Sends[i]
		if s.Outcome != OK {
			continue
		}
		if len(v.where[s.Value]) == 0 {
			r.add(Anomaly{Lost, s.Partition, s.Offset, s.Value, "acknowledged, never read"})
		}
	}
	if len(h.Final) == 0 {
		return
	}
	missing := make(map[string]pos)
	for i := range h.Sends {
		s := &h.Sends[i]
		if s.Outcome == OK && !v.final[s.Value] {
			missing[s.Value] = pos{s.Partition, s.Offset}
		}
	}
	for val, p := range v.during {
		if !v.final[val] {
			missing[val] = p
		}
	}
	for _, val := range sortedKeys(missing) {
		p := missing[val]
		if c, ok := complete[p.partition]; ok && !c {
			continue // reported as final_incomplete
		}
		r.add(Anomaly{Unseen, p.partition, p.offset, val, "not in the final read"})
	}
}

// checkPoll checks one poll: offsets dense from the one asked for, and a next offset
// right after the last record.
func checkPoll(r *Report, rd *Read) {
	prev := rd.From - 1
	top := prev
	for i, rec := range rd.Records {
		switch {
		case i == 0 && rd.From < 0:
			// A group batch: its start is the member's business.
		case rec.Offset <= prev:
			r.add(Anomaly{Nonmonotonic, rd.Partition, rec.Offset, rec.Value,
				fmt.Sprintf("%s poll by %s from %d: offset %d after %d", rd.Mode, rd.Consumer, rd.From, rec.Offset, prev)})
		case rec.Offset > prev+1:
			r.add(Anomaly{Skipping, rd.Partition, rec.Offset, rec.Value,
				fmt.Sprintf("%s poll by %s from %d: offset %d after %d (skipped %d)", rd.Mode, rd.Consumer, rd.From, rec.Offset, prev, rec.Offset-prev-1)})
		}
		prev = rec.Offset
		top = max(top, rec.Offset)
	}
	if len(rd.Records) == 0 {
		if rd.From >= 0 && rd.Next < rd.From {
			r.add(Anomaly{Nonmonotonic, rd.Partition, rd.Next, "", fmt.Sprintf("%s poll by %s from %d answered next offset %d", rd.Mode, rd.Consumer, rd.From, rd.Next)})
		}
		return
	}
	switch {
	case rd.Next < top+1:
		r.add(Anomaly{Nonmonotonic, rd.Partition, rd.Next, "", fmt.Sprintf("%s poll by %s: next offset %d, highest record %d", rd.Mode, rd.Consumer, rd.Next, top)})
	case rd.Next > top+1:
		r.add(Anomaly{Skipping, rd.Partition, rd.Next, "", fmt.Sprintf("%s poll by %s: next offset %d, highest record %d", rd.Mode, rd.Consumer, rd.Next, top)})
	}
}

// checkGroups checks the groups' committed offsets: never backwards, never beyond the
// high watermark, and every offset below the final one handed to some member.
func checkGroups(r *Report, h *History) {
	hwm := make(map[int32]int64)
	logStart := make(map[int32]int64)
	for _, f := range h.Final {
		hwm[f.Partition] = f.HWM
		logStart[f.Partition] = f.LogStart
	}
	type gp struct {
		group     string
		partition int32
	}
	last := make(map[gp]int64)
	finalOff := make(map[gp]int64)
	obs := append([]GroupOffsets(nil), h.Groups...)
	sort.SliceStable(obs, func(i, j int) bool { return obs[i].At.Before(obs[j].At) })
	for _, g := range obs {
		for p, off := range g.Offsets {
			k := gp{g.Group, p}
			if prev, ok := last[k]; ok && off < prev {
				r.add(Anomaly{GroupRegressed, p, off, "", fmt.Sprintf("group %s: committed offset %d after %d", g.Group, off, prev)})
			}
			last[k] = off
			if g.Final {
				finalOff[k] = off
				if w, ok := hwm[p]; ok && off > w {
					r.add(Anomaly{GroupBeyondHWM, p, off, "", fmt.Sprintf("group %s: committed offset %d, high watermark %d", g.Group, off, w)})
				}
			}
		}
	}
	delivered := make(map[gp]map[int64]bool)
	for i := range h.Reads {
		rd := &h.Reads[i]
		if rd.Mode != ReadGroup || rd.Err != "" {
			continue
		}
		k := gp{rd.Group, rd.Partition}
		if delivered[k] == nil {
			delivered[k] = make(map[int64]bool)
		}
		for _, rec := range rd.Records {
			delivered[k][rec.Offset] = true
		}
	}
	keys := make([]gp, 0, len(finalOff))
	for k := range finalOff {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return keys[i].partition < keys[j].partition
	})
	for _, k := range keys {
		off := finalOff[k]
		n, first := 0, int64(-1)
		for o := logStart[k.partition]; o < off; o++ {
			if !delivered[k][o] {
				if n == 0 {
					first = o
				}
				n++
			}
		}
		if n > 0 {
			r.add(Anomaly{GroupSkipped, k.partition, first, "", fmt.Sprintf("group %s: %d offsets below its committed offset %d were never handed to a member (first %d)", k.group, n, off, first)})
		}
	}
}

func firstPos(ps map[pos]bool) pos {
	first := pos{offset: -1}
	for p := range ps {
		if first.offset < 0 || p.partition < first.partition || p.partition == first.partition && p.offset < first.offset {
			first = p
		}
	}
	return first
}

func posList(ps map[pos]bool) string {
	l := make([]pos, 0, len(ps))
	for p := range ps {
		l = append(l, p)
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].partition != l[j].partition {
			return l[i].partition < l[j].partition
		}
		return l[i].offset < l[j].offset
	})
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = fmt.Sprintf("%d/%d", p.partition, p.offset)
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
