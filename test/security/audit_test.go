package security_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
)

// auditRecord is what the test compares of an audit record.
type auditRecord struct{ principal, action, resource string }

func (s *stack) audit() []auditRecord {
	s.t.Helper()
	var out []auditRecord
	for _, it := range s.must(http.StatusOK, "GET", "/v1/audit?limit=1000", "").json(s.t)["records"].([]any) {
		m := it.(map[string]any)
		out = append(out, auditRecord{m["principal"].(string), m["action"].(string), m["resource"].(string)})
	}
	return out
}

// TestAuditOnePerAction: every administrative action, through the HTTP API and the
// Kafka protocol, leaves exactly one audit record naming its principal, in order; an
// action refused (by the ACLs, or inside its transaction) or only validated leaves
// none.
func TestAuditOnePerAction(t *testing.T) {
	s := startStack(t)
	ops := "User:ops"
	for _, g := range []grant{
		{op: acl.OpAll, typ: acl.TypeTopic, name: "au-", prefixed: true},
		{op: acl.OpAll, typ: acl.TypeGroup, name: "au-", prefixed: true},
		{op: acl.OpAlter, typ: acl.TypeCluster, name: acl.ClusterName},
	} {
		s.allow(ops, g)
	}
	opsID, opsKey := s.key(ops)
	s.sync()
	start := len(s.audit()) // the grants and the key above
	var want []auditRecord
	ok := func(action, resource string, status int, method, path, body string) {
		t.Helper()
		if r := s.do(opsKey, method, path, body); r.status != status {
			t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
		}
		want = append(want, auditRecord{ops, action, resource})
	}
	refused := func(status int, key, method, path, body string) {
		t.Helper()
		if r := s.do(key, method, path, body); r.status != status {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, status)
		}
	}

	// HTTP.
	ok("topic.create", "au-h", 201, "POST", "/v1/topics", `{"name":"au-h","partitions":1}`)
	ok("topic.alter", "au-h", 200, "PATCH", "/v1/topics/au-h", `{"configs":{"retention.ms":"60000"}}`)
	ok("topic.alter", "au-h", 200, "PATCH", "/v1/topics/au-h", `{"partitions":2}`)
	s.must(200, "POST", "/v1/topics/au-h/records", `{"records":[{"value":1,"partition":0}]}`) // not administrative
	ok("records.delete", "au-h", 200, "POST", "/v1/topics/au-h/partitions/0/records:delete", `{"before_offset":1}`)
	ok("group.reset_offsets", "au-g", 200, "POST", "/v1/groups/au-g/offsets:reset", `{"topic":"au-h","to":"earliest","create":true}`)
	ok("group.delete", "au-g", 204, "DELETE", "/v1/groups/au-g", "")
	ok("acl.create", "", 201, "POST", "/v1/acls", `{"principal":"User:x","resource_type":"topic","resource_name":"x","operation":"read"}`)
	ok("acl.delete", "filter", 200, "DELETE", "/v1/acls?principal=User:x", "")
	m := s.do(opsKey, "POST", "/v1/keys", `{"principal":"User:y"}`).json(t)
	want = append(want, auditRecord{ops, "key.create", m["id"].(string)})
	ok("key.revoke", m["id"].(string), 200, "DELETE", "/v1/keys/"+m["id"].(string), "")
	ok("topic.delete", "au-h", 204, "DELETE", "/v1/topics/au-h", "")

	// Refused, by the ACLs or in the transaction: none.
	_, outsider := s.key("User:outsider") // by the superuser: recorded
	s.topic("au-x", 2, 0)
	want = append(want, auditRecord{"User:bootstrap", "key.create", ""}, auditRecord{"User:bootstrap", "topic.create", "au-x"})
	s.sync()
	refused(409, opsKey, "POST", "/v1/topics", `{"name":"au-x","partitions":1}`)
	refused(403, outsider, "DELETE", "/v1/topics/au-x", "")
	refused(404, opsKey, "DELETE", "/v1/topics/au-missing", "")
	refused(404, opsKey, "DELETE", "/v1/groups/au-missing", "")
	refused(404, opsKey, "DELETE", "/v1/keys/key-missing", "")
	refused(400, opsKey, "PATCH", "/v1/topics/au-x", `{"partitions":1}`)
	refused(403, outsider, "POST", "/v1/acls", `{"principal":"User:x","resource_type":"topic","resource_name":"x","operation":"read"}`)
	s.must(200, "POST", "/v1/groups/au-live/heartbeat", `{"member_id":"m","member_epoch":0,"topics":["au-x"]}`)
	refused(409, opsKey, "POST", "/v1/groups/au-live/offsets:reset", `{"topic":"au-x","to":"earliest"}`)

	want = append(want, kafkaAdminActions(t, s, ops, opsID, opsKey)...)

	got := s.audit()[start:]
	if len(got) != len(want) {
		t.Fatalf("%d audit records, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.action == "acl.create" && strings.HasPrefix(g.resource, "allow User:") {
			w.resource = g.resource // the binding, spelled out
		}
		if w.action == "key.create" && w.resource == "" {
			w.resource = g.resource
		}
		if g != w {
			t.Errorf("audit record %d: %+v, want %+v", i, g, w)
		}
	}
}

