package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/strata-io/strata/acl"
)

// countingAuthorizer allows everything but the refused resources, and counts the
// questions per resource.
type countingAuthorizer struct {
	refused map[acl.Resource]bool
	asked   map[acl.Resource]int
}

func (a *countingAuthorizer) Allowed(who Principal, op acl.Operation, r acl.Resource) bool {
	a.asked[r]++
	return !a.refused[r]
}

// TestProduceAuthorizesEachTopicOnce: a produce asks about each topic it writes once,
// however many records name it and in whatever order, past the handful a list holds;
// the first topic refused is named, and nothing reaches the writer.
func TestProduceAuthorizesEachTopicOnce(t *testing.T) {
	e := newEnv(t)
	auth := &countingAuthorizer{refused: map[acl.Resource]bool{}, asked: map[acl.Resource]int{}}
	e.b.d.Authorizer = auth
	var recs []Record
	for i := range 200 {
		recs = append(recs, Record{Topic: fmt.Sprintf("t%02d", (i*7)%40), Partition: -1, Value: []byte("v")})
	}
	who := Principal{Name: "User:p"}
	_, err := e.b.Produce(context.Background(), who, ProduceRequest{Records: recs})
	wantCode(t, err, CodeTopicNotFound) // authorized, then looked up: the fake has none of them
	if len(auth.asked) != 40 {
		t.Errorf("asked about %d topics, want 40", len(auth.asked))
	}
	for r, n := range auth.asked {
		if n != 1 {
			t.Errorf("asked about %s %d times", r, n)
		}
	}
	auth.refused[acl.Topic("t39")] = true
	_, err = e.b.Produce(context.Background(), who, ProduceRequest{Records: recs})
	fe := wantCode(t, err, CodeForbidden)
	if fe.Details["operation"] != "write" || fe.Details["resource"] != "t39" || fe.Details["resource_type"] != "topic" {
		t.Fatalf("refusal %+v", fe.Details)
	}
	if e.w.calls() != 0 {
		t.Fatal("a refused produce reached the writer")
	}
}

// TestForbiddenBeforeLookup: a refusal comes before any catalog lookup, so a missing
// topic and an existing one are refused alike.
func TestForbiddenBeforeLookup(t *testing.T) {
	e := newEnv(t)
	e.b.d.Authorizer = &countingAuthorizer{refused: map[acl.Resource]bool{acl.Topic("plain"): true, acl.Topic("missing"): true}, asked: map[acl.Resource]int{}}
	who := Principal{Name: "User:p"}
	ctx := context.Background()
	for _, name := range []string{"plain", "missing"} {
		for what, call := range map[string]func() error{
			"topic":        func() error { _, err := e.b.Topic(ctx, who, name); return err },
			"delete":       func() error { return e.b.DeleteTopic(ctx, who, name) },
			"update":       func() error { _, err := e.b.UpdateTopic(ctx, who, name, TopicUpdate{Partitions: 9}); return err },
			"configs":      func() error { _, err := e.b.DescribeConfigs(ctx, who, name); return err },
			"lookup":       func() error { _, err := e.b.LookupPartition(ctx, who, name, 0); return err },
			"list offset":  func() error { _, err := e.b.ListOffset(ctx, who, name, 0, Latest); return err },
			"grow":         func() error { _, err := e.b.GrowPartitions(ctx, who, name, 9, false); return err },
			"alter config": func() error { _, err := e.b.AlterConfigs(ctx, who, name, AlterConfigsRequest{}); return err },
		} {
			if e := wantCode(t, call(), CodeForbidden); e.Details["resource"] != name {
				t.Errorf("%s %s: refusal names %v", what, name, e.Details["resource"])
			}
		}
	}
	// Listings leave out what may not be described.
	ts, err := e.b.Topics(ctx, who)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range ts {
		if tp.Name == "plain" {
			t.Errorf("listing shows %s", tp.Name)
		}
	}
}

// TestTimestampLimitNeedsClusterAlterConfigs: message.timestamp.after.max.ms above the
// operator's limit is refused as invalid on a node without authorization (only the flag
// raises it), refused as forbidden to a principal without alter-configs on the cluster,
// and accepted for one with it.
func TestTimestampLimitNeedsClusterAlterConfigs(t *testing.T) {
	ctx := context.Background()
	twoDays := map[string]string{"message.timestamp.after.max.ms": "172800000"}
	who := Principal{Name: "User:p"}

	e := newEnv(t)
	_, err := e.b.CreateTopic(ctx, who, CreateTopicRequest{Name: "far", Configs: twoDays})
	wantCode(t, err, CodeInvalidConfig)
	_, err = e.b.UpdateTopic(ctx, who, "plain", TopicUpdate{Configs: twoDays})
	wantCode(t, err, CodeInvalidConfig)

	auth := &countingAuthorizer{refused: map[acl.Resource]bool{acl.Cluster(): true}, asked: map[acl.Resource]int{}}
	e.b.d.Authorizer = auth
	for what, call := range map[string]func() error{
		"create": func() error {
			_, err := e.b.CreateTopic(ctx, who, CreateTopicRequest{Name: "far", Configs: twoDays})
			return err
		},
		"update": func() error { _, err := e.b.UpdateTopic(ctx, who, "plain", TopicUpdate{Configs: twoDays}); return err },
		"alter": func() error {
			_, err := e.b.AlterConfigs(ctx, who, "plain", AlterConfigsRequest{Changes: []ConfigChange{{Name: "message.timestamp.after.max.ms", Value: "172800000", Op: ConfigSet}}})
			return err
		},
	} {
		fe := wantCode(t, call(), CodeForbidden)
		if fe.Details["operation"] != "alter-configs" || fe.Details["resource_type"] != "cluster" || fe.Details["config"] != "message.timestamp.after.max.ms" {
			t.Errorf("%s: %+v", what, fe.Details)
		}
	}
	delete(auth.refused, acl.Cluster())
	if _, err := e.b.UpdateTopic(ctx, who, "plain", TopicUpdate{Configs: twoDays}); err != nil {
		t.Fatalf("with alter-configs on the cluster: %v", err)
	}
	if _, err := e.b.UpdateTopic(ctx, who, "plain", TopicUpdate{Configs: map[string]string{"message.timestamp.after.max.ms": "3600000"}}); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
}
