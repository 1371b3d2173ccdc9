package kafka

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
)

// Config resources: topics have configs (the core's); brokers have none over the
// protocol (a node is configured by its flags), so describing one answers an empty
// list and altering one is refused.
const (
	resourceTopic  = 2
	resourceBroker = 4
	resourceGroup  = 32 // a group id's configs: the share-group configs
)

// Kafka's names for where a config's value comes from, and for its type.
const (
	sourceTopic   = 1 // DYNAMIC_TOPIC_CONFIG: set on the topic
	sourceDefault = 5 // DEFAULT_CONFIG
)

func configSource(e broker.ConfigEntry) kmsg.ConfigSource {
	if e.Default {
		return sourceDefault
	}
	return sourceTopic
}

// configType is the type Kafka gives a config, as DescribeConfigs v3+ reports it: the
// integer configs are longs (ints for those Kafka declares int), cleanup.policy a list,
// the rest strings.
func configType(name, value string) kmsg.ConfigType {
	switch name {
	case "cleanup.policy":
		return kmsg.ConfigTypeList
	case "max.message.bytes", "segment.bytes":
		return kmsg.ConfigTypeInt
	}
	if _, err := strconv.ParseInt(value, 10, 64); err == nil {
		return kmsg.ConfigTypeLong
	}
	return kmsg.ConfigTypeString
}

// describeConfigs serves DescribeConfigs: every effective config of a topic with its
// source (set on the topic, or the default), or those named.
func (s *Server) describeConfigs(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range in.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		switch res.ResourceType {
		case resourceBroker:
			// The node's configs: none are listed (DescribeNodeConfigs).
			if _, err := s.deps.Core.DescribeNodeConfigs(ctx, r.who); err != nil {
				rr.ErrorCode, rr.ErrorMessage = s.kafkaError(err)
			}
		case resourceTopic:
			entries, err := s.deps.Core.DescribeConfigs(ctx, r.who, res.ResourceName)
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = s.kafkaError(err)
				break
			}
			want := map[string]bool{}
			for _, n := range res.ConfigNames {
				want[n] = true
			}
			for _, e := range entries {
				if res.ConfigNames != nil && !want[e.Name] {
					continue
				}
				rr.Configs = append(rr.Configs, describedConfig(e, in.IncludeSynonyms))
			}
		case resourceGroup:
			configs, explicit, err := s.deps.Core.GroupConfigs(ctx, r.who, res.ResourceName)
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = s.kafkaError(err)
				break
			}
			names := res.ConfigNames
			if names == nil {
				names = slices.Sorted(maps.Keys(configs))
			}
			for _, n := range names {
				v, ok := configs[n]
				if !ok {
					continue
				}
				rr.Configs = append(rr.Configs, describedConfig(broker.ConfigEntry{Name: n, Value: v, Default: !explicit[n]}, in.IncludeSynonyms))
			}
		default:
			msg := "only topic (2), broker (4) and group (32) resources have configs here"
			rr.ErrorCode, rr.ErrorMessage = kerr.InvalidRequest.Code, &msg
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func describedConfig(e broker.ConfigEntry, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	v := e.Value
	c.Name, c.Value, c.IsDefault, c.Source = e.Name, &v, e.Default, configSource(e)
	c.ConfigType = configType(e.Name, e.Value)
	if synonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = e.Name, &v, c.Source
		c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn}
	}
	return c
}

// alterConfigs serves AlterConfigs: a topic's explicit configs become exactly those
// named; the others go back to their defaults.
func (s *Server) alterConfigs(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, res := range in.Resources {
		areq := broker.AlterConfigsRequest{Replace: true, ValidateOnly: in.ValidateOnly}
		for _, c := range res.Configs {
			if c.Value != nil {
				areq.Changes = append(areq.Changes, broker.ConfigChange{Name: c.Name, Op: broker.ConfigSet, Value: *c.Value})
			}
		}
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.ErrorCode, rr.ErrorMessage = s.alterTopicConfigs(ctx, r.who, res.ResourceType, res.ResourceName, areq)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// incrementalAlterConfigs serves IncrementalAlterConfigs: set, delete, append to or
// subtract from one config at a time.
func (s *Server) incrementalAlterConfigs(ctx context.Context, r *request, req kmsg.Request) (kmsg.Response, error) {
	in := req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, res := range in.Resources {
		areq := broker.AlterConfigsRequest{ValidateOnly: in.ValidateOnly}
		for _, c := range res.Configs {
			ch := broker.ConfigChange{Name: c.Name, Op: broker.ConfigOp(c.Op)}
			if c.Value != nil {
				ch.Value = *c.Value
			}
			areq.Changes = append(areq.Changes, ch)
		}
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.ErrorCode, rr.ErrorMessage = s.alterTopicConfigs(ctx, r.who, res.ResourceType, res.ResourceName, areq)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func (s *Server) alterTopicConfigs(ctx context.Context, who broker.Principal, typ kmsg.ConfigResourceType, name string, req broker.AlterConfigsRequest) (int16, *string) {
	if typ == resourceGroup {
		return s.kafkaError(s.deps.Core.AlterGroupConfigs(ctx, who, name, req))
	}
	if typ != resourceTopic {
		msg := "only topic configs can be changed here: a node is configured by its flags"
		return kerr.InvalidRequest.Code, &msg
	}
	_, err := s.deps.Core.AlterConfigs(ctx, who, name, req)
	return s.kafkaError(err)
}
