package broker

import (
	"context"
	"crypto/sha256"
	"errors"
	"regexp"
	"slices"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// Kafka keeps committed offsets in an internal topic, __consumer_offsets, which every
// cluster that has served a group lists. Strata keeps them in the catalog, so the topic
// has no records. It is listed (internal, one partition) for the clients and tools that
// look for it — franz-go's regex consumers skip internal topics by that flag — without
// existing, authorized like any topic (describe on __consumer_offsets), as Kafka's is;
// it is never auto-created, and is made, empty, only when a subscription pattern names
// it (Kafka's coordinator assigns internal topics a pattern matches, and the member then
// fetches from it). A topic of that name is always internal, whoever made it. These are
// the rules of the Kafka protocol's front end; they are kept here, with the other topic
// rules, so that no front end holds one.

// OffsetsTopic is the name of Kafka's internal topic of committed offsets.
const OffsetsTopic = "__consumer_offsets"

// OffsetsTopicID is its topic id: fixed, so that every node answers the same.
var OffsetsTopicID = func() catalog.UUID {
	sum := sha256.Sum256([]byte("strata:" + OffsetsTopic))
	var u catalog.UUID
	copy(u[:], sum[:16])
	u[6], u[8] = u[6]&0x0f|0x50, u[8]&0x3f|0x80 // a name-based (v5-like) UUID
	return u
}()

// InternalTopic reports whether a topic of this name is internal (Kafka's is_internal).
func InternalTopic(name string) bool { return name == OffsetsTopic }

// offsetsTopic is the offsets topic as listed while no topic of its name exists.
func offsetsTopic() catalog.Topic {
	return catalog.Topic{Name: OffsetsTopic, UUID: OffsetsTopicID, Partitions: 1}
}

// ListedTopics is Topics as a client of the Kafka protocol is told them: with the
// offsets topic when no topic has its name and who may describe it.
func (b *Broker) ListedTopics(ctx context.Context, who Principal) ([]catalog.Topic, error) {
	ts, err := b.Topics(ctx, who)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(ts, func(t catalog.Topic) bool { return t.Name == OffsetsTopic }) ||
		!b.may(who, acl.OpDescribe, acl.Topic(OffsetsTopic)) {
		return ts, nil
	}
	i, _ := slices.BinarySearchFunc(ts, OffsetsTopic, func(t catalog.Topic, name string) int {
		switch {
		case t.Name < name:
			return -1
		case t.Name > name:
			return 1
		}
		return 0
	})
	return slices.Insert(ts, i, offsetsTopic()), nil
}

// DescribeTopic is Topic as a client of the Kafka protocol is told it (Metadata): read
// from the catalog, not the topic cache that produce and fetch trust for a while, since
// Metadata is what clients learn a deleted topic or a partition count from, on any
// node, at once (it is asked for rarely: on start, every few minutes, after errors).
// The offsets topic is answered while no topic has its name; and, when autoCreate is above 0, a topic that does not
// exist is created with autoCreate partitions, under CreateTopic's rules (its
// authorization included) — never an internal one. created says it was made by this
// call; a topic made meanwhile by another node or client is read back.
func (b *Broker) DescribeTopic(ctx context.Context, who Principal, name string, autoCreate int32) (t catalog.Topic, created bool, err error) {
	t, err = b.Topic(ctx, who, name)
	if !isCode(err, CodeTopicNotFound) {
		return t, false, err
	}
	if InternalTopic(name) { // Topic has authorized describe on it
		return offsetsTopic(), false, nil
	}
	if autoCreate <= 0 {
		return catalog.Topic{}, false, err
	}
	t, err = b.CreateTopic(ctx, who, CreateTopicRequest{Name: name, Partitions: autoCreate})
	if isCode(err, CodeTopicExists) {
		t, err = b.Topic(ctx, who, name)
		return t, false, err
	}
	return t, err == nil, err
}

// DescribeTopicByUUID is TopicByUUID as a client of the Kafka protocol is told it: the
// offsets topic's fixed id names it, to whoever may describe it.
func (b *Broker) DescribeTopicByUUID(ctx context.Context, who Principal, id catalog.UUID) (catalog.Topic, error) {
	if id == OffsetsTopicID && b.may(who, acl.OpDescribe, acl.Topic(OffsetsTopic)) {
		return offsetsTopic(), nil
	}
	return b.TopicByUUID(ctx, who, id)
}

// subscribeInternal adds to names, the topics a subscription pattern re matches, the
// internal topics it matches, as Kafka's coordinator assigns them: the offsets topic is
// made (empty) so that it can be assigned and fetched. A caller who may not create it
// does not get it.
func (b *Broker) subscribeInternal(ctx context.Context, who Principal, re *regexp.Regexp, names []string) []string {
	if slices.Contains(names, OffsetsTopic) || !re.MatchString(OffsetsTopic) {
		return names
	}
	if _, err := b.CreateTopic(ctx, who, CreateTopicRequest{Name: OffsetsTopic, Partitions: 1}); err == nil || isCode(err, CodeTopicExists) {
		names = append(names, OffsetsTopic)
	}
	return names
}

// isCode reports whether err is the core's error with code c.
func isCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}
