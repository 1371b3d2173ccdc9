package catalogtest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// testStreamsStandbys: three members of a Streams-assignor group over two
// co-partitioned topics of six partitions, one standby each. Every task (partition n of
// both topics) gets an active and a standby on another member. The members report their
// lags (0 on their actives, a few records on their standbys: what the backend stores
// and reads back across heartbeats), then one leaves: each of its tasks goes to the
// member that kept its standby, and gets a new standby elsewhere.
func testStreamsStandbys(t *testing.T, c GroupCatalog) {
	x := SeedTopic(t, c, "sx", 6, nil)
	y := SeedTopic(t, c, "sy", 6, nil)
	g := Name(t, "g")
	var ms []*member
	for _, id := range []string{"a", "b", "c"} {
		m := newMember(c, g, id, x.Name, y.Name)
		m.assignor, m.replicas = catalog.AssignorStreams, 1
		ms = append(ms, m)
	}
	report := func() {
		for _, m := range ms {
			m.lags = []catalog.TaskLag{}
			for _, p := range partitionsOf(m.owned, x.Name) {
				m.lags = append(m.lags, catalog.TaskLag{Topic: x.Name, Partition: p})
			}
			for _, p := range partitionsOf(m.standby, x.Name) {
				m.lags = append(m.lags, catalog.TaskLag{Topic: x.Name, Partition: p, Lag: 7})
			}
		}
	}
	settle(t, ms...)
	report()
	settle(t, ms...)
	// where maps each task to its active and standby member.
	where := func(ms ...*member) (map[int32]string, map[int32]string) {
		active, standby := map[int32]string{}, map[int32]string{}
		for _, m := range ms {
			xs, ys := partitionsOf(m.owned, x.Name), partitionsOf(m.owned, y.Name)
			if !slices.Equal(xs, ys) {
				t.Fatalf("%s owns %s %v and %s %v: a task split", m.id, x.Name, xs, y.Name, ys)
			}
			for _, p := range xs {
				active[p] = m.id
			}
			for _, p := range partitionsOf(m.standby, x.Name) {
				if standby[p] != "" {
					t.Fatalf("task %d has standbys on %s and %s, want one", p, standby[p], m.id)
				}
				standby[p] = m.id
			}
		}
		for p := range int32(6) {
			if active[p] == "" || standby[p] == "" || active[p] == standby[p] {
				t.Fatalf("task %d: active on %q, standby on %q", p, active[p], standby[p])
			}
		}
		return active, standby
	}
	active, standby := where(ms...)
	for _, m := range ms {
		if n, s := len(partitionsOf(m.owned, x.Name)), len(partitionsOf(m.standby, x.Name)); n != 2 || s != 2 {
			t.Fatalf("%s: %d actives and %d standbys of 6 tasks over 3 members, want 2 and 2", m.id, n, s)
		}
	}
	// a leaves.
	if _, err := c.Heartbeat(t.Context(), catalog.Heartbeat{Group: g, MemberID: "a", MemberEpoch: catalog.LeaveEpoch}); err != nil {
		t.Fatalf("leave: %v", err)
	}
	rest := ms[1:]
	settle(t, rest...)
	after, _ := where(rest...)
	for p, id := range active {
		if id == "a" && after[p] != standby[p] {
			t.Errorf("task %d of the member that left went to %s, its caught-up standby was on %s", p, after[p], standby[p])
		}
	}
	if t.Failed() {
		t.Logf("before: active %v standby %v; after: %v", fmt.Sprint(active), fmt.Sprint(standby), fmt.Sprint(after))
	}
}
