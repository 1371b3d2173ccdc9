package engine

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/strata-io/strata/catalog"
)

// The Streams assignor (catalog.AssignorStreams): active tasks, placed like the sticky
// assignor but moved first to a member caught up on the task's state, and standby tasks,
// warm copies of each task's state on members other than its active. As KIP-1071 does
// it, the rule runs here, where every member's report meets: members report per task
// how far their local state is behind its changelogs (catalog.Heartbeat.TaskLags), and
// the answer is deterministic in the rows, so every heartbeat computes the same one.
//
// A task is partition p of every subscribed topic with n partitions (taskKey{n, p}):
// co-partitioned inputs (same count, as stream joins need) land on one member, as with
// the range assignor. Members of one Streams application subscribe alike; a member is
// eligible for a task when it subscribes to one of its topics, and is given only the
// partitions of the topics it subscribes to.

// taskKey names a task: its topics' partition count and its partition.
type taskKey struct{ count, part int32 }

func compareTaskKeys(a, b taskKey) int {
	return cmp.Or(cmp.Compare(a.count, b.count), cmp.Compare(a.part, b.part))
}

// streamsTasks lists the tasks of topics (sorted) and their partitions, and which
// members may take each.
type streamsTasks struct {
	keys     []taskKey
	parts    map[taskKey][]catalog.TopicPartition
	topic    map[int64]string
	eligible map[taskKey][]string // member ids in order
	subs     map[string]map[string]bool
	lags     map[string]map[taskKey]int64 // member → task → reported lag
}

func newStreamsTasks(members []assignMember, topics []TopicMeta) *streamsTasks {
	t := &streamsTasks{parts: map[taskKey][]catalog.TopicPartition{}, topic: map[int64]string{},
		eligible: map[taskKey][]string{}, subs: map[string]map[string]bool{}, lags: map[string]map[taskKey]int64{}}
	count := map[string]int32{}
	for _, m := range members {
		s := map[string]bool{}
		for _, name := range m.Topics {
			s[name] = true
		}
		t.subs[m.ID] = s
	}
	for _, tm := range topics {
		count[tm.Name] = tm.Partitions
		t.topic[tm.ID] = tm.Name
		var subs []string
		for _, m := range members {
			if t.subs[m.ID][tm.Name] {
				subs = append(subs, m.ID)
			}
		}
		if len(subs) == 0 {
			continue
		}
		for p := range tm.Partitions {
			k := taskKey{tm.Partitions, p}
			if t.parts[k] == nil {
				t.keys = append(t.keys, k)
			}
			t.parts[k] = append(t.parts[k], catalog.TopicPartition{TopicID: tm.ID, Partition: p})
			for _, id := range subs {
				if !slices.Contains(t.eligible[k], id) {
					t.eligible[k] = append(t.eligible[k], id)
				}
			}
		}
	}
	slices.SortFunc(t.keys, compareTaskKeys)
	for k := range t.eligible {
		slices.Sort(t.eligible[k])
	}
	for _, m := range members {
		ls := map[taskKey]int64{}
		for _, l := range m.Lags {
			n, ok := count[l.Topic]
			if !ok || l.Partition >= n {
				continue
			}
			k := taskKey{n, l.Partition}
			if old, ok := ls[k]; !ok || l.Lag < old {
				ls[k] = l.Lag
			}
		}
		t.lags[m.ID] = ls
	}
	return t
}

// lag is member's reported lag on task k, -1 when it holds no state of it.
func (t *streamsTasks) lag(member string, k taskKey) int64 {
	if l, ok := t.lags[member][k]; ok {
		return l
	}
	return -1
}

// caughtUp says whether member's state of task k is within the acceptable lag.
func (t *streamsTasks) caughtUp(member string, k taskKey) bool {
	l := t.lag(member, k)
	return l >= 0 && l <= catalog.AcceptableRecoveryLag
}

