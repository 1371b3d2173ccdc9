package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// setAuthorizer decides by a set of bindings, as package security does for the
// principals that are not superusers.
type setAuthorizer struct{ set *acl.Set }

func (a setAuthorizer) Allowed(who Principal, op acl.Operation, r acl.Resource) bool {
	return a.set.Allowed(who.Name, "*", op, r)
}

func allowing(bs ...acl.Binding) setAuthorizer { return setAuthorizer{acl.NewSet(bs)} }

func bind(principal string, op acl.Operation, r acl.Resource, prefixed bool) acl.Binding {
	p := acl.PatternLiteral
	if prefixed {
		p = acl.PatternPrefixed
	}
	return acl.Binding{Principal: principal, Host: "*", Resource: r.Type, Name: r.Name, Pattern: p, Operation: op, Permission: acl.PermissionAllow}
}

// planner is a ConnectorPlanner that counts its calls and needs write on topic.
type planner struct {
	calls int
	topic string
	err   error
}

func (p *planner) plan(_ context.Context, _ string, _ map[string]string) (ConnectorPlan, error) {
	p.calls++
	if p.err != nil {
		return ConnectorPlan{}, p.err
	}
	return ConnectorPlan{Type: catalog.ConnectorSource, Tasks: []map[string]string{{}},
		Needs: []Need{{acl.OpWrite, acl.Topic(p.topic)}}}, nil
}

func put(b *Broker, who Principal, name string, upsert bool, p *planner) (catalog.Connector, bool, error) {
	return b.PutConnector(context.Background(), who, PutConnectorRequest{Name: name, Config: map[string]string{"k": "v"}, Upsert: upsert, Plan: p.plan})
}

// TestConnectorRules: the core's answers for connectors, by code: a second create, a
// bad name or state, a planner's refusal, a missing connector or task, offsets edited
// while running.
func TestConnectorRules(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	who := Anonymous
	p := &planner{topic: "t"}
	if _, created, err := put(b, who, "c", false, p); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	wantCode(t, third(put(b, who, "c", false, p)), CodeConnectorExists)
	wantCode(t, third(put(b, who, "no/slash", false, p)), CodeInvalidRequest)
	wantCode(t, third(b.PutConnector(ctx, who, PutConnectorRequest{Name: "d", TargetState: "SLEEPING", Plan: p.plan})), CodeInvalidRequest)
	bad := &planner{err: &Error{Code: CodeInvalidConfig, Message: "the plugin's words"}}
	if e := wantCode(t, third(put(b, who, "d", false, bad)), CodeInvalidConfig); e.Message != "the plugin's words" {
		t.Errorf("a planner's refusal: %q", e.Message)
	}
	wantCode(t, third(put(b, who, "d", false, &planner{err: errors.New("plain")})), CodeInvalidConfig)
	wantCode(t, second(b.Connector(ctx, who, "missing")), CodeConnectorNotFound)
	wantCode(t, b.DeleteConnector(ctx, who, "missing"), CodeConnectorNotFound)
	wantCode(t, b.SetConnectorState(ctx, who, "missing", catalog.StatePaused), CodeConnectorNotFound)
	wantCode(t, b.SetConnectorState(ctx, who, "c", "SLEEPING"), CodeInvalidRequest)
	wantCode(t, second(b.RestartConnectorTasks(ctx, who, "c", 7, false)), CodeTaskNotFound)
	wantCode(t, second(b.ConnectorTopics(ctx, who, "missing")), CodeConnectorNotFound)
	wantCode(t, b.ResetConnectorOffsets(ctx, who, "c"), CodeConnectorNotStopped)
	wantCode(t, b.RestartConnector(ctx, who, "missing", "w", p.plan), CodeConnectorNotFound)
	if err := b.SetConnectorState(ctx, who, "c", catalog.StateStopped); err != nil {
		t.Fatal(err)
	}
	decode := func(string) (OffsetsEdit, error) { return OffsetsEdit{}, nil }
	wantCode(t, b.AlterConnectorOffsets(ctx, who, "c", decode), CodeInvalidRequest) // none given
	if err := b.ResetConnectorOffsets(ctx, who, "c"); err != nil {
		t.Fatal(err)
	}
}

func third[A, B any](_ A, _ B, err error) error { return err }

