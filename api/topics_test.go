package api

import (
	"context"
	"github.com/strata-io/strata/catalog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-io/strata/segment"
)

func TestTopicLifecycle(t *testing.T) {
	e := newEnv(t, Config{})

	rec := e.do("POST", "/v1/topics", `{"name":"orders","partitions":3,"configs":{"retention.ms":"3600000","value.format":"string"}}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	if loc := rec.Header().Get("Location"); loc != "/v1/topics/orders" {
		t.Errorf("Location %q", loc)
	}
	var created topicJSON
	decodeBody(t, rec, &created)
	want := topicJSON{Name: "orders", ID: 1, Partitions: 3, Configs: map[string]string{"retention.ms": "3600000", "value.format": "string"}, CreatedAt: testNow.UTC()}
	// About one topic, every config in force: the set ones and the defaults.
	want.EffectiveConfigs = map[string]string{}
	for _, k := range catalog.ConfigKeys() {
		want.EffectiveConfigs[k], _ = catalog.ConfigDefault(k)
	}
	want.EffectiveConfigs["retention.ms"], want.EffectiveConfigs["value.format"] = "3600000", "string"
	if !reflect.DeepEqual(created, want) {
		t.Errorf("created %+v, want %+v", created, want)
	}

	// Numbers are accepted as config text; the partition count defaults to 1.
	rec = e.do("POST", "/v1/topics", `{"name":"audit","configs":{"retention.ms":86400000}}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create audit: %d %s", rec.Code, rec.Body)
	}
	decodeBody(t, rec, &created)
	if created.Partitions != 1 || created.Configs["retention.ms"] != "86400000" {
		t.Errorf("audit: %+v", created)
	}

	rec = e.do("GET", "/v1/topics", "")
	var list struct{ Topics []topicJSON }
	decodeBody(t, rec, &list)
	if len(list.Topics) != 2 || list.Topics[0].Name != "audit" || list.Topics[1].Name != "orders" || list.Topics[0].EffectiveConfigs != nil {
		t.Errorf("list: %+v", list)
	}

	rec = e.do("GET", "/v1/topics/orders", "")
	var got topicJSON
	decodeBody(t, rec, &got)
	if rec.Code != 200 || !reflect.DeepEqual(got, want) {
		t.Errorf("get: %d %+v", rec.Code, got)
	}

	rec = e.do("PATCH", "/v1/topics/orders", `{"partitions":5,"configs":{"retention.ms":null,"cleanup.policy":"compact"}}`)
	if rec.Code != 200 {
		t.Fatalf("patch: %d %s", rec.Code, rec.Body)
	}
	got = topicJSON{}
	decodeBody(t, rec, &got)
	if got.Partitions != 5 || !reflect.DeepEqual(got.Configs, map[string]string{"value.format": "string", "cleanup.policy": "compact"}) {
		t.Errorf("patched: %+v", got)
	}

	// An empty patch changes nothing and says so.
	writes, _, _ := e.c.stats()
	rec = e.do("PATCH", "/v1/topics/orders", `{}`)
	if w2, _, _ := e.c.stats(); rec.Code != 200 || w2 != writes {
		t.Errorf("empty patch: %d, writes %d→%d", rec.Code, writes, w2)
	}

	e.c.appendRaw("orders", 2, segment.DecodedRecord{Value: []byte("ab")}, segment.DecodedRecord{Value: []byte("cde")})
	rec = e.do("GET", "/v1/topics/orders/partitions", "")
	var parts struct{ Partitions []partitionJSON }
	decodeBody(t, rec, &parts)
	if len(parts.Partitions) != 5 {
		t.Fatalf("partitions: %+v", parts)
	}
	for i, p := range parts.Partitions {
		wantP := partitionJSON{Partition: int32(i)}
		if i == 2 {
			wantP = partitionJSON{Partition: 2, LogStartOffset: 0, HighWatermark: 2, LastStableOffset: 2, Bytes: 5}
		}
		if p != wantP {
			t.Errorf("partition %d: %+v, want %+v", i, p, wantP)
		}
	}

	rec = e.do("DELETE", "/v1/topics/orders", "")
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body)
	}
	wantProblem(t, e.do("GET", "/v1/topics/orders", ""), 404, CodeTopicNotFound)
	wantProblem(t, e.do("DELETE", "/v1/topics/orders", ""), 404, CodeTopicNotFound)
	wantProblem(t, e.do("GET", "/v1/topics/orders/partitions", ""), 404, CodeTopicNotFound)
}

