package broker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
)

// ValidateTopicName applies the name rule of topics (catalog.ValidateTopicName). Every
// call of the core that names a topic applies it, after authorization and before
// anything is looked up, so front ends need not: a bad name is CodeInvalidTopicName,
// whichever front end sent it.
func ValidateTopicName(name string) error {
	if e := validTopic(name); e != nil {
		return e
	}
	return nil
}

func validTopic(name string) *Error {
	if err := catalog.ValidateTopicName(name); err != nil {
		return newError(CodeInvalidTopicName, "%s", err.Error())
	}
	return nil
}

// validGroup applies the same rule to a group's name (catalog.ValidateGroupName): every
// group call checks it, after authorization and before the catalog is asked.
func validGroup(name string) *Error {
	if err := catalog.ValidateGroupName(name); err != nil {
		return newError(CodeInvalidGroupName, "%s", err.Error())
	}
	return nil
}

// CheckPartitionCount applies the rule of partition counts (catalog.ValidatePartitions:
// 1 to catalog.MaxPartitions), as CodeInvalidPartitionCount. The core applies it to
// every count it creates or grows a topic to; a front end whose caller named a count
// explicitly calls it on that count first, since an explicit 0 and the zero value of
// CreateTopicRequest.Partitions (the default) look alike here.
func CheckPartitionCount(n int32) error {
	if e := checkPartitionCount(n); e != nil {
		return e
	}
	return nil
}

func checkPartitionCount(n int32) *Error {
	if err := catalog.ValidatePartitions(n); err != nil {
		return catalogError("partition count", err)
	}
	return nil
}

// LookupTopic returns a topic's metadata from the topic cache (DefaultTopicCacheTTL),
// which produce and fetch read instead of the catalog.
func (b *Broker) LookupTopic(ctx context.Context, who Principal, name string) (TopicInfo, error) {
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(name)); e != nil {
		return TopicInfo{}, e
	}
	ti, e := b.lookupTopic(ctx, name)
	if e != nil {
		return TopicInfo{}, e
	}
	return ti, nil
}

func (b *Broker) lookupTopic(ctx context.Context, name string) (TopicInfo, *Error) {
	if e := b.check(CapTopics); e != nil {
		return TopicInfo{}, e
	}
	if e := validTopic(name); e != nil {
		return TopicInfo{}, e
	}
	ti, err := b.topics.get(ctx, name)
	if err != nil {
		return TopicInfo{}, catalogError("get topic", err, onTopic(name))
	}
	return ti, nil
}

// LookupPartition is LookupTopic for one partition of the topic: a partition beyond the
// cached count re-reads the topic first (it may have just grown), then answers
// CodePartitionOutOfRange.
func (b *Broker) LookupPartition(ctx context.Context, who Principal, name string, partition int32) (TopicInfo, error) {
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(name)); e != nil {
		return TopicInfo{}, e
	}
	ti, e := b.lookupPartition(ctx, name, partition)
	if e != nil {
		return TopicInfo{}, e
	}
	return ti, nil
}

func (b *Broker) lookupPartition(ctx context.Context, name string, part int32) (TopicInfo, *Error) {
	ti, e := b.lookupTopic(ctx, name)
	if e == nil && part >= ti.Partitions {
		ti, e = b.refreshTopic(ctx, name)
	}
	if e != nil {
		return TopicInfo{}, e
	}
	if part < 0 || part >= ti.Partitions {
		return TopicInfo{}, partitionOutOfRange(name, part, ti.Partitions)
	}
	return ti, nil
}

// refreshTopic reads the topic from the catalog into the cache.
func (b *Broker) refreshTopic(ctx context.Context, name string) (TopicInfo, *Error) {
	ti, err := b.topics.refresh(ctx, name)
	if err != nil {
		return TopicInfo{}, catalogError("get topic", err, onTopic(name))
	}
	return ti, nil
}

func partitionOutOfRange(topic string, part, count int32) *Error {
	return newError(CodePartitionOutOfRange, "topic %q has partitions 0 to %d; there is no partition %d", topic, count-1, part).
		with("partitions", count)
}

// DefaultPartitions is a new topic's partition count when the request names none, as
// Kafka's num.partitions.
const DefaultPartitions = 1

// CreateTopicRequest asks for a topic.
type CreateTopicRequest struct {
	Name string
	// Partitions is the partition count; 0 or less: DefaultPartitions.
	Partitions int32
	// Configs are the explicit configs (catalog.ParseConfig); the rest take defaults.
	Configs map[string]string
	// ValidateOnly checks everything, the name being free included, and creates nothing:
	// the answer is the topic that would have been created (ID 0).
	ValidateOnly bool
}

