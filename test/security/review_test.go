package security_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/strata-io/strata/acl"
)

// TestReviewReproductions: the outside review's findings, each now refused with 403 and
// changing nothing. A second key read, deleted records from, reset, re-configured
// (retention.ms=-1) and deleted a topic made with the first, and 1,500 joins to another
// key's group took its partitions.
func TestReviewReproductions(t *testing.T) {
	s := startStack(t)
	// Alice owns the alice- topics and groups; Bob the bob- ones.
	for _, who := range []string{"alice", "bob"} {
		for _, g := range []grant{
			{op: acl.OpAll, typ: acl.TypeTopic, name: who + "-", prefixed: true},
			{op: acl.OpAll, typ: acl.TypeGroup, name: who + "-", prefixed: true},
		} {
			s.allow("User:"+who, g)
		}
	}
	_, alice := s.key("User:alice")
	_, bob := s.key("User:bob")
	s.sync()
	if r := s.do(alice, "POST", "/v1/topics", `{"name":"alice-orders","partitions":2}`); r.status != http.StatusCreated {
		t.Fatalf("alice creates her topic: %d %s", r.status, r.body)
	}
	if r := s.do(alice, "POST", "/v1/topics/alice-orders/records", `{"records":[{"value":1,"partition":0},{"value":2,"partition":0},{"value":3,"partition":1}]}`); r.status != http.StatusOK {
		t.Fatalf("alice produces: %d %s", r.status, r.body)
	}
	join := `{"member_id":"alice-1","member_epoch":0,"topics":["alice-orders"],"session_timeout_ms":60000}`
	if r := s.do(alice, "POST", "/v1/groups/alice-app/heartbeat", join); r.status != http.StatusOK {
		t.Fatalf("alice joins her group: %d %s", r.status, r.body)
	}

	for _, rq := range []struct {
		what, method, path, body string
		op                       acl.Operation
		typ                      acl.ResourceType
		name                     string
	}{
		{"read", "GET", "/v1/topics/alice-orders/partitions/0/records?offset=0", "", acl.OpRead, acl.TypeTopic, "alice-orders"},
		{"delete records", "POST", "/v1/topics/alice-orders/partitions/0/records:delete", `{"before_offset":-1}`, acl.OpDelete, acl.TypeTopic, "alice-orders"},
		{"reset offsets", "POST", "/v1/groups/alice-app/offsets:reset", `{"topic":"alice-orders","to":"latest"}`, acl.OpRead, acl.TypeGroup, "alice-app"},
		{"re-configure", "PATCH", "/v1/topics/alice-orders", `{"configs":{"retention.ms":"-1"}}`, acl.OpAlterConfigs, acl.TypeTopic, "alice-orders"},
		{"delete the topic", "DELETE", "/v1/topics/alice-orders", "", acl.OpDelete, acl.TypeTopic, "alice-orders"},
		{"delete the group", "DELETE", "/v1/groups/alice-app", "", acl.OpDelete, acl.TypeGroup, "alice-app"},
	} {
		wantForbidden(t, "bob: "+rq.what, s.do(bob, rq.method, rq.path, rq.body), rq.op, rq.typ, rq.name)
	}
	for i := range 1500 {
		body := fmt.Sprintf(`{"member_id":"bob-%d","member_epoch":0,"topics":["alice-orders"]}`, i)
		r := s.do(bob, "POST", "/v1/groups/alice-app/heartbeat", body)
		if r.status != http.StatusForbidden {
			t.Fatalf("bob's join %d: %d %s", i, r.status, r.body)
		}
	}

	// Nothing changed: the records, the configs, the topic, the group and its member.
	parts := s.must(http.StatusOK, "GET", "/v1/topics/alice-orders/partitions", "").json(t)["partitions"].([]any)
	p0 := parts[0].(map[string]any)
	if p0["log_start_offset"].(float64) != 0 || p0["high_watermark"].(float64) != 2 {
		t.Errorf("partition 0 after bob: %v", p0)
	}
	topic := s.must(http.StatusOK, "GET", "/v1/topics/alice-orders", "").json(t)
	if cfg, _ := topic["configs"].(map[string]any); cfg["retention.ms"] != nil {
		t.Errorf("configs after bob: %v", cfg)
	}
	g := s.must(http.StatusOK, "GET", "/v1/groups/alice-app", "").json(t)
	members, _ := g["members"].([]any)
	if len(members) != 1 || members[0].(map[string]any)["member_id"] != "alice-1" {
		t.Errorf("group members after bob: %v", g["members"])
	}
	if r := s.do(alice, "POST", "/v1/groups/alice-app/heartbeat",
		`{"member_id":"alice-1","member_epoch":1,"topics":["alice-orders"],"owned":[{"topic":"alice-orders","partitions":[0,1]}]}`); r.status != http.StatusOK {
		t.Errorf("alice's member after bob's joins: %d %s", r.status, r.body)
	}
	// Bob's own topic works for him.
	if r := s.do(bob, "POST", "/v1/topics", `{"name":"bob-orders","partitions":1}`); r.status != http.StatusCreated {
		t.Errorf("bob creates his own topic: %d %s", r.status, r.body)
	}
}
