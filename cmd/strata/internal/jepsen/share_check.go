package jepsen

import (
	"fmt"
	"sort"
)

// The share-group workload's anomalies (share.go).
const (
	// ShareAcceptedTwice: two acceptances of one record were both answered ok.
	ShareAcceptedTwice Kind = "share_accepted_twice"
	// ShareRedelivered: a record was delivered again after an acceptance of an
	// earlier delivery was answered ok.
	ShareRedelivered Kind = "share_redelivered_after_accept"
	// ShareHeldTwice: one record was handed out twice with one delivery count — two
	// members held it at once.
	ShareHeldTwice Kind = "share_held_twice"
	// ShareOverLimit: a delivery count outside 1 to share.delivery.count.limit.
	ShareOverLimit Kind = "share_over_delivery_limit"
	// ShareNotAccepted: after the group was drained, a record of the topic was never
	// accepted, although it was delivered fewer times than the limit.
	ShareNotAccepted Kind = "share_never_accepted"
	// ShareNotDrained: the final member could not drain the share group after healing
	// (or read its dead-letter topic once nothing was pending).
	ShareNotDrained Kind = "share_not_drained"
	// ShareDLQDuplicate: the dead-letter topic holds two copies of one record.
	ShareDLQDuplicate Kind = "share_dead_letter_duplicate"
	// ShareDLQMissing: a record whose rejection was answered ok has no copy in the
	// dead-letter topic.
	ShareDLQMissing Kind = "share_dead_letter_missing"
	// ShareDLQAccepted: the dead-letter topic holds a copy of a record whose
	// acceptance was answered ok.
	ShareDLQAccepted Kind = "share_dead_lettered_and_accepted"
)

// checkShares checks the share-group workload against the history alone: the
// deliveries, their acknowledgements' answers and the final read (v).
func checkShares(r *Report, h *History, v *seen) {
	if h.ShareGroup == "" {
		return
	}
	by := sharesByRecord(h.Shares)
	dlq := checkDLQ(r, h, v, by)
	keys := make([]pos, 0, len(by))
	for p := range by {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].partition != keys[j].partition {
			return keys[i].partition < keys[j].partition
		}
		return keys[i].offset < keys[j].offset
	})
	for _, p := range keys {
		ds := by[p]
		r.ShareDeliveries += len(ds)
		held := map[int]*ShareDelivery{}
		var accepted *ShareDelivery
		for _, d := range ds {
			if d.DeliveryCount < 1 || d.DeliveryCount > h.ShareLimit {
				r.add(Anomaly{ShareOverLimit, p.partition, p.offset, d.Value, fmt.Sprintf("delivery count %d to %s (limit %d)", d.DeliveryCount, d.Member, h.ShareLimit)})
			}
			if o, dup := held[d.DeliveryCount]; dup {
				r.add(Anomaly{ShareHeldTwice, p.partition, p.offset, d.Value, fmt.Sprintf("delivery %d to %s and to %s", d.DeliveryCount, o.Member, d.Member)})
			}
			held[d.DeliveryCount] = d
			if was, ok := v.at[p]; ok && was != d.Value {
				r.add(Anomaly{Inconsistent, p.partition, p.offset, d.Value, fmt.Sprintf("delivered to share member %s; read as %q", d.Member, was)})
			}
			if d.Action != ShareAccept || d.Outcome != OK {
				continue
			}
			if accepted != nil {
				r.add(Anomaly{ShareAcceptedTwice, p.partition, p.offset, d.Value, fmt.Sprintf("accepted by %s (delivery %d) and by %s (delivery %d)", accepted.Member, accepted.DeliveryCount, d.Member, d.DeliveryCount)})
			}
			if accepted == nil || d.DeliveryCount < accepted.DeliveryCount {
				accepted = d
			}
		}
		if accepted != nil {
			r.ShareAccepted++
			for _, d := range ds {
				if d.DeliveryCount > accepted.DeliveryCount {
					r.add(Anomaly{ShareRedelivered, p.partition, p.offset, d.Value, fmt.Sprintf("delivery %d to %s after %s's acceptance of delivery %d", d.DeliveryCount, d.Member, accepted.Member, accepted.DeliveryCount)})
				}
			}
		}
	}
	if !h.ShareDrained {
		r.add(Anomaly{Kind: ShareNotDrained, Detail: "the final member did not drain the share group after healing"})
		return
	}
	// Every record the final read saw was accepted — or might have been (an answer
	// lost, a Kafka member's) — unless it was delivered up to the limit.
	for i := range h.Reads {
		rd := &h.Reads[i]
		if rd.Mode != ReadFinal {
			continue
		}
		for _, rec := range rd.Records {
			p := pos{rd.Partition, rec.Offset}
			maxCount, maybe := 0, dlq[p] > 0
			for _, d := range by[p] {
				maxCount = max(maxCount, d.DeliveryCount)
				maybe = maybe || (d.Action != ShareRelease && d.Outcome != Failed)
			}
			if !maybe && maxCount < h.ShareLimit {
				r.add(Anomaly{ShareNotAccepted, p.partition, p.offset, rec.Value, fmt.Sprintf("delivered %d times, never accepted", maxCount)})
			}
		}
	}
}

// checkDLQ checks the dead-letter topic's copies against the deliveries: one copy
// per record at most, one for every rejection answered ok, none of a record whose
// acceptance was answered ok, each with the record's value. It answers the copies
// per original record.
func checkDLQ(r *Report, h *History, v *seen, by map[pos][]*ShareDelivery) map[pos]int {
	copies := map[pos]int{}
	if h.ShareDLQTopic == "" || !h.ShareDrained {
		return copies
	}
	if !h.ShareDLQRead {
		r.add(Anomaly{Kind: ShareNotDrained, Detail: "the dead-letter topic " + h.ShareDLQTopic + " was not read after the group drained"})
		return copies
	}
	for _, c := range h.ShareDLQ {
		p := pos{c.Partition, c.Orig}
		copies[p]++
		r.ShareDeadLettered++
		if copies[p] == 2 {
			r.add(Anomaly{ShareDLQDuplicate, p.partition, p.offset, c.Value, fmt.Sprintf("copied again at dead-letter offset %d (%s)", c.Offset, c.Reason)})
		}
		if was, ok := v.at[p]; ok && was != c.Value {
			r.add(Anomaly{Inconsistent, p.partition, p.offset, c.Value, fmt.Sprintf("dead-letter copy at %d; read as %q", c.Offset, was)})
		}
		for _, d := range by[p] {
			if d.Action == ShareAccept && d.Outcome == OK {
				r.add(Anomaly{ShareDLQAccepted, p.partition, p.offset, c.Value, fmt.Sprintf("dead-lettered (%s) after %s's acceptance of delivery %d", c.Reason, d.Member, d.DeliveryCount)})
				break
			}
		}
	}
	for p, ds := range by {
		for _, d := range ds {
			if d.Action == ShareReject && d.Outcome == OK && copies[p] == 0 {
				r.add(Anomaly{ShareDLQMissing, p.partition, p.offset, d.Value, fmt.Sprintf("rejected by %s (delivery %d), no dead-letter copy", d.Member, d.DeliveryCount)})
				break
			}
		}
	}
	return copies
}