// TestConnectorAuthorizedFirst: without the grants, every call is refused before the
// connector is looked up or its config planned — the same refusal for a missing
// connector and an existing one.
func TestConnectorAuthorizedFirst(t *testing.T) {
	b, _ := newRealCore(t)
	ctx := t.Context()
	p := &planner{topic: "t"}
	if _, _, err := put(b, Anonymous, "exists", false, p); err != nil {
		t.Fatal(err)
	}
	b.d.Authorizer = allowing()
	who := Principal{Name: "User:nobody"}
	p.calls = 0
	decode := func(string) (OffsetsEdit, error) { t.Fatal("decoded for a refused caller"); return OffsetsEdit{}, nil }
	for _, name := range []string{"exists", "missing"} {
		for what, tc := range map[string]struct {
			err error
			op  acl.Operation
		}{
			"get":           {second(b.Connector(ctx, who, name)), acl.OpDescribe},
			"topics":        {second(b.ConnectorTopics(ctx, who, name)), acl.OpDescribe},
			"offsets":       {second(b.ConnectorOffsets(ctx, who, name)), acl.OpDescribe},
			"create":        {third(put(b, who, name, false, p)), acl.OpCreate},
			"upsert":        {third(put(b, who, name, true, p)), acl.OpAlter},
			"restart":       {b.RestartConnector(ctx, who, name, "w", p.plan), acl.OpAlter},
			"restart tasks": {second(b.RestartConnectorTasks(ctx, who, name, -1, false)), acl.OpAlter},
			"pause":         {b.SetConnectorState(ctx, who, name, catalog.StatePaused), acl.OpAlter},
			"reset topics":  {b.ResetConnectorTopics(ctx, who, name), acl.OpAlter},
			"alter offsets": {b.AlterConnectorOffsets(ctx, who, name, decode), acl.OpAlter},
			"reset offsets": {b.ResetConnectorOffsets(ctx, who, name), acl.OpAlter},
			"delete":        {b.DeleteConnector(ctx, who, name), acl.OpDelete},
		} {
			e := wantCode(t, tc.err, CodeForbidden)
			if e.Details["operation"] != tc.op.String() || e.Details["resource_type"] != "connector" || e.Details["resource"] != name {
				t.Errorf("%s %s: refusal %v, want %s on connector %s", what, name, e.Details, tc.op, name)
			}
		}
	}
	if p.calls != 0 {
		t.Errorf("the planner ran %d times for a refused caller", p.calls)
	}
	if cs, err := b.Connectors(ctx, who); err != nil || len(cs) != 0 {
		t.Errorf("a caller without describe lists %v, %v", cs, err)
	}
}

// TestConnectorRunsAsWhoStoresIt: creating needs create (on the cluster or the name);
// the config's needs are checked as the caller; a reconfiguration by another principal
// needs alter and the needs, and makes the connector run as it; create alone does not
// replace an existing connector.
func TestConnectorRunsAsWhoStoresIt(t *testing.T) {
	b, cat := newRealCore(t)
	ctx := t.Context()
	alice, bob := Principal{Name: "User:alice"}, Principal{Name: "User:bob"}
	b.d.Authorizer = allowing(
		bind(alice.Name, acl.OpCreate, acl.Connector("a-"), true),
		bind(alice.Name, acl.OpWrite, acl.Topic("t"), false),
		bind(bob.Name, acl.OpCreate, acl.Cluster(), false),
	)
	p := &planner{topic: "t"}
	if e := wantCode(t, third(put(b, alice, "b-conn", false, p)), CodeForbidden); e.Details["operation"] != "create" {
		t.Fatalf("alice creates outside her prefix: %v", e.Details)
	}
	if _, _, err := put(b, alice, "a-conn", false, p); err != nil {
		t.Fatalf("alice creates: %v", err)
	}
	if e := wantCode(t, third(put(b, bob, "b-conn", false, p)), CodeForbidden); e.Details["resource"] != "t" {
		t.Fatalf("bob without write on the topic: %v", e.Details)
	}
	// Create on the cluster does not replace alice's.
	if e := wantCode(t, third(put(b, bob, "a-conn", true, p)), CodeForbidden); e.Details["operation"] != "alter" {
		t.Fatalf("bob replaces with create alone: %v", e.Details)
	}
	b.d.Authorizer = allowing(
		bind(bob.Name, acl.OpAlter, acl.Connector("a-conn"), false),
		bind(bob.Name, acl.OpWrite, acl.Topic("t"), false),
	)
	c, created, err := put(b, bob, "a-conn", true, p)
	if err != nil || created || c.Principal != bob.Name {
		t.Fatalf("bob reconfigures: %+v %v %v", c, created, err)
	}
	if got, _ := cat.Connector(ctx, "a-conn"); got.Principal != bob.Name {
		t.Fatalf("stored principal %q", got.Principal)
	}
	// A restart keeps the principal.
	b.d.Authorizer = allowing(bind(alice.Name, acl.OpAlter, acl.Connector("a-"), true))
	if err := b.RestartConnector(ctx, alice, "a-conn", "w", p.plan); err != nil {
		t.Fatal(err)
	}
	if got, _ := cat.Connector(ctx, "a-conn"); got.Principal != bob.Name {
		t.Fatalf("after alice's restart it runs as %q", got.Principal)
	}
}