// CreateTopic creates a topic with every partition at offset 0. It needs create on the
// cluster or on the topic, as in Kafka.
func (b *Broker) CreateTopic(ctx context.Context, who Principal, req CreateTopicRequest) (catalog.Topic, error) {
	if e := b.check(CapTopics); e != nil {
		return catalog.Topic{}, e
	}
	if !b.may(who, acl.OpCreate, acl.Cluster()) {
		if e := b.authorize(ctx, who, acl.OpCreate, acl.Topic(req.Name)); e != nil {
			return catalog.Topic{}, e
		}
	}
	if err := ValidateTopicName(req.Name); err != nil {
		return catalog.Topic{}, err
	}
	if req.Partitions <= 0 {
		req.Partitions = DefaultPartitions
	}
	if e := checkPartitionCount(req.Partitions); e != nil {
		return catalog.Topic{}, e
	}
	if _, err := catalog.ParseConfig(req.Configs); err != nil {
		return catalog.Topic{}, catalogError("create topic", err, onTopic(req.Name))
	}
	if e := b.checkConfigLimits(ctx, who, req.Configs); e != nil {
		return catalog.Topic{}, e
	}
	if req.ValidateOnly {
		_, err := b.d.Catalog.Topic(ctx, req.Name)
		switch {
		case err == nil:
			return catalog.Topic{}, newError(CodeTopicExists, "topic %q already exists", req.Name)
		case !errors.Is(err, catalog.ErrTopicNotFound):
			return catalog.Topic{}, catalogError("create topic", err, onTopic(req.Name))
		}
		return catalog.Topic{Name: req.Name, Partitions: req.Partitions, Configs: maps.Clone(req.Configs)}, nil
	}
	if e := b.mutate(who, req.Partitions); e != nil {
		return catalog.Topic{}, e
	}
	ctx = withAudit(b.withOwner(ctx, who), who, "topic.create", acl.Topic(req.Name), map[string]any{"partitions": req.Partitions, "configs": req.Configs})
	t, err := b.d.Catalog.CreateTopic(ctx, req.Name, req.Partitions, req.Configs)
	if errors.Is(err, catalog.ErrCapReached) {
		return catalog.Topic{}, b.capError(who, catalog.QuotaTopicCount, err)
	}
	if err != nil {
		return catalog.Topic{}, catalogError("create topic", err, onTopic(req.Name))
	}
	return t, nil
}

// Topics lists the live topics the caller may describe, ordered by name.
func (b *Broker) Topics(ctx context.Context, who Principal) ([]catalog.Topic, error) {
	if e := b.check(CapTopics); e != nil {
		return nil, e
	}
	ts, err := b.d.Catalog.Topics(ctx)
	if err != nil {
		return nil, catalogError("list topics", err)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return visible(b, who, ts, func(t catalog.Topic) acl.Resource { return acl.Topic(t.Name) }), nil
}

// Topic reads a topic from the catalog (not the cache: an administrator sees a change
// made on another node at once).
func (b *Broker) Topic(ctx context.Context, who Principal, name string) (catalog.Topic, error) {
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(name)); e != nil {
		return catalog.Topic{}, e
	}
	return b.topic(ctx, "get topic", name)
}

func (b *Broker) topic(ctx context.Context, op, name string) (catalog.Topic, error) {
	if e := b.check(CapTopics); e != nil {
		return catalog.Topic{}, e
	}
	if err := ValidateTopicName(name); err != nil {
		return catalog.Topic{}, err
	}
	t, err := b.d.Catalog.Topic(ctx, name)
	if err != nil {
		return catalog.Topic{}, catalogError(op, err, onTopic(name))
	}
	return t, nil
}

// DeleteTopic deletes a topic; its data goes with the compactor, and a topic created
// again under its name is a new one.
func (b *Broker) DeleteTopic(ctx context.Context, who Principal, name string) error {
	if e := b.check(CapTopics); e != nil {
		return e
	}
	if e := b.authorize(ctx, who, acl.OpDelete, acl.Topic(name)); e != nil {
		return e
	}
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if b.d.Quotas != nil {
		// Kafka counts a deletion's partitions; a topic not found is refused below.
		n := int32(1)
		if t, err := b.d.Catalog.Topic(ctx, name); err == nil {
			n = t.Partitions
		}
		if e := b.mutate(who, n); e != nil {
			return e
		}
	}
	err := b.d.Catalog.DeleteTopic(withAudit(ctx, who, "topic.delete", acl.Topic(name), nil), name)
	b.topics.invalidate(name)
	if err != nil {
		return catalogError("delete topic", err, onTopic(name))
	}
	return nil
}

