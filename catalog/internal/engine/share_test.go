package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
)

// memShare is ShareStmts over maps, counting the writes, for the rules' unit tests (the
// backends' SQL is proved by catalogtest's share_groups suite).
type memShare struct {
	now     time.Time
	groups  map[string]int32
	members map[string][]ShareMemberRow
	parts   map[PartitionKey]SharePartitionRow
	bounds  map[PartitionKey]PartitionBounds
	topics  map[string]TopicMeta
	configs map[string]string
	writes  int
}

func (m *memShare) Name() string { return "mem" }
func (m *memShare) ShareTx(_ context.Context, fn func(ShareStmts) error) error {
	return fn(m)
}
func (m *memShare) Now(context.Context) (time.Time, error) { return m.now, nil }
func (m *memShare) ShareGroupRow(_ context.Context, g string) (int32, bool, error) {
	e, ok := m.groups[g]
	return e, ok, nil
}
func (m *memShare) ConsumerGroupExists(context.Context, string) (bool, error) { return false, nil }
func (m *memShare) InsertShareGroup(_ context.Context, g string) (bool, error) {
	m.writes++
	m.groups[g] = 0
	return true, nil
}
func (m *memShare) SetShareGroupEpoch(_ context.Context, g string, e int32) error {
	m.writes++
	m.groups[g] = e
	return nil
}
func (m *memShare) DeleteShareGroup(_ context.Context, g string) error {
	m.writes++
	delete(m.groups, g)
	return nil
}
func (m *memShare) ListShareGroups(context.Context) ([]string, error) { return nil, nil }
func (m *memShare) ShareMembers(_ context.Context, g string) ([]ShareMemberRow, error) {
	return m.members[g], nil
}
func (m *memShare) PutShareMember(_ context.Context, g string, r ShareMemberRow) error {
	m.writes++
	m.members[g] = append(slices.DeleteFunc(m.members[g], func(x ShareMemberRow) bool { return x.ID == r.ID }), r)
	return nil
}
func (m *memShare) DeleteShareMember(_ context.Context, g, id string) error {
	m.writes++
	m.members[g] = slices.DeleteFunc(m.members[g], func(x ShareMemberRow) bool { return x.ID == id })
	return nil
}
func (m *memShare) Topics(_ context.Context, names []string) (map[string]TopicMeta, error) {
	out := map[string]TopicMeta{}
	for _, n := range names {
		if t, ok := m.topics[n]; ok {
			out[n] = t
		}
	}
	return out, nil
}
func (m *memShare) TopicsByID(_ context.Context, ids []int64) (map[int64]TopicMeta, error) {
	out := map[int64]TopicMeta{}
	for _, t := range m.topics {
		if slices.Contains(ids, t.ID) {
			out[t.ID] = t
		}
	}
	return out, nil
}
func (m *memShare) SharePartitions(_ context.Context, _ string, keys []PartitionKey, _ bool) ([]SharePartitionRow, error) {
	var out []SharePartitionRow
	for _, k := range keys {
		if r, ok := m.parts[k]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}
func (m *memShare) Bounds(_ context.Context, keys []PartitionKey) (map[PartitionKey]PartitionBounds, error) {
	return m.bounds, nil
}
func (m *memShare) OffsetForTime(_ context.Context, k PartitionKey, _ int64) (int64, error) {
	return m.bounds[k].HighWatermark, nil
}
func (m *memShare) InsertSharePartition(_ context.Context, _ string, r SharePartitionRow) (bool, error) {
	m.writes++
	m.parts[PartitionKey{r.TopicID, r.Partition}] = r
	return true, nil
}
func (m *memShare) UpdateSharePartition(_ context.Context, _ string, r SharePartitionRow) error {
	m.writes++
	m.parts[PartitionKey{r.TopicID, r.Partition}] = r
	return nil
}
func (m *memShare) DeleteSharePartitions(context.Context, string, []int64) error { return nil }
func (m *memShare) GroupConfigs(_ context.Context, g string) (string, error) {
	return m.configs[g], nil
}
func (m *memShare) SetGroupConfigs(_ context.Context, g, c string) error {
	m.writes++
	m.configs[g] = c
	return nil
}

// TestShareAcquireNothingWritesNothing: an acquire that finds nothing — no new record,
// nothing available, no lock expired — writes nothing to the catalog; one that finds an
// expired lock writes.
func TestShareAcquireNothingWritesNothing(t *testing.T) {
	ctx := t.Context()
	k := PartitionKey{1, 0}
	m := &memShare{now: time.UnixMilli(1_000_000), groups: map[string]int32{}, members: map[string][]ShareMemberRow{},
		parts: map[PartitionKey]SharePartitionRow{}, bounds: map[PartitionKey]PartitionBounds{k: {0, 3, 3}},
		topics: map[string]TopicMeta{"t": {ID: 1, Name: "t", Partitions: 1}}, configs: map[string]string{}}
	if _, err := ShareHeartbeat(ctx, m, catalog.ShareHeartbeat{Group: "g", MemberID: "a", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	req := catalog.ShareAcquire{Group: "g", MemberID: "a", Partitions: []catalog.ShareTP{{Topic: "t"}}, MaxRecords: 10, ResetEarliest: true, LockDuration: time.Second}
	res, err := ShareAcquire(ctx, m, req)
	if err != nil || len(res.Partitions) != 1 || len(res.Partitions[0].Ranges) != 1 || res.Partitions[0].Ranges[0].Last != 2 {
		t.Fatalf("first acquire: %+v, %v", res, err)
	}
	before := m.writes
	for range 3 {
		res, err = ShareAcquire(ctx, m, req)
		if err != nil || len(res.Partitions[0].Ranges) != 0 || res.Partitions[0].Next != 3 {
			t.Fatalf("empty acquire: %+v, %v", res, err)
		}
	}
	if m.writes != before {
		t.Fatalf("acquires that found nothing wrote %d times", m.writes-before)
	}
	m.now = m.now.Add(time.Second) // the locks expire: the next acquire redelivers and writes
	res, err = ShareAcquire(ctx, m, req)
	if err != nil || len(res.Partitions[0].Ranges) != 1 || res.Partitions[0].Ranges[0].DeliveryCount != 2 || m.writes != before+1 {
		t.Fatalf("acquire after expiry: %+v, %v, %d writes", res, err, m.writes-before)
	}
}

// TestSharePartRules: the state's rules by known answers.
func TestSharePartRules(t *testing.T) {
	p := SharePart{Start: 10}
	got := p.acquire("a", 100, 5, 13) // only 3 records below the limit
	if len(got) != 1 || got[0].First != 10 || got[0].Last != 12 || got[0].Count != 1 {
		t.Fatalf("acquire: %+v", got)
	}
	// Per-offset acknowledgement: accept 10, release 11, reject 12.
	if err := p.ack("a", 50, []catalog.AckBatch{{First: 10, Last: 12, Types: []int8{1, 2, 3}}}, time.Second, 5); err != nil {
		t.Fatal(err)
	}
	if p.Start != 11 || len(p.Ranges) != 2 || p.Ranges[0].State != RangeAvailable || p.Ranges[1].State != RangeArchived {
		t.Fatalf("after acks: %+v", p)
	}
	got = p.acquire("b", 200, 5, 13)
	if len(got) != 1 || got[0].First != 11 || got[0].Last != 11 || got[0].Count != 2 {
		t.Fatalf("redelivery: %+v", got)
	}
	// A deadline at or before now is expired: b's ack at 200 is refused, and at the
	// limit (2) the expiry archives, moving the start past everything.
	if err := p.ack("b", 200, []catalog.AckBatch{{First: 11, Last: 11, Types: []int8{1}}}, time.Second, 2); err == nil {
		t.Fatal("an ack at the deadline was accepted")
	}
	if !p.expire(200, 2) {
		t.Fatal("nothing expired")
	}
	p.normalize()
	if p.Start != 13 || len(p.Ranges) != 0 {
		t.Fatalf("after expiry at the limit: %+v", p)
	}
	// clampLogStart drops what retention removed.
	p = SharePart{Start: 0, Ranges: []ShareRange{{First: 0, Last: 9, State: RangeAvailable, Count: 1}}}
	if !p.clampLogStart(4) || p.Start != 4 || p.Ranges[0].First != 4 {
		t.Fatalf("clamp: %+v", p)
	}
}

func (m *memShare) DLQPendingPartitions(context.Context, int) ([]DLQPendingRow, error) {
	return nil, nil
}
func (m *memShare) DLQLease(context.Context, string) (DLQLeaseRow, bool, error) {
	return DLQLeaseRow{}, false, nil
}
func (m *memShare) PutDLQLease(context.Context, string, DLQLeaseRow) error { return nil }
func (m *memShare) DLQCopied(context.Context, string) (int64, error)       { return 0, nil }
