package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
)

// The rules the front ends used to apply themselves, each now here once: every call
// that names a topic or a group checks the name (after authorization, before any
// lookup); partition counts, session timeouts, offsets in a commit, the audit page and
// the fetch wait are bounded by the core. test/frontends holds the HTTP API and the
// Kafka listener to the same answers.

func TestNamesCheckedByEveryCall(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := context.Background()
	who := Anonymous
	const bad = "a b"
	topicCalls := map[string]func() error{
		"LookupTopic":     func() error { _, err := b.LookupTopic(ctx, who, bad); return err },
		"LookupPartition": func() error { _, err := b.LookupPartition(ctx, who, bad, 0); return err },
		"CreateTopic":     func() error { _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: bad}); return err },
		"Topic":           func() error { _, err := b.Topic(ctx, who, bad); return err },
		"DeleteTopic":     func() error { return b.DeleteTopic(ctx, who, bad) },
		"UpdateTopic":     func() error { _, err := b.UpdateTopic(ctx, who, bad, TopicUpdate{Partitions: 3}); return err },
		"GrowPartitions":  func() error { _, err := b.GrowPartitions(ctx, who, bad, 3, false); return err },
		"DescribeConfigs": func() error { _, err := b.DescribeConfigs(ctx, who, bad); return err },
		"Partitions":      func() error { _, err := b.Partitions(ctx, who, bad); return err },
		"ListOffset":      func() error { _, err := b.ListOffset(ctx, who, bad, 0, Earliest); return err },
		"Fetch":           func() error { _, err := b.Fetch(ctx, who, FetchRequest{Topic: bad}); return err },
		"FetchBatches":    func() error { _, err := b.FetchBatches(ctx, who, FetchRequest{Topic: bad}); return err },
		"DeleteRecords":   func() error { _, err := b.DeleteRecords(ctx, who, bad, 0, 1); return err },
		"Produce": func() error {
			_, err := b.Produce(ctx, who, ProduceRequest{Records: []Record{{Topic: bad, Partition: -1, Value: []byte("v")}}})
			return err
		},
	}
	for name, call := range topicCalls {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), CodeInvalidTopicName) })
	}
	offs := []catalog.CommitOffset{{Topic: "t", Partition: 0, Offset: 0}}
	groupCalls := map[string]func() error{
		"Heartbeat": func() error {
			_, err := b.Heartbeat(ctx, who, catalog.Heartbeat{Group: bad, MemberID: "m", Topics: []string{"t"}})
			return err
		},
		"CommitOffsets": func() error { return b.CommitOffsets(ctx, who, catalog.OffsetCommit{Group: bad, Offsets: offs}) },
		"GroupOffsets":  func() error { _, err := b.GroupOffsets(ctx, who, bad); return err },
		"GroupLag":      func() error { _, err := b.GroupLag(ctx, who, bad); return err },
		"DescribeGroup": func() error { _, _, err := b.DescribeGroup(ctx, who, bad); return err },
		"DeleteGroup":   func() error { return b.DeleteGroup(ctx, who, bad) },
		"ResetOffsets": func() error {
			_, err := b.ResetOffsets(ctx, who, bad, ResetRequest{Topic: "t", To: Earliest, Create: true})
			return err
		},
		"Produce with group offsets": func() error {
			_, err := b.Produce(ctx, who, ProduceRequest{Records: []Record{{Topic: "t", Partition: 0, Value: []byte("v")}},
				GroupOffsets: &catalog.OffsetCommit{Group: bad, Offsets: offs}})
			return err
		},
	}
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	for name, call := range groupCalls {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), CodeInvalidGroupName) })
	}

	// Authorization comes first, as Kafka answers: the name of what the caller may not
	// touch is not examined.
	b.d.Authorizer = &countingAuthorizer{refused: map[acl.Resource]bool{acl.Topic(bad): true, acl.Group(bad): true}, asked: map[acl.Resource]int{}}
	wantCode(t, topicCalls["Topic"](), CodeForbidden)
	wantCode(t, groupCalls["DescribeGroup"](), CodeForbidden)
}