// TestCommitSourceAuthorizes: a source commit needs write on every topic it produces,
// as a produce does; refused, nothing is written.
func TestCommitSourceAuthorizes(t *testing.T) {
	b, cat := newRealCore(t)
	ctx := t.Context()
	for _, n := range []string{"mine", "theirs"} {
		if _, err := b.CreateTopic(ctx, Anonymous, CreateTopicRequest{Name: n, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := put(b, Anonymous, "src", false, &planner{topic: "mine"}); err != nil {
		t.Fatal(err)
	}
	a, err := cat.WorkerHeartbeat(ctx, catalog.WorkerBeat{Worker: "w", Lease: catalog.MinSessionTimeout})
	if err != nil || len(a.Tasks) != 1 {
		t.Fatalf("claim: %+v %v", a, err)
	}
	who := Principal{Name: "User:src"}
	auth := allowing(bind(who.Name, acl.OpWrite, acl.Topic("mine"), false))
	b.d.Authorizer = auth
	req := SourceRequest{
		Records: []Record{{Topic: "mine", Partition: 0, Value: []byte("1")}, {Topic: "theirs", Partition: 0, Value: []byte("2")}},
		Source:  catalog.SourceCommit{Fence: a.Tasks[0].TaskFence, Offsets: []catalog.SourceOffset{{Partition: `{"p":1}`, Offset: `{"o":1}`}}},
	}
	if e := wantCode(t, second(b.CommitSource(ctx, who, req)), CodeForbidden); e.Details["resource"] != "theirs" || e.Details["operation"] != "write" {
		t.Fatalf("refusal %v", e.Details)
	}
	b.d.Authorizer = nil
	for _, n := range []string{"mine", "theirs"} {
		ps, err := b.Partitions(ctx, Anonymous, n)
		if err != nil || ps[0].HighWatermark != 0 {
			t.Fatalf("%s after a refused commit: %+v %v", n, ps, err)
		}
	}
	b.d.Authorizer = auth
	req.Records = req.Records[:1]
	if _, err := b.CommitSource(ctx, who, req); err != nil {
		t.Fatalf("a commit it may make: %v", err)
	}
}

// BenchmarkConnectorGet reads a connector through the core as a principal among 1,000
// bindings of 100 principals (keyed), and on a node without authorization (open): the
// difference is what the connector check costs a Connect REST call.
func BenchmarkConnectorGet(b *testing.B) {
	core, _ := newRealCore(b)
	ctx := context.Background()
	if _, _, err := put(core, Anonymous, "bench-c", false, &planner{topic: "t"}); err != nil {
		b.Fatal(err)
	}
	var bs []acl.Binding
	for i := range 1000 {
		bs = append(bs, bind(fmt.Sprintf("User:u%d", i%100), acl.OpDescribe, acl.Connector(fmt.Sprintf("c-%d", i)), i%10 == 0))
	}
	bs = append(bs, bind("User:u7", acl.OpDescribe, acl.Connector("bench-"), true))
	who := Principal{Name: "User:u7"}
	for _, tc := range []struct {
		name string
		auth Authorizer
	}{{"open", nil}, {"keyed", allowing(bs...)}} {
		b.Run(tc.name, func(b *testing.B) {
			core.d.Authorizer = tc.auth
			b.ReportAllocs()
			for b.Loop() {
				if _, err := core.Connector(ctx, who, "bench-c"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
