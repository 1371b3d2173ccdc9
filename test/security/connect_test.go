package security_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// The Connect REST API's ACL matrix, beside the HTTP API's and the Kafka protocol's:
// every route is authorized by the core on the connector resource (and on what a config
// needs), refused in Kafka Connect's error shape naming the first missing grant, the
// same whether the connector exists or not, and audited when it changes anything.

// connectRoute is one Connect route's case.
type connectRoute struct {
	name string
	// setup is the connector the case starts with, made by the superuser: a running
	// source, a stopped one, a sink (stopped, and with offsets), or none.
	setup string
	need  func(c names) []grant
	do    func(s *stack, c names, key string) response
	ok    int
	// audit is the action an allowed request records, on the connector named by
	// auditOn ({C} when empty); "" for the routes that change nothing.
	audit, auditOn string
}

const (
	setupSource          = "source"
	setupStoppedSource   = "stopped source"
	setupSink            = "sink"
	setupStoppedSink     = "stopped sink"
	setupSinkWithOffsets = "stopped sink with offsets"
)

// connectNames are a Connect case's names: connector c%02d-conn, topic t%02d-topic, and
// the sink group connect-c%02d-conn; grants are prefixes for odd cases.
func connectNames(i int) names {
	c := names{i: i, topic: fmt.Sprintf("t%02d-topic", i), connector: fmt.Sprintf("c%02d-conn", i), prefixed: i%2 == 1}
	c.group = "connect-" + c.connector
	return c
}

func (c names) connGrant(op acl.Operation) grant {
	if c.prefixed {
		return grant{op: op, typ: acl.TypeConnector, name: fmt.Sprintf("c%02d-", c.i), prefixed: true}
	}
	return grant{op: op, typ: acl.TypeConnector, name: c.connector}
}

// newConnGrant is op on the connector {C}-new the case makes; refused names what its
// absence is refused for.
func (c names) newConnGrant(op acl.Operation, refused acl.Operation) grant {
	g := c.connGrant(op)
	if !g.prefixed {
		g.name = c.connector + "-new"
	}
	g.refused = &refusal{refused, acl.TypeConnector, c.connector + "-new"}
	return g
}

// sinkGroupGrant is op on the case's sink group (of {C}, or of {C}-new).
func (c names) sinkGroupGrant(op acl.Operation, fresh bool) grant {
	name := c.group
	if fresh {
		name += "-new"
	}
	g := grant{op: op, typ: acl.TypeGroup, name: name, refused: &refusal{op, acl.TypeGroup, name}}
	if c.prefixed {
		g.name, g.prefixed = fmt.Sprintf("connect-c%02d-", c.i), true
	}
	return g
}

func connOp(op acl.Operation) func(names) []grant {
	return func(c names) []grant { return []grant{c.connGrant(op)} }
}

// creq is a request with {C}, {T} and {G} replaced by the case's names.
func creq(method, path, body string) func(s *stack, c names, key string) response {
	return func(s *stack, c names, key string) response {
		r := strings.NewReplacer("{C}", c.connector, "{T}", c.topic, "{G}", c.group)
		return s.do(key, method, r.Replace(path), r.Replace(body))
	}
}

const (
	sourceConfig = `{"connector.class":"test.GenSource","topic":"{T}"}`
	sinkConfig   = `{"connector.class":"test.MemSink","topics":"{T}"}`
)

