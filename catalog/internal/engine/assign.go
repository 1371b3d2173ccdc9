package engine

import (
	"cmp"
	"slices"
	"sort"

	"github.com/strata-io/strata/catalog"
)

// The assignors: which member each partition of a group's subscribed topics should be
// at (the target), computed afresh by every heartbeat that changes the group
// (assignTargets). Deterministic: the answer depends only on the inputs, so two
// backends computing it from the same rows agree.

// assignMember is a member as an assignor sees it.
type assignMember struct {
	ID     string
	Topics []string // sorted
	Lags   []catalog.TaskLag
}

// assign computes targets: partition → member id, for the partitions of topics that
// some member subscribes to. Members are taken in id order, topics in name order, so
// the answer depends only on its inputs. current is the previous target (used by the
// sticky assignor). An unknown assignor name assigns as the default.
func assign(assignor string, members []assignMember, topics []TopicMeta, current map[catalog.TopicPartition]string) map[catalog.TopicPartition]string {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b assignMember) int { return cmp.Compare(a.ID, b.ID) })
	topics = slices.Clone(topics)
	slices.SortFunc(topics, func(a, b TopicMeta) int { return cmp.Compare(a.Name, b.Name) })
	switch assignor {
	case catalog.AssignorRange:
		return assignRange(members, topics)
	case catalog.AssignorRoundRobin:
		return assignRoundRobin(members, topics)
	case catalog.AssignorStreams:
		return assignStreams(members, topics, current)
	}
	return assignSticky(members, topics, current)
}

func subscribers(members []assignMember, topic string) []string {
	var out []string
	for _, m := range members {
		if _, ok := slices.BinarySearch(m.Topics, topic); ok {
			out = append(out, m.ID)
		}
	}
	return out
}

// assignRange gives the i-th subscriber of each topic the i-th contiguous range; the
// first n%m subscribers take one more.
func assignRange(members []assignMember, topics []TopicMeta) map[catalog.TopicPartition]string {
	out := map[catalog.TopicPartition]string{}
	for _, t := range topics {
		subs := subscribers(members, t.Name)
		if len(subs) == 0 {
			continue
		}
		n, m := int(t.Partitions), len(subs)
		p := 0
		for i, id := range subs {
			count := n / m
			if i < n%m {
				count++
			}
			for k := 0; k < count; k++ {
				out[catalog.TopicPartition{TopicID: t.ID, Partition: int32(p)}] = id
				p++
			}
		}
	}
	return out
}

// assignRoundRobin deals every partition, topic by topic, to the next member in turn
// that subscribes to its topic.
func assignRoundRobin(members []assignMember, topics []TopicMeta) map[catalog.TopicPartition]string {
	out := map[catalog.TopicPartition]string{}
	if len(members) == 0 {
		return out
	}
	next := 0
	for _, t := range topics {
		if len(subscribers(members, t.Name)) == 0 {
			continue
		}
		for p := int32(0); p < t.Partitions; p++ {
			for {
				m := members[next%len(members)]
				next++
				if _, ok := slices.BinarySearch(m.Topics, t.Name); ok {
					out[catalog.TopicPartition{TopicID: t.ID, Partition: p}] = m.ID
					break
				}
			}
		}
	}
	return out
}

// assignSticky keeps every current target that is still valid, hands the free
// partitions to the least loaded eligible members, then moves partitions one at a time
// from the most loaded member to the least loaded one that may take them while their
// counts differ by two or more. With equal subscriptions that ends balanced (counts
// within one) having moved the fewest partitions possible: each move takes a partition
// from a member above the final ceiling or gives one to a member below the floor, and no
// partition moves twice.
func assignSticky(members []assignMember, topics []TopicMeta, current map[catalog.TopicPartition]string) map[catalog.TopicPartition]string {
	out := map[catalog.TopicPartition]string{}
	if len(members) == 0 {
		return out
	}
	subs := map[string]map[int64]bool{} // member → topic ids
	byName := map[string]TopicMeta{}
	for _, t := range topics {
		byName[t.Name] = t
	}
	for _, m := range members {
		s := map[int64]bool{}
		for _, name := range m.Topics {
			if t, ok := byName[name]; ok {
				s[t.ID] = true
			}
		}
		subs[m.ID] = s
	}
	held := map[string][]catalog.TopicPartition{}
	var free []catalog.TopicPartition
	for _, t := range topics {
		for p := int32(0); p < t.Partitions; p++ {
			tp := catalog.TopicPartition{TopicID: t.ID, Partition: p}
			eligible := false
			for _, m := range members {
				if subs[m.ID][t.ID] {
					eligible = true
					break
				}
			}
			if !eligible {
				continue
			}
			if cur, ok := current[tp]; ok && subs[cur] != nil && subs[cur][t.ID] {
				held[cur] = append(held[cur], tp)
				continue
			}
			free = append(free, tp)
		}
	}
	// least returns the least loaded member eligible for topic, ties by id.
	least := func(topic int64) string {
		best := ""
		for _, m := range members {
			if !subs[m.ID][topic] {
				continue
			}
			if best == "" || len(held[m.ID]) < len(held[best]) {
				best = m.ID
			}
		}
		return best
	}
	for _, tp := range free {
		id := least(tp.TopicID)
		held[id] = append(held[id], tp)
	}
	// Balance: at most one pass per partition; each move strictly lowers the sum of
	// squared counts, so the loop ends.
	total := 0
	for _, hs := range held {
		total += len(hs)
	}
	for range total + 1 {
		// Counts within one of each other cannot improve: the common case of a
		// heartbeat that changes nothing ends here.
		lo, hi := total, 0
		for _, m := range members {
			lo, hi = min(lo, len(held[m.ID])), max(hi, len(held[m.ID]))
		}
		if hi-lo <= 1 {
			break
		}
		donors := make([]string, 0, len(members))
		for _, m := range members {
			donors = append(donors, m.ID)
		}
		sort.SliceStable(donors, func(i, j int) bool { return len(held[donors[i]]) > len(held[donors[j]]) })
		moved := false
		for _, d := range donors {
			hs := held[d]
			slices.SortFunc(hs, comparePartitions)
			// Give away the highest-numbered partitions first, so that which ones move is
			// stable.
			for i := len(hs) - 1; i >= 0 && !moved; i-- {
				r := least(hs[i].TopicID)
				if r == "" || len(held[r])+2 > len(hs) {
					continue
				}
				held[r] = append(held[r], hs[i])
				held[d] = slices.Delete(hs, i, i+1)
				moved = true
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	for id, hs := range held {
		for _, tp := range hs {
			out[tp] = id
		}
	}
	return out
}
