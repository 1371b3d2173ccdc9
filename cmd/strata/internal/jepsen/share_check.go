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
	// ShareNotDrained: the final member could not drain the group after healing.
	ShareNotDrained Kind = "share_not_drained"
)

// checkShares checks the share-group workload against the history alone: the
// deliveries, their acknowledgements' answers and the final read (v).
func checkShares(r *Report, h *History, v *seen) {
	if h.ShareGroup == "" {
		return
	}
	by := sharesByRecord(h.Shares)
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
			maxCount, maybe := 0, false
			for _, d := range by[p] {
				maxCount = max(maxCount, d.DeliveryCount)
				maybe = maybe || (d.Action == ShareAccept && d.Outcome != Failed)
			}
			if !maybe && maxCount < h.ShareLimit {
				r.add(Anomaly{ShareNotAccepted, p.partition, p.offset, rec.Value, fmt.Sprintf("delivered %d times, never accepted", maxCount)})
			}
		}
	}
}