func TestTopicBadInput(t *testing.T) {
	long := strings.Repeat("a", 5000)
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		body    string
		headers []header
		status  int
		code    Code
	}{
		{"no content type", "POST", "/v1/topics", `{"name":"x"}`, []header{{"Content-Type", ""}}, 415, CodeUnsupportedMediaType},
		{"text/plain", "POST", "/v1/topics", `{"name":"x"}`, []header{{"Content-Type", "text/plain"}}, 415, CodeUnsupportedMediaType},
		{"charset allowed but bad json", "POST", "/v1/topics", `{"name":`, []header{{"Content-Type", "application/json; charset=utf-8"}}, 400, CodeInvalidJSON},
		{"trailing data", "POST", "/v1/topics", `{"name":"x"} {"name":"y"}`, nil, 400, CodeInvalidJSON},
		{"trailing garbage", "POST", "/v1/topics", `{"name":"x"}]`, nil, 400, CodeInvalidJSON},
		{"invalid utf-8", "POST", "/v1/topics", "{\"name\":\"x\xff\"}", nil, 400, CodeInvalidJSON},
		{"empty body", "POST", "/v1/topics", ` `, nil, 400, CodeInvalidJSON},
		{"unknown field", "POST", "/v1/topics", `{"name":"x","replicas":3}`, nil, 400, CodeInvalidRequest},
		{"wrong type", "POST", "/v1/topics", `{"name":7}`, nil, 400, CodeInvalidRequest},
		{"array body", "POST", "/v1/topics", `[]`, nil, 400, CodeInvalidRequest},
		{"empty name", "POST", "/v1/topics", `{"partitions":1}`, nil, 400, CodeInvalidTopicName},
		{"slash in name", "POST", "/v1/topics", `{"name":"a/b"}`, nil, 400, CodeInvalidTopicName},
		{"dot dot", "POST", "/v1/topics", `{"name":".."}`, nil, 400, CodeInvalidTopicName},
		{"5000 chars", "POST", "/v1/topics", `{"name":"` + long + `"}`, nil, 400, CodeInvalidTopicName},
		{"zero partitions", "POST", "/v1/topics", `{"name":"x","partitions":0}`, nil, 400, CodeInvalidPartitionCount},
		{"negative partitions", "POST", "/v1/topics", `{"name":"x","partitions":-1}`, nil, 400, CodeInvalidPartitionCount},
		{"too many partitions", "POST", "/v1/topics", `{"name":"x","partitions":10001}`, nil, 400, CodeInvalidPartitionCount},
		{"fractional partitions", "POST", "/v1/topics", `{"name":"x","partitions":1.5}`, nil, 400, CodeInvalidPartitionCount},
		{"string partitions", "POST", "/v1/topics", `{"name":"x","partitions":"3"}`, nil, 400, CodeInvalidPartitionCount},
		{"unknown config", "POST", "/v1/topics", `{"name":"x","configs":{"retention.hours":"1"}}`, nil, 400, CodeInvalidConfig},
		{"bad config value", "POST", "/v1/topics", `{"name":"x","configs":{"retention.ms":"soon"}}`, nil, 400, CodeInvalidConfig},
		{"bad format", "POST", "/v1/topics", `{"name":"x","configs":{"value.format":"avro"}}`, nil, 400, CodeInvalidConfig},
		{"null config on create", "POST", "/v1/topics", `{"name":"x","configs":{"retention.ms":null}}`, nil, 400, CodeInvalidConfig},
		{"object config", "POST", "/v1/topics", `{"name":"x","configs":{"retention.ms":{}}}`, nil, 400, CodeInvalidConfig},
		{"topic exists", "POST", "/v1/topics", `{"name":"existing"}`, nil, 409, CodeTopicExists},
		{"get long name", "GET", "/v1/topics/" + long, "", nil, 400, CodeInvalidTopicName},
		{"delete bad name", "DELETE", "/v1/topics/a%20b", "", nil, 400, CodeInvalidTopicName},
		{"patch unknown topic", "PATCH", "/v1/topics/nope", `{"partitions":2}`, nil, 404, CodeTopicNotFound},
		{"patch shrink", "PATCH", "/v1/topics/existing", `{"partitions":1}`, nil, 400, CodeInvalidPartitionCount},
		{"patch zero", "PATCH", "/v1/topics/existing", `{"partitions":0}`, nil, 400, CodeInvalidPartitionCount},
		{"patch unknown config", "PATCH", "/v1/topics/existing", `{"configs":{"nope":"1"}}`, nil, 400, CodeInvalidConfig},
		{"patch remove unknown", "PATCH", "/v1/topics/existing", `{"configs":{"nope":null}}`, nil, 400, CodeInvalidConfig},
		{"patch empty value", "PATCH", "/v1/topics/existing", `{"configs":{"retention.ms":""}}`, nil, 400, CodeInvalidConfig},
		{"patch bad value", "PATCH", "/v1/topics/existing", `{"configs":{"max.message.bytes":"0"}}`, nil, 400, CodeInvalidConfig},
		{"patch unknown field", "PATCH", "/v1/topics/existing", `{"name":"renamed"}`, nil, 400, CodeInvalidRequest},
		{"patch content type", "PATCH", "/v1/topics/existing", `{"partitions":4}`, []header{{"Content-Type", "application/xml"}}, 415, CodeUnsupportedMediaType},
		{"partitions of unknown", "GET", "/v1/topics/nope/partitions", "", nil, 404, CodeTopicNotFound},
		{"unknown route", "GET", "/v1/nothing", "", nil, 404, CodeNotFound},
		{"unknown nested route", "GET", "/v1/topics/existing/partitions/0/nothing", "", nil, 404, CodeNotFound},
		{"wrong method", "PUT", "/v1/topics/existing", `{}`, nil, 405, CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.createTopic("existing", 2, map[string]string{"retention.ms": "1000"})
			before, _ := e.c.Topics(context.Background())
			rec := e.do(tc.method, tc.path, tc.body, tc.headers...)
			wantProblem(t, rec, tc.status, tc.code)
			if w, _, _ := e.c.stats(); w != 0 {
				t.Errorf("the catalog saw %d writes", w)
			}
			after, _ := e.c.Topics(context.Background())
			if !reflect.DeepEqual(before, after) {
				t.Errorf("topics changed: %+v → %+v", before, after)
			}
		})
	}
}