func TestPartitionCountRule(t *testing.T) {
	for _, n := range []int32{-1, 0, catalog.MaxPartitions + 1} {
		wantCode(t, CheckPartitionCount(n), CodeInvalidPartitionCount)
	}
	for _, n := range []int32{1, catalog.MaxPartitions} {
		if err := CheckPartitionCount(n); err != nil {
			t.Errorf("CheckPartitionCount(%d) = %v", n, err)
		}
	}
	b, _ := newRealCore(t)
	ctx := context.Background()
	wantCode(t, second(b.CreateTopic(ctx, Anonymous, CreateTopicRequest{Name: "t", Partitions: catalog.MaxPartitions + 1})), CodeInvalidPartitionCount)
	if _, err := b.CreateTopic(ctx, Anonymous, CreateTopicRequest{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, second(b.GrowPartitions(ctx, Anonymous, "t", catalog.MaxPartitions+1, false)), CodeInvalidPartitionCount)
	wantCode(t, second(b.GrowPartitions(ctx, Anonymous, "t", 0, false)), CodeInvalidPartitionCount)
}

// TestSessionTimeoutRule: the bounds of a member's session timeout are the catalog's,
// 100 ms to 30 min, for a heartbeat (HTTP, KIP-848) and a classic join alike; an
// explicit 0 is refused too (in a heartbeat 0 keeps the member's).
func TestSessionTimeoutRule(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Millisecond, 50 * time.Millisecond, catalog.MaxSessionTimeout + time.Millisecond} {
		e := wantCode(t, CheckSessionTimeout(d), CodeInvalidRequest)
		if !strings.Contains(e.Message, "use between 100 and 1800000") {
			t.Errorf("CheckSessionTimeout(%s): %q does not give the bounds", d, e.Message)
		}
	}
	for _, d := range []time.Duration{catalog.MinSessionTimeout, catalog.MaxSessionTimeout} {
		if err := CheckSessionTimeout(d); err != nil {
			t.Errorf("CheckSessionTimeout(%s) = %v", d, err)
		}
	}
	b, _ := newRealCore(t)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, Anonymous, CreateTopicRequest{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	// The heartbeat refuses 50 ms as CheckSessionTimeout does: the same rule.
	_, err := b.Heartbeat(ctx, Anonymous, catalog.Heartbeat{Group: "g", MemberID: "m", Topics: []string{"t"}, SessionTimeout: 50 * time.Millisecond})
	he := wantCode(t, err, CodeInvalidRequest)
	if ce := CheckSessionTimeout(50 * time.Millisecond).(*Error); !strings.Contains(he.Message, "session_timeout_ms 50: use between 100 and 1800000") || ce.Message != he.Message {
		t.Errorf("heartbeat refused %q, the rule says %q", he.Message, ce.Message)
	}
	// A classic join refuses it in Kafka's terms, with the same bounds.
	_, err = b.JoinGroup(ctx, Anonymous, JoinGroupRequest{Group: "c", SessionTimeout: 50 * time.Millisecond, ProtocolType: "consumer",
		Protocols: []catalog.ClassicProtocol{{Name: "range"}}})
	je := wantCode(t, err, CodeInvalidSessionTimeout)
	if !strings.Contains(je.Message, "use between 100 and 1800000") {
		t.Errorf("join refused %q", je.Message)
	}
}

// TestCommitOffsetsShape: a negative partition or offset in a commit is refused by the
// core, whichever call carries the commit.
func TestCommitOffsetsShape(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, Anonymous, CreateTopicRequest{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    catalog.CommitOffset
		code Code
	}{
		{catalog.CommitOffset{Topic: "t", Partition: -1, Offset: 0}, CodeInvalidPartition},
		{catalog.CommitOffset{Topic: "t", Partition: 0, Offset: -1}, CodeInvalidOffset},
	} {
		c := catalog.OffsetCommit{Group: "g", Offsets: []catalog.CommitOffset{tc.o}}
		wantCode(t, b.CommitOffsets(ctx, Anonymous, c), tc.code)
		_, err := b.Produce(ctx, Anonymous, ProduceRequest{Records: []Record{{Topic: "t", Partition: 0, Value: []byte("v")}}, GroupOffsets: &c})
		wantCode(t, err, tc.code)
	}
}

func TestAuditPageRule(t *testing.T) {
	_, cat := newRealCore(t)
	b := New(Config{}, Deps{Catalog: cat, Security: cat})
	ctx := context.Background()
	for _, n := range []int{-1, 0, catalog.MaxAuditPage + 1} {
		wantCode(t, second(b.AuditLog(ctx, Anonymous, 0, n)), CodeInvalidParameter)
	}
	wantCode(t, second(b.AuditLog(ctx, Anonymous, -1, DefaultAuditPage)), CodeInvalidParameter)
	for _, n := range []int{1, DefaultAuditPage, catalog.MaxAuditPage} {
		if _, err := b.AuditLog(ctx, Anonymous, 0, n); err != nil {
			t.Errorf("AuditLog(limit %d) = %v", n, err)
		}
	}
}

// waitReader answers every fetch at once, empty, and keeps the waits it was asked for.
type waitReader struct{ waits chan time.Duration }

func (r waitReader) Fetch(ctx context.Context, f reader.Fetch) (reader.Result, error) {
	r.waits <- f.Wait
	return reader.Result{NextOffset: f.Offset}, nil
}

func (r waitReader) FetchRawShared(ctx context.Context, f reader.Fetch) (reader.SharedRawResult, error) {
	r.waits <- f.Wait
	return reader.SharedRawResult{}, nil
}

// TestFetchWaitCapped: the core caps a fetch's wait at Config.MaxWait, for records and
// for stored batches, as asked by either front end.
func TestFetchWaitCapped(t *testing.T) {
	e := newEnv(t)
	rd := waitReader{waits: make(chan time.Duration, 4)}
	e.b = New(Config{MaxWait: 70 * time.Millisecond}, Deps{Catalog: e.cat, Reader: rd, Batches: rd})
	ctx := context.Background()
	for _, wait := range []time.Duration{time.Hour, 70 * time.Millisecond, 20 * time.Millisecond, 0} {
		want := min(wait, 70*time.Millisecond)
		if _, err := e.b.Fetch(ctx, Anonymous, FetchRequest{Topic: "plain", Wait: wait}); err != nil {
			t.Fatal(err)
		}
		if got := <-rd.waits; got != want {
			t.Errorf("Fetch with wait %s: the reader was asked to wait %s, want %s", wait, got, want)
		}
		if _, err := e.b.FetchBatches(ctx, Anonymous, FetchRequest{Topic: "plain", Wait: wait}); err != nil {
			t.Fatal(err)
		}
		if got := <-rd.waits; got != want {
			t.Errorf("FetchBatches with wait %s: the reader was asked to wait %s, want %s", wait, got, want)
		}
	}
	if d := New(Config{}, Deps{}).maxWait; d != DefaultMaxWait {
		t.Errorf("default MaxWait %s, want %s", d, DefaultMaxWait)
	}
}
