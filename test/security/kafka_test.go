package security_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/internal/testkit/batchtest"
)

// kclient is a franz-go client authenticated by SASL/PLAIN as key id and secret.
func (s *stack) kclient(id, secret string) *kgo.Client {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka), kgo.SASL(plain.Auth{User: id, Pass: secret}.AsMechanism()),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cl.Close)
	return cl
}

// kafkaCase is one Kafka API's case of the ACL matrix: the grants it needs in the order
// they are checked, and the request, answering the error code that matters.
type kafkaCase struct {
	name string
	need func(c names) []grant
	do   func(ctx context.Context, cl *kgo.Client, c names) (int16, error)
}

func str(s string) *string { return &s }

// direct sends requests to the one node as they are: franz-go's client would otherwise
// find a coordinator or a partition's leader first, and answer for that step's refusal.
func direct(cl *kgo.Client) kmsg.Requestor { return cl.Broker(nodeID) }

// nodeID is the stack's node's id: the first one a registry hands out.
const nodeID = 0

// authzCode is the Kafka error a refusal of a resource of this type answers.
var authzCode = map[acl.ResourceType]*kerr.Error{
	acl.TypeTopic:           kerr.TopicAuthorizationFailed,
	acl.TypeGroup:           kerr.GroupAuthorizationFailed,
	acl.TypeCluster:         kerr.ClusterAuthorizationFailed,
	acl.TypeTransactionalID: kerr.TransactionalIDAuthorizationFailed,
}

func kafkaCases(t *testing.T) []kafkaCase {
	return slices.Concat(recordCases(t), groupCases(), adminCases(), aclCases())
}

// topicOp needs op on the case's topic; clusterOp, op on the cluster.
func topicOp(op acl.Operation) func(names) []grant {
	return func(c names) []grant { return []grant{c.topicGrant(op)} }
}

func clusterOp(op acl.Operation) func(names) []grant {
	return func(names) []grant { return []grant{cluster(op)} }
}

