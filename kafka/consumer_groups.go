package kafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe over the
// catalog's server-side groups, the same groups (and offsets) the HTTP API's members
// use. What is Kafka's own here: topics named by id, the assignors' names, and
// "unchanged" fields left null.

// serverAssignors maps KIP-848's assignor names to the catalog's.
var serverAssignors = map[string]string{
	"uniform": catalog.AssignorSticky,
	"range":   catalog.AssignorRange,
}

func assignorName(a string) string {
	for k, v := range serverAssignors {
		if v == a {
			return k
		}
	}
	return a
}

func (s *Server) consumerGroupHeartbeat(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp, nil
	}
	memberID := in.MemberID
	if memberID == "" {
		if in.Version >= 1 || in.MemberEpoch != catalog.JoinEpoch {
			return fail(kerr.InvalidRequest.Code, "MemberId is required: a member chooses its id (a UUID) and keeps it")
		}
		var u [16]byte
		_, _ = rand.Read(u[:])
		memberID = base64.RawURLEncoding.EncodeToString(u[:])
	}
	hb := catalog.Heartbeat{Group: in.Group, MemberID: memberID, MemberEpoch: in.MemberEpoch, Topics: in.SubscribedTopicNames}
	if hb.MemberEpoch == -2 { // a static member's leave: static membership is not kept
		hb.MemberEpoch = catalog.LeaveEpoch
	}
	if in.ServerAssignor != nil {
		a, ok := serverAssignors[*in.ServerAssignor]
		if !ok {
			return fail(kerr.UnsupportedAssignor.Code, "server assignors: uniform, range")
		}
		hb.Assignor = a
	}
	if code, msg := s.heartbeatTopics(ctx, r.who, in, &hb); code != 0 {
		return fail(code, msg)
	}
	if hb.MemberEpoch == catalog.JoinEpoch && len(hb.Topics) == 0 {
		// The catalog's groups need a subscription to join; a member subscribed to
		// nothing (yet) is answered with no assignment and joins once it has one.
		resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(memberID), 0
		resp.HeartbeatIntervalMillis = int32(catalog.HeartbeatInterval(broker.ConsumerSessionTimeout).Milliseconds())
		resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		return resp, nil
	}
	res, err := s.deps.Core.ConsumerHeartbeat(ctx, r.who, hb, in.Topics == nil)
	if err != nil {
		code, msg := s.kafkaError(err)
		switch {
		case hasCode(err, broker.CodeStaleMemberEpoch):
			code = kerr.FencedMemberEpoch.Code
		case hasCode(err, broker.CodeGroupNotFound):
			code = kerr.UnknownMemberID.Code // the group went (deleted): join again
		case hasCode(err, broker.CodeShuttingDown), hasCode(err, broker.CodeRoleUnavailable):
			code = kerr.NotCoordinator.Code
		case hasCode(err, broker.CodeCatalogUnavailable):
			code = kerr.CoordinatorNotAvailable.Code
		}
		return fail(code, *msg)
	}
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(memberID), res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	if hb.MemberEpoch == catalog.LeaveEpoch {
		resp.MemberEpoch = in.MemberEpoch
		return resp, nil
	}
	// The whole assignment every time: clients compare it with what they hold.
	resp.Assignment = &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
	for _, tp := range res.Assignment {
		ti, err := s.deps.Core.LookupTopic(ctx, r.who, tp.Topic)
		if err != nil {
			continue // deleted since: not assigned any more
		}
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = ti.UUID, tp.Partitions
		resp.Assignment.Topics = append(resp.Assignment.Topics, t)
	}
	return resp, nil
}

// heartbeatTopics fills hb's subscription from a pattern (resolved to the topics it
// matches now) and its owned partitions from topic ids (null: unchanged), answering a
// Kafka error code and message when that fails.
func (s *Server) heartbeatTopics(ctx context.Context, who broker.Principal, in *kmsg.ConsumerGroupHeartbeatRequest, hb *catalog.Heartbeat) (int16, string) {
	if in.SubscribedTopicRegex != nil {
		names, err := s.deps.Core.TopicsMatching(ctx, who, *in.SubscribedTopicRegex)
		if err != nil {
			code, msg := s.kafkaError(err)
			if hasCode(err, broker.CodeInvalidParameter) {
				code = kerr.InvalidRegularExpression.Code
			}
			return code, *msg
		}
		hb.Topics = append(hb.Topics, names...)
		if hb.Topics == nil {
			hb.Topics = []string{}
		}
	}
	if in.Topics == nil {
		return 0, ""
	}
	ids := make([]catalog.UUID, len(in.Topics))
	for i, t := range in.Topics {
		ids[i] = t.TopicID
	}
	names, err := s.deps.Core.TopicNamesByUUID(ctx, who, ids)
	if err != nil {
		return s.groupCode(err), "resolving owned topic ids failed"
	}
	hb.Owned = []catalog.TopicPartitions{}
	for _, t := range in.Topics {
		if name, ok := names[t.TopicID]; ok { // a deleted topic is owned no more
			hb.Owned = append(hb.Owned, catalog.TopicPartitions{Topic: name, Partitions: t.Partitions})
		}
	}
	return 0, ""
}

// consumerGroupDescribe serves ConsumerGroupDescribe for consumer groups: members with
// their epochs, subscriptions, assignments and targets (assigned plus waiting).
func (s *Server) consumerGroupDescribe(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range in.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.AuthorizedOperations = name, -2147483648
		info, err := s.deps.Core.DescribeAnyGroup(ctx, r.who, name)
		switch {
		case hasCode(err, broker.CodeGroupNotFound), hasCode(err, broker.CodeInvalidGroupName):
			rg.ErrorCode = kerr.GroupIDNotFound.Code
		case err != nil:
			rg.ErrorCode = s.groupCode(err)
		case info.Consumer == nil:
			rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr("group "+name+" is a classic group: describe it with DescribeGroups")
		default:
			d := info.Consumer
			rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = consumerState(d.State), d.Epoch, d.Epoch, assignorName(d.Assignor)
			for _, m := range d.Members {
				rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				rm.MemberID, rm.MemberEpoch, rm.SubscribedTopics, rm.MemberType = m.ID, m.Epoch, m.Topics, 1
				rm.Assignment = s.kafkaAssignment(ctx, r.who, m.Assignment, m.Revoking)
				rm.TargetAssignment = s.kafkaAssignment(ctx, r.who, m.Assignment, m.Pending)
				rg.Members = append(rg.Members, rm)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// kafkaAssignment lays partitions out with their topics' ids.
func (s *Server) kafkaAssignment(ctx context.Context, who broker.Principal, lists ...[]catalog.TopicPartitions) kmsg.Assignment {
	var a kmsg.Assignment
	at := map[string]int{}
	for _, l := range lists {
		for _, tp := range l {
			i, ok := at[tp.Topic]
			if !ok {
				t := kmsg.NewAssignmentTopicPartition()
				t.Topic = tp.Topic
				if ti, err := s.deps.Core.LookupTopic(ctx, who, tp.Topic); err == nil {
					t.TopicID = ti.UUID
				}
				i = len(a.TopicPartitions)
				at[tp.Topic] = i
				a.TopicPartitions = append(a.TopicPartitions, t)
			}
			a.TopicPartitions[i].Partitions = append(a.TopicPartitions[i].Partitions, tp.Partitions...)
		}
	}
	return a
}
