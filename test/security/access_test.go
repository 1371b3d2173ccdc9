package security_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/acl"
)

// accessLines are the node's access-log lines, decoded.
func (s *stack) accessLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.logs.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "access" {
			out = append(out, m)
		}
	}
	return out
}

func findAccess(lines []map[string]any, match map[string]any) bool {
	for _, l := range lines {
		ok := true
		for k, v := range match {
			ok = ok && l[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

// TestAccessLog: a line per request with principal, operation, resource and status on
// both front ends; refusals always, the rest only when sampled.
func TestAccessLog(t *testing.T) {
	for _, sample := range []float64{0, 1} {
		s := startStackWith(t, sample)
		s.topic("logged", 1, 1)
		id, key := s.key("User:logger")
		s.allow("User:logger", grant{op: acl.OpRead, typ: acl.TypeTopic, name: "logged"})
		s.do(key, "GET", "/v1/topics/logged/partitions/0/records?offset=0", "")
		s.do(key, "DELETE", "/v1/topics/logged", "")
		s.do("", "GET", "/v1/topics", "")
		cl := s.kclient(id, key)
		req := kmsg.NewPtrDeleteTopicsRequest()
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = str("logged")
		req.Topics, req.TopicNames = append(req.Topics, dt), []string{"logged"}
		if _, err := direct(cl).Request(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		lines := s.accessLines()
		for _, want := range []map[string]any{
			{"principal": "User:logger", "method": "DELETE", "route": "/v1/topics/{topic}", "status": float64(http.StatusForbidden),
				"operation": "delete", "resource_type": "topic", "resource": "logged", "allowed": false},
			{"principal": "User:ANONYMOUS", "route": "/v1/topics", "status": float64(http.StatusUnauthorized)},
			{"principal": "User:logger", "api": "DeleteTopics", "operation": "delete", "resource": "logged", "allowed": false, "error": true},
		} {
			if !findAccess(lines, want) {
				t.Errorf("sample %v: no access line %v in\n%v", sample, want, lines)
			}
		}
		read := map[string]any{"principal": "User:logger", "method": "GET", "status": float64(200), "operation": "read", "resource": "logged", "allowed": true}
		if got := findAccess(lines, read); got != (sample == 1) {
			t.Errorf("sample %v: an allowed request logged: %v", sample, got)
		}
	}
}
