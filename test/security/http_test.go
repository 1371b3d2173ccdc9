package security_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-io/strata/acl"
)

// route is one HTTP route's case of the ACL matrix: what a request needs, in the order
// the core checks it, and what it answers once it has it all.
type route struct {
	name string
	// need lists the grants, in the order they are checked; none: any authenticated
	// principal may.
	need func(c names) []grant
	// do sends the request as key.
	do func(s *stack, c names, key string) response
	ok int
}

// names are a case's resources: its own topic and group, and whether its grants name
// them by prefix (every other case) or literally.
type names struct {
	i            int
	topic, group string
	prefixed     bool
	// connector is a Connect case's connector (its sink's group is group).
	connector string
}

func (c names) topicGrant(op acl.Operation) grant {
	if c.prefixed {
		return grant{op: op, typ: acl.TypeTopic, name: fmt.Sprintf("t%02d-", c.i), prefixed: true}
	}
	return grant{op: op, typ: acl.TypeTopic, name: c.topic}
}

func (c names) groupGrant(op acl.Operation) grant {
	if c.prefixed {
		return grant{op: op, typ: acl.TypeGroup, name: fmt.Sprintf("g%02d-", c.i), prefixed: true}
	}
	return grant{op: op, typ: acl.TypeGroup, name: c.group}
}

func (c names) txnGrant() grant {
	return grant{op: acl.OpWrite, typ: acl.TypeTransactionalID, name: "tx-" + c.topic}
}

func cluster(op acl.Operation) grant {
	return grant{op: op, typ: acl.TypeCluster, name: acl.ClusterName}
}

func req(method, path, body string, headers ...string) func(s *stack, c names, key string) response {
	return func(s *stack, c names, key string) response {
		p := strings.NewReplacer("{T}", c.topic, "{G}", c.group).Replace(path)
		b := strings.NewReplacer("{T}", c.topic, "{G}", c.group).Replace(body)
		return s.do(key, method, p, b, headers...)
	}
}

// implied marks the grants as implying describe: a request without them is refused
// describe.
func implied(need func(names) []grant) func(names) []grant {
	return func(c names) []grant {
		gs := need(c)
		for i := range gs {
			gs[i].refused = &refusal{acl.OpDescribe, gs[i].typ, wantResourceName(c, gs[i])}
		}
		return gs
	}
}

