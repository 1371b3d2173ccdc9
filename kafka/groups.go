package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): each
// handler decodes, calls the core — which holds the state machine in the catalog and
// holds a JoinGroup or SyncGroup that must wait for other members — and encodes. What
// is Kafka's own here: the consumer protocol's metadata (read for the subscription,
// which the group's listings show) and its empty assignment.

// emptyConsumerAssignment is a serialized ConsumerMemberAssignment with no partitions:
// what a member of a "consumer" group gets when the leader's plan leaves it out (a
// client cannot decode zero bytes: Sarama #2292, franz-go "not enough data").
var emptyConsumerAssignment = new(kmsg.ConsumerMemberAssignment).AppendTo(nil)

// groupCode maps the core's error for the group APIs: the node stopping or its catalog
// failing are coordinator errors, which group clients retry by finding the coordinator
// again.
func (s *Server) groupCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case hasCode(err, broker.CodeShuttingDown), hasCode(err, broker.CodeRoleUnavailable):
		s.code(err) // logged as usual
		return kerr.NotCoordinator.Code
	case hasCode(err, broker.CodeCatalogUnavailable):
		s.code(err)
		return kerr.CoordinatorNotAvailable.Code
	}
	return s.code(err)
}

// holdContext is the context a held group request waits under: the connection's, ended
// too when the server begins to stop (the member finds its coordinator again and
// rejoins, rather than waiting out the shutdown grace).
func (s *Server) holdContext(r *request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.conn.ctx)
	stop := context.AfterFunc(s.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// consumerTopics reads the subscription of Kafka's consumer protocol metadata; nil when
// it is not that protocol or does not parse.
func consumerTopics(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) []string {
	if protocolType != "consumer" || len(protocols) == 0 {
		return nil
	}
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(protocols[0].Metadata); err != nil {
		return nil
	}
	return m.Topics
}

func (s *Server) joinGroup(_ context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	creq := broker.JoinGroupRequest{
		Group: in.Group, MemberID: in.MemberID, InstanceID: deref(in.InstanceID), ClientID: deref(r.header.clientID),
		ClientHost: "/" + hostOf(r.conn.remote), SessionTimeout: time.Duration(in.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout: time.Duration(in.RebalanceTimeoutMillis) * time.Millisecond, ProtocolType: in.ProtocolType,
		Topics: consumerTopics(in.ProtocolType, in.Protocols), RequireKnownMemberID: in.Version >= 4,
	}
	if in.Version == 0 {
		creq.RebalanceTimeout = 0 // v0 has none: the session timeout
	}
	for _, p := range in.Protocols {
		creq.Protocols = append(creq.Protocols, catalog.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	ctx, done := s.holdContext(r)
	defer done()
	res, err := s.deps.Core.JoinGroup(ctx, r.who, creq)
	if err != nil {
		resp.ErrorCode = s.groupCode(err)
		resp.MemberID = in.MemberID
		return resp, nil
	}
	resp.MemberID = res.MemberID
	if res.MemberIDRequired {
		resp.ErrorCode = kerr.MemberIDRequired.Code
		return resp, nil
	}
	resp.Generation, resp.LeaderID, resp.SkipAssignment = res.Generation, res.Leader, res.SkipAssignment
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.ID, m.Metadata
		if m.InstanceID != "" {
			rm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

func (s *Server) syncGroup(_ context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	creq := broker.SyncGroupRequest{Group: in.Group, MemberID: in.MemberID, InstanceID: deref(in.InstanceID),
		Generation: in.Generation, ProtocolType: deref(in.ProtocolType), Protocol: deref(in.Protocol)}
	for _, a := range in.GroupAssignment {
		creq.Assignments = append(creq.Assignments, catalog.ClassicAssignment{MemberID: a.MemberID, Assignment: a.MemberAssignment})
	}
	ctx, done := s.holdContext(r)
	defer done()
	res, err := s.deps.Core.SyncGroup(ctx, r.who, creq)
	if err != nil {
		resp.ErrorCode = s.groupCode(err)
		return resp, nil
	}
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	resp.MemberAssignment = res.Assignment
	if len(resp.MemberAssignment) == 0 && res.ProtocolType == "consumer" {
		resp.MemberAssignment = emptyConsumerAssignment
	}
	return resp, nil
}

func (s *Server) heartbeat(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = s.groupCode(s.deps.Core.ClassicHeartbeat(ctx, r.who, catalog.ClassicHeartbeat{
		Group: in.Group, MemberID: in.MemberID, InstanceID: deref(in.InstanceID), Generation: in.Generation}))
	return resp, nil
}

// leaveGroup serves LeaveGroup: one member before v3, a batch (by member or instance
// id) from v3.
func (s *Server) leaveGroup(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	var leavers []catalog.ClassicLeaver
	if in.Version < 3 {
		leavers = []catalog.ClassicLeaver{{MemberID: in.MemberID}}
	}
	for _, m := range in.Members {
		leavers = append(leavers, catalog.ClassicLeaver{MemberID: m.MemberID, InstanceID: deref(m.InstanceID)})
	}
	if len(leavers) == 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	errs, err := s.deps.Core.LeaveGroup(ctx, r.who, in.Group, leavers)
	if err != nil {
		resp.ErrorCode = s.groupCode(err)
		return resp, nil
	}
	if in.Version < 3 {
		resp.ErrorCode = s.groupCode(errs[0])
		return resp, nil
	}
	for i, m := range in.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, s.groupCode(errs[i])
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