func connectRoutes() []connectRoute {
	none := func(names) []grant { return nil }
	source := func(fresh bool) func(c names) []grant {
		return func(c names) []grant {
			return []grant{c.newConnGrant(acl.OpCreate, acl.OpCreate), c.topicGrant(acl.OpWrite)}
		}
	}
	sinkOffsets := `{"offsets":[{"partition":{"kafka_topic":"{T}","kafka_partition":0},"offset":{"kafka_offset":1}}]}`
	return []connectRoute{
		{name: "list connectors", setup: setupSource, need: none, do: creq("GET", "/connectors", ""), ok: 200},
		{name: "create a source", need: source(true), do: creq("POST", "/connectors", `{"name":"{C}-new","config":`+sourceConfig+`}`),
			ok: 201, audit: "connector.create", auditOn: "{C}-new"},
		{name: "create a source with create on the cluster", need: func(c names) []grant {
			g := cluster(acl.OpCreate)
			g.refused = &refusal{acl.OpCreate, acl.TypeConnector, c.connector + "-new"}
			return []grant{g, c.topicGrant(acl.OpWrite)}
		}, do: creq("POST", "/connectors", `{"name":"{C}-new","config":`+sourceConfig+`}`), ok: 201, audit: "connector.create", auditOn: "{C}-new"},
		{name: "create a sink", need: func(c names) []grant {
			return []grant{c.newConnGrant(acl.OpCreate, acl.OpCreate), c.topicGrant(acl.OpRead), c.sinkGroupGrant(acl.OpRead, true)}
		}, do: creq("POST", "/connectors", `{"name":"{C}-new","config":`+sinkConfig+`}`), ok: 201, audit: "connector.create", auditOn: "{C}-new"},
		{name: "create by config", need: func(c names) []grant {
			return []grant{c.newConnGrant(acl.OpCreate, acl.OpAlter), c.topicGrant(acl.OpWrite)}
		}, do: func(s *stack, c names, key string) response {
			// Each try creates it: one made by a try before would need alter.
			s.do(bootKey, "DELETE", "/connectors/"+c.connector+"-new", "")
			return creq("PUT", "/connectors/{C}-new/config", sourceConfig)(s, c, key)
		}, ok: 201, audit: "connector.create", auditOn: "{C}-new"},
		{name: "reconfigure a source", setup: setupSource, need: func(c names) []grant {
			return []grant{c.connGrant(acl.OpAlter), c.topicGrant(acl.OpWrite)}
		}, do: creq("PUT", "/connectors/{C}/config", `{"connector.class":"test.GenSource","topic":"{T}","value":"w"}`), ok: 200, audit: "connector.config"},
		{name: "reconfigure a sink", setup: setupSink, need: func(c names) []grant {
			return []grant{c.connGrant(acl.OpAlter), c.topicGrant(acl.OpRead), c.sinkGroupGrant(acl.OpRead, false)}
		}, do: creq("PUT", "/connectors/{C}/config", `{"connector.class":"test.MemSink","topics":"{T}","reject":"x"}`), ok: 200, audit: "connector.config"},
		{name: "connector", setup: setupSource, need: connOp(acl.OpDescribe), do: creq("GET", "/connectors/{C}", ""), ok: 200},
		{name: "connector under /v1", setup: setupSource, need: connOp(acl.OpDescribe), do: creq("GET", "/v1/connectors/{C}", ""), ok: 200},
		{name: "config, implied by alter", setup: setupSource, need: implied(connOp(acl.OpAlter)), do: creq("GET", "/connectors/{C}/config", ""), ok: 200},
		{name: "status", setup: setupSource, need: connOp(acl.OpDescribe), do: creq("GET", "/connectors/{C}/status", ""), ok: 200},
		{name: "tasks", setup: setupSource, need: connOp(acl.OpDescribe), do: creq("GET", "/connectors/{C}/tasks", ""), ok: 200},
		{name: "task status", setup: setupSource, need: connOp(acl.OpDescribe), do: creq("GET", "/connectors/{C}/tasks/0/status", ""), ok: 200},
		{name: "topics", setup: setupSource, need: connOp(acl.OpDescribe), do: creq("GET", "/connectors/{C}/topics", ""), ok: 200},
		{name: "source offsets", setup: setupSource, need: connOp(acl.OpDescribe), do: creq("GET", "/connectors/{C}/offsets", ""), ok: 200},
		{name: "sink offsets", setup: setupSinkWithOffsets, need: connOp(acl.OpDescribe), do: creq("GET", "/connectors/{C}/offsets", ""), ok: 200},
		{name: "pause", setup: setupSource, need: connOp(acl.OpAlter), do: creq("PUT", "/connectors/{C}/pause", ""), ok: 202, audit: "connector.pause"},
		{name: "resume", setup: setupSource, need: connOp(acl.OpAlter), do: creq("PUT", "/connectors/{C}/resume", ""), ok: 202, audit: "connector.resume"},
		{name: "stop", setup: setupSource, need: connOp(acl.OpAlter), do: creq("PUT", "/connectors/{C}/stop", ""), ok: 204, audit: "connector.stop"},
		{name: "restart", setup: setupSource, need: connOp(acl.OpAlter), do: creq("POST", "/connectors/{C}/restart", ""), ok: 204, audit: "connector.restart"},
		{name: "restart tasks", setup: setupSource, need: connOp(acl.OpAlter), do: creq("POST", "/connectors/{C}/restart?includeTasks=true", ""), ok: 202, audit: "connector.restart_tasks"},
		{name: "restart a task", setup: setupSource, need: connOp(acl.OpAlter), do: creq("POST", "/connectors/{C}/tasks/0/restart", ""), ok: 204, audit: "connector.restart_task"},
		{name: "reset topics", setup: setupSource, need: connOp(acl.OpAlter), do: creq("PUT", "/connectors/{C}/topics/reset", ""), ok: 202, audit: "connector.topics.reset"},
		{name: "alter source offsets", setup: setupStoppedSource, need: connOp(acl.OpAlter),
			do: creq("PATCH", "/connectors/{C}/offsets", `{"offsets":[{"partition":{"gen":"x"},"offset":{"n":7}}]}`), ok: 200, audit: "connector.offsets.alter"},
		{name: "reset source offsets", setup: setupStoppedSource, need: connOp(acl.OpAlter), do: creq("DELETE", "/connectors/{C}/offsets", ""), ok: 200, audit: "connector.offsets.reset"},
		{name: "alter sink offsets", setup: setupStoppedSink, need: func(c names) []grant {
			return []grant{c.connGrant(acl.OpAlter), c.topicGrant(acl.OpDescribe)}
		}, do: creq("PATCH", "/connectors/{C}/offsets", sinkOffsets), ok: 200, audit: "connector.offsets.alter"},
		{name: "reset sink offsets", setup: setupSinkWithOffsets, need: connOp(acl.OpAlter), do: creq("DELETE", "/connectors/{C}/offsets", ""), ok: 200, audit: "connector.offsets.reset"},
		{name: "delete", setup: setupSource, need: connOp(acl.OpDelete), do: creq("DELETE", "/connectors/{C}", ""), ok: 204, audit: "connector.delete"},
		{name: "validate a named config", need: func(c names) []grant { return []grant{c.newConnGrant(acl.OpCreate, acl.OpCreate)} },
			do: creq("PUT", "/connector-plugins/test.GenSource/config/validate", `{"connector.class":"test.GenSource","name":"{C}-new","topic":"{T}"}`), ok: 200},
		{name: "validate", need: func(names) []grant { return []grant{cluster(acl.OpCreate)} },
			do: creq("PUT", "/connector-plugins/test.GenSource/config/validate", `{"connector.class":"test.GenSource","topic":"{T}"}`), ok: 200},
		{name: "plugins", need: none, do: creq("GET", "/connector-plugins", ""), ok: 200},
		{name: "a plugin's config", need: none, do: creq("GET", "/connector-plugins/test.GenSource/config", ""), ok: 200},
	}
}

