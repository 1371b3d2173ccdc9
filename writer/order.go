package writer

// An idempotent producer pipelines: it sends several requests at once, each numbered
// with a base sequence per partition, and the catalog accepts a request only when its
// sequences follow the last committed ones. Requests sent together over different
// connections reach the writer in any order, and within a flush the catalog checks them
// in request order: a request that overtook the one before it would be refused as out
// of order, then retried in a later flush. So when a flush is cut, each producer's
// requests are put in sequence order, in the slots its requests already occupy; other
// requests keep their places.

// seqBefore says whether sequence a comes before b, sequences wrapping at 2^31 as
// Kafka's do: b is less than half the sequence space ahead of a.
func seqBefore(a, b int32) bool {
	d := (int64(b) - int64(a)) & (1<<31 - 1)
	return d != 0 && d < 1<<30
}

// mustPrecede says whether request a must come before b: one producer identity, and a
// partition both write with a's sequence before b's.
func mustPrecede(a, b *pending) bool {
	pa, pb := a.req.Producer, b.req.Producer
	if pa == nil || pb == nil || *pa != *pb {
		return false
	}
	for tp, sa := range a.req.Sequences {
		if sb, ok := b.req.Sequences[tp]; ok && seqBefore(sa, sb) {
			return true
		}
	}
	return false
}

// orderBySequence reorders reqs in place as described above. It is stable: requests
// with no order between them (other producers, no partition in common, retries of one
// another) keep their arrival order, and a set of requests whose sequences contradict
// each other is left as it came.
func orderBySequence(reqs []*pending) {
	type key struct {
		id    int64
		epoch int16
	}
	slots := map[key][]int{}
	for i, p := range reqs {
		if p.req.Producer != nil {
			k := key{p.req.Producer.ID, p.req.Producer.Epoch}
			slots[k] = append(slots[k], i)
		}
	}
	for _, idx := range slots {
		if len(idx) < 2 {
			continue
		}
		group := make([]*pending, len(idx))
		for j, i := range idx {
			group[j] = reqs[i]
		}
		ordered, ok := topoStable(group)
		if !ok {
			continue
		}
		for j, i := range idx {
			reqs[i] = ordered[j]
		}
	}
}

// topoStable orders group so that mustPrecede holds, choosing the earliest arrival
// among the requests free to go next (Kahn's algorithm); ok is false on a cycle.
func topoStable(group []*pending) ([]*pending, bool) {
	n := len(group)
	before := make([][]bool, n) // before[a][b]: a must precede b
	indeg := make([]int, n)
	for a := range group {
		before[a] = make([]bool, n)
		for b := range group {
			if a != b && mustPrecede(group[a], group[b]) {
				before[a][b] = true
				indeg[b]++
			}
		}
	}
	out := make([]*pending, 0, n)
	done := make([]bool, n)
	for len(out) < n {
		next := -1
		for i := range group {
			if !done[i] && indeg[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			return nil, false
		}
		done[next] = true
		out = append(out, group[next])
		for b := range group {
			if before[next][b] {
				indeg[b]--
			}
		}
	}
	return out, true
}