// TopicUpdate changes a topic.
type TopicUpdate struct {
	// Partitions is the new partition count: 0 leaves it; fewer than now is refused.
	Partitions int32
	// Configs sets configs; an empty value removes one (back to its default).
	Configs map[string]string
}

// UpdateTopic grows the partition count and sets or removes configs. Each config is
// checked on its own first, so that the refusal names the one that is wrong; the
// catalog checks the result as a whole. An empty update answers the topic as it is.
func (b *Broker) UpdateTopic(ctx context.Context, who Principal, name string, u TopicUpdate) (catalog.Topic, error) {
	if e := b.check(CapTopics); e != nil {
		return catalog.Topic{}, e
	}
	if u.Partitions != 0 || len(u.Configs) == 0 {
		if e := b.authorize(ctx, who, acl.OpAlter, acl.Topic(name)); e != nil {
			return catalog.Topic{}, e
		}
	}
	if len(u.Configs) > 0 {
		if e := b.authorize(ctx, who, acl.OpAlterConfigs, acl.Topic(name)); e != nil {
			return catalog.Topic{}, e
		}
	}
	if err := ValidateTopicName(name); err != nil {
		return catalog.Topic{}, err
	}
	known := catalog.ConfigKeys()
	for _, k := range slices.Sorted(maps.Keys(u.Configs)) {
		v := u.Configs[k]
		if v == "" {
			if !slices.Contains(known, k) {
				return catalog.Topic{}, newError(CodeInvalidConfig, "config %s: unknown config", k).with("config", k)
			}
			continue
		}
		if _, err := catalog.ParseConfig(map[string]string{k: v}); err != nil {
			return catalog.Topic{}, catalogError("update topic", err, onTopic(name))
		}
	}
	if u.Partitions == 0 && len(u.Configs) == 0 {
		return b.topic(ctx, "update topic", name)
	}
	if e := b.checkConfigLimits(ctx, who, u.Configs); e != nil {
		return catalog.Topic{}, e
	}
	ctx = withAudit(ctx, who, "topic.alter", acl.Topic(name), alterDetails(u.Partitions, u.Configs))
	t, err := b.d.Catalog.UpdateTopic(ctx, name, u.Partitions, u.Configs)
	b.topics.invalidate(name)
	if err != nil {
		return catalog.Topic{}, catalogError("update topic", err, onTopic(name))
	}
	return t, nil
}

// ConfigEntry is one config of a topic as DescribeConfigs shows it.
type ConfigEntry struct {
	Name  string
	Value string
	// Default: the topic does not set it; Value is the default.
	Default bool
}

// DescribeNodeConfigs lists a node's own configs (Kafka's broker resource): none can be
// read or set through a client here, so none are listed; asking needs describe-configs
// on the cluster, as in Kafka, so that a refused caller learns that much and no more.
func (b *Broker) DescribeNodeConfigs(ctx context.Context, who Principal) ([]ConfigEntry, error) {
	if e := b.authorize(ctx, who, acl.OpDescribeConfigs, acl.Cluster()); e != nil {
		return nil, e
	}
	return []ConfigEntry{}, nil
}

// DescribeConfigs lists every supported config of a topic with its effective value,
// ordered by name.
func (b *Broker) DescribeConfigs(ctx context.Context, who Principal, name string) ([]ConfigEntry, error) {
	if e := b.authorize(ctx, who, acl.OpDescribeConfigs, acl.Topic(name)); e != nil {
		return nil, e
	}
	t, err := b.topic(ctx, "describe configs", name)
	if err != nil {
		return nil, err
	}
	return EffectiveConfigs(t.Configs), nil
}

// EffectiveConfigs lists every supported config, ordered by name, with its value under
// the explicit configs given (a topic's Configs).
func EffectiveConfigs(explicit map[string]string) []ConfigEntry {
	var out []ConfigEntry
	for _, k := range catalog.ConfigKeys() {
		v, set := explicit[k]
		if !set {
			v, _ = catalog.ConfigDefault(k)
		}
		out = append(out, ConfigEntry{Name: k, Value: v, Default: !set})
	}
	return out
}

// Partitions lists a topic's partitions in order, read from the catalog.
func (b *Broker) Partitions(ctx context.Context, who Principal, name string) ([]catalog.PartitionInfo, error) {
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(name)); e != nil {
		return nil, e
	}
	t, err := b.topic(ctx, "list partitions", name)
	if err != nil {
		return nil, err
	}
	ps, err := b.d.Catalog.Partitions(ctx, t.ID)
	if err != nil {
		return nil, catalogError("list partitions", err, onTopic(name))
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
	return ps, nil
}

