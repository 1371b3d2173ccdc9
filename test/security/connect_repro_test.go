package security_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// The reproductions of issue 27's Connect findings, each on a node with keys required:
// what a principal could do to another's connectors, what a connector could write, and
// what the answers echoed.

// taskOf answers a connector's task 0 status (state, trace) as key sees it.
func (s *stack) taskOf(key, name string) map[string]any {
	s.t.Helper()
	r := s.do(key, "GET", "/connectors/"+name+"/status", "")
	if r.status != http.StatusOK {
		s.t.Fatalf("status of %s: %d %s", name, r.status, r.body)
	}
	ts, _ := r.json(s.t)["tasks"].([]any)
	if len(ts) == 0 {
		return map[string]any{}
	}
	return ts[0].(map[string]any)
}

// waitTask waits until the connector's task 0 is in state and answers its status.
func (s *stack) waitTask(name, state string) map[string]any {
	s.t.Helper()
	var task map[string]any
	testwait.NoError(s.t, 30*time.Second, name+"'s task to be "+state, func() error {
		if task = s.taskOf(bootKey, name); task["state"] != state {
			return fmt.Errorf("task %v", task)
		}
		return nil
	})
	return task
}

// highWatermark is partition 0's.
func (s *stack) highWatermark(topic string) int64 {
	s.t.Helper()
	ps := s.must(http.StatusOK, "GET", "/v1/topics/"+topic+"/partitions", "").json(s.t)["partitions"].([]any)
	return int64(ps[0].(map[string]any)["high_watermark"].(float64))
}

// TestConnectorOfAnother: a principal without grants on another's connector can neither
// read, reconfigure, pause, restart, rewind nor delete it; alter alone does not let it
// reconfigure the connector into what it may not do itself; with alter and what the
// config needs, the connector runs as it from then on (and the audit log says so).
func TestConnectorOfAnother(t *testing.T) {
	s := startConnectStack(t)
	s.topic("alice-t", 1, 0)
	_, alice := s.key("User:alice")
	_, bob := s.key("User:bob")
	s.allow("User:alice", grant{op: acl.OpAll, typ: acl.TypeConnector, name: "alice-", prefixed: true})
	s.allow("User:alice", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "alice-t"})
	cfg := `{"connector.class":"test.GenSource","topic":"alice-t","gate":"alice-gate"}`
	if r := s.do(alice, "POST", "/connectors", `{"name":"alice-conn","config":`+cfg+`}`); r.status != http.StatusCreated {
		t.Fatalf("alice creates her connector: %d %s", r.status, r.body)
	}
	for _, rq := range []struct {
		method, path, body string
		op                 acl.Operation
	}{
		{"GET", "/connectors/alice-conn/config", "", acl.OpDescribe},
		{"GET", "/connectors/alice-conn/status", "", acl.OpDescribe},
		{"GET", "/connectors/alice-conn/offsets", "", acl.OpDescribe},
		{"PUT", "/connectors/alice-conn/config", cfg, acl.OpAlter},
		{"PUT", "/connectors/alice-conn/pause", "", acl.OpAlter},
		{"PUT", "/connectors/alice-conn/stop", "", acl.OpAlter},
		{"POST", "/connectors/alice-conn/restart?includeTasks=true", "", acl.OpAlter},
		{"PATCH", "/connectors/alice-conn/offsets", `{"offsets":[{"partition":{"gen":"x"},"offset":{"n":0}}]}`, acl.OpAlter},
		{"DELETE", "/connectors/alice-conn/offsets", "", acl.OpAlter},
		{"DELETE", "/connectors/alice-conn", "", acl.OpDelete},
	} {
		wantConnectForbidden(t, "bob: "+rq.method+" "+rq.path, s.do(bob, rq.method, rq.path, rq.body), rq.op, acl.TypeConnector, "alice-conn")
	}
	if r := s.do(alice, "GET", "/connectors/alice-conn", ""); r.status != http.StatusOK {
		t.Fatalf("alice's connector after bob's tries: %d %s", r.status, r.body)
	}
	// Stopped by alice, its offsets still cannot be rewound by bob.
	if r := s.do(alice, "PUT", "/connectors/alice-conn/stop", ""); r.status != http.StatusNoContent {
		t.Fatalf("alice stops it: %d %s", r.status, r.body)
	}
	wantConnectForbidden(t, "bob rewinds the stopped connector", s.do(bob, "PATCH", "/connectors/alice-conn/offsets",
		`{"offsets":[{"partition":{"gen":"x"},"offset":{"n":0}}]}`), acl.OpAlter, acl.TypeConnector, "alice-conn")
	if r := s.do(alice, "PUT", "/connectors/alice-conn/resume", ""); r.status != http.StatusAccepted {
		t.Fatalf("alice resumes it: %d %s", r.status, r.body)
	}

	// Alter on the connector alone: bob may not make it write what he may not.
	s.allow("User:bob", grant{op: acl.OpAlter, typ: acl.TypeConnector, name: "alice-conn"})
	wantConnectForbidden(t, "bob reconfigures with alter alone", s.do(bob, "PUT", "/connectors/alice-conn/config", cfg),
		acl.OpWrite, acl.TypeTopic, "alice-t")
	if got := s.connectorPrincipal("alice-conn"); got != "User:alice" {
		t.Fatalf("after a refused reconfiguration it runs as %q", got)
	}
	// With write on the topic too, it is bob's connector from now on.
	s.allow("User:bob", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "alice-t"})
	if r := s.do(bob, "PUT", "/connectors/alice-conn/config", cfg); r.status != http.StatusOK {
		t.Fatalf("bob reconfigures with alter and write: %d %s", r.status, r.body)
	}
	if got := s.connectorPrincipal("alice-conn"); got != "User:bob" {
		t.Fatalf("reconfigured by bob, it runs as %q", got)
	}
	recs := s.must(http.StatusOK, "GET", "/v1/audit?limit=1000", "").json(t)["records"].([]any)
	last := recs[len(recs)-1].(map[string]any)
	d, _ := last["details"].(map[string]any)
	if last["action"] != "connector.config" || last["principal"] != "User:bob" || d["runs_as"] != "User:bob" || d["previous_runs_as"] != "User:alice" {
		t.Fatalf("the reconfiguration's audit record: %v", last)
	}
	// And it acts as bob: once bob may no longer write the topic, it writes nothing.
	s.waitTask("alice-conn", "RUNNING")
	s.revokeACLs("User:bob", acl.TypeTopic)
	gate("alice-gate") <- "after bob lost write"
	task := s.waitTask("alice-conn", "FAILED")
	if tr, _ := task["trace"].(string); !strings.Contains(tr, "not authorized to write topic alice-t") || !strings.Contains(tr, "User:bob") {
		t.Fatalf("trace %q", tr)
	}
	if hw := s.highWatermark("alice-t"); hw != 0 {
		t.Fatalf("alice-t's high watermark %d: a refused connector wrote", hw)
	}
}