// setupConnector makes the case's topic (one partition, three records) and connector.
func (s *stack) setupConnector(c names, kind string) {
	s.t.Helper()
	s.topic(c.topic, 1, 3)
	body := func(cfg, state string) string {
		cfg = strings.NewReplacer("{T}", c.topic).Replace(cfg)
		return fmt.Sprintf(`{"name":%q,"config":%s,"initial_state":%q}`, c.connector, cfg, state)
	}
	switch kind {
	case setupSource:
		s.must(http.StatusCreated, "POST", "/connectors", body(sourceConfig, "RUNNING"))
	case setupStoppedSource:
		s.must(http.StatusCreated, "POST", "/connectors", body(sourceConfig, "STOPPED"))
	case setupSink:
		s.must(http.StatusCreated, "POST", "/connectors", body(sinkConfig, "RUNNING"))
	case setupStoppedSink, setupSinkWithOffsets:
		s.must(http.StatusCreated, "POST", "/connectors", body(sinkConfig, "STOPPED"))
		if kind == setupSinkWithOffsets {
			s.must(http.StatusOK, "PATCH", "/connectors/"+c.connector+"/offsets",
				fmt.Sprintf(`{"offsets":[{"partition":{"kafka_topic":%q,"kafka_partition":0},"offset":{"kafka_offset":2}}]}`, c.topic))
		}
	}
}

