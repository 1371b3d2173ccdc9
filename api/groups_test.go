package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/catalogtest"
	"github.com/strata-io/strata/catalog/sqlite"
)

// groupsEnv serves the API from a real SQLite catalog: the group rules live in the
// catalog, so a fake would only test itself.
type groupsEnv struct {
	t   *testing.T
	cat *sqlite.Catalog
	h   http.Handler
}

func newGroupsEnv(t *testing.T) *groupsEnv {
	t.Helper()
	cat, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	a := newAPI(Config{}, testDeps{Catalog: cat, Groups: cat})
	return &groupsEnv{t: t, cat: cat, h: a.Handler()}
}

func (e *groupsEnv) do(method, path, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	var req *http.Request
	if body != "" {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

func (e *groupsEnv) ok(rec *httptest.ResponseRecorder, status int, v any) {
	e.t.Helper()
	if rec.Code != status {
		e.t.Fatalf("status %d, want %d; body %s", rec.Code, status, rec.Body.String())
	}
	if v != nil {
		decodeBody(e.t, rec, v)
	}
}

type hbAnswer struct {
	MemberEpoch         int32                 `json:"member_epoch"`
	Assignment          []topicPartitionsJSON `json:"assignment"`
	HeartbeatIntervalMs int64                 `json:"heartbeat_interval_ms"`
}

func (e *groupsEnv) heartbeat(group, body string) hbAnswer {
	e.t.Helper()
	var a hbAnswer
	e.ok(e.do("POST", "/v1/groups/"+group+"/heartbeat", body), 200, &a)
	return a
}

func TestGroupsHTTP(t *testing.T) {
	e := newGroupsEnv(t)
	tp := catalogtest.SeedTopic(t, e.cat, "orders", 2, nil)
	catalogtest.SeedRecords(t, e.cat, tp.ID, 0, 1, 10) // high watermark 10
	catalogtest.SeedRecords(t, e.cat, tp.ID, 1, 1, 4)  // 4

	a := e.heartbeat("g1", fmt.Sprintf(`{"member_id":"a","member_epoch":0,"topics":[%q],"session_timeout_ms":30000}`, tp.Name))
	if a.MemberEpoch != 1 || len(a.Assignment) != 1 || fmt.Sprint(a.Assignment[0].Partitions) != "[0 1]" || a.HeartbeatIntervalMs != 3000 {
		t.Fatalf("join answered %+v", a)
	}
	// b joins: partition 1 is revoked from a; b waits.
	b := e.heartbeat("g1", fmt.Sprintf(`{"member_id":"b","member_epoch":0,"topics":[%q]}`, tp.Name))
	if len(b.Assignment) != 0 {
		t.Fatalf("b granted %+v before a gave anything back", b.Assignment)
	}
	a = e.heartbeat("g1", fmt.Sprintf(`{"member_id":"a","member_epoch":1,"owned":[{"topic":%q,"partitions":[0,1]}]}`, tp.Name))
	if fmt.Sprint(a.Assignment[0].Partitions) != "[0]" {
		t.Fatalf("a keeps %+v, want [0]", a.Assignment)
	}
	commit := func(member string, epoch int32, partition, offset int64) *httptest.ResponseRecorder {
		return e.do("POST", "/v1/groups/g1/offsets", fmt.Sprintf(`{"member_id":%q,"member_epoch":%d,"offsets":[{"topic":%q,"partition":%d,"offset":%d,"metadata":"m"}]}`,
			member, epoch, tp.Name, partition, offset))
	}
	// Being revoked, still a's: its commit counts.
	e.ok(commit("a", 1, 1, 3), 200, nil)
	// a acknowledges; b is granted partition 1 at a new epoch.
	e.heartbeat("g1", fmt.Sprintf(`{"member_id":"a","member_epoch":1,"owned":[{"topic":%q,"partitions":[0]}]}`, tp.Name))
	b = e.heartbeat("g1", fmt.Sprintf(`{"member_id":"b","member_epoch":%d,"owned":[]}`, b.MemberEpoch))
	if len(b.Assignment) != 1 || fmt.Sprint(b.Assignment[0].Partitions) != "[1]" || b.MemberEpoch != 3 {
		t.Fatalf("b answered %+v, want partition 1 at epoch 3", b)
	}
	wantProblem(t, commit("a", 1, 1, 4), 409, CodeNotOwner)
	wantProblem(t, commit("b", 2, 1, 4), 409, CodeStaleMemberEpoch)
	wantProblem(t, commit("b", 9, 1, 4), 409, CodeStaleMemberEpoch)
	wantProblem(t, commit("zed", 3, 1, 4), 409, CodeUnknownMember)
	wantProblem(t, commit("b", 3, 1, 5), 400, CodeInvalidOffset) // beyond the high watermark 4
	wantProblem(t, commit("b", 3, 1, -1), 400, CodeInvalidOffset)
	wantProblem(t, commit("b", 3, 7, 0), 404, CodePartitionOutOfRange)
	e.ok(commit("b", 3, 1, 4), 200, nil)

	var offs struct {
		Group   string       `json:"group"`
		Offsets []offsetJSON `json:"offsets"`
	}
	e.ok(e.do("GET", "/v1/groups/g1/offsets", ""), 200, &offs)
	if len(offs.Offsets) != 1 || *offs.Offsets[0].Offset != 4 || *offs.Offsets[0].Partition != 1 || offs.Offsets[0].Metadata != "m" || offs.Offsets[0].CommittedAt == nil {
		t.Fatalf("offsets %+v", offs)
	}
	var lag struct {
		TotalLag   int64 `json:"total_lag"`
		Partitions []struct {
			Partition       int32  `json:"partition"`
			CommittedOffset *int64 `json:"committed_offset"`
			Lag             int64  `json:"lag"`
			Owner           string `json:"owner"`
		} `json:"partitions"`
	}
	e.ok(e.do("GET", "/v1/groups/g1/lag", ""), 200, &lag)
	if lag.TotalLag != 10 || len(lag.Partitions) != 2 || lag.Partitions[0].CommittedOffset != nil || lag.Partitions[0].Lag != 10 ||
		lag.Partitions[0].Owner != "a" || *lag.Partitions[1].CommittedOffset != 4 || lag.Partitions[1].Lag != 0 || lag.Partitions[1].Owner != "b" {
		t.Fatalf("lag %+v", lag)
	}
	var g groupJSON
	e.ok(e.do("GET", "/v1/groups/g1", ""), 200, &g)
	if g.State != "stable" || g.Assignor != "sticky" || len(g.Members) != 2 || g.Members[0].MemberID != "a" || g.Members[1].MemberEpoch != 3 || g.TotalLag != 10 {
		t.Fatalf("describe %+v", g)
	}
	var list struct {
		Groups []groupSummaryJSON `json:"groups"`
	}
	e.ok(e.do("GET", "/v1/groups", ""), 200, &list)
	if len(list.Groups) != 1 || list.Groups[0] != (groupSummaryJSON{Name: "g1", State: "stable", Members: 2, Assignor: "sticky"}) {
		t.Fatalf("list %+v", list)
	}

	// Live members: no reset, no delete.
	wantProblem(t, e.do("POST", "/v1/groups/g1/offsets:reset", fmt.Sprintf(`{"topic":%q,"to":"earliest"}`, tp.Name)), 409, CodeGroupNotEmpty)
	wantProblem(t, e.do("DELETE", "/v1/groups/g1", ""), 409, CodeGroupNotEmpty)
	for _, m := range []string{"a", "b"} {
		if ans := e.heartbeat("g1", fmt.Sprintf(`{"member_id":%q,"member_epoch":-1}`, m)); ans.MemberEpoch != -1 {
			t.Fatalf("leave answered %+v", ans)
		}
	}
	reset := func(body string) []offsetJSON {
		t.Helper()
		var out struct {
			Offsets []offsetJSON `json:"offsets"`
		}
		e.ok(e.do("POST", "/v1/groups/g1/offsets:reset", body), 200, &out)
		return out.Offsets
	}
	if o := reset(fmt.Sprintf(`{"topic":%q,"to":"latest"}`, tp.Name)); len(o) != 2 || *o[0].Offset != 10 || *o[1].Offset != 4 {
		t.Fatalf("reset latest %+v", o)
	}
	if o := reset(fmt.Sprintf(`{"topic":%q,"to":"earliest","partitions":[1]}`, tp.Name)); len(o) != 1 || *o[0].Offset != 0 || *o[0].Partition != 1 {
		t.Fatalf("reset earliest %+v", o)
	}
	if o := reset(fmt.Sprintf(`{"topic":%q,"to":"offset","offset":2}`, tp.Name)); len(o) != 2 || *o[0].Offset != 2 {
		t.Fatalf("reset offset %+v", o)
	}
	if o := reset(fmt.Sprintf(`{"topic":%q,"to":"timestamp","timestamp":0}`, tp.Name)); len(o) != 2 || *o[0].Offset != 0 {
		t.Fatalf("reset timestamp %+v", o)
	}
	wantProblem(t, e.do("POST", "/v1/groups/g1/offsets:reset", fmt.Sprintf(`{"topic":%q,"to":"offset","offset":5}`, tp.Name)), 400, CodeInvalidOffset)
	wantProblem(t, e.do("POST", "/v1/groups/g1/offsets:reset", fmt.Sprintf(`{"topic":%q,"to":"sideways"}`, tp.Name)), 400, CodeInvalidRequest)
	wantProblem(t, e.do("POST", "/v1/groups/g1/offsets:reset", `{"topic":"nope","to":"latest"}`), 404, CodeTopicNotFound)
	e.ok(e.do("DELETE", "/v1/groups/g1", ""), 204, nil)
	wantProblem(t, e.do("GET", "/v1/groups/g1", ""), 404, CodeGroupNotFound)
}

// TestGroupsHTTPBadInput: every refusal is a 4xx with its stable code, and changes
// nothing.
func TestGroupsHTTPBadInput(t *testing.T) {
	e := newGroupsEnv(t)
	tp := catalogtest.SeedTopic(t, e.cat, "orders", 2, nil)
	join := fmt.Sprintf(`{"member_id":"a","member_epoch":0,"topics":[%q]}`, tp.Name)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     Code
	}{
		{"unknown group", "GET", "/v1/groups/nope", "", 404, CodeGroupNotFound},
		{"unknown group offsets", "GET", "/v1/groups/nope/offsets", "", 404, CodeGroupNotFound},
		{"unknown group lag", "GET", "/v1/groups/nope/lag", "", 404, CodeGroupNotFound},
		{"unknown group delete", "DELETE", "/v1/groups/nope", "", 404, CodeGroupNotFound},
		{"unknown group heartbeat", "POST", "/v1/groups/nope/heartbeat", `{"member_id":"a","member_epoch":4}`, 404, CodeGroupNotFound},
		{"invalid group name", "GET", "/v1/groups/bad%20name", "", 400, CodeInvalidGroupName},
		{"malformed body", "POST", "/v1/groups/g/heartbeat", `{"member_id":`, 400, CodeInvalidJSON},
		{"unknown field", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":0,"topic":"x"}`, 400, CodeInvalidRequest},
		{"epoch as string", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":"0"}`, 400, CodeInvalidRequest},
		{"missing epoch", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","topics":["x"]}`, 400, CodeInvalidRequest},
		{"missing member", "POST", "/v1/groups/g/heartbeat", `{"member_epoch":0,"topics":["x"]}`, 400, CodeInvalidRequest},
		{"join without topics", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":0}`, 400, CodeInvalidRequest},
		{"session timeout zero", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":0,"topics":["x"],"session_timeout_ms":0}`, 400, CodeInvalidRequest},
		{"unknown assignor", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":0,"topics":["x"],"assignor":"best"}`, 400, CodeInvalidRequest},
		{"too many standby replicas", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":0,"topics":["x"],"assignor":"streams","standby_replicas":17}`, 400, CodeInvalidRequest},
		{"negative task lag", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":0,"topics":["x"],"task_lags":[{"topic":"x","partition":0,"lag":-1}]}`, 400, CodeInvalidRequest},
		{"epoch below -1", "POST", "/v1/groups/g/heartbeat", `{"member_id":"a","member_epoch":-5}`, 409, CodeStaleMemberEpoch},
		{"not JSON", "POST", "/v1/groups/g/offsets", `offsets`, 400, CodeInvalidJSON},
		{"no offsets", "POST", "/v1/groups/g/offsets", `{"offsets":[]}`, 400, CodeInvalidRequest},
		{"offset missing", "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"x","partition":0}]}`, 400, CodeInvalidRequest},
		{"negative offset", "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"x","partition":0,"offset":-3}]}`, 400, CodeInvalidOffset},
		{"negative partition", "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"x","partition":-1,"offset":0}]}`, 400, CodeInvalidPartition},
		{"member without epoch", "POST", "/v1/groups/g/offsets", `{"member_id":"a","offsets":[{"topic":"x","partition":0,"offset":0}]}`, 400, CodeInvalidRequest},
		{"reset without to", "POST", "/v1/groups/g/offsets:reset", `{"topic":"x"}`, 400, CodeInvalidRequest},
		{"reset bad timestamp", "POST", "/v1/groups/g/offsets:reset", `{"topic":"x","to":"timestamp","timestamp":"yesterday"}`, 400, CodeInvalidTimestamp},
		{"wrong method on reset", "GET", "/v1/groups/g/offsets:reset", "", 405, CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, e.do(tc.method, tc.path, tc.body), tc.status, tc.code)
		})
	}
	var list struct {
		Groups []groupSummaryJSON `json:"groups"`
	}
	e.ok(e.do("GET", "/v1/groups", ""), 200, &list)
	if len(list.Groups) != 0 {
		t.Fatalf("refused requests created groups: %+v", list.Groups)
	}
	// An epoch from the future, and an offset beyond the high watermark, for a real member.
	a := e.heartbeat("g", join)
	wantProblem(t, e.do("POST", "/v1/groups/g/heartbeat", fmt.Sprintf(`{"member_id":"a","member_epoch":%d}`, a.MemberEpoch+5)), 409, CodeStaleMemberEpoch)
	wantProblem(t, e.do("POST", "/v1/groups/g/heartbeat", `{"member_id":"b","member_epoch":3}`), 409, CodeUnknownMember)
	wantProblem(t, e.do("POST", "/v1/groups/g/offsets", fmt.Sprintf(`{"member_id":"a","member_epoch":%d,"offsets":[{"topic":%q,"partition":0,"offset":1}]}`, a.MemberEpoch, tp.Name)), 400, CodeInvalidOffset)
	wantProblem(t, e.do("POST", "/v1/groups/g/offsets", fmt.Sprintf(`{"member_id":"a","member_epoch":%d,"offsets":[{"topic":"nope","partition":0,"offset":0}]}`, a.MemberEpoch)), 404, CodeTopicNotFound)
	var offs struct {
		Offsets []offsetJSON `json:"offsets"`
	}
	e.ok(e.do("GET", "/v1/groups/g/offsets", ""), 200, &offs)
	if len(offs.Offsets) != 0 {
		t.Fatalf("refused commits stored %+v", offs.Offsets)
	}
}

func TestGroupsWithoutCatalog(t *testing.T) {
	h := newAPI(Config{}, testDeps{}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/groups", nil))
	wantProblem(t, rec, 503, CodeRoleUnavailable)
}