// connectorPrincipal is whom the connector runs as, from the catalog.
func (s *stack) connectorPrincipal(name string) string {
	s.t.Helper()
	c, err := s.cat.Connector(s.t.Context(), name)
	if err != nil {
		s.t.Fatal(err)
	}
	return c.Principal
}

// revokeACLs deletes the principal's bindings of a resource type.
func (s *stack) revokeACLs(principal string, typ acl.ResourceType) {
	s.t.Helper()
	s.must(http.StatusOK, "DELETE", fmt.Sprintf("/v1/acls?principal=%s&resource_type=%s", principal, typ), "")
	s.sync()
}

// TestConnectorWithoutWrite: a connector whose principal may not write a topic never
// writes it — refused when its config names the topic, and, when a transform routes its
// records there, at every commit: its task fails with a trace naming the refusal and
// the topic's high watermark does not move. The same holds once a connector that could
// write loses the right with its creator's key and ACLs revoked.
func TestConnectorWithoutWrite(t *testing.T) {
	s := startConnectStack(t)
	s.topic("carol-t", 1, 0)
	s.topic("dave-t", 1, 0)
	carolID, carol := s.key("User:carol")
	s.allow("User:carol", grant{op: acl.OpAll, typ: acl.TypeConnector, name: "carol-", prefixed: true})
	s.allow("User:carol", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "carol-t"})

	wantConnectForbidden(t, "a config naming dave's topic", s.do(carol, "POST", "/connectors",
		`{"name":"carol-direct","config":{"connector.class":"test.GenSource","topic":"dave-t","count":"3"}}`), acl.OpWrite, acl.TypeTopic, "dave-t")
	routed := `{"name":"carol-routed","config":{"connector.class":"test.GenSource","topic":"carol-t","count":"3",` +
		`"transforms":"r","transforms.r.type":"RegexRouter","transforms.r.regex":"carol-t","transforms.r.replacement":"dave-t"}}`
	if r := s.do(carol, "POST", "/connectors", routed); r.status != http.StatusCreated {
		t.Fatalf("a config whose transform routes elsewhere: %d %s", r.status, r.body)
	}
	task := s.waitTask("carol-routed", "FAILED")
	tr, _ := task["trace"].(string)
	if !strings.Contains(tr, "stage KAFKA_PRODUCE") || !strings.Contains(tr, "not authorized to write topic dave-t") || !strings.Contains(tr, "User:carol") {
		t.Fatalf("trace %q", tr)
	}
	if hw := s.highWatermark("dave-t"); hw != 0 {
		t.Fatalf("dave-t's high watermark %d, want 0", hw)
	}

	// A connector that may write, writing; then its creator's key and ACLs go.
	if r := s.do(carol, "POST", "/connectors", `{"name":"carol-gated","config":{"connector.class":"test.GenSource","topic":"carol-t","gate":"carol-gate"}}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	s.waitTask("carol-gated", "RUNNING")
	for i := range 3 {
		gate("carol-gate") <- fmt.Sprint("before-", i)
	}
	testwait.NoError(t, 30*time.Second, "three records in carol-t", func() error {
		if hw := s.highWatermark("carol-t"); hw != 3 {
			return fmt.Errorf("high watermark %d", hw)
		}
		return nil
	})
	s.must(http.StatusOK, "DELETE", "/v1/keys/"+carolID, "")
	s.revokeACLs("User:carol", acl.TypeTopic)
	gate("carol-gate") <- "after"
	task = s.waitTask("carol-gated", "FAILED")
	if tr, _ := task["trace"].(string); !strings.Contains(tr, "not authorized to write topic carol-t") {
		t.Fatalf("trace %q", tr)
	}
	if hw := s.highWatermark("carol-t"); hw != 3 {
		t.Fatalf("carol-t's high watermark %d after the revocation, want 3", hw)
	}
}

// secretPayload is a record no trace may quote any part of.
const secretPayload = "hunter2-SECRETPAYLOAD-correcthorse"

// TestConnectTraceShowsNoRecord: a task failed by a record names it by topic,
// partition and offset in its status trace, and shows nothing of its bytes: a
// converter that cannot read it, a plugin that refuses it quoting it, a transform that
// cannot cast it.
func TestConnectTraceShowsNoRecord(t *testing.T) {
	s := startConnectStack(t)
	s.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"raw","partitions":1,"configs":{"value.format":"string"}}`)
	s.must(http.StatusOK, "POST", "/v1/topics/raw/records", `{"records":[{"value":"plain"},{"value":"`+secretPayload+`"}]}`)
	s.topic("casts", 1, 0)
	for _, tc := range []struct {
		name, cfg, where string
	}{
		{"json-sink", `{"connector.class":"test.MemSink","topics":"raw","value.converter":"JsonConverter"}`, "topic raw partition 0 offset 0"},
		{"refusing-sink", `{"connector.class":"test.MemSink","topics":"raw","value.converter":"StringConverter","reject":"SECRET"}`,
			"topic raw partition 0 offset 1"},
		{"casting-source", `{"connector.class":"test.GenSource","topic":"casts","count":"1","value":"` + secretPayload + `",` +
			`"transforms":"c","transforms.c.type":"Cast$Value","transforms.c.spec":"int32"}`, "topic casts"},
	} {
		s.must(http.StatusCreated, "POST", "/connectors", fmt.Sprintf(`{"name":%q,"config":%s}`, tc.name, tc.cfg))
		task := s.waitTask(tc.name, "FAILED")
		tr, _ := task["trace"].(string)
		t.Logf("%s: %s", tc.name, tr)
		if !strings.Contains(tr, tc.where) {
			t.Errorf("%s: trace %q does not name the record (%s)", tc.name, tr, tc.where)
		}
		for _, part := range strings.Split(secretPayload, "-") {
			if strings.Contains(tr, part) {
				t.Errorf("%s: trace %q quotes %q of the record", tc.name, tr, part)
			}
		}
		if strings.Contains(tr, "'h'") || strings.Contains(tr, `"h"`) {
			t.Errorf("%s: trace %q quotes the record's first byte", tc.name, tr)
		}
	}
}