// partitionInfo reads one partition's state from the catalog.
func (b *Broker) partitionInfo(ctx context.Context, ti TopicInfo, part int32) (catalog.PartitionInfo, *Error) {
	ps, err := b.d.Catalog.Partitions(ctx, ti.ID)
	if err != nil {
		return catalog.PartitionInfo{}, catalogError("read partition", err, onPartition(ti.Name, part))
	}
	for _, pi := range ps {
		if pi.Partition == part {
			return pi, nil
		}
	}
	return catalog.PartitionInfo{}, partitionOutOfRange(ti.Name, part, ti.Partitions)
}

// Earliest and Latest, passed to ListOffset as the time, name the log start offset and
// the high watermark (Kafka's ListOffsets uses the same numbers).
const (
	Latest   int64 = -1
	Earliest int64 = -2
)

// ListOffset answers a partition's log start offset (at Earliest), its high watermark
// (at Latest: the offset the next record will get), or the earliest offset whose
// timestamp is at or after at (unix ms), at the catalog's chunk granularity; the high
// watermark when there is none.
func (b *Broker) ListOffset(ctx context.Context, who Principal, topic string, partition int32, at int64) (int64, error) {
	return b.ListOffsetAt(ctx, who, topic, partition, at, reader.ReadUncommitted)
}

// ListOffsetAt is ListOffset for a reader at an isolation level: under
// reader.ReadCommitted, Latest is the last stable offset (Kafka's ListOffsets with
// isolation level 1).
func (b *Broker) ListOffsetAt(ctx context.Context, who Principal, topic string, partition int32, at int64, iso reader.Isolation) (int64, error) {
	if e := b.authorize(ctx, who, acl.OpDescribe, acl.Topic(topic)); e != nil {
		return 0, e
	}
	ti, e := b.lookupPartition(ctx, topic, partition)
	if e != nil {
		return 0, e
	}
	switch {
	case at == Earliest || at == Latest:
		pi, e := b.partitionInfo(ctx, ti, partition)
		if e != nil {
			return 0, e
		}
		switch {
		case at == Earliest:
			return pi.LogStartOffset, nil
		case iso == reader.ReadCommitted:
			return pi.LastStableOffset, nil
		}
		return pi.HighWatermark, nil
	case at < 0:
		return 0, newError(CodeInvalidTimestamp, "timestamp %d: use unix milliseconds, or %d (earliest) or %d (latest)", at, Earliest, Latest)
	}
	off, e := b.offsetAtTime(ctx, ti, partition, at)
	if e != nil {
		return 0, e
	}
	return off, nil
}

// DeleteRecords deletes a partition's records below before — Kafka's DeleteRecords; -1
// means the high watermark, everything written so far — by moving its log start offset
// up (never down): fetches below it are out of range at once, and the compactor deletes
// the data behind it later, safely. Stream processing uses it to purge consumed
// repartition topics.
func (b *Broker) DeleteRecords(ctx context.Context, who Principal, topic string, partition int32, before int64) (catalog.PartitionInfo, error) {
	if e := b.check(CapDeleteRecords); e != nil {
		return catalog.PartitionInfo{}, e
	}
	if e := b.authorize(ctx, who, acl.OpDelete, acl.Topic(topic)); e != nil {
		return catalog.PartitionInfo{}, e
	}
	if before < -1 {
		return catalog.PartitionInfo{}, newError(CodeInvalidOffset, "before_offset must be an offset (records below it are deleted) or -1 for the high watermark")
	}
	ti, e := b.lookupPartition(ctx, topic, partition)
	if e != nil {
		return catalog.PartitionInfo{}, e
	}
	if before == -1 {
		pi, e := b.partitionInfo(ctx, ti, partition)
		if e != nil {
			return catalog.PartitionInfo{}, e
		}
		before = pi.HighWatermark
	}
	ctx = withAudit(ctx, who, "records.delete", acl.Topic(topic), map[string]any{"partition": partition, "before_offset": before})
	pi, err := b.d.Records.DeleteRecords(ctx, ti.ID, partition, before)
	if err != nil {
		var re *catalog.OffsetRangeError
		if errors.As(err, &re) {
			// Deleting below the log start changes nothing, so 0 is as good as any.
			return catalog.PartitionInfo{}, offsetRange(onPartition(topic, partition), re.Offset, 0, re.LogStartOffset, re.HighWatermark).
				cause(err).with("field", "before_offset")
		}
		return catalog.PartitionInfo{}, catalogError("delete records", err, onPartition(topic, partition))
	}
	return pi, nil
}
