package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// Round trips of group traffic, counted through the proxy (issue 13): a heartbeat takes
// at most two (BEGIN, the lock and every read pipelined; then the writes with COMMIT),
// an offset commit two, and a flush that carries group offsets one (strata_commit_groups
// checks them in SQL). Under the statement cache (after the statements are prepared, on
// a pool of one connection so that every call finds them) and under exec mode (no
// preparation at all, for transaction-pooling proxies).
func TestGroupRoundTrips(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	for _, mode := range []string{"cache_statement", "exec"} {
		t.Run(mode, func(t *testing.T) {
			proxy := newCutProxy(t, proxyTarget(t, dsn))
			pdsn := withParam(t, withParam(t, proxied(t, dsn, proxy.addr()), "default_query_exec_mode", mode), "pool_max_conns", "1")
			c := openDSN(t, pdsn, catalog.Options{})
			ctx := context.Background()
			in := mustTopic(t, c, "in-"+mode, 2, nil)
			out := mustTopic(t, c, "out-"+mode, 1, nil)
			if _, err := c.Commit(ctx, makeSegment(testKey(time.Now()), 10, []flushBatch{{in.ID, 0, 5, 1}}, []flushBatch{{in.ID, 1, 5, 1}})); err != nil {
				t.Fatal(err)
			}
			group := "g-" + mode
			join := func(id string) (catalog.HeartbeatResult, error) {
				return c.Heartbeat(ctx, catalog.Heartbeat{Group: group, MemberID: id, Topics: []string{in.Name}, SessionTimeout: time.Minute})
			}
			commitFlush := func(epoch int32, off int64) error {
				seg := makeSegment(testKey(time.Now()), 10, []flushBatch{{out.ID, 0, 1, 1}})
				seg.Requests[0].GroupOffsets = &catalog.OffsetCommit{Group: group, MemberID: "a", MemberEpoch: epoch,
					Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: off}}}
				res, err := c.Commit(ctx, seg)
				if err == nil {
					err = res[0].Err
				}
				return err
			}
			beat := func(id string, epoch int32, owned []catalog.TopicPartitions) (catalog.HeartbeatResult, error) {
				return c.Heartbeat(ctx, catalog.Heartbeat{Group: group, MemberID: id, MemberEpoch: epoch, Owned: owned})
			}
			// Everything once, so the statements are prepared (cache mode), then counted.
			res, err := join("a")
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if res, err = beat("a", res.MemberEpoch, res.Assignment); err != nil {
					t.Fatal(err)
				}
				if err := c.CommitOffsets(ctx, catalog.OffsetCommit{Group: group, MemberID: "a", MemberEpoch: res.MemberEpoch,
					Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: 1}}}); err != nil {
					t.Fatal(err)
				}
				if err := commitFlush(res.MemberEpoch, 2); err != nil {
					t.Fatal(err)
				}
				if _, err := join("b"); err != nil {
					t.Fatal(err)
				}
				if _, err := beat("b", catalog.LeaveEpoch, nil); err != nil {
					t.Fatal(err)
				}
				if res, err = beat("a", res.MemberEpoch, res.Assignment); err != nil {
					t.Fatal(err)
				}
			}
			if len(res.Assignment) != 1 || len(res.Assignment[0].Partitions) != 2 {
				t.Fatalf("a owns %+v, want both partitions", res.Assignment)
			}
			proxy.takeFlights()
			for _, tc := range []struct {
				name string
				max  int
				fn   func() error
			}{
				{"heartbeat", 2, func() error {
					var err error
					res, err = beat("a", res.MemberEpoch, res.Assignment)
					return err
				}},
				{"offset commit", 2, func() error {
					return c.CommitOffsets(ctx, catalog.OffsetCommit{Group: group, MemberID: "a", MemberEpoch: res.MemberEpoch,
						Offsets: []catalog.CommitOffset{{Topic: in.Name, Partition: 0, Offset: 3}}})
				}},
				{"flush with group offsets", 1, func() error { return commitFlush(res.MemberEpoch, 4) }},
				{"join", 2, func() error { _, err := join("b"); return err }},
				{"leave", 2, func() error { _, err := beat("b", catalog.LeaveEpoch, nil); return err }},
			} {
				if err := tc.fn(); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				fs := proxy.takeFlights()
				t.Logf("%s: %d round trips", tc.name, len(fs))
				if len(fs) > tc.max || len(fs) == 0 {
					var b strings.Builder
					for i, f := range fs {
						b.WriteString("\n  flight " + string(rune('1'+i)) + ": " + strings.Join(f.sqls, " | "))
					}
					t.Errorf("%s took %d round trips, want at most %d:%s", tc.name, len(fs), tc.max, b.String())
				}
			}
		})
	}
}
