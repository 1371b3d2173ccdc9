package catalogtest

import (
	"fmt"
	"testing"

	"github.com/strata-io/strata/catalog"
)

// BenchmarkClassic is for backends' benchmarks, on a stable classic group of members
// members. "rebalance" is one whole rebalance as the catalog sees it — the leader joins
// again (which starts it), every other member joins, the held joins are answered
// (PollJoin), the leader syncs its plan and every other member syncs —: the catalog's
// share of a rebalance, without the clients' own time. "heartbeat" is one member's
// heartbeat of the stable group (its latency, serially).
func BenchmarkClassic(b *testing.B, c ClassicCatalog, members int) {
	tp := SeedTopic(b, c, "cgb", int32(members), nil)
	group := Name(b, "cg")
	ids := make([]string, members)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%03d", i)
	}
	stableClassic(b, c, group, []string{tp.Name}, ids...)
	b.Run("rebalance", func(b *testing.B) {
		for b.Loop() {
			classicRebalance(b, c, group, tp.Name)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rebalances/s")
	})
	b.Run("heartbeat", func(b *testing.B) {
		g := readClassic(b, c, group)
		i := 0
		for b.Loop() {
			h := catalog.ClassicHeartbeat{Group: group, MemberID: ids[i%members], Generation: g.Generation}
			if reb, err := c.ClassicHeartbeat(b.Context(), h); err != nil || reb {
				b.Fatalf("heartbeat: rebalancing %v, %v", reb, err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
	})
}

// classicRebalance runs one rebalance of the stable group, leader first.
func classicRebalance(b *testing.B, c ClassicCatalog, group, topic string) {
	g := readClassic(b, c, group)
	order := []string{g.Leader}
	for _, m := range g.Members {
		if m.ID != g.Leader {
			order = append(order, m.ID)
		}
	}
	waits := map[string]int32{}
	for _, id := range order {
		res := mustClassicJoin(b, c, classicJoin(group, id, "", topic))
		if res.Answer == nil {
			waits[id] = res.WaitGeneration
		}
	}
	for id, wait := range waits {
		if _, p, err := c.PollJoin(b.Context(), group, id, "", wait); err != nil || !p.Done {
			b.Fatalf("poll join of %s: %+v %v", id, p, err)
		}
	}
	gen := g.Generation + 1
	plan := make([]catalog.ClassicAssignment, len(order))
	for i, id := range order {
		plan[i] = catalog.ClassicAssignment{MemberID: id, Assignment: []byte("a-" + id)}
	}
	for i, id := range order {
		s := catalog.ClassicSync{Group: group, MemberID: id, Generation: gen}
		if i == 0 {
			s.Assignments = plan
		}
		if res, err := c.SyncGroup(b.Context(), s); err != nil || !res.Ready {
			b.Fatalf("sync of %s at generation %d: %+v %v", id, gen, res, err)
		}
	}
}
