package kafka

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// Group administration over the Kafka protocol — DescribeGroups, ListGroups,
// DeleteGroups, OffsetDelete — for groups of both types: a consumer group (HTTP and
// KIP-848 members) is described as Kafka describes one, protocol type "consumer".

// consumerState names a consumer group's state as Kafka does.
func consumerState(state string) string {
	switch state {
	case catalog.GroupEmpty:
		return "Empty"
	case catalog.GroupReconciling:
		return "Reconciling"
	}
	return "Stable"
}

// consumerAssignment serializes a consumer group member's partitions as the consumer
// protocol's assignment, so that tools reading DescribeGroups see them.
func consumerAssignment(tps []catalog.TopicPartitions) []byte {
	var a kmsg.ConsumerMemberAssignment
	for _, tp := range tps {
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = tp.Topic, tp.Partitions
		a.Topics = append(a.Topics, t)
	}
	return a.AppendTo(nil)
}

// describeGroups serves DescribeGroups: a group that does not exist is "Dead", with no
// error (as Kafka answers up to v5). A classic group's members carry their metadata and
// assignment once it is stable.
func (s *Server) describeGroups(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range in.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.AuthorizedOperations = name, -2147483648
		info, err := s.deps.Core.DescribeAnyGroup(ctx, r.who, name)
		switch {
		case hasCode(err, broker.CodeGroupNotFound):
			rg.State = catalog.ClassicDead
		case hasCode(err, broker.CodeInvalidGroupName):
			rg.ErrorCode = kerr.InvalidGroupID.Code
		case err != nil:
			rg.ErrorCode = s.groupCode(err)
		case info.Classic != nil:
			describeClassic(&rg, info.Classic)
		default:
			d := info.Consumer
			rg.State, rg.ProtocolType, rg.Protocol = consumerState(d.State), "consumer", d.Assignor
			for _, m := range d.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.MemberAssignment = m.ID, consumerAssignment(m.Assignment)
				rg.Members = append(rg.Members, rm)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func describeClassic(rg *kmsg.DescribeGroupsResponseGroup, g *catalog.ClassicDescription) {
	rg.State, rg.ProtocolType, rg.Protocol = g.State, g.ProtocolType, g.Protocol
	for _, m := range g.Members {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.ClientID, rm.ClientHost = m.ID, m.ClientID, m.ClientHost
		if m.InstanceID != "" {
			rm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		if g.State == catalog.ClassicStable { // as Kafka: metadata and assignment once stable
			rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
		}
		rg.Members = append(rg.Members, rm)
	}
}

// listGroups serves ListGroups with v4's state filter and v5's type filter (both
// case-insensitive, as Kafka's).
func (s *Server) listGroups(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	sums, err := s.deps.Core.ListGroups(ctx, r.who)
	if err != nil {
		resp.ErrorCode = s.groupCode(err)
		return resp, nil
	}
	kinds, err := s.deps.Core.GroupKinds(ctx, r.who)
	if err != nil {
		resp.ErrorCode = s.groupCode(err)
		return resp, nil
	}
	kind := make(map[string]catalog.GroupKind, len(kinds))
	for _, k := range kinds {
		kind[k.Name] = k
	}
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	for _, g := range sums {
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Name, "consumer", consumerState(g.State), catalog.GroupTypeConsumer
		if k, ok := kind[g.Name]; ok && k.Type == catalog.GroupTypeClassic {
			rg.ProtocolType, rg.GroupState, rg.GroupType = k.ProtocolType, k.ClassicState, catalog.GroupTypeClassic
		}
		if matches(in.StatesFilter, rg.GroupState) && matches(in.TypesFilter, rg.GroupType) {
			resp.Groups = append(resp.Groups, rg)
		}
	}
	if s.deps.Core.Check(broker.CapShareGroups) != nil {
		return resp, nil
	}
	shares, err := s.deps.Core.ShareGroupSummaries(ctx, r.who)
	if err != nil {
		resp.ErrorCode = s.groupCode(err)
		return resp, nil
	}
	for _, g := range shares {
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Name, "share", g.State, "share"
		if matches(in.StatesFilter, rg.GroupState) && matches(in.TypesFilter, rg.GroupType) {
			resp.Groups = append(resp.Groups, rg)
		}
	}
	return resp, nil
}

// deleteGroups serves DeleteGroups: each group without live members goes, with its
// offsets.
func (s *Server) deleteGroups(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range in.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		err := s.deps.Core.DeleteGroup(ctx, r.who, name)
		switch {
		case hasCode(err, broker.CodeGroupNotEmpty):
			rg.ErrorCode = kerr.NonEmptyGroup.Code
		case hasCode(err, broker.CodeInvalidGroupName):
			rg.ErrorCode = kerr.InvalidGroupID.Code
		default:
			rg.ErrorCode = s.groupCode(err)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// offsetDelete serves OffsetDelete: a partition of a topic the group's live members
// consume is refused with GROUP_SUBSCRIBED_TO_TOPIC, the others' offsets go.
func (s *Server) offsetDelete(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var tps []catalog.TopicPartitionName
	for _, t := range in.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, catalog.TopicPartitionName{Topic: t.Topic, Partition: p.Partition})
		}
	}
	errs, err := s.deps.Core.DeleteOffsets(ctx, r.who, in.Group, tps)
	if err != nil {
		switch {
		case hasCode(err, broker.CodeGroupNotFound), hasCode(err, broker.CodeInvalidGroupName):
			resp.ErrorCode = kerr.GroupIDNotFound.Code
		default:
			resp.ErrorCode = s.groupCode(err)
		}
		return resp, nil
	}
	i := 0
	for _, t := range in.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, s.groupCode(errs[i])
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