func TestMethodNotAllowedListsAllow(t *testing.T) {
	e := newEnv(t, Config{})
	rec := e.do("PUT", "/v1/topics/x", `{}`)
	wantProblem(t, rec, 405, CodeMethodNotAllowed)
	allow := rec.Header().Values("Allow")
	if !reflect.DeepEqual(allow, []string{"GET", "PATCH", "DELETE"}) {
		t.Errorf("Allow %v", allow)
	}
}

func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, Config{MaxBodyBytes: 64})
	body := `{"name":"` + strings.Repeat("x", 100) + `"}`
	wantProblem(t, e.do("POST", "/v1/topics", body), 413, CodeBodyTooLarge)

	// Without a declared length (chunked), the limit is hit while reading.
	req, _ := http.NewRequest("POST", "/v1/topics", strings.NewReader(body))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	wantProblem(t, rec, 413, CodeBodyTooLarge)
	if w, _, _ := e.c.stats(); w != 0 {
		t.Errorf("catalog writes %d", w)
	}
}

func TestOffsetForTime(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("t", 2, nil)
	e.c.appendRaw("t", 1,
		segment.DecodedRecord{Timestamp: 1000},
		segment.DecodedRecord{Timestamp: 2000},
		segment.DecodedRecord{Timestamp: 3000})
	e.c.mu.Lock()
	e.c.logStart[tp{1, 1}] = 0
	e.c.mu.Unlock()
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"timestamp=1500", `{"offset":1}`},
		{"timestamp=1000", `{"offset":0}`},
		{"timestamp=9000", `{"offset":3}`},
		{"timestamp=1970-01-01T00:00:02Z", `{"offset":1}`},
		{"timestamp=1970-01-01T01:00:02.5%2B01:00", `{"offset":2}`},
		{"timestamp=earliest", `{"offset":0}`},
		{"timestamp=latest", `{"offset":3}`},
	} {
		rec := e.do("GET", "/v1/topics/t/partitions/1/offsets?"+tc.query, "")
		if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != tc.want {
			t.Errorf("%s: %d %s, want %s", tc.query, rec.Code, rec.Body, tc.want)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		code   Code
	}{
		{"/v1/topics/t/partitions/1/offsets", 400, CodeInvalidTimestamp},
		{"/v1/topics/t/partitions/1/offsets?timestamp=yesterday", 400, CodeInvalidTimestamp},
		{"/v1/topics/t/partitions/1/offsets?timestamp=1.5", 400, CodeInvalidTimestamp},
		{"/v1/topics/t/partitions/1/offsets?timestamp=-1", 400, CodeInvalidTimestamp},
		{"/v1/topics/t/partitions/1/offsets?timestamp=1969-12-31T23:59:59Z", 400, CodeInvalidTimestamp},
		{"/v1/topics/t/partitions/2/offsets?timestamp=1", 404, CodePartitionOutOfRange},
		{"/v1/topics/t/partitions/-1/offsets?timestamp=1", 400, CodeInvalidPartition},
		{"/v1/topics/t/partitions/x/offsets?timestamp=1", 400, CodeInvalidPartition},
		{"/v1/topics/t/partitions/99999999999/offsets?timestamp=1", 400, CodeInvalidPartition},
		{"/v1/topics/u/partitions/0/offsets?timestamp=1", 404, CodeTopicNotFound},
		{"/v1/topics/u*/partitions/0/offsets?timestamp=1", 400, CodeInvalidTopicName},
	} {
		wantProblem(t, e.do("GET", tc.path, ""), tc.status, tc.code)
	}
}
