package kafka_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/kafka"
)

// Topic administration, configs, offsets and group commits through franz-go's admin
// client.

func configsOf(t *testing.T, adm *kadm.Client, topic string) map[string]kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctxFor(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs of %s: %v %v", topic, err, rc.Err)
	}
	out := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		out[c.Key] = c
	}
	return out
}

func wantConfig(t *testing.T, cs map[string]kadm.Config, key, value string, source kmsg.ConfigSource) {
	t.Helper()
	c, ok := cs[key]
	if !ok || c.MaybeValue() != value || c.Source != source {
		t.Fatalf("config %s: %q from %v (present %v), want %q from %v", key, c.MaybeValue(), c.Source, ok, value, source)
	}
}

func TestFranzGoTopicAdmin(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	adm := kadm.NewClient(client(t, kgo.SeedBrokers(n.addr)))
	ctx := ctxFor(t, 60*time.Second)

	// Validate-only creates nothing; any replication factor is reported as 1.
	v, err := adm.ValidateCreateTopics(ctx, 3, 3, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "admin")
	if err != nil || v["admin"].Err != nil {
		t.Fatalf("validate create: %v %+v", err, v["admin"])
	}
	if ts, _ := adm.ListTopics(ctx); ts.Has("admin") {
		t.Fatal("validate-only created the topic")
	}
	cr, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "admin")
	if err != nil || cr.NumPartitions != 3 || cr.ReplicationFactor != 1 || cr.ID == (kadm.TopicID{}) {
		t.Fatalf("create: %v %+v", err, cr)
	}
	if c := cr.Configs["retention.ms"]; c.MaybeValue() != "60000" {
		t.Fatalf("create answered retention.ms %q", c.MaybeValue())
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "admin"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, "other"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("unknown config: %v, want INVALID_CONFIG", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "bad/name"); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}

	// Every effective config, with where it comes from.
	cs := configsOf(t, adm, "admin")
	wantConfig(t, cs, "retention.ms", "60000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, cs, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, cs, "max.message.bytes", "1048576", kmsg.ConfigSourceDefaultConfig)
	if len(cs) < 10 {
		t.Fatalf("described %d configs, want every one", len(cs))
	}

	// Incremental: set, append to a list, delete; the others stay.
	alter := func(cfgs ...kadm.AlterConfig) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, cfgs, "admin")
		if err == nil {
			_, err = rs.On("admin", nil)
		}
		if err != nil || rs[0].Err != nil {
			t.Fatalf("alter %+v: %v %v %s", cfgs, err, rs[0].Err, rs[0].ErrMessage)
		}
	}
	alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2000")},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")})
	cs = configsOf(t, adm, "admin")
	wantConfig(t, cs, "max.message.bytes", "2000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, cs, "cleanup.policy", "compact,delete", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, cs, "retention.ms", "60000", kmsg.ConfigSourceDynamicTopicConfig)
	alter(kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"})
	cs = configsOf(t, adm, "admin")
	wantConfig(t, cs, "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, cs, "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("-5")}}, "admin")
	if err != nil || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("invalid value: %v %+v, want INVALID_CONFIG", err, rs)
	}
	rs, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("5")}}, "admin")
	if c := configsOf(t, adm, "admin")["retention.ms"]; err != nil || rs[0].Err != nil || c.MaybeValue() != "604800000" {
		t.Fatalf("validate-only alter: %v %+v, or it changed the config", err, rs)
	}
	// The legacy AlterConfigs replaces the whole set: what it does not name is reset.
	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("120000")}}, "admin")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("alter state: %v %+v", err, rs)
	}
	cs = configsOf(t, adm, "admin")
	wantConfig(t, cs, "retention.ms", "120000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, cs, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, cs, "max.message.bytes", "1048576", kmsg.ConfigSourceDefaultConfig)

	// Partitions grow, never shrink; validate-only changes nothing.
	if r, err := adm.ValidateUpdatePartitions(ctx, 8, "admin"); err != nil || r["admin"].Err != nil {
		t.Fatalf("validate grow: %v %+v", err, r)
	}
	if r, err := adm.UpdatePartitions(ctx, 5, "admin"); err != nil || r["admin"].Err != nil {
		t.Fatalf("grow: %v %+v", err, r)
	}
	if r, _ := adm.UpdatePartitions(ctx, 2, "admin"); !errors.Is(r["admin"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %+v, want INVALID_PARTITIONS", r)
	}
	if tp, _ := cat.Topic(ctx, "admin"); tp.Partitions != 5 {
		t.Fatalf("partitions %d, want 5", tp.Partitions)
	}

	// Delete, by name; then it is gone.
	if r, err := adm.DeleteTopic(ctx, "admin"); err != nil || r.Err != nil {
		t.Fatalf("delete: %v %+v", err, r)
	}
	if _, err := adm.DeleteTopic(ctx, "admin"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete again: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

// Offsets: list by time, delete records, and commits from outside a group with their
// metadata.
func TestFranzGoOffsetsAndCommits(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	if _, err := cat.CreateTopic(t.Context(), "offs", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl := client(t, kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("offs"))
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t, 60*time.Second)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 10 {
		produceSync(t, cl, []*kgo.Record{{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)}})
	}
	lookup := func(lo kadm.ListedOffsets, err error) kadm.ListedOffset {
		t.Helper()
		o, ok := lo.Lookup("offs", 0)
		if err != nil || !ok || o.Err != nil {
			t.Fatalf("list offsets: %v %v %+v", err, ok, o)
		}
		return o
	}
	if o := lookup(adm.ListStartOffsets(ctx, "offs")); o.Offset != 0 {
		t.Fatalf("start %d", o.Offset)
	}
	if o := lookup(adm.ListEndOffsets(ctx, "offs")); o.Offset != 10 {
		t.Fatalf("end %d", o.Offset)
	}
	if o := lookup(adm.ListOffsetsAfterMilli(ctx, base.Add(3500*time.Millisecond).UnixMilli(), "offs")); o.Offset != 4 || o.Timestamp != base.Add(4*time.Second).UnixMilli() {
		t.Fatalf("after 3.5s: offset %d timestamp %d, want 4", o.Offset, o.Timestamp)
	}
	if o := lookup(adm.ListMaxTimestampOffsets(ctx, "offs")); o.Offset != 9 {
		t.Fatalf("max timestamp: offset %d, want 9", o.Offset)
	}

	var del kadm.Offsets
	del.AddOffset("offs", 0, 6, -1)
	dr, err := adm.DeleteRecords(ctx, del)
	if err != nil || dr["offs"][0].Err != nil || dr["offs"][0].LowWatermark != 6 {
		t.Fatalf("delete records: %v %+v", err, dr)
	}
	if o := lookup(adm.ListStartOffsets(ctx, "offs")); o.Offset != 6 {
		t.Fatalf("start after delete %d, want 6", o.Offset)
	}
	var past kadm.Offsets
	past.AddOffset("offs", 0, 99, -1)
	if dr, _ := adm.DeleteRecords(ctx, past); !errors.Is(dr["offs"][0].Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past the end: %+v, want OFFSET_OUT_OF_RANGE", dr)
	}

	// Commits from outside a group (generation -1), with metadata round-tripped.
	var co kadm.Offsets
	co.Add(kadm.Offset{Topic: "offs", Partition: 0, At: 7, LeaderEpoch: -1, Metadata: "checkpoint-7"})
	cr, err := adm.CommitOffsets(ctx, "reporting", co)
	if err != nil || cr.Error() != nil {
		t.Fatalf("commit: %v %v", err, cr.Error())
	}
	fr, err := adm.FetchOffsets(ctx, "reporting")
	if err != nil || fr.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fr.Error())
	}
	if o, ok := fr.Lookup("offs", 0); !ok || o.At != 7 || o.Metadata != "checkpoint-7" {
		t.Fatalf("fetched %+v (found %v), want 7 with its metadata", o, ok)
	}
	if fr, err := adm.FetchOffsets(ctx, "nobody"); err != nil || len(fr) != 0 {
		t.Fatalf("offsets of an unknown group: %v %+v, want none", err, fr)
	}
	// A member the group does not have: its commits are refused.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = "reporting", "member-1", 3
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "offs"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = 8
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("member commit: %v %+v, want UNKNOWN_MEMBER_ID", err, resp)
	}
}

