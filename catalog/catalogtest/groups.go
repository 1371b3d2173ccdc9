package catalogtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// GroupCatalog is a catalog with consumer groups.
type GroupCatalog interface {
	catalog.Catalog
	catalog.Groups
}

// runGroups runs the consumer-group conformance suite. open returns a catalog for a
// subtest and arranges its Close with t.Cleanup; calls within one subtest must return
// catalogs on the same database (the concurrency test spreads members over several, as
// several nodes would be). Every subtest names its groups and topics uniquely.
func runGroups(t *testing.T, open func(t *testing.T) GroupCatalog) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c GroupCatalog)
	}{
		{"sticky/join_one_by_one", testStickyJoins},
		{"sticky/fourth_member_moves_minimum", testStickyFourthMember},
		{"sticky/eight_partitions_fourth_moves_two", testStickyEightPartitions},
		{"revocation_needs_acknowledgement", testRevocationProtocol},
		{"epochs", testEpochs},
		{"lease_expiry_frees_partitions", testLeaseExpiry},
		{"leave", testLeave},
		{"rejoin_starts_afresh", testRejoin},
		{"more_members_than_partitions", testMoreMembersThanPartitions},
		{"range_copartitions", testRangeAssignor},
		{"roundrobin", testRoundRobinAssignor},
		{"assignor_change", testAssignorChange},
		{"streams/standbys_and_warm_handover", testStreamsStandbys},
		{"subscription_change_and_topic_growth", testSubscriptionChange},
		{"offsets/commit_and_fetch", testOffsets},
		{"offsets/refusals", testOffsetRefusals},
		{"offsets/reset_and_delete", testResetAndDelete},
		{"offsets/flush_check_agrees", testFlushOffsetsAgree},
		{"lag", testLag},
		{"describe_and_list", testDescribeAndList},
		{"invalid_requests", testInvalidGroupRequests},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
	t.Run("concurrent_heartbeats", func(t *testing.T) { testConcurrentHeartbeats(t, open) })
}

// member drives one group member through Heartbeat the way a well-behaved client does:
// it reports as owned what the last answer assigned it, so revocations are acknowledged
// on the next heartbeat.
type member struct {
	c        catalog.Groups
	group    string
	id       string
	topics   []string
	session  time.Duration
	assignor string
	epoch    int32
	owned    []catalog.TopicPartitions
	// The Streams assignor's: standby replicas asked for on join, the lags reported
	// (nil: none), and the standbys last answered.
	replicas int32
	lags     []catalog.TaskLag
	standby  []catalog.TopicPartitions
}

func newMember(c catalog.Groups, group, id string, topics ...string) *member {
	return &member{c: c, group: group, id: id, topics: topics, session: 30 * time.Second}
}

func (m *member) heartbeat(ctx context.Context) (catalog.HeartbeatResult, error) {
	hb := catalog.Heartbeat{Group: m.group, MemberID: m.id, MemberEpoch: m.epoch, Owned: m.owned, SessionTimeout: m.session, Assignor: m.assignor,
		TaskLags: m.lags}
	if m.epoch == catalog.JoinEpoch {
		hb.Topics, hb.StandbyReplicas = m.topics, m.replicas
	}
	res, err := m.c.Heartbeat(ctx, hb)
	if err != nil {
		return res, err
	}
	m.epoch = res.MemberEpoch
	m.owned = res.Assignment
	m.standby = res.Standbys
	return res, nil
}

func (m *member) beat(t testing.TB) catalog.HeartbeatResult {
	t.Helper()
	res, err := m.heartbeat(t.Context())
	if err != nil {
		t.Fatalf("heartbeat of %s: %v", m.id, err)
	}
	return res
}

// partitionsOf flattens an assignment of one topic.
func partitionsOf(a []catalog.TopicPartitions, topic string) []int32 {
	for _, tp := range a {
		if tp.Topic == topic {
			return tp.Partitions
		}
	}
	return nil
}

// settle heartbeats every member in turn until two full rounds in a row change nothing.
// One quiet round is not enough: a member may acknowledge a revocation in it after the
// partition's next owner has already heartbeated, and neither answer changes; the grant
// shows only in the next round.
func settle(t testing.TB, ms ...*member) {
	t.Helper()
	quiet := 0
	for round := 0; round < 20; round++ {
		changed := false
		for _, m := range ms {
			before := fmt.Sprint(m.owned, m.epoch)
			m.beat(t)
			if fmt.Sprint(m.owned, m.epoch) != before {
				changed = true
			}
		}
		if changed {
			quiet = 0
		} else if quiet++; quiet == 2 {
			return
		}
	}
	t.Fatalf("group did not settle in 20 rounds")
}

func wantPartitions(t testing.TB, m *member, topic string, want ...int32) {
	t.Helper()
	got := partitionsOf(m.owned, topic)
	if !slices.Equal(got, want) {
		t.Fatalf("member %s owns %s %v, want %v", m.id, topic, got, want)
	}
}

func seedGroupTopic(t testing.TB, c GroupCatalog, partitions int32) catalog.Topic {
	t.Helper()
	return SeedTopic(t, c, "grp", partitions, nil)
}

func describe(t testing.TB, c catalog.Groups, g string) catalog.GroupDescription {
	t.Helper()
	d, err := c.DescribeGroup(t.Context(), g)
	if err != nil {
		t.Fatalf("describe %s: %v", g, err)
	}
	return d
}

func memberDesc(t testing.TB, d catalog.GroupDescription, id string) catalog.MemberDescription {
	t.Helper()
	for _, m := range d.Members {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("group %s has no member %s", d.Name, id)
	return catalog.MemberDescription{}
}

func groupOffsets(t testing.TB, c catalog.Groups, g string) []catalog.GroupOffset {
	t.Helper()
	offs, err := c.GroupOffsets(t.Context(), g)
	if err != nil {
		t.Fatalf("offsets of %s: %v", g, err)
	}
	return offs
}

// BenchmarkHeartbeats is for backends' benchmarks: heartbeats of a stable group of
// members members (one partition each), each member heartbeating in turn as a client
// does, never two at once. "serial" heartbeats one member after another (the latency of
// one heartbeat); "concurrent" runs every member at once (how many heartbeats the
// group's lock lets through: every heartbeat of a group holds it exclusively).
func BenchmarkHeartbeats(b *testing.B, c GroupCatalog, members int) {
	ctx := context.Background()
	tp, err := c.CreateTopic(ctx, Name(b, "bench"), int32(members), nil)
	if err != nil {
		b.Fatal(err)
	}
	g := Name(b, "g")
	ms := make([]*member, members)
	for i := range ms {
		ms[i] = newMember(c, g, fmt.Sprintf("m%03d", i), tp.Name)
	}
	settle(b, ms...)
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := ms[i%members].heartbeat(ctx); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
	})
	b.Run("concurrent", func(b *testing.B) {
		var left atomic.Int64
		left.Store(int64(b.N))
		errs := make(chan error, members)
		var wg sync.WaitGroup
		b.ResetTimer()
		for _, m := range ms {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if _, err := m.heartbeat(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
	})
}