// wantConnectForbidden checks a 403 in Kafka Connect's shape naming op on the resource.
func wantConnectForbidden(t *testing.T, what string, r response, op acl.Operation, typ acl.ResourceType, name string) {
	t.Helper()
	if r.status != http.StatusForbidden {
		t.Fatalf("%s: %d %s, want 403 (%s %s %s)", what, r.status, r.body, op, typ, name)
	}
	m := r.json(t)
	msg, _ := m["message"].(string)
	if m["error_code"] != 403.0 || m["operation"] != op.String() || m["resource_type"] != typ.String() || m["resource"] != name ||
		!strings.Contains(msg, fmt.Sprintf("not authorized to %s %s", op, acl.Resource{Type: typ, Name: name})) {
		t.Fatalf("%s: %s, want a refusal of %s on %s %s", what, r.body, op, typ, name)
	}
}

// TestConnectMatrix: for every Connect route, a principal with none of the ACLs it
// needs is refused 403 naming the first one missing; with each grant added in turn, the
// refusal names the next; with all of them, the request succeeds and, when it changes
// anything, leaves one audit record naming the principal; a deny of the last grant
// refuses it again.
func TestConnectMatrix(t *testing.T) {
	s := startConnectStack(t)
	for i, rt := range connectRoutes() {
		c := connectNames(i)
		t.Run(rt.name, func(t *testing.T) {
			s.t = t
			s.setupConnector(c, rt.setup)
			principal := fmt.Sprintf("User:cp%02d", i)
			_, key := s.key(principal)
			s.sync()
			s.walkGrants(principal, c, rt.need(c), func(what string, want refusal) {
				wantConnectForbidden(t, what, rt.do(s, c, key), want.op, want.typ, want.name)
			}, func(need []grant) {
				before := len(s.audit())
				if r := rt.do(s, c, key); r.status != rt.ok {
					t.Fatalf("with %v: %d %s, want %d", need, r.status, r.body, rt.ok)
				}
				recs := s.audit()[before:]
				if rt.audit == "" {
					if len(recs) != 0 {
						t.Fatalf("a request that changes nothing left audit records %v", recs)
					}
					return
				}
				on := strings.NewReplacer("{C}", c.connector).Replace(rt.auditOn)
				if on == "" {
					on = c.connector
				}
				if want := []auditRecord{{principal, rt.audit, on}}; !slices.Equal(recs, want) {
					t.Fatalf("audit records %v, want %v", recs, want)
				}
			})
		})
	}
}

// TestConnectForbiddenSameForMissing: for every route on a connector, a principal with
// no grants gets the same bytes whether the connector exists or not.
func TestConnectForbiddenSameForMissing(t *testing.T) {
	s := startConnectStack(t)
	_, key := s.key("User:outsider")
	s.sync()
	reqs := []struct{ method, path, body string }{
		{"GET", "/connectors/secret-conn", ""},
		{"GET", "/connectors/secret-conn/config", ""},
		{"PUT", "/connectors/secret-conn/config", `{"connector.class":"test.GenSource","topic":"secret-t"}`},
		{"POST", "/connectors", `{"name":"secret-conn","config":{"connector.class":"test.GenSource","topic":"secret-t"}}`},
		{"GET", "/connectors/secret-conn/status", ""},
		{"GET", "/connectors/secret-conn/tasks", ""},
		{"GET", "/connectors/secret-conn/tasks/0/status", ""},
		{"POST", "/connectors/secret-conn/tasks/0/restart", ""},
		{"PUT", "/connectors/secret-conn/pause", ""},
		{"PUT", "/connectors/secret-conn/resume", ""},
		{"PUT", "/connectors/secret-conn/stop", ""},
		{"POST", "/connectors/secret-conn/restart", ""},
		{"POST", "/connectors/secret-conn/restart?includeTasks=true", ""},
		{"GET", "/connectors/secret-conn/topics", ""},
		{"PUT", "/connectors/secret-conn/topics/reset", ""},
		{"GET", "/connectors/secret-conn/offsets", ""},
		{"PATCH", "/connectors/secret-conn/offsets", `{"offsets":[{"partition":{"gen":"x"},"offset":{"n":1}}]}`},
		{"DELETE", "/connectors/secret-conn/offsets", ""},
		{"DELETE", "/connectors/secret-conn", ""},
	}
	before := make([][]byte, len(reqs))
	for i, rq := range reqs {
		r := s.do(key, rq.method, rq.path, rq.body)
		if r.status != http.StatusForbidden {
			t.Fatalf("%s %s before it exists: %d %s", rq.method, rq.path, r.status, r.body)
		}
		before[i] = r.body
	}
	s.topic("secret-t", 1, 0)
	s.must(http.StatusCreated, "POST", "/connectors", `{"name":"secret-conn","config":{"connector.class":"test.GenSource","topic":"secret-t"}}`)
	for i, rq := range reqs {
		if r := s.do(key, rq.method, rq.path, rq.body); r.status != http.StatusForbidden || !bytes.Equal(r.body, before[i]) {
			t.Errorf("%s %s: missing answered %s; existing %d %s", rq.method, rq.path, before[i], r.status, r.body)
		}
	}
}