func routes() []route {
	groupOp := func(op acl.Operation) func(names) []grant {
		return func(c names) []grant { return []grant{c.groupGrant(op)} }
	}
	member := func(c names) []grant { return []grant{c.groupGrant(acl.OpRead), c.topicGrant(acl.OpRead)} }
	none := func(names) []grant { return nil }
	return []route{
		{"create topic", func(c names) []grant {
			g := c.topicGrant(acl.OpCreate)
			if !g.prefixed {
				g.name = c.topic + "-new"
			}
			g.refused = &refusal{acl.OpCreate, acl.TypeTopic, c.topic + "-new"}
			return []grant{g}
		}, req("POST", "/v1/topics", `{"name":"{T}-new","partitions":1}`), http.StatusCreated},
		{"create topic with create on the cluster", func(c names) []grant {
			g := cluster(acl.OpCreate)
			g.refused = &refusal{acl.OpCreate, acl.TypeTopic, c.topic + "-new"}
			return []grant{g}
		}, req("POST", "/v1/topics", `{"name":"{T}-new","partitions":1}`), http.StatusCreated},
		{"describe topic", topicOp(acl.OpDescribe), req("GET", "/v1/topics/{T}", ""), http.StatusOK},
		{"describe topic, implied by read", implied(topicOp(acl.OpRead)), req("GET", "/v1/topics/{T}", ""), http.StatusOK},
		{"alter topic configs", topicOp(acl.OpAlterConfigs), req("PATCH", "/v1/topics/{T}", `{"configs":{"retention.ms":"-1"}}`), http.StatusOK},
		{"grow partitions", topicOp(acl.OpAlter), req("PATCH", "/v1/topics/{T}", `{"partitions":3}`), http.StatusOK},
		{"timestamps far ahead need the cluster", func(c names) []grant {
			return []grant{c.topicGrant(acl.OpAlterConfigs), cluster(acl.OpAlterConfigs)}
		}, req("PATCH", "/v1/topics/{T}", `{"configs":{"message.timestamp.after.max.ms":"172800000"}}`), http.StatusOK},
		{"partitions, implied by write", implied(topicOp(acl.OpWrite)), req("GET", "/v1/topics/{T}/partitions", ""), http.StatusOK},
		{"offset by time", topicOp(acl.OpDescribe), req("GET", "/v1/topics/{T}/partitions/0/offsets?timestamp=0", ""), http.StatusOK},
		{"fetch", topicOp(acl.OpRead), req("GET", "/v1/topics/{T}/partitions/0/records?offset=0", ""), http.StatusOK},
		{"fetch batches", topicOp(acl.OpRead), req("GET", "/v1/topics/{T}/partitions/0/records?offset=0", "", "Accept", "application/vnd.kafka.record-batch"), http.StatusOK},
		{"tail", topicOp(acl.OpRead), req("GET", "/v1/topics/{T}/partitions/0/records?offset=0", "", "Accept", "text/event-stream"), http.StatusOK},
		{"produce", topicOp(acl.OpWrite), req("POST", "/v1/topics/{T}/records", `{"records":[{"value":1}]}`), http.StatusOK},
		{"delete records", topicOp(acl.OpDelete), req("POST", "/v1/topics/{T}/partitions/0/records:delete", `{"before_offset":1}`), http.StatusOK},
		{"delete topic", topicOp(acl.OpDelete), req("DELETE", "/v1/topics/{T}", ""), http.StatusNoContent},
		{"describe group", groupOp(acl.OpDescribe), req("GET", "/v1/groups/{G}", ""), http.StatusOK},
		{"group offsets", groupOp(acl.OpDescribe), req("GET", "/v1/groups/{G}/offsets", ""), http.StatusOK},
		{"group lag, implied by read", implied(groupOp(acl.OpRead)), req("GET", "/v1/groups/{G}/lag", ""), http.StatusOK},
		{"heartbeat", member, req("POST", "/v1/groups/{G}/heartbeat", `{"member_id":"m1","member_epoch":0,"topics":["{T}"]}`), http.StatusOK},
		{"commit offsets", member, req("POST", "/v1/groups/{G}/offsets", `{"offsets":[{"topic":"{T}","partition":0,"offset":1}]}`), http.StatusOK},
		{"reset offsets", member, req("POST", "/v1/groups/{G}/offsets:reset", `{"topic":"{T}","to":"latest"}`), http.StatusOK},
		{"delete group", groupOp(acl.OpDelete), req("DELETE", "/v1/groups/{G}", ""), http.StatusNoContent},
		{"transactional producer", func(c names) []grant { return []grant{c.txnGrant()} },
			req("POST", "/v1/producers", `{"transactional_id":"tx-{T}"}`), http.StatusOK},
		{"idempotent producer", none, req("POST", "/v1/producers", ``), http.StatusOK},
		{"records with group offsets", func(c names) []grant {
			return []grant{c.topicGrant(acl.OpWrite), c.groupGrant(acl.OpRead), c.topicGrant(acl.OpRead)}
		}, req("POST", "/v1/records", `{"records":[{"topic":"{T}","value":1}],"group_offsets":{"group":"{G}","offsets":[{"topic":"{T}","partition":0,"offset":1}]}}`), http.StatusOK},
		{"records of a transactional producer", func(c names) []grant { return []grant{c.topicGrant(acl.OpWrite), c.txnGrant()} },
			txnProduce, http.StatusOK},
		{"list ACLs", clusterOp(acl.OpDescribe), req("GET", "/v1/acls", ""), http.StatusOK},
		{"create ACL", clusterOp(acl.OpAlter), req("POST", "/v1/acls", `{"principal":"User:x","resource_type":"topic","resource_name":"x","operation":"read"}`), http.StatusCreated},
		{"delete ACLs", clusterOp(acl.OpAlter), req("DELETE", "/v1/acls?principal=User:nobody", ""), http.StatusOK},
		{"list keys", clusterOp(acl.OpDescribe), req("GET", "/v1/keys", ""), http.StatusOK},
		{"create key", clusterOp(acl.OpAlter), req("POST", "/v1/keys", `{"principal":"User:made"}`), http.StatusCreated},
		{"revoke key", clusterOp(acl.OpAlter), revokeOther, http.StatusOK},
		{"audit log", clusterOp(acl.OpDescribe), req("GET", "/v1/audit", ""), http.StatusOK},
		{"live nodes", clusterOp(acl.OpDescribe), req("GET", "/v1/nodes", ""), http.StatusOK},
		{"openapi document", none, req("GET", "/v1/openapi.json", ""), http.StatusOK},
	}
}