// activeTasks places every task's active: kept at its current member while that one is
// eligible; a free task goes to the least loaded caught-up member, else the least
// loaded one; then, while members' counts differ by two or more, a task moves from the
// most loaded to the least loaded member, one that member is caught up on first.
func (t *streamsTasks) activeTasks(members []assignMember, current map[catalog.TopicPartition]string) map[taskKey]string {
	active := map[taskKey]string{}
	load := map[string]int{}
	for _, m := range members {
		load[m.ID] = 0
	}
	var free []taskKey
	for _, k := range t.keys {
		cur := ""
		for _, tp := range t.parts[k] { // the first partition with a live current target
			if id := current[tp]; id != "" && slices.Contains(t.eligible[k], id) {
				cur = id
				break
			}
		}
		if cur == "" {
			free = append(free, k)
			continue
		}
		active[k] = cur
		load[cur]++
	}
	// better says whether member a is a better home for task k than b.
	better := func(k taskKey, a, b string) bool {
		ca, cb := t.caughtUp(a, k), t.caughtUp(b, k)
		if ca != cb {
			return ca
		}
		if load[a] != load[b] {
			return load[a] < load[b]
		}
		if la, lb := t.lag(a, k), t.lag(b, k); la != lb && (la >= 0) == (lb >= 0) {
			return la < lb
		}
		return a < b
	}
	for _, k := range free {
		best := ""
		for _, id := range t.eligible[k] {
			if best == "" || better(k, id, best) {
				best = id
			}
		}
		active[k] = best
		load[best]++
	}
	for range len(t.keys) + 1 {
		lo, hi := "", ""
		for _, m := range members {
			if lo == "" || load[m.ID] < load[lo] {
				lo = m.ID
			}
			if hi == "" || load[m.ID] > load[hi] {
				hi = m.ID
			}
		}
		if hi == "" || load[hi]-load[lo] <= 1 {
			break
		}
		// The highest-numbered task of hi that lo may take, one lo is caught up on first.
		pick, found := taskKey{}, false
		for _, k := range slices.Backward(t.keys) {
			if active[k] != hi || !slices.Contains(t.eligible[k], lo) {
				continue
			}
			if !found || (t.caughtUp(lo, k) && !t.caughtUp(lo, pick)) {
				pick, found = k, true
			}
		}
		if !found {
			break
		}
		active[pick] = lo
		load[hi]--
		load[lo]++
	}
	return active
}

// standbyTasks places n standbys of every task: on eligible members other than its
// active, caught-up ones first (a copy already warm stays where it is), then ones
// holding any state of it, then those keeping the fewest standbys, then by id.
func (t *streamsTasks) standbyTasks(active map[taskKey]string, n int) map[taskKey][]string {
	out := map[taskKey][]string{}
	if n <= 0 {
		return out
	}
	load := map[string]int{}
	for _, k := range t.keys {
		cands := slices.DeleteFunc(slices.Clone(t.eligible[k]), func(id string) bool { return id == active[k] })
		slices.SortStableFunc(cands, func(a, b string) int {
			ca, cb := t.caughtUp(a, k), t.caughtUp(b, k)
			ha, hb := t.lag(a, k) >= 0, t.lag(b, k) >= 0
			switch {
			case ca != cb:
				return boolFirst(ca)
			case ha != hb:
				return boolFirst(ha)
			}
			return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b))
		})
		cands = cands[:min(n, len(cands))]
		for _, id := range cands {
			load[id]++
		}
		out[k] = cands
	}
	return out
}

func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}

// assignStreams is the Streams assignor's targets: each task's active, partition by
// partition (a member gets only the topics it subscribes to).
func assignStreams(members []assignMember, topics []TopicMeta, current map[catalog.TopicPartition]string) map[catalog.TopicPartition]string {
	out := map[catalog.TopicPartition]string{}
	if len(members) == 0 {
		return out
	}
	t := newStreamsTasks(members, topics)
	for k, id := range t.activeTasks(members, current) {
		for _, tp := range t.parts[k] {
			if t.subs[id][t.topic[tp.TopicID]] {
				out[tp] = id
			}
		}
	}
	return out
}

// memberStandbys lists the standby tasks of member id in st (after assignTargets), each
// named by the partitions of its topics the member subscribes to: empty unless the
// group uses the Streams assignor and a live member asks for standbys.
func memberStandbys(st *GroupState, topics map[string]TopicMeta, id string) []catalog.TopicPartition {
	if st.Assignor != catalog.AssignorStreams {
		return nil
	}
	n := int32(0)
	for _, m := range st.Members {
		n = max(n, m.StandbyReplicas)
	}
	if n == 0 {
		return nil
	}
	members, metas := assignInputs(st, topics)
	slices.SortFunc(members, func(a, b assignMember) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(metas, func(a, b TopicMeta) int { return cmp.Compare(a.Name, b.Name) })
	t := newStreamsTasks(members, metas)
	active := map[taskKey]string{}
	for _, k := range t.keys {
		for _, tp := range t.parts[k] {
			if o := st.Owners[tp]; o != nil && o.Target != "" {
				active[k] = o.Target
				break
			}
		}
	}
	var out []catalog.TopicPartition
	for k, ids := range t.standbyTasks(active, int(n)) {
		if !slices.Contains(ids, id) {
			continue
		}
		for _, tp := range t.parts[k] {
			if t.subs[id][t.topic[tp.TopicID]] {
				out = append(out, tp)
			}
		}
	}
	slices.SortFunc(out, comparePartitions)
	return out
}

// EncodeTaskLags is a member's lags as the backends store them (group_members.task_lags,
// JSON): "[]" for none.
func EncodeTaskLags(lags []catalog.TaskLag) string {
	if len(lags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(lags) // plain structs: cannot fail
	return string(b)
}
