package broker

import (
	"context"
	"slices"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// Table topics (package tables): a topic with iceberg.enabled is also an Iceberg
// table, served read-only to engines. Loading or listing a table is reading its
// topic, so it is authorized as a fetch is: Read on the topic.

// TableTopic answers the table topic name, for who may read it: Forbidden without Read
// (whether or not it exists), CodeTopicNotFound when there is no such topic or its
// iceberg.enabled is false.
func (b *Broker) TableTopic(ctx context.Context, who Principal, name string) (catalog.Topic, error) {
	if e := b.authorize(ctx, who, acl.OpRead, acl.Topic(name)); e != nil {
		return catalog.Topic{}, e
	}
	t, err := b.topic(ctx, "get table", name)
	if err != nil {
		return catalog.Topic{}, err
	}
	if !tableTopic(t) {
		return catalog.Topic{}, newError(CodeTopicNotFound, "topic %q is not a table topic (its iceberg.enabled is false)", name).with("topic", name)
	}
	return t, nil
}

// TableTopics lists the table topics who may read, by name.
func (b *Broker) TableTopics(ctx context.Context, who Principal) ([]catalog.Topic, error) {
	ts, err := b.Topics(ctx, who)
	if err != nil {
		return nil, err
	}
	ts = slices.DeleteFunc(ts, func(t catalog.Topic) bool { return !tableTopic(t) || !b.may(who, acl.OpRead, acl.Topic(t.Name)) })
	return ts, nil
}

func tableTopic(t catalog.Topic) bool {
	cfg, err := catalog.ParseConfig(t.Configs)
	return err == nil && cfg.IcebergEnabled
}

// TableStates reads the table topics' committed state (both catalog backends).
type TableStates interface {
	TableState(ctx context.Context, topicID int64) (catalog.TableState, error)
}

// TableStatus is how far a table topic's table has come: per partition, the next
// offset the table does not hold yet beside the partition's last stable offset, the
// most the tables role converts (it reads committed records only).
type TableStatus struct {
	Topic string
	// MetadataLocation is the table's current metadata file, "" before its first
	// commit.
	MetadataLocation string
	Partitions       []TablePartition
}

// TablePartition is one partition of a TableStatus.
type TablePartition struct {
	Partition    int32
	Next, Stable int64
}

// Lag is the records (offsets) the table is behind the partition.
func (p TablePartition) Lag() int64 { return max(0, p.Stable-p.Next) }

// Lag is the table's lag summed over its partitions.
func (s TableStatus) Lag() int64 {
	var n int64
	for _, p := range s.Partitions {
		n += p.Lag()
	}
	return n
}

// TableStatus answers how far topic's table has come, for who may read the topic (as
// loading the table does): CodeTopicNotFound for a topic that is not a table topic,
// CodeRoleUnavailable on a node without the catalog's table state.
func (b *Broker) TableStatus(ctx context.Context, who Principal, topic string) (TableStatus, error) {
	t, err := b.TableTopic(ctx, who, topic)
	if err != nil {
		return TableStatus{}, err
	}
	if b.d.Tables == nil {
		return TableStatus{}, newError(CodeRoleUnavailable, "this node does not read table state")
	}
	st, err := b.d.Tables.TableState(ctx, t.ID)
	if err != nil {
		return TableStatus{}, catalogError("table status", err, onTopic(topic))
	}
	parts, err := b.d.Catalog.Partitions(ctx, t.ID)
	if err != nil {
		return TableStatus{}, catalogError("table status", err, onTopic(topic))
	}
	out := TableStatus{Topic: t.Name, MetadataLocation: st.MetadataLocation, Partitions: make([]TablePartition, len(parts))}
	for i, p := range parts {
		out.Partitions[i] = TablePartition{Partition: p.Partition, Next: st.NextOffset(p.Partition), Stable: p.LastStableOffset}
	}
	return out, nil
}
