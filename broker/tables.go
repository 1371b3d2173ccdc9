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
