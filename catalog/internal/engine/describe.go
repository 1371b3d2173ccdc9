package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/catalog"
)

// The group views: DescribeGroup's rendering of a loaded GroupState, and GroupLag
// computed from the other reads.

// Describe renders st at now for DescribeGroup; names maps topic ids to names.
func (st *GroupState) Describe(now time.Time, names map[int64]string) catalog.GroupDescription {
	d := catalog.GroupDescription{Name: st.Name, State: st.State(now), Assignor: st.Assignor, Epoch: st.Epoch, CreatedAt: st.CreatedAt}
	ids := make([]string, 0, len(st.Members))
	for id, m := range st.Members {
		if m.ExpiresAt.After(now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := st.Members[id]
		var own, rev, pend []catalog.TopicPartition
		for tp, o := range st.Owners {
			switch {
			case o.Owner == id && o.Target == id:
				own = append(own, tp)
			case o.Owner == id:
				rev = append(rev, tp)
			case o.Target == id:
				pend = append(pend, tp)
			}
		}
		d.Members = append(d.Members, catalog.MemberDescription{
			ID: id, Epoch: m.Epoch, Topics: slices.Clone(m.Topics), SessionTimeout: m.SessionTimeout,
			ExpiresAt: m.ExpiresAt, Assignment: groupByTopic(own, names),
			Revoking: groupByTopic(rev, names), Pending: groupByTopic(pend, names),
		})
	}
	return d
}

// LagReader is what GroupLagOf reads: any catalog with groups.
type LagReader interface {
	DescribeGroup(ctx context.Context, group string) (catalog.GroupDescription, error)
	GroupOffsets(ctx context.Context, group string) ([]catalog.GroupOffset, error)
	Topic(ctx context.Context, name string) (catalog.Topic, error)
	TopicByID(ctx context.Context, id int64) (catalog.Topic, error)
	Partitions(ctx context.Context, topicID int64) ([]catalog.PartitionInfo, error)
}

// GroupLagOf computes GroupLag from the other reads, for both backends: lag is a view,
// so it needs no snapshot of its own (each partition's figures are consistent; the
// partitions are read one topic at a time).
func GroupLagOf(ctx context.Context, r LagReader, group string) ([]catalog.PartitionLag, error) {
	d, err := r.DescribeGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	offs, err := r.GroupOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	committed := map[catalog.TopicPartition]catalog.GroupOffset{}
	topicIDs := map[int64]string{}
	for _, o := range offs {
		committed[catalog.TopicPartition{TopicID: o.TopicID, Partition: o.Partition}] = o
		topicIDs[o.TopicID] = o.Topic
	}
	owners := map[string]string{} // "topic/partition" → member
	for _, m := range d.Members {
		for _, list := range [][]catalog.TopicPartitions{m.Assignment, m.Revoking} {
			for _, tps := range list {
				for _, p := range tps.Partitions {
					owners[fmt.Sprintf("%s/%d", tps.Topic, p)] = m.ID
				}
			}
		}
		for _, name := range m.Topics {
			t, err := r.Topic(ctx, name)
			if errors.Is(err, catalog.ErrTopicNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			topicIDs[t.ID] = t.Name
		}
	}
	ids := make([]int64, 0, len(topicIDs))
	for id := range topicIDs {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int64) int { return cmp.Compare(topicIDs[a], topicIDs[b]) })
	var out []catalog.PartitionLag
	for _, id := range ids {
		parts, err := r.Partitions(ctx, id)
		if errors.Is(err, catalog.ErrTopicNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			l := catalog.PartitionLag{Topic: topicIDs[id], TopicID: id, Partition: p.Partition, Committed: -1,
				LogStartOffset: p.LogStartOffset, HighWatermark: p.HighWatermark,
				Owner: owners[fmt.Sprintf("%s/%d", topicIDs[id], p.Partition)]}
			from := p.LogStartOffset
			if o, ok := committed[catalog.TopicPartition{TopicID: id, Partition: p.Partition}]; ok {
				l.Committed = o.Offset
				from = max(o.Offset, p.LogStartOffset)
			}
			l.Lag = max(p.HighWatermark-from, 0)
			out = append(out, l)
		}
	}
	return out, nil
}