// TestConnectListingsFiltered: the connector listing (names, and expanded) shows only
// the connectors the principal may describe; a connector's topics and a sink's offsets
// only the topics it may describe.
func TestConnectListingsFiltered(t *testing.T) {
	s := startConnectStack(t)
	s.topic("mine-t", 1, 2)
	s.topic("theirs-t", 1, 2)
	s.must(http.StatusCreated, "POST", "/connectors", `{"name":"mine-a","config":{"connector.class":"test.GenSource","topic":"mine-t,theirs-t","count":"2"}}`)
	s.must(http.StatusCreated, "POST", "/connectors", `{"name":"mine-s","config":{"connector.class":"test.MemSink","topics":"mine-t,theirs-t"},"initial_state":"STOPPED"}`)
	s.must(http.StatusCreated, "POST", "/connectors", `{"name":"theirs","config":{"connector.class":"test.GenSource","topic":"theirs-t"}}`)
	s.must(http.StatusOK, "PATCH", "/connectors/mine-s/offsets",
		`{"offsets":[{"partition":{"kafka_topic":"mine-t","kafka_partition":0},"offset":{"kafka_offset":1}},{"partition":{"kafka_topic":"theirs-t","kafka_partition":0},"offset":{"kafka_offset":1}}]}`)
	testwait.NoError(t, 30*time.Second, "mine-a to write both topics", func() error {
		var m map[string]map[string][]string
		if err := json.Unmarshal(s.must(http.StatusOK, "GET", "/connectors/mine-a/topics", "").body, &m); err != nil {
			return err
		}
		if got := m["mine-a"]["topics"]; len(got) != 2 {
			return fmt.Errorf("topics %v", got)
		}
		return nil
	})
	_, key := s.key("User:lister")
	s.allow("User:lister", grant{op: acl.OpDescribe, typ: acl.TypeConnector, name: "mine-", prefixed: true})
	s.allow("User:lister", grant{op: acl.OpDescribe, typ: acl.TypeTopic, name: "mine-t"})

	var names []string
	decode(t, s.do(key, "GET", "/connectors", ""), &names)
	if strings.Join(names, ",") != "mine-a,mine-s" {
		t.Errorf("connectors listed: %v, want mine-a, mine-s", names)
	}
	var expanded map[string]any
	decode(t, s.do(key, "GET", "/connectors?expand=status&expand=info", ""), &expanded)
	if _, ok := expanded["theirs"]; ok || len(expanded) != 2 {
		t.Errorf("expanded listing shows %v", expanded)
	}
	var topics map[string]map[string][]string
	decode(t, s.do(key, "GET", "/connectors/mine-a/topics", ""), &topics)
	if got := topics["mine-a"]["topics"]; !slices.Equal(got, []string{"mine-t"}) {
		t.Errorf("topics of mine-a: %v, want mine-t only", got)
	}
	var offs struct {
		Offsets []struct {
			Partition map[string]any `json:"partition"`
		} `json:"offsets"`
	}
	decode(t, s.do(key, "GET", "/connectors/mine-s/offsets", ""), &offs)
	if len(offs.Offsets) != 1 || offs.Offsets[0].Partition["kafka_topic"] != "mine-t" {
		t.Errorf("offsets of mine-s: %+v, want mine-t's only", offs)
	}
	decode(t, s.must(http.StatusOK, "GET", "/connectors", ""), &names)
	if len(names) != 3 {
		t.Errorf("the superuser lists %v", names)
	}
}

func decode(t *testing.T, r response, v any) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
}
