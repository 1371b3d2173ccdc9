package frontends_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/strata-io/strata/api/v1"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// shareNode is a node serving share groups over HTTP.
type shareNode struct {
	t   *testing.T
	url string
}

// call sends a JSON request and answers the status, the problem's code and the body.
func (s shareNode) call(method, path string, body any) (int, string, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		if raw, ok := body.(string); ok {
			b = []byte(raw)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", v1.ContentTypeJSON)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p v1.Problem
	if resp.StatusCode >= 300 {
		if err := json.Unmarshal(b, &p); err != nil {
			s.t.Fatalf("%s %s: %d answer is not a problem: %s", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, p.Code, b
}

func (s shareNode) want(method, path string, body any, status int, code string) []byte {
	s.t.Helper()
	got, gotCode, b := s.call(method, path, body)
	if got != status || gotCode != code {
		s.t.Fatalf("%s %s %v: %d %q (%s), want %d %q", method, path, body, got, gotCode, b, status, code)
	}
	return b
}

func (s shareNode) acquire(req v1.ShareRecordsRequest) v1.ShareRecordsResponse {
	s.t.Helper()
	var out v1.ShareRecordsResponse
	if err := json.Unmarshal(s.want("POST", "/v1/share-groups/g/records", req, 200, ""), &out); err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s shareNode) partitions() []v1.SharePartition {
	s.t.Helper()
	var g v1.ShareGroup
	if err := json.Unmarshal(s.want("GET", "/v1/share-groups/g", nil, 200, ""), &g); err != nil {
		s.t.Fatal(err)
	}
	return g.Partitions
}

func i64(n int64) *int64 { return &n }

func ackBody(member, acq string, first, last int64, typ string) v1.ShareAckRequest {
	return v1.ShareAckRequest{MemberID: member, Acks: []v1.ShareAck{{AcquisitionID: acq,
		Ranges: []v1.ShareAckRange{{First: i64(first), Last: i64(last), Type: typ}}}}}
}

// TestShareGroupHTTP: records acquired over HTTP come back after their lock passes, to
// the same member; the first acquisition's id is then refused (acquisition_not_held)
// and changes nothing; bad input gets a 4xx with a stable code and changes nothing; a
// rejected record is archived and never delivered again; accepting the rest moves the
// start offset past both. On SQLite and on Postgres.
func TestShareGroupHTTP(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []nodetest.Option
	}{{"sqlite", nil}, {"postgres", []nodetest.Option{nodetest.OnServices()}}} {
		t.Run(tc.name, func(t *testing.T) {
			n := nodetest.Start(t, tc.opts...)
			testShareGroupHTTP(t, shareNode{t: t, url: n.URL})
		})
	}
}

func testShareGroupHTTP(t *testing.T, s shareNode) {
	s.want("POST", "/v1/topics", `{"name":"q","partitions":1}`, 201, "")
	s.want("POST", "/v1/topics/q/records", `{"records":[{"value":"a"},{"value":"b"}]}`, 200, "")
	s.want("PUT", "/v1/share-groups/g", `{"configs":{"share.auto.offset.reset":"earliest","share.record.lock.duration.ms":"1000"}}`, 200, "")

	first := s.acquire(v1.ShareRecordsRequest{Topics: []string{"q"}, WaitMs: 5000})
	m := first.MemberID
	if m == "" || len(first.Partitions) != 1 || len(first.Partitions[0].Records) != 2 {
		t.Fatalf("first acquisition: %+v, want a member id and records 0-1", first)
	}
	a1 := first.Partitions[0]
	if r := a1.Records[0]; r.Offset != 0 || string(r.Value) != `"a"` || r.DeliveryCount != 1 {
		t.Fatalf("first record: %+v", r)
	}
	// The next acquisitions hold their records for a minute: the refusals below must
	// meet records still held, however slow the machine.
	s.want("PUT", "/v1/share-groups/g", `{"configs":{"share.auto.offset.reset":"earliest","share.record.lock.duration.ms":"60000"}}`, 200, "")
	// Not acknowledged: once the lock passes (the catalog's clock) the same member
	// acquires them again, at delivery 2.
	var a2 v1.ShareAcquisition
	if !testwait.Within(30*time.Second, func() bool {
		got := s.acquire(v1.ShareRecordsRequest{MemberID: m, Topics: []string{"q"}, WaitMs: 200})
		if len(got.Partitions) == 0 {
			return false
		}
		a2 = got.Partitions[0]
		return true
	}) {
		t.Fatal("records 0-1 were never delivered again after their lock passed")
	}
	if len(a2.Records) != 2 || a2.Records[0].DeliveryCount != 2 || a2.AcquisitionID == a1.AcquisitionID {
		t.Fatalf("redelivery: %+v, want records 0-1 at delivery 2 under a new acquisition id", a2)
	}
	// The second member joins (acquiring nothing: everything is held).
	m2 := s.acquire(v1.ShareRecordsRequest{Topics: []string{"q"}}).MemberID

	before := s.partitions()
	if len(before) != 1 || before[0].Acquired != 2 {
		t.Fatalf("before the refusals: %+v, want 2 acquired", before)
	}
	const acks = "/v1/share-groups/g/acks"
	const records = "/v1/share-groups/g/records"
	for _, bad := range []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"the first acquisition, late, from the same member", acks, ackBody(m, a1.AcquisitionID, 0, 1, "accept"), 409, v1.CodeAcquisitionNotHeld},
		{"another member's acquisition", acks, ackBody(m2, a2.AcquisitionID, 0, 0, "accept"), 409, v1.CodeAcquisitionNotHeld},
		{"offsets outside the acquisition", acks, ackBody(m, a2.AcquisitionID, 1, 2, "accept"), 400, v1.CodeAckOutOfRange},
		{"good and late together: all refused", acks, v1.ShareAckRequest{MemberID: m, Acks: []v1.ShareAck{
			{AcquisitionID: a2.AcquisitionID, Ranges: []v1.ShareAckRange{{First: i64(0), Type: "accept"}}},
			{AcquisitionID: a1.AcquisitionID, Ranges: []v1.ShareAckRange{{First: i64(1), Type: "accept"}}}}}, 409, v1.CodeAcquisitionNotHeld},
		{"malformed acquisition id", acks, ackBody(m, "not-an-id", 0, 0, "accept"), 400, v1.CodeInvalidRequest},
		{"unknown type", acks, ackBody(m, a2.AcquisitionID, 0, 0, "maybe"), 400, v1.CodeInvalidRequest},
		{"first after last", acks, ackBody(m, a2.AcquisitionID, 1, 0, "accept"), 400, v1.CodeInvalidRequest},
		{"no member id", acks, ackBody("", a2.AcquisitionID, 0, 0, "accept"), 400, v1.CodeInvalidRequest},
		{"no acks", acks, v1.ShareAckRequest{MemberID: m}, 400, v1.CodeInvalidRequest},
		{"no first", acks, `{"member_id":"x","acks":[{"acquisition_id":"x","ranges":[{"type":"accept"}]}]}`, 400, v1.CodeInvalidRequest},
		{"unknown field", acks, `{"member_id":"x","ack":[]}`, 400, v1.CodeInvalidRequest},
		{"no topics", records, `{"member_id":"x"}`, 400, v1.CodeInvalidRequest},
		{"unknown topic", records, `{"topics":["nope"]}`, 404, v1.CodeTopicNotFound},
		{"too many records", records, `{"topics":["q"],"max_records":10001}`, 400, v1.CodeInvalidParameter},
		{"negative wait", records, `{"topics":["q"],"wait_ms":-1}`, 400, v1.CodeInvalidParameter},
		{"bad member id", records, `{"topics":["q"],"member_id":"a b"}`, 400, v1.CodeInvalidRequest},
		{"bad group config", "/v1/share-groups/g", `{"configs":{"share.delivery.count.limit":"99"}}`, 400, v1.CodeInvalidConfig},
		{"unknown group config", "/v1/share-groups/g", `{"configs":{"nope":"1"}}`, 400, v1.CodeInvalidConfig},
	} {
		method := "POST"
		if bad.path == "/v1/share-groups/g" {
			method = "PUT"
		}
		if got, code, b := s.call(method, bad.path, bad.body); got != bad.status || code != bad.code {
			t.Errorf("%s: %d %q (%s), want %d %q", bad.name, got, code, b, bad.status, bad.code)
		}
		if after := s.partitions(); !reflect.DeepEqual(after, before) {
			t.Fatalf("%s changed the share group: %+v, was %+v", bad.name, after, before)
		}
	}
	var cfg v1.ShareGroupConfigs
	_ = json.Unmarshal(s.want("PUT", "/v1/share-groups/g", `{"configs":{"share.auto.offset.reset":"earliest","share.record.lock.duration.ms":"60000"}}`, 200, ""), &cfg)
	if cfg.Configs["share.record.lock.duration.ms"] != "60000" || cfg.Configs["share.delivery.count.limit"] != "5" {
		t.Errorf("configs answered: %v", cfg.Configs)
	}
	s.want("GET", "/v1/share-groups/nope", nil, 404, v1.CodeGroupNotFound)
	s.want("POST", "/v1/groups/cg/heartbeat", `{"member_id":"c","member_epoch":0,"topics":["q"],"owned":[]}`, 200, "")
	s.want("POST", "/v1/share-groups/cg/records", `{"topics":["q"]}`, 409, v1.CodeGroupTypeMismatch)
	s.want("DELETE", "/v1/share-groups/g", nil, 409, v1.CodeGroupNotEmpty)

	// Reject → archived, never delivered again; accept → done.
	s.want("POST", acks, ackBody(m, a2.AcquisitionID, 1, 1, "reject"), 204, "")
	if p := s.partitions(); p[0].StartOffset != 0 || p[0].Acquired != 1 || p[0].Archived != 1 {
		t.Fatalf("after the reject: %+v, want start 0, 1 acquired, 1 archived", p)
	}
	s.want("POST", acks, ackBody(m, a2.AcquisitionID, 0, 0, "accept"), 204, "")
	if p := s.partitions(); p[0].StartOffset != 2 || p[0].Lag != 0 || p[0].Acquired != 0 {
		t.Fatalf("after the accept: %+v, want start 2, lag 0", p)
	}
	// Acknowledged already: the acquisition holds nothing now.
	s.want("POST", acks, ackBody(m, a2.AcquisitionID, 0, 0, "accept"), 409, v1.CodeAcquisitionNotHeld)
	if got := s.acquire(v1.ShareRecordsRequest{MemberID: m, Topics: []string{"q"}}); len(got.Partitions) != 0 {
		t.Fatalf("after reject and accept: acquired %+v, want nothing", got.Partitions)
	}
	// Reset to the earliest (no live members needed: refused while there are).
	s.want("POST", "/v1/share-groups/g/offsets:reset", `{"topic":"q","to":"earliest"}`, 409, v1.CodeGroupNotEmpty)
	// Both members leave; then the reset goes ahead, and the records come back.
	s.want("DELETE", "/v1/share-groups/g/members/"+m, nil, 204, "")
	s.want("DELETE", "/v1/share-groups/g/members/"+m2, nil, 204, "")
	s.want("DELETE", "/v1/share-groups/g/members/"+m2, nil, 204, "") // left already: no error
	s.want("DELETE", "/v1/share-groups/g/members/a%20b", nil, 400, v1.CodeInvalidRequest)
	s.want("POST", "/v1/share-groups/g/offsets:reset", `{"topic":"q","to":"earliest"}`, 200, "")
	if p := s.partitions(); p[0].StartOffset != 0 || p[0].Lag != 2 {
		t.Fatalf("after the reset: %+v, want start 0, lag 2", p)
	}
	if got := s.acquire(v1.ShareRecordsRequest{Topics: []string{"q"}}); len(got.Partitions) != 1 || len(got.Partitions[0].Records) != 2 {
		t.Fatalf("after the reset: acquired %+v, want records 0-1 again", got.Partitions)
	}
	if !strings.HasPrefix(m, "http-") {
		t.Errorf("member id %q: want the server's http- prefix", m)
	}
}