// kafkaAdminActions runs every administrative Kafka API once as principal (key id and
// secret), and answers the audit records each should leave.
func kafkaAdminActions(t *testing.T, s *stack, principal, id, secret string) []auditRecord {
	t.Helper()
	var want []auditRecord
	ops := principal
	cl := s.kclient(id, secret)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	kafkaOK := func(action, resource string, req kmsg.Request, code func(kmsg.Response) int16) {
		t.Helper()
		resp, err := direct(cl).Request(ctx, req)
		if err == nil && code(resp) != 0 {
			err = fmt.Errorf("error code %d", code(resp))
		}
		if err != nil {
			t.Fatalf("Kafka %s: %v", action, err)
		}
		if action != "" {
			want = append(want, auditRecord{ops, action, resource})
		}
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "au-k", 1, 1
	ct.Topics, ct.ValidateOnly = []kmsg.CreateTopicsRequestTopic{ctt}, true
	kafkaOK("", "", ct, func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }) // validated only: none
	ct.ValidateOnly = false
	kafkaOK("topic.create", "au-k", ct, func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode })

	ac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	acr := kmsg.NewIncrementalAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = 2, "au-k"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "retention.ms", str("120000")
	acr.Configs = append(acr.Configs, cfg)
	ac.Resources = append(ac.Resources, acr)
	kafkaOK("topic.alter", "au-k", ac, func(r kmsg.Response) int16 {
		return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	})
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "au-k", 2
	cp.Topics = append(cp.Topics, cpt)
	kafkaOK("topic.alter", "au-k", cp, func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode })
	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "au-k"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	kafkaOK("records.delete", "au-k", dr, func(r kmsg.Response) int16 {
		return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
	})
	ca := kmsg.NewPtrCreateACLsRequest()
	cac := kmsg.NewCreateACLsRequestCreation()
	cac.ResourceType, cac.ResourceName, cac.ResourcePatternType = 2, "z", 3
	cac.Principal, cac.Host, cac.Operation, cac.PermissionType = "User:z", "*", 3, 3
	ca.Creations = append(ca.Creations, cac)
	kafkaOK("acl.create", "", ca, func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode })
	da := kmsg.NewPtrDeleteACLsRequest()
	daf := kmsg.NewDeleteACLsRequestFilter()
	daf.ResourceType, daf.ResourcePatternType, daf.Operation, daf.PermissionType = 1, 1, 1, 1
	daf.Principal = str("User:z")
	da.Filters = append(da.Filters, daf)
	kafkaOK("acl.delete", "filter", da, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode })
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = str("au-k")
	dt.Topics, dt.TopicNames = append(dt.Topics, dtt), []string{"au-k"}
	kafkaOK("topic.delete", "au-k", dt, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode })

	return want
}