// txnProduce initialises a transactional producer as the superuser, then produces with
// its identity as key.
func txnProduce(s *stack, c names, key string) response {
	m := s.must(http.StatusOK, "POST", "/v1/producers", fmt.Sprintf(`{"transactional_id":"tx-%s"}`, c.topic)).json(s.t)
	body := fmt.Sprintf(`{"records":[{"topic":%q,"partition":0,"value":1}],"producer":{"id":%v,"epoch":%v,"sequences":{%q:{"0":0}}}}`,
		c.topic, m["producer_id"], m["epoch"], c.topic)
	return s.do(key, "POST", "/v1/records", body)
}

func revokeOther(s *stack, c names, key string) response {
	id, _ := s.key("User:revokable-" + c.topic)
	return s.do(key, "DELETE", "/v1/keys/"+id, "")
}

// TestHTTPMatrix: for every route, a principal with none of the ACLs it needs is
// refused with 403 forbidden naming the first one missing; with each grant added in
// turn, the refusal names the next; with all of them, the request succeeds; a deny of
// the last one refuses it again, deny winning. Grants are literal for even cases and
// prefixes for odd ones; the implied describe cases grant read or write only.
func TestHTTPMatrix(t *testing.T) {
	s := startStack(t)
	for i, rt := range routes() {
		c := names{i: i, topic: fmt.Sprintf("t%02d-topic", i), group: fmt.Sprintf("g%02d-group", i), prefixed: i%2 == 1}
		t.Run(rt.name, func(t *testing.T) {
			s.t = t
			s.topic(c.topic, 2, 3)
			s.must(http.StatusOK, "POST", "/v1/groups/"+c.group+"/offsets:reset", fmt.Sprintf(`{"topic":%q,"to":"earliest","create":true}`, c.topic))
			principal := fmt.Sprintf("User:p%02d", i)
			_, key := s.key(principal)
			s.sync()
			s.walkGrants(principal, c, rt.need(c), func(what string, want refusal) {
				wantForbidden(t, what, rt.do(s, c, key), want.op, want.typ, want.name)
			}, func(need []grant) {
				if r := rt.do(s, c, key); r.status != rt.ok {
					t.Fatalf("with %v: %d %s, want %d", need, r.status, r.body, rt.ok)
				}
			})
		})
	}
}

// walkGrants grants need to principal one at a time in case c: refused is called before
// each, with what the request must be refused for; allowed once all are granted; then
// the last grant is denied (and what its absence is refused for, when that differs),
// and refused is called again: deny wins over the allows.
func (s *stack) walkGrants(principal string, c names, need []grant, refused func(what string, want refusal), allowed func(need []grant)) {
	for _, g := range need {
		want := refusal{g.op, g.typ, wantResourceName(c, g)}
		if g.refused != nil {
			want = *g.refused
		}
		refused("without "+g.String(), want)
		s.allow(principal, g)
	}
	allowed(need)
	if len(need) == 0 {
		return
	}
	last := need[len(need)-1]
	want := refusal{last.op, last.typ, wantResourceName(c, last)}
	s.allow(principal, grant{op: want.op, typ: want.typ, name: want.name, deny: true})
	if last.refused != nil {
		want = *last.refused
		s.allow(principal, grant{op: want.op, typ: want.typ, name: want.name, deny: true})
	}
	refused("with a deny", want)
}

// wantResourceName is the resource a grant's refusal names in case c.
func wantResourceName(c names, g grant) string {
	switch {
	case g.typ == acl.TypeCluster:
		return acl.ClusterName
	case g.typ == acl.TypeTransactionalID:
		return g.name
	case g.typ == acl.TypeGroup:
		return c.group
	case g.typ == acl.TypeConnector:
		return c.connector
	default:
		return c.topic
	}
}

