package catalogtest

import (
	"reflect"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// runUsage runs the conformance suite of catalog.Usage on a fresh catalog (the prune
// counts rows across the store).
func runUsage(t *testing.T, open func(t *testing.T) catalog.Backend) {
	t.Run("add_window_prune", func(t *testing.T) { testUsage(t, open(t)) })
}

func testUsage(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	m0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m1 := m0.Add(time.Minute)
	const topic, other = 7001, 7002
	// One batch touching a bucket twice (two nodes' worth of counts merged), two
	// principals, two minutes, and a second topic that must not leak into the first.
	if err := c.AddUsage(ctx, []catalog.UsageDelta{
		{TopicID: topic, Principal: "User:alice", Minute: m0.Add(10 * time.Second), UsageCounts: catalog.UsageCounts{BytesIn: 100, RecordsIn: 2, PutRequests: 0.25, Commits: 0.25}},
		{TopicID: topic, Principal: "User:alice", Minute: m0.Add(50 * time.Second), UsageCounts: catalog.UsageCounts{BytesIn: 300, RecordsIn: 6, PutRequests: 0.5, Commits: 0.5}},
		{TopicID: topic, Principal: "User:bob", Minute: m1, UsageCounts: catalog.UsageCounts{BytesOut: 40, RecordsOut: 4, GetRequests: 1}},
		{TopicID: other, Principal: "User:alice", Minute: m1, UsageCounts: catalog.UsageCounts{BytesIn: 1 << 40, RecordsIn: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	// A later transaction adds to the same bucket.
	if err := c.AddUsage(ctx, []catalog.UsageDelta{
		{TopicID: topic, Principal: "User:alice", Minute: m1, UsageCounts: catalog.UsageCounts{BytesIn: 8, RecordsIn: 1, PutRequests: 0.125}},
		{TopicID: topic, Principal: "User:alice", Minute: m0, UsageCounts: catalog.UsageCounts{BytesIn: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddUsage(ctx, nil); err != nil {
		t.Fatalf("AddUsage(nil) = %v, want nil", err)
	}

	got, err := c.TopicUsage(ctx, topic, m0.Add(30*time.Second)) // inside m0: its bucket counts whole
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.PrincipalUsage{
		{Principal: "User:alice", UsageCounts: catalog.UsageCounts{BytesIn: 409, RecordsIn: 9, PutRequests: 0.875, Commits: 0.75}},
		{Principal: "User:bob", UsageCounts: catalog.UsageCounts{BytesOut: 40, RecordsOut: 4, GetRequests: 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("TopicUsage since m0 = %+v\nwant %+v", got, want)
	}
	got, err = c.TopicUsage(ctx, topic, m1)
	if err != nil {
		t.Fatal(err)
	}
	want = []catalog.PrincipalUsage{
		{Principal: "User:alice", UsageCounts: catalog.UsageCounts{BytesIn: 8, RecordsIn: 1, PutRequests: 0.125}},
		{Principal: "User:bob", UsageCounts: catalog.UsageCounts{BytesOut: 40, RecordsOut: 4, GetRequests: 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("TopicUsage since m1 = %+v\nwant %+v", got, want)
	}
	if got, err := c.TopicUsage(ctx, topic, m1.Add(time.Minute)); err != nil || len(got) != 0 {
		t.Fatalf("TopicUsage after every bucket = %+v, %v; want nothing", got, err)
	}

	n, err := c.PruneUsage(ctx, m1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 { // alice's m0 bucket of topic
		t.Errorf("PruneUsage(m1) dropped %d buckets, want 1", n)
	}
	got, err = c.TopicUsage(ctx, topic, m0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].BytesIn != 8 {
		t.Errorf("after the prune, TopicUsage since m0 = %+v; want only the m1 buckets", got)
	}
}
