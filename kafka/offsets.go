package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/reader"
)

// listOffsets serves ListOffsets: -2 is the log start offset, -1 the high watermark
// (the last stable offset under read_committed, isolation level 1), -3 the record with
// the largest timestamp, and a time the first record at or after it (offset -1 when
// there is none). v0 answers a list of at most one offset.
func (s *Server) listOffsets(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range in.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch = p.Partition, 0
			rp.Timestamp, rp.Offset = -1, -1
			var err error
			switch ts := p.Timestamp; ts {
			case broker.Earliest, broker.Latest:
				iso := reader.ReadUncommitted
				if in.IsolationLevel == 1 {
					iso = reader.ReadCommitted
				}
				rp.Offset, err = s.deps.Core.ListOffsetAt(ctx, r.who, t.Topic, p.Partition, ts, iso)
			default:
				var to broker.TimestampOffset
				to, err = s.deps.Core.OffsetForTimestamp(ctx, r.who, t.Topic, p.Partition, ts)
				if to.Found {
					rp.Timestamp, rp.Offset = to.Timestamp, to.Offset
				}
			}
			if err != nil {
				rp.ErrorCode = s.code(err)
				rp.Timestamp, rp.Offset = -1, -1
			}
			if in.Version == 0 && rp.ErrorCode == 0 && rp.Offset >= 0 && p.MaxNumOffsets > 0 {
				rp.OldStyleOffsets = []int64{rp.Offset}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// deleteRecords serves DeleteRecords: each partition's log start offset moves up to the
// offset asked for (-1: the high watermark), and the answer is the new log start.
func (s *Server) deleteRecords(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range in.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			pi, err := s.deps.Core.DeleteRecords(ctx, r.who, t.Topic, p.Partition, p.Offset)
			if err != nil {
				rp.ErrorCode = s.code(err)
			} else {
				rp.LowWatermark = pi.LogStartOffset
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// initProducerID serves InitProducerId: for idempotent producers a new id at epoch 0,
// or (v3+, KIP-360) the producer's own id at the next epoch when it names its current
// identity; with a transactional id, the coordinator's (txn.go).
func (s *Server) initProducerID(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if in.TransactionalID != nil {
		return s.initTxnProducerID(ctx, r, in, resp)
	}
	var creq broker.InitProducerRequest
	if in.ProducerID >= 0 && in.ProducerEpoch >= 0 {
		creq.Current = &catalog.Producer{ID: in.ProducerID, Epoch: in.ProducerEpoch}
	}
	p, err := s.deps.Core.InitProducer(ctx, r.who, creq)
	if err != nil {
		resp.ErrorCode = s.code(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = p.ID, p.Epoch
	return resp, nil
}

// offsetCommit serves OffsetCommit. Without a member id it is a commit from outside a
// group (Kafka's simple or assign mode), which the core accepts while the group has no
// live members. With one, the group's type decides: a classic member commits at its
// generation, a KIP-848 member at its member epoch (the same field). The core commits
// all the offsets or none, so a refusal is every partition's.
func (s *Server) offsetCommit(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	c := broker.MemberCommit{Group: in.Group, MemberID: in.MemberID, InstanceID: deref(in.InstanceID), Generation: in.Generation}
	for _, t := range in.Topics {
		for _, p := range t.Partitions {
			c.Offsets = append(c.Offsets, catalog.CommitOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, Metadata: deref(p.Metadata)})
		}
	}
	code := int16(0)
	if len(c.Offsets) > 0 {
		code = s.commitCode(s.deps.Core.CommitMemberOffsets(ctx, r.who, c), in.Version)
	}
	for _, t := range in.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// commitCode maps a commit's refusal: a KIP-848 member's stale epoch, or a partition it
// no longer owns, is STALE_MEMBER_EPOCH from v9 (the client retries once its heartbeat
// has the new epoch and assignment); a member's commit to a group that does not exist
// names an unknown member.
func (s *Server) commitCode(err error, version int16) int16 {
	switch {
	case hasCode(err, broker.CodeStaleMemberEpoch), hasCode(err, broker.CodeNotOwner):
		s.code(err)
		if version >= 9 {
			return kerr.StaleMemberEpoch.Code
		}
		return kerr.IllegalGeneration.Code
	case hasCode(err, broker.CodeGroupNotFound):
		return kerr.UnknownMemberID.Code
	}
	return s.groupCode(err)
}

// offsetFetch serves OffsetFetch (v8: for several groups): the committed offsets and
// their metadata; offset -1 for a partition without one (and for every partition of a
// group that does not exist, as Kafka answers). No topics (v2+) asks for every
// committed offset of the group.
func (s *Server) offsetFetch(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if in.Version >= 8 {
		for _, g := range in.Groups {
			topics := make([]kmsg.OffsetFetchRequestTopic, len(g.Topics))
			for i, t := range g.Topics {
				topics[i] = kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions}
			}
			if g.Topics == nil {
				topics = nil
			}
			code := s.commitCode(s.deps.Core.CheckFetchMember(ctx, r.who, g.Group, deref(g.MemberID), g.MemberEpoch), 9)
			var rts []kmsg.OffsetFetchResponseTopic
			if code == 0 {
				rts, code = s.groupOffsets(ctx, r.who, g.Group, topics)
			}
			if code == 0 && in.RequireStable {
				code = s.markUnstable(ctx, r.who, g.Group, rts)
			}
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			for _, rt := range rts {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = rt.Topic
				for _, p := range rt.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.Metadata, gp.ErrorCode, gp.LeaderEpoch = p.Partition, p.Offset, p.Metadata, p.ErrorCode, p.LeaderEpoch
					gt.Partitions = append(gt.Partitions, gp)
				}
				rg.Topics = append(rg.Topics, gt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	resp.Topics, resp.ErrorCode = s.groupOffsets(ctx, r.who, in.Group, in.Topics)
	if resp.ErrorCode == 0 && in.Version >= 7 && in.RequireStable {
		resp.ErrorCode = s.markUnstable(ctx, r.who, in.Group, resp.Topics)
	}
	return resp, nil
}

// markUnstable answers OffsetFetch's require_stable (KIP-447): a partition whose offset
// waits in an ongoing transaction is UNSTABLE_OFFSET_COMMIT (offset -1), so the
// client asks again once the transaction is decided.
func (s *Server) markUnstable(ctx context.Context, who broker.Principal, group string, rts []kmsg.OffsetFetchResponseTopic) int16 {
	pending, err := s.deps.Core.PendingTxnOffsets(ctx, who, group)
	if err != nil {
		return s.code(err)
	}
	if len(pending) == 0 {
		return 0
	}
	unstable := map[string]map[int32]bool{}
	for _, tp := range pending {
		unstable[tp.Topic] = map[int32]bool{}
		for _, p := range tp.Partitions {
			unstable[tp.Topic][p] = true
		}
	}
	for i := range rts {
		for j := range rts[i].Partitions {
			if p := &rts[i].Partitions[j]; unstable[rts[i].Topic][p.Partition] {
				p.ErrorCode, p.Offset = kerr.UnstableOffsetCommit.Code, -1
			}
		}
	}
	return 0
}

// groupOffsets answers one group of an OffsetFetch.
func (s *Server) groupOffsets(ctx context.Context, who broker.Principal, group string, topics []kmsg.OffsetFetchRequestTopic) ([]kmsg.OffsetFetchResponseTopic, int16) {
	offs, err := s.deps.Core.GroupOffsets(ctx, who, group)
	if err != nil && !hasCode(err, broker.CodeGroupNotFound) {
		return nil, s.code(err)
	}
	type tp struct {
		topic string
		part  int32
	}
	have := make(map[tp]catalog.GroupOffset, len(offs))
	for _, o := range offs {
		have[tp{o.Topic, o.Partition}] = o
	}
	if topics == nil { // every committed offset
		at := map[string]int{}
		for _, o := range offs {
			i, ok := at[o.Topic]
			if !ok {
				i = len(topics)
				at[o.Topic] = i
				topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: o.Topic})
			}
			topics[i].Partitions = append(topics[i].Partitions, o.Partition)
		}
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			empty := ""
			rp.Metadata = &empty
			if o, ok := have[tp{t.Topic, p}]; ok {
				meta := o.Metadata
				rp.Offset, rp.Metadata = o.Offset, &meta
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, 0
}