// recordCases are the APIs of records and their topics' metadata.
func recordCases(t *testing.T) []kafkaCase {
	batch := batchtest.Batch(t, batchtest.Some(1, time.Now().UnixMilli()), 0, -1, -1, -1)
	return []kafkaCase{
		{"Metadata", topicOp(acl.OpDescribe), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = str(c.topic)
			r.Topics = append(r.Topics, mt)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{"Metadata, implied by read", implied(topicOp(acl.OpRead)), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = str(c.topic)
			r.Topics = append(r.Topics, mt)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{"Produce", topicOp(acl.OpWrite), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = -1, 10000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = c.topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = append([]byte(nil), batch...)
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{"Fetch", topicOp(acl.OpRead), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrFetchRequest()
			r.MaxBytes, r.MaxWaitMillis = 1<<20, 10
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = c.topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{"ListOffsets", topicOp(acl.OpDescribe), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = c.topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
	}
}

// allowedPast answers 0 for code ok, an answer that only comes past authorization.
func allowedPast(code int16, ok *kerr.Error) int16 {
	if code == ok.Code {
		return 0
	}
	return code
}

// groupCases are the consumer-group APIs.
func groupCases() []kafkaCase {
	return []kafkaCase{
		{"OffsetCommit", func(c names) []grant { return []grant{c.groupGrant(acl.OpRead), c.topicGrant(acl.OpRead)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				r := kmsg.NewPtrOffsetCommitRequest()
				r.Group, r.Generation = c.group, -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = c.topic
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Offset = 1
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				return resp.Topics[0].Partitions[0].ErrorCode, nil
			}},
		{"OffsetFetch", func(c names) []grant { return []grant{c.groupGrant(acl.OpDescribe)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				// franz-go sends the newest version both sides have: v8 names groups in
				// a list, older ones in Group.
				r := kmsg.NewPtrOffsetFetchRequest()
				r.Group = c.group
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = c.group
				r.Groups = append(r.Groups, g)
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				if len(resp.Groups) > 0 {
					return resp.Groups[0].ErrorCode, nil
				}
				return resp.ErrorCode, nil
			}},
		// The classic group APIs (issue 16). An answer past authorization that is about
		// the request itself (a new member's MEMBER_ID_REQUIRED, an unknown member, a
		// group that does not exist) counts as allowed.
		{"JoinGroup", func(c names) []grant { return []grant{c.groupGrant(acl.OpRead)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				r := kmsg.NewPtrJoinGroupRequest()
				r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = c.group, 10_000, 10_000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
				r.Protocols = append(r.Protocols, p)
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				return allowedPast(resp.ErrorCode, kerr.MemberIDRequired), nil
			}},
		{"Heartbeat", func(c names) []grant { return []grant{c.groupGrant(acl.OpRead)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				r := kmsg.NewPtrHeartbeatRequest()
				r.Group, r.MemberID, r.Generation = c.group, "nobody", 1
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				return allowedPast(resp.ErrorCode, kerr.UnknownMemberID), nil
			}},
		{"DescribeGroups", func(c names) []grant { return []grant{c.groupGrant(acl.OpDescribe)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.Groups = []string{c.group}
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				return allowedPast(resp.Groups[0].ErrorCode, kerr.GroupIDNotFound), nil
			}},
		{"DeleteGroups", func(c names) []grant { return []grant{c.groupGrant(acl.OpDelete)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				r := kmsg.NewPtrDeleteGroupsRequest()
				r.Groups = []string{c.group}
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				return allowedPast(resp.Groups[0].ErrorCode, kerr.GroupIDNotFound), nil
			}},
		{"OffsetDelete", func(c names) []grant { return []grant{c.groupGrant(acl.OpDelete), c.topicGrant(acl.OpRead)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				r := kmsg.NewPtrOffsetDeleteRequest()
				r.Group = c.group
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = c.topic
				rt.Partitions = append(rt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
				r.Topics = append(r.Topics, rt)
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				if resp.ErrorCode != 0 {
					return allowedPast(resp.ErrorCode, kerr.GroupIDNotFound), nil
				}
				return resp.Topics[0].Partitions[0].ErrorCode, nil
			}},
		{"FindCoordinator", func(c names) []grant { return []grant{c.groupGrant(acl.OpDescribe)} },
			func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
				r := kmsg.NewPtrFindCoordinatorRequest()
				r.CoordinatorKey, r.CoordinatorKeys = c.group, []string{c.group}
				resp, err := r.RequestWith(ctx, direct(cl))
				if err != nil {
					return 0, err
				}
				if len(resp.Coordinators) > 0 {
					return resp.Coordinators[0].ErrorCode, nil
				}
				return resp.ErrorCode, nil
			}},
	}
}

// adminCases are the administrative APIs, and those served to everyone.
func adminCases() []kafkaCase {
	return []kafkaCase{
		{"CreateTopics", func(c names) []grant {
			g := c.topicGrant(acl.OpCreate)
			if !g.prefixed {
				g.name = c.topic + "-k"
			}
			g.refused = &refusal{acl.OpCreate, acl.TypeTopic, c.topic + "-k"}
			return []grant{g}
		}, func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.topic+"-k", 1, 1
			r.Topics = append(r.Topics, rt)
			r.TimeoutMillis = 10000
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{"CreatePartitions", topicOp(acl.OpAlter), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = c.topic, 3
			r.Topics = append(r.Topics, rt)
			r.TimeoutMillis = 10000
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{"DescribeConfigs of a topic", topicOp(acl.OpDescribeConfigs), describeConfigs(2, func(c names) string { return c.topic })},
		{"DescribeConfigs of the broker", clusterOp(acl.OpDescribeConfigs), describeConfigs(4, func(names) string { return "0" })},
		{"AlterConfigs", topicOp(acl.OpAlterConfigs), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrAlterConfigsRequest()
			rr := kmsg.NewAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = 2, c.topic
			cfg := kmsg.NewAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Value = "retention.ms", str("-1")
			rr.Configs = append(rr.Configs, cfg)
			r.Resources = append(r.Resources, rr)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Resources[0].ErrorCode, nil
		}},
		{"IncrementalAlterConfigs", topicOp(acl.OpAlterConfigs), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = 2, c.topic
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Value = "retention.ms", str("60000")
			rr.Configs = append(rr.Configs, cfg)
			r.Resources = append(r.Resources, rr)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Resources[0].ErrorCode, nil
		}},
		// Transactional ids are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
		// whatever the ACLs (transactions are not served): an idempotent producer needs
		// no grant.
		{"InitProducerID", func(names) []grant { return nil }, func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionTimeoutMillis = 60000
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}},
		{"DeleteRecords", topicOp(acl.OpDelete), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrDeleteRecordsRequest()
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = c.topic
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			r.TimeoutMillis = 10000
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].Partitions[0].ErrorCode, nil
		}},
		{"DeleteTopics", topicOp(acl.OpDelete), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TopicNames, r.TimeoutMillis = []string{c.topic}, 10000
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = str(c.topic)
			r.Topics = append(r.Topics, dt)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Topics[0].ErrorCode, nil
		}},
		{"DescribeCluster", func(names) []grant { return nil }, func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}},
		{"ApiVersions", func(names) []grant { return nil }, func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}},
	}
}

func describeConfigs(typ kmsg.ConfigResourceType, name func(names) string) func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
	return func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
		r := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name(c)
		r.Resources = append(r.Resources, rr)
		resp, err := r.RequestWith(ctx, direct(cl))
		if err != nil {
			return 0, err
		}
		return resp.Resources[0].ErrorCode, nil
	}
}

// TestKafkaMatrix: every Kafka API the listener serves, as a principal granted what it
// needs one grant at a time (literal for even cases, prefixed for odd ones): the
// authorization error of the kind of resource missing, then success, then the error
// again under a deny. The SASL APIs are served to everyone (they authenticate).
func TestKafkaMatrix(t *testing.T) {
	s := startStack(t)
	for i, kc := range kafkaCases(t) {
		c := names{i: i, topic: fmt.Sprintf("t%02d-topic", i), group: fmt.Sprintf("g%02d-group", i), prefixed: i%2 == 1}
		t.Run(kc.name, func(t *testing.T) {
			s.t = t
			s.topic(c.topic, 2, 3)
			principal := fmt.Sprintf("User:k%02d", i)
			id, secret := s.key(principal)
			s.sync()
			cl := s.kclient(id, secret)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			try := func(what string, want *kerr.Error) {
				t.Helper()
				code, err := kc.do(ctx, cl, c)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if got := kerr.ErrorForCode(code); got != want && !(want == nil && code == 0) {
					t.Fatalf("%s: error %v, want %v", what, got, want)
				}
			}
			s.walkGrants(principal, c, kc.need(c), func(what string, want refusal) {
				try(what, authzCode[want.typ])
			}, func(need []grant) { try(fmt.Sprintf("with %v", need), nil) })
		})
	}
}

// TestKafkaMetadataFiltered: a request for every topic lists only those the principal
// may describe.
func TestKafkaMetadataFiltered(t *testing.T) {
	s := startStack(t)
	for _, n := range []string{"k-mine", "k-theirs"} {
		s.topic(n, 1, 0)
	}
	id, secret := s.key("User:meta")
	s.allow("User:meta", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "k-mine"})
	cl := s.kclient(id, secret)
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tp := range resp.Topics {
		got = append(got, *tp.Topic)
	}
	if len(got) != 1 || got[0] != "k-mine" {
		t.Fatalf("every topic: %v, want k-mine only", got)
	}
}

// aclCases are the ACL APIs.
func aclCases() []kafkaCase {
	return []kafkaCase{
		{"DescribeAcls", clusterOp(acl.OpDescribe), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = 1, 1, 1, 1
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		}},
		{"CreateAcls", clusterOp(acl.OpAlter), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrCreateACLsRequest()
			cr := kmsg.NewCreateACLsRequestCreation()
			cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = 2, "k-made", 3
			cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:k-made", "*", 3, 3
			r.Creations = append(r.Creations, cr)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Results[0].ErrorCode, nil
		}},
		{"DeleteAcls", clusterOp(acl.OpAlter), func(ctx context.Context, cl *kgo.Client, c names) (int16, error) {
			r := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = 1, 1, 1, 1
			f.Principal = str("User:nobody")
			r.Filters = append(r.Filters, f)
			resp, err := r.RequestWith(ctx, direct(cl))
			if err != nil {
				return 0, err
			}
			return resp.Results[0].ErrorCode, nil
		}},
	}
}
