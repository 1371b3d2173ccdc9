package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
)

// createTopics serves CreateTopics: configs and validate-only as the core takes them;
// any replication factor is accepted and answered as 1 (durability is the object
// store's). Brokers do not hold partitions, so a replica assignment is refused.
func (s *Server) createTopics(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	defer func() { // controller_mutation_rate: a refusal says how long to wait
		for _, t := range resp.Topics {
			if t.ErrorCode == kerr.ThrottlingQuotaExceeded.Code {
				resp.ThrottleMillis = throttleMillis(s.deps.Core.MutationThrottle(r.who))
			}
		}
	}()
	names := map[string]int{}
	for _, t := range in.Topics {
		names[t.Topic]++
	}
	for _, t := range in.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			rt.ErrorCode, rt.ErrorMessage = code, &msg
			resp.Topics = append(resp.Topics, rt)
		}
		switch {
		case names[t.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "the topic is named more than once in the request")
			continue
		case len(t.ReplicaAssignment) > 0:
			fail(kerr.InvalidReplicaAssignment.Code, "partitions are not placed on brokers here: give a partition count instead")
			continue
		}
		// -1 is Kafka's spelling of the default count (num.partitions), the core's 0; any
		// other count is checked as given, so an explicit 0 is refused as the HTTP API
		// refuses it (and as Kafka does: INVALID_PARTITIONS).
		partitions := int32(0)
		if t.NumPartitions != -1 {
			if err := broker.CheckPartitionCount(t.NumPartitions); err != nil {
				rt.ErrorCode, rt.ErrorMessage = s.kafkaError(err)
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			partitions = t.NumPartitions
		}
		configs := map[string]string{}
		for _, c := range t.Configs {
			if c.Value != nil {
				configs[c.Name] = *c.Value
			}
		}
		ct, err := s.deps.Core.CreateTopic(ctx, r.who, broker.CreateTopicRequest{
			Name: t.Topic, Partitions: partitions, Configs: configs, ValidateOnly: in.ValidateOnly,
		})
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = s.kafkaError(err)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID, rt.NumPartitions, rt.ReplicationFactor = ct.UUID, ct.Partitions, 1
		for _, e := range broker.EffectiveConfigs(ct.Configs) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.Source = e.Name, &e.Value, int8(configSource(e))
			rt.Configs = append(rt.Configs, c)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// deleteTopics serves DeleteTopics, by name or (v6) by topic id.
func (s *Server) deleteTopics(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	defer func() { // controller_mutation_rate: a refusal says how long to wait
		for _, t := range resp.Topics {
			if t.ErrorCode == kerr.ThrottlingQuotaExceeded.Code {
				resp.ThrottleMillis = throttleMillis(s.deps.Core.MutationThrottle(r.who))
			}
		}
	}()
	type target struct {
		name *string
		id   catalog.UUID
	}
	var targets []target
	if in.Version >= 6 {
		for _, t := range in.Topics {
			targets = append(targets, target{t.Topic, catalog.UUID(t.TopicID)})
		}
	} else {
		for _, n := range in.TopicNames {
			targets = append(targets, target{name: &n})
		}
	}
	for _, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = tg.name, tg.id
		var err error
		switch {
		case tg.name != nil:
			err = s.deps.Core.DeleteTopic(ctx, r.who, *tg.name)
		case tg.id.IsZero():
			rt.ErrorCode = kerr.InvalidRequest.Code
		default:
			var t catalog.Topic
			if t, err = s.deps.Core.TopicByUUID(ctx, r.who, tg.id); err == nil {
				name := t.Name
				rt.Topic = &name
				err = s.deps.Core.DeleteTopic(ctx, r.who, name)
			} else if hasCode(err, broker.CodeTopicNotFound) {
				rt.ErrorCode, err = kerr.UnknownTopicID.Code, nil
			}
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = s.kafkaError(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// createPartitions serves CreatePartitions: a topic grows to the count asked for
// (never shrinks); brokers do not hold partitions, so an assignment is refused.
func (s *Server) createPartitions(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	defer func() { // controller_mutation_rate: a refusal says how long to wait
		for _, t := range resp.Topics {
			if t.ErrorCode == kerr.ThrottlingQuotaExceeded.Code {
				resp.ThrottleMillis = throttleMillis(s.deps.Core.MutationThrottle(r.who))
			}
		}
	}()
	for _, t := range in.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		if len(t.Assignment) > 0 {
			msg := "partitions are not placed on brokers here: give the count alone"
			rt.ErrorCode, rt.ErrorMessage = kerr.InvalidReplicaAssignment.Code, &msg
		} else if _, err := s.deps.Core.GrowPartitions(ctx, r.who, t.Topic, t.Count, in.ValidateOnly); err != nil {
			rt.ErrorCode, rt.ErrorMessage = s.kafkaError(err)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