// TestForbiddenSameForMissing: a 403 is the same bytes whether the topic (or group)
// exists or not, for every kind of request on it.
func TestForbiddenSameForMissing(t *testing.T) {
	s := startStack(t)
	_, key := s.key("User:outsider")
	s.sync()
	reqs := []struct{ method, path, body string }{
		{"GET", "/v1/topics/secret", ""},
		{"DELETE", "/v1/topics/secret", ""},
		{"PATCH", "/v1/topics/secret", `{"configs":{"retention.ms":"-1"}}`},
		{"GET", "/v1/topics/secret/partitions", ""},
		{"GET", "/v1/topics/secret/partitions/0/records?offset=0", ""},
		{"POST", "/v1/topics/secret/records", `{"records":[{"value":1}]}`},
		{"POST", "/v1/topics/secret/partitions/0/records:delete", `{"before_offset":1}`},
		{"GET", "/v1/groups/secret-group", ""},
		{"DELETE", "/v1/groups/secret-group", ""},
		{"POST", "/v1/groups/secret-group/offsets:reset", `{"topic":"secret","to":"earliest"}`},
	}
	before := make([][]byte, len(reqs))
	for i, rq := range reqs {
		r := s.do(key, rq.method, rq.path, rq.body, "X-Request-Id", "same-id")
		if r.status != http.StatusForbidden {
			t.Fatalf("%s %s before it exists: %d %s", rq.method, rq.path, r.status, r.body)
		}
		before[i] = r.body
	}
	s.topic("secret", 1, 2)
	s.must(http.StatusOK, "POST", "/v1/groups/secret-group/offsets:reset", `{"topic":"secret","to":"earliest","create":true}`)
	for i, rq := range reqs {
		r := s.do(key, rq.method, rq.path, rq.body, "X-Request-Id", "same-id")
		if r.status != http.StatusForbidden || !bytes.Equal(r.body, before[i]) {
			t.Errorf("%s %s: missing answered %s; existing %d %s", rq.method, rq.path, before[i], r.status, r.body)
		}
	}
}

// TestListingsFiltered: the topic and group listings and a group's offsets show only
// what the principal may describe.
func TestListingsFiltered(t *testing.T) {
	s := startStack(t)
	for _, n := range []string{"mine-a", "mine-b", "theirs"} {
		s.topic(n, 1, 1)
		s.must(http.StatusOK, "POST", "/v1/groups/g-"+n+"/offsets:reset", fmt.Sprintf(`{"topic":%q,"to":"earliest","create":true}`, n))
	}
	s.must(http.StatusOK, "POST", "/v1/groups/g-mine-a/offsets:reset", `{"topic":"theirs","to":"earliest","create":true}`)
	_, key := s.key("User:lister")
	s.allow("User:lister", grant{op: acl.OpRead, typ: acl.TypeTopic, name: "mine-", prefixed: true})
	s.allow("User:lister", grant{op: acl.OpDescribe, typ: acl.TypeGroup, name: "g-mine-a"})
	s.allow("User:lister", grant{op: acl.OpDescribe, typ: acl.TypeTopic, name: "theirs", deny: true})
	topics := listed(t, s.do(key, "GET", "/v1/topics", ""), "topics", "name")
	if strings.Join(topics, ",") != "mine-a,mine-b" {
		t.Errorf("topics listed: %v, want mine-a, mine-b", topics)
	}
	groups := listed(t, s.do(key, "GET", "/v1/groups", ""), "groups", "name")
	if strings.Join(groups, ",") != "g-mine-a" {
		t.Errorf("groups listed: %v, want g-mine-a", groups)
	}
	offs := listed(t, s.do(key, "GET", "/v1/groups/g-mine-a/offsets", ""), "offsets", "topic")
	if strings.Join(offs, ",") != "mine-a" {
		t.Errorf("offsets listed for topics %v, want mine-a only", offs)
	}
	if all := listed(t, s.must(http.StatusOK, "GET", "/v1/topics", ""), "topics", "name"); len(all) != 3 {
		t.Errorf("the superuser lists %v", all)
	}
}

// listed lists field of each object in the answer's list member.
func listed(t *testing.T, r response, list, field string) []string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("listing: %d %s", r.status, r.body)
	}
	var out []string
	items, _ := r.json(t)[list].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any)[field].(string))
	}
	return out
}

// TestGroupMemberNeedsGroupRead: read on the topic is not enough to join a group, to
// commit its offsets or to take its partitions: the group needs read too.
func TestGroupMemberNeedsGroupRead(t *testing.T) {
	s := startStack(t)
	s.topic("orders", 2, 1)
	_, key := s.key("User:member")
	s.allow("User:member", grant{op: acl.OpRead, typ: acl.TypeTopic, name: "orders"})
	for _, rq := range []struct{ path, body string }{
		{"/v1/groups/app/heartbeat", `{"member_id":"m","member_epoch":0,"topics":["orders"]}`},
		{"/v1/groups/app/offsets", `{"offsets":[{"topic":"orders","partition":0,"offset":1}]}`},
	} {
		wantForbidden(t, rq.path, s.do(key, "POST", rq.path, rq.body), acl.OpRead, acl.TypeGroup, "app")
	}
	if r := s.do(key, "GET", "/v1/topics/orders/partitions/0/records?offset=0", ""); r.status != http.StatusOK {
		t.Fatalf("fetching the topic it may read: %d %s", r.status, r.body)
	}
}