// TestConnectProviderValuesNeverAnswered: values resolved from ${env:} and ${file:}
// appear in no answer — not a validation error, a refusal, a config, a task's config,
// a status trace — while the references do.
func TestConnectProviderValuesNeverAnswered(t *testing.T) {
	const envValue, fileValue = "envSecretValue-7731", "fileSecretValue-9142"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "creds.properties"), []byte("token = "+fileValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_T_SECRET", envValue)
	prov, err := connect.NewProviders([]string{"STRATA_T_"}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	s := startConnectStack(t, prov)
	s.topic("p-t", 1, 0)
	envRef, fileRef := "${env:STRATA_T_SECRET}", "${file:"+filepath.Join(dir, "creds.properties")+":token}"
	_, key := s.key("User:prov")
	s.allow("User:prov", grant{op: acl.OpAll, typ: acl.TypeConnector, name: "p-", prefixed: true})
	s.allow("User:prov", grant{op: acl.OpWrite, typ: acl.TypeTopic, name: "p-t"})
	var answers []string
	ask := func(method, path, body string) response {
		r := s.do(key, method, path, body)
		answers = append(answers, fmt.Sprintf("%s %s → %d %s", method, path, r.status, r.body))
		return r
	}
	for _, ref := range []string{envRef, fileRef} {
		// A key whose type the value fails: the message names the reference.
		bad := fmt.Sprintf(`{"connector.class":"test.GenSource","name":"p-bad","topic":"p-t","count":%q,"value":%q}`, ref, ref)
		if r := ask("PUT", "/connector-plugins/test.GenSource/config/validate", bad); r.status != http.StatusOK || !strings.Contains(string(r.body), `"error_count":1`) {
			t.Fatalf("validate: %d %s", r.status, r.body)
		}
		if r := ask("POST", "/connectors", `{"name":"p-bad","config":`+bad+`}`); r.status != http.StatusBadRequest {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		// A topic named by reference: not checked at creation (its name is the
		// provider's), refused at the first commit — and the trace names it hidden.
		name := "p-ok-" + ref[2:5]
		good := fmt.Sprintf(`{"connector.class":"test.GenSource","topic":%q,"count":"1","value":%q,"api.token":%q}`, ref, ref, ref)
		if r := ask("POST", "/connectors", fmt.Sprintf(`{"name":%q,"config":%s}`, name, good)); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		s.waitTask(name, "FAILED")
		for _, p := range []string{"", "/config", "/tasks", "/status", "/tasks/0/status", "/topics"} {
			ask("GET", "/connectors/"+name+p, "")
		}
		ask("GET", "/connectors?expand=info&expand=status", "")
	}
	all := strings.Join(answers, "\n")
	for _, v := range []string{envValue, fileValue} {
		if strings.Contains(all, v) {
			t.Errorf("an answer shows the resolved value %q:\n%s", v, all)
		}
	}
	if !strings.Contains(all, envRef) || !strings.Contains(all, "creds.properties:token}") {
		t.Errorf("the references are not shown:\n%s", all)
	}
}

// TestSinkWithoutGroupReadFails: a sink config its principal may not read the group of
// is refused; a running sink whose principal loses read on its group backs off and
// fails — a bounded number of tries and log lines, not a hot loop — with a trace
// naming the refusal.
func TestSinkWithoutGroupReadFails(t *testing.T) {
	s := startConnectStack(t)
	s.topic("erin-t", 1, 3)
	_, erin := s.key("User:erin")
	s.allow("User:erin", grant{op: acl.OpAll, typ: acl.TypeConnector, name: "erin-", prefixed: true})
	s.allow("User:erin", grant{op: acl.OpRead, typ: acl.TypeTopic, name: "erin-t"})
	cfg := `{"name":"erin-sink","config":{"connector.class":"test.MemSink","topics":"erin-t"}}`
	wantConnectForbidden(t, "a sink without read on its group", s.do(erin, "POST", "/connectors", cfg), acl.OpRead, acl.TypeGroup, "connect-erin-sink")

	s.allow("User:erin", grant{op: acl.OpRead, typ: acl.TypeGroup, name: "connect-erin-sink"})
	if r := s.do(erin, "POST", "/connectors", cfg); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	s.waitTask("erin-sink", "RUNNING")
	testwait.NoError(t, 30*time.Second, "the sink to commit the three records", func() error {
		offs := s.must(http.StatusOK, "GET", "/connectors/erin-sink/offsets", "").json(t)["offsets"].([]any)
		if len(offs) != 1 || offs[0].(map[string]any)["offset"].(map[string]any)["kafka_offset"] != 3.0 {
			return fmt.Errorf("offsets %v", offs)
		}
		return nil
	})
	logsBefore := len(s.logs.String())
	s.revokeACLs("User:erin", acl.TypeGroup)
	task := s.waitTask("erin-sink", "FAILED")
	if tr, _ := task["trace"].(string); !strings.Contains(tr, "not authorized to read group connect-erin-sink") || !strings.Contains(tr, "User:erin") {
		t.Fatalf("trace %q", tr)
	}
	var lines, refusals int
	for _, l := range strings.Split(s.logs.String()[logsBefore:], "\n") {
		if strings.Contains(l, `"connector":"erin-sink"`) {
			lines++
			if strings.Contains(l, "refused by the broker") {
				refusals++
			}
		}
	}
	t.Logf("from the revocation to FAILED: %d log lines of the sink, %d refusals", lines, refusals)
	if refusals == 0 || refusals >= 5*2 || lines > 40 {
		t.Fatalf("from the revocation to FAILED: %d log lines of the sink, %d refusals (want a handful, not a hot loop):\n%s",
			lines, refusals, s.logs.String()[logsBefore:])
	}
}

// TestKafkaACLsLeaveConnectorsAlone: connector bindings are Strata's own type, which
// the Kafka protocol neither shows nor takes: DescribeAcls leaves them out, CreateAcls
// refuses the type, and a DeleteAcls of everything leaves them in place.
func TestKafkaACLsLeaveConnectorsAlone(t *testing.T) {
	s := startStack(t)
	s.allow("User:k", grant{op: acl.OpAlter, typ: acl.TypeConnector, name: "k-conn"})
	s.allow("User:k", grant{op: acl.OpRead, typ: acl.TypeTopic, name: "k-t"})
	id, secret := s.key("User:kadmin")
	s.allow("User:kadmin", grant{op: acl.OpAlter, typ: acl.TypeCluster, name: acl.ClusterName})
	k := s.kclient(id, secret)
	ctx := context.Background()

	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = 1, 1, 1, 1
	dr, err := d.RequestWith(ctx, direct(k))
	if err != nil || dr.ErrorCode != 0 {
		t.Fatalf("DescribeAcls: %v %v", dr, err)
	}
	for _, r := range dr.Resources {
		if acl.ResourceType(r.ResourceType) == acl.TypeConnector {
			t.Fatalf("DescribeAcls shows a connector binding: %+v", r)
		}
	}
	d.ResourceType = kmsg.ACLResourceType(acl.TypeConnector)
	if dr, err = d.RequestWith(ctx, direct(k)); err != nil || dr.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("DescribeAcls of connectors: %+v %v, want INVALID_REQUEST", dr, err)
	}

	c := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceType(acl.TypeConnector), "k-other", 3
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:k", "*", 7, 3
	c.Creations = append(c.Creations, cr)
	cres, err := c.RequestWith(ctx, direct(k))
	if err != nil || cres.Results[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("CreateAcls of a connector binding: %+v %v, want INVALID_REQUEST", cres, err)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = 1, 1, 1, 1
	f.Principal = str("User:k")
	del.Filters = append(del.Filters, f)
	dres, err := del.RequestWith(ctx, direct(k))
	if err != nil || dres.Results[0].ErrorCode != 0 || len(dres.Results[0].MatchingACLs) != 1 {
		t.Fatalf("DeleteAcls of User:k's: %+v %v, want the topic binding alone", dres, err)
	}
	left := s.must(http.StatusOK, "GET", "/v1/acls?principal=User:k", "").json(t)["acls"].([]any)
	if len(left) != 1 || left[0].(map[string]any)["resource_type"] != "connector" {
		t.Fatalf("left after Kafka's delete: %v, want the connector binding", left)
	}
}
