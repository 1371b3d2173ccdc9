package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// metadata answers with the live nodes as brokers and, per topic, partitions 0..n-1
// each "led" by the rendezvous node at leader epoch 0. Every node accepts every
// partition, so a client with a stale view is never refused (no NOT_LEADER); the epoch
// never moves, so no client sees it go backwards.
func (s *Server) metadata(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	m := s.view.get(ctx)
	for _, b := range m.brokers {
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.id, b.host, b.port
		resp.Brokers = append(resp.Brokers, rb)
	}
	if m.clusterID != "" {
		resp.ClusterID = &m.clusterID
	}
	resp.ControllerID = m.controller

	// v0: an empty list means every topic; v1+: null means every topic, empty none.
	if in.Topics == nil || (in.Version == 0 && len(in.Topics) == 0) {
		ts, err := s.deps.Core.ListedTopics(ctx, r.who)
		if err != nil {
			// No answer rather than an empty one: a client asking for every topic
			// would take an empty list to mean they were all deleted.
			return nil, fmt.Errorf("list topics: %w", err)
		}
		for _, t := range ts {
			resp.Topics = append(resp.Topics, topicMetadata(m, t))
		}
		return resp, nil
	}
	autoCreate := int32(0) // the partitions of a topic auto-created; 0: none
	if s.cfg.AutoCreateTopics && (in.Version < 4 || in.AllowAutoTopicCreation) {
		autoCreate = s.cfg.AutoCreatePartitions
	}
	seenName, seenID := map[string]bool{}, map[catalog.UUID]bool{}
	for _, rt := range in.Topics {
		var (
			t   catalog.Topic
			err error
		)
		id := catalog.UUID(rt.TopicID)
		switch {
		case rt.Topic == nil && !id.IsZero():
			if seenID[id] {
				continue
			}
			seenID[id] = true
			if t, err = s.deps.Core.DescribeTopicByUUID(ctx, r.who, id); err != nil {
				resp.Topics = append(resp.Topics, topicError(nil, rt.TopicID, s.code(err), kerr.UnknownTopicID))
				continue
			}
		case rt.Topic == nil:
			resp.Topics = append(resp.Topics, topicError(nil, rt.TopicID, kerr.InvalidRequest.Code, kerr.InvalidRequest))
			continue
		default:
			name := *rt.Topic
			if seenName[name] {
				continue
			}
			seenName[name] = true
			var created bool
			t, created, err = s.deps.Core.DescribeTopic(ctx, r.who, name, autoCreate)
			if created {
				s.log.Info("auto-created topic", "topic", name, "partitions", t.Partitions)
			}
			if err != nil {
				resp.Topics = append(resp.Topics, topicError(&name, rt.TopicID, s.code(err), kerr.UnknownTopicOrPartition))
				continue
			}
		}
		resp.Topics = append(resp.Topics, topicMetadata(m, t))
	}
	return resp, nil
}

// hasCode reports whether err is the core's error with code c.
func hasCode(err error, c broker.Code) bool {
	var e *broker.Error
	return errors.As(err, &e) && e.Code == c
}

func topicMetadata(m *membership, t catalog.Topic) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	rt.Topic, rt.TopicID, rt.IsInternal = &name, t.UUID, broker.InternalTopic(name)
	rt.Partitions = make([]kmsg.MetadataResponseTopicPartition, t.Partitions)
	for p := range t.Partitions {
		rp := kmsg.NewMetadataResponseTopicPartition()
		leader := m.leader(t.Name, p)
		rp.Partition, rp.Leader, rp.LeaderEpoch = p, leader, 0
		rp.Replicas, rp.ISR, rp.OfflineReplicas = []int32{leader}, []int32{leader}, []int32{}
		rt.Partitions[p] = rp
	}
	return rt
}

// topicError answers a topic that cannot be described, from the Kafka code of why
// (kafkaError): notFound's code when it does not exist, INVALID_TOPIC_EXCEPTION for a
// name no topic can have, and a retriable LEADER_NOT_AVAILABLE for anything else (the
// lookup itself failed), so the client asks again.
func topicError(name *string, id [16]byte, code int16, notFound *kerr.Error) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic, rt.TopicID = name, id
	rt.Partitions = []kmsg.MetadataResponseTopicPartition{}
	switch code {
	case kerr.UnknownTopicOrPartition.Code, notFound.Code:
		rt.ErrorCode = notFound.Code
	case kerr.InvalidTopicException.Code, kerr.TopicAuthorizationFailed.Code:
		rt.ErrorCode = code
	default:
		rt.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	return rt
}

// findCoordinator answers rendezvous(key) over the live nodes, for groups and
// transactional ids alike (v4+: for each key of the batch).
func (s *Server) findCoordinator(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	m := s.view.get(ctx)
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		if err := s.deps.Core.AuthorizeCoordinator(ctx, r.who, broker.CoordinatorKind(in.CoordinatorType), key); err != nil {
			c.ErrorCode, c.ErrorMessage = s.kafkaError(err)
			c.NodeID = -1
			return c
		}
		b, ok := m.broker(m.coordinator(in.CoordinatorType, key))
		if !ok { // no live node with a usable address: the client retries
			c.ErrorCode, c.NodeID = kerr.CoordinatorNotAvailable.Code, -1
			return c
		}
		c.NodeID, c.Host, c.Port = b.id, b.host, b.port
		return c
	}
	if in.Version >= 4 {
		for _, k := range in.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, answer(k))
		}
		return resp, nil
	}
	c := answer(in.CoordinatorKey)
	resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
	return resp, nil
}

// describeCluster answers the live nodes, the cluster id and the controller.
func (s *Server) describeCluster(ctx context.Context, _ *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if in.Version >= 1 && in.EndpointType != 1 { // 1: brokers; every node is one
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		msg := "this is a broker endpoint: ask with endpoint type 1"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	resp.EndpointType = in.EndpointType
	m := s.view.get(ctx)
	resp.ClusterID, resp.ControllerID = m.clusterID, m.controller
	for _, b := range m.brokers {
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.id, b.host, b.port
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
