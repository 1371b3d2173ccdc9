package broker

import (
	"context"
	"regexp"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// Consumer-group members of the Kafka protocol (KIP-848's ConsumerGroupHeartbeat): the
// same server-side groups as the HTTP API's members (groups.go), with what that
// protocol leaves implicit made explicit here.

// ConsumerSessionTimeout is a KIP-848 member's session: Kafka's default
// group.consumer.session.timeout.ms (the protocol does not carry one). ConsumerHeartbeat
// gives it to every heartbeat that names none.
const ConsumerSessionTimeout = 45 * time.Second

// ConsumerHeartbeat is Heartbeat for a member that may leave its owned partitions
// unsaid (KIP-848's null Topics: "as last sent"): they are then taken to be what the
// group says it owns, so no revocation is acknowledged by omission — the member may
// still be committing the offsets of partitions it is giving back.
func (b *Broker) ConsumerHeartbeat(ctx context.Context, who Principal, hb catalog.Heartbeat, ownedUnchanged bool) (catalog.HeartbeatResult, error) {
	if e := b.check(CapGroups); e != nil {
		return catalog.HeartbeatResult{}, e
	}
	if e := b.authorize(ctx, who, acl.OpRead, acl.Group(hb.Group)); e != nil {
		return catalog.HeartbeatResult{}, e
	}
	if hb.SessionTimeout == 0 {
		hb.SessionTimeout = ConsumerSessionTimeout
	}
	if ownedUnchanged && hb.MemberEpoch > catalog.JoinEpoch {
		// Only this member's own heartbeat releases what it owns, and a member sends one
		// heartbeat at a time: what the group says it owns cannot shrink meanwhile.
		d, err := b.d.Groups.DescribeGroup(ctx, hb.Group)
		if err != nil {
			return catalog.HeartbeatResult{}, groupError("heartbeat", err)
		}
		for _, m := range d.Members {
			if m.ID == hb.MemberID {
				hb.Owned = append(append([]catalog.TopicPartitions(nil), m.Assignment...), m.Revoking...)
			}
		}
	}
	return b.Heartbeat(ctx, who, hb)
}

// TopicsMatching lists the topics whose whole name matches pattern (KIP-848's
// SubscribedTopicRegex, in Go's RE2 syntax, which covers what clients send: alternations,
// classes and quantifiers), the internal ones it matches included (made if need be:
// internal_topics.go). The pattern is compiled once per call.
func (b *Broker) TopicsMatching(ctx context.Context, who Principal, pattern string) ([]string, error) {
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return nil, newError(CodeInvalidParameter, "subscription pattern %q: %s", pattern, err)
	}
	ts, err := b.Topics(ctx, who)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range ts {
		if re.MatchString(t.Name) {
			out = append(out, t.Name)
		}
	}
	if len(out) > 1000 {
		return nil, newError(CodeInvalidParameter, "subscription pattern %q matches %d topics: at most 1000", pattern, len(out))
	}
	return b.subscribeInternal(ctx, who, re, out), nil
}

// TopicNamesByUUID resolves topic ids (unknown ones are left out).
func (b *Broker) TopicNamesByUUID(ctx context.Context, who Principal, ids []catalog.UUID) (map[catalog.UUID]string, error) {
	out := make(map[catalog.UUID]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ts, err := b.Topics(ctx, who)
	if err != nil {
		return nil, err
	}
	want := make(map[catalog.UUID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for _, t := range ts {
		if want[t.UUID] {
			out[t.UUID] = t.Name
		}
	}
	return out, nil
}