// The admin requests' corners, by hand: topics deleted by id, replica assignments
// refused, names given twice, broker configs.
func TestAdminRequestCorners(t *testing.T) {
	cat := openSQLite(t)
	n := startNode(t, cat, kafka.Config{})
	r := rawTo(t, n)
	topic, err := cat.CreateTopic(t.Context(), "by-id", 1, nil)
	if err != nil {
		t.Fatal(err)
	}

	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"twice", "twice", "placed"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 3
		if name == "placed" {
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Replicas = []int32{0}
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		ct.Topics = append(ct.Topics, rt)
	}
	cr := r.do(ct).(*kmsg.CreateTopicsResponse)
	wantCode(t, "a name twice", cr.Topics[0].ErrorCode, kerr.InvalidRequest)
	wantCode(t, "a name twice (second)", cr.Topics[1].ErrorCode, kerr.InvalidRequest)
	wantCode(t, "replica assignment", cr.Topics[2].ErrorCode, kerr.InvalidReplicaAssignment)
	if ts, _ := cat.Topics(t.Context()); len(ts) != 1 {
		t.Fatalf("refused creations made topics: %+v", ts)
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "by-id", 2
	cpt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{0}}}
	cp.Topics = append(cp.Topics, cpt)
	wantCode(t, "partition assignment", r.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode, kerr.InvalidReplicaAssignment)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = 4, "0"
	dc.Resources = append(dc.Resources, res)
	if dr := r.do(dc).(*kmsg.DescribeConfigsResponse).Resources[0]; dr.ErrorCode != 0 || len(dr.Configs) != 0 {
		t.Fatalf("broker configs: %+v, want none and no error", dr)
	}
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iar := kmsg.NewIncrementalAlterConfigsRequestResource()
	iar.ResourceType, iar.ResourceName = 4, "0"
	ia.Resources = append(ia.Resources, iar)
	wantCode(t, "altering a broker's configs", r.do(ia).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode, kerr.InvalidRequest)

	// DeleteTopics v6 by topic id; an unknown id.
	dt := kmsg.NewPtrDeleteTopicsRequest()
	for _, id := range [][16]byte{topic.UUID, {1, 2, 3}} {
		t6 := kmsg.NewDeleteTopicsRequestTopic()
		t6.TopicID = id
		dt.Topics = append(dt.Topics, t6)
	}
	dr := r.do(dt).(*kmsg.DeleteTopicsResponse)
	if dr.Topics[0].ErrorCode != 0 || dr.Topics[0].Topic == nil || *dr.Topics[0].Topic != "by-id" {
		t.Fatalf("delete by id: %+v", dr.Topics[0])
	}
	wantCode(t, "delete an unknown id", dr.Topics[1].ErrorCode, kerr.UnknownTopicID)
	if _, err := cat.Topic(t.Context(), "by-id"); err == nil {
		t.Fatal("the topic deleted by id is still there")
	}
}
