package broker

import (
	"context"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// GrowPartitions raises a topic's partition count to count, as Kafka's CreatePartitions:
// a count that is not above the current one is refused, and validateOnly checks
// without changing anything (the answer is the topic as it would be).
func (b *Broker) GrowPartitions(ctx context.Context, who Principal, topic string, count int32, validateOnly bool) (catalog.Topic, error) {
	if e := b.authorize(ctx, who, acl.OpAlter, acl.Topic(topic)); e != nil {
		return catalog.Topic{}, e
	}
	t, err := b.topic(ctx, "create partitions", topic)
	if err != nil {
		return catalog.Topic{}, err
	}
	if e := checkPartitionCount(count); e != nil {
		return catalog.Topic{}, e
	}
	if count <= t.Partitions {
		return catalog.Topic{}, newError(CodeInvalidPartitionCount, "topic %s has %d partitions: ask for more (partitions never shrink)", topic, t.Partitions).
			with("partitions", t.Partitions)
	}
	if validateOnly {
		t.Partitions = count
		return t, nil
	}
	if e := b.mutate(who, count-t.Partitions); e != nil {
		return catalog.Topic{}, e
	}
	return b.UpdateTopic(ctx, who, topic, TopicUpdate{Partitions: count})
}

// TopicByUUID returns the live topic whose UUID is id (Kafka names topics by id from
// Metadata v10 and DeleteTopics v6). Such lookups are rare: they read the topic list.
// A topic the caller may not describe is not found, as Kafka answers: its id must not
// reveal its name.
func (b *Broker) TopicByUUID(ctx context.Context, who Principal, id catalog.UUID) (catalog.Topic, error) {
	ts, err := b.Topics(ctx, who)
	if err != nil {
		return catalog.Topic{}, err
	}
	for _, t := range ts {
		if t.UUID == id {
			return t, nil
		}
	}
	return catalog.Topic{}, newError(CodeTopicNotFound, "no topic has id %s", id)
}
