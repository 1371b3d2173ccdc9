package engine

// The classic group's state as the backends load it under its lock, the encoding of its
// protocols for a catalog column, and DeleteOffsets' rule (the types of the calls and the
// one rule about a group's type are catalog's: catalog/classic.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// ClassicGroup is a classic group's state as the backends load it under its lock.
type ClassicGroup struct {
	Name         string
	Type         string // the group row's type (GroupTypeClassic once a classic member joined)
	State        string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	// SyncedGeneration is the last generation whose leader synced: its assignments
	// are those stored.
	SyncedGeneration int32
	// Deadline is the timer of the state: PreparingRebalance ends by it (members not
	// joined again are removed), CompletingRebalance too (members that did not sync are
	// removed and a rebalance starts). Zero in the other states.
	Deadline  time.Time
	CreatedAt time.Time
	Members   map[string]*ClassicMember
	// OtherLive counts live members of the consumer type (a group of that type being
	// joined by a classic member; then never written).
	OtherLive int
}

// ClassicMember is one classic member (or a pending id handed out by MEMBER_ID_REQUIRED).
type ClassicMember struct {
	ID               string
	InstanceID       string
	ClientID         string
	ClientHost       string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Protocols        []catalog.ClassicProtocol
	Topics           []string
	Assignment       []byte
	// Generation is the generation the member is part of (0 before its first).
	Generation int32
	// Joining: its JoinGroup waits for the rebalance in progress. Syncing: its
	// SyncGroup waits for the leader's. Pending: an id handed out with
	// MEMBER_ID_REQUIRED, not a member until it joins with it.
	Joining, Syncing, Pending bool
	SessionDeadline           time.Time
	JoinedAt                  time.Time
}

// NewClassicGroup returns a group that has never had a classic member.
func NewClassicGroup(name string, createdAt time.Time) *ClassicGroup {
	return &ClassicGroup{Name: name, Type: catalog.GroupTypeClassic, State: catalog.ClassicEmpty, CreatedAt: createdAt, Members: map[string]*ClassicMember{}}
}

// Clone deep-copies g (members' byte slices are shared: they are never mutated in
// place).
func (g *ClassicGroup) Clone() *ClassicGroup {
	c := *g
	c.Members = make(map[string]*ClassicMember, len(g.Members))
	for id, m := range g.Members {
		mc := *m
		c.Members[id] = &mc
	}
	return &c
}

// EncodeClassicProtocols lays protocols out for a catalog column: per protocol, the
// name's length (uint16), the name, the metadata's length (uint32), the metadata.
func EncodeClassicProtocols(ps []catalog.ClassicProtocol) []byte {
	n := 0
	for _, p := range ps {
		n += 6 + len(p.Name) + len(p.Metadata)
	}
	out := make([]byte, 0, n)
	for _, p := range ps {
		out = binary.BigEndian.AppendUint16(out, uint16(len(p.Name)))
		out = append(out, p.Name...)
		out = binary.BigEndian.AppendUint32(out, uint32(len(p.Metadata)))
		out = append(out, p.Metadata...)
	}
	return out
}

// DecodeClassicProtocols reads what EncodeClassicProtocols wrote.
func DecodeClassicProtocols(b []byte) ([]catalog.ClassicProtocol, error) {
	var out []catalog.ClassicProtocol
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, errors.New("classic protocols: truncated name length")
		}
		nl := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		if len(b) < nl+4 {
			return nil, errors.New("classic protocols: truncated name")
		}
		name := string(b[:nl])
		b = b[nl:]
		ml := int(binary.BigEndian.Uint32(b))
		b = b[4:]
		if ml > len(b) {
			return nil, errors.New("classic protocols: truncated metadata")
		}
		out = append(out, catalog.ClassicProtocol{Name: name, Metadata: append([]byte(nil), b[:ml]...)})
		b = b[ml:]
	}
	return out, nil
}

// CheckDeleteOffsets is DeleteOffsets' rule, for both backends: each offset's topic must
// exist and its partition be in range, and no live member may subscribe to its topic
// (subscribed, from the members' subscriptions). del is called for each partition whose
// offset goes; the answer holds each offset's refusal, nil when deleted.
func CheckDeleteOffsets(offsets []catalog.TopicPartitionName, subscribed []string, topics map[string]TopicMeta, del func(catalog.TopicPartition)) []error {
	errs := make([]error, len(offsets))
	for i, o := range offsets {
		t, ok := topics[o.Topic]
		switch {
		case !ok:
			errs[i] = fmt.Errorf("%w: %q", catalog.ErrTopicNotFound, o.Topic)
		case o.Partition < 0 || o.Partition >= t.Partitions:
			errs[i] = fmt.Errorf("%w: topic %s has %d partitions, not %d", catalog.ErrPartitionOutOfRange, o.Topic, t.Partitions, o.Partition)
		case slices.Contains(subscribed, o.Topic):
			errs[i] = fmt.Errorf("%w: a live member of the group consumes %s: its offsets can be deleted once the group no longer subscribes to it", catalog.ErrGroupSubscribed, o.Topic)
		default:
			del(catalog.TopicPartition{TopicID: t.ID, Partition: o.Partition})
		}
	}
	return errs
}
