package api

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/writer"
)

func TestProduce(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("orders", 3, nil)
	body := `{"records":[
		{"key":"user-1","value":{"amount": 12.5, "items":[1,2]},"headers":[{"key":"trace","value":"abc"},{"key":"trace","value":null}],"partition":2,"timestamp":1699999999000},
		{"value":[1, 2 ,3]},
		{"key":null,"value":null,"headers":{"b":"2","a":"1"},"timestamp":"2023-11-14T22:13:19Z","partition":2}
	]}`
	rec := e.do("POST", "/v1/topics/orders/records", body)
	if rec.Code != 200 {
		t.Fatalf("produce: %d %s", rec.Code, rec.Body)
	}
	if got, want := strings.TrimSpace(rec.Body.String()), `{"offsets":[{"partition":2,"offset":0},{"partition":0,"offset":0},{"partition":2,"offset":1}]}`; got != want {
		t.Errorf("response %s, want %s", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	want := []writer.Record{
		{TopicID: 1, Partitions: 3, Partition: 2, Record: segment.Record{
			Key: []byte("user-1"), Value: []byte(`{"amount": 12.5, "items":[1,2]}`),
			Headers:   []segment.Header{{Key: "trace", Value: []byte("abc")}, {Key: "trace"}},
			Timestamp: 1699999999000}},
		{TopicID: 1, Partitions: 3, Partition: -1, Record: segment.Record{Value: []byte(`[1, 2 ,3]`), Timestamp: testNow.UnixMilli()}},
		{TopicID: 1, Partitions: 3, Partition: 2, Record: segment.Record{
			Headers: []segment.Header{{Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("1")}}, Timestamp: 1699999999000}},
	}
	if !reflect.DeepEqual(e.c.produced, want) {
		t.Errorf("produced\n%+v\nwant\n%+v", e.c.produced, want)
	}
	if e.c.produced[0].Headers[1].Value != nil || e.c.produced[2].Key != nil || e.c.produced[2].Value != nil {
		t.Error("nulls must stay nil (null header value, null key, tombstone)")
	}
}

func TestProduceBadInput(t *testing.T) {
	now := testNow.UnixMilli()
	// Record 0 ({}: null key, tombstone) is valid in every format; record 1 is the bad one.
	rec1 := func(r string) string { return `{"records":[{"value":null},` + r + `]}` }
	for _, tc := range []struct {
		name    string
		path    string
		body    string
		headers []header
		status  int
		code    Code
		field   string // for invalid_record: the field named
	}{
		{"no content type", "/v1/topics/js/records", `{"records":[{"value":1}]}`, []header{{"Content-Type", ""}}, 415, CodeUnsupportedMediaType, ""},
		{"form content type", "/v1/topics/js/records", `{"records":[{"value":1}]}`, []header{{"Content-Type", "application/x-www-form-urlencoded"}}, 415, CodeUnsupportedMediaType, ""},
		{"truncated", "/v1/topics/js/records", `{"records":[`, nil, 400, CodeInvalidJSON, ""},
		{"syntax", "/v1/topics/js/records", `{"records":[{"value":01}]}`, nil, 400, CodeInvalidJSON, ""},
		{"trailing data", "/v1/topics/js/records", `{"records":[{"value":1}]} x`, nil, 400, CodeInvalidJSON, ""},
		{"two values", "/v1/topics/js/records", `{"records":[{"value":1}]}{}`, nil, 400, CodeInvalidJSON, ""},
		{"invalid utf-8 in value", "/v1/topics/js/records", "{\"records\":[{\"value\":\"\xc3\x28\"}]}", nil, 400, CodeInvalidJSON, ""},
		{"invalid utf-8 in key", "/v1/topics/js/records", "{\"records\":[{\"key\":\"\xff\",\"value\":1}]}", nil, 400, CodeInvalidJSON, ""},
		{"unknown top-level field", "/v1/topics/js/records", `{"records":[{"value":1}],"acks":1}`, nil, 400, CodeInvalidRequest, ""},
		{"unknown record field", "/v1/topics/js/records", `{"records":[{"value":1,"offset":3}]}`, nil, 400, CodeInvalidRequest, ""},
		{"records not an array", "/v1/topics/js/records", `{"records":{"value":1}}`, nil, 400, CodeInvalidRequest, ""},
		{"record not an object", "/v1/topics/js/records", `{"records":[1]}`, nil, 400, CodeInvalidRequest, ""},
		{"empty records", "/v1/topics/js/records", `{"records":[]}`, nil, 400, CodeEmptyBatch, ""},
		{"no records", "/v1/topics/js/records", `{}`, nil, 400, CodeEmptyBatch, ""},
		{"null records", "/v1/topics/js/records", `{"records":null}`, nil, 400, CodeEmptyBatch, ""},
		{"too many records", "/v1/topics/js/records", `{"records":[{},{},{},{}]}`, nil, 400, CodeTooManyRecords, ""},
		{"body too large", "/v1/topics/js/records", `{"records":[{"value":"` + strings.Repeat("x", 5000) + `"}]}`, nil, 413, CodeBodyTooLarge, ""},
		{"invalid topic name", "/v1/topics/a$b/records", `{"records":[{"value":1}]}`, nil, 400, CodeInvalidTopicName, ""},
		{"5000-char topic name", "/v1/topics/" + strings.Repeat("t", 5000) + "/records", `{"records":[{"value":1}]}`, nil, 400, CodeInvalidTopicName, ""},
		{"unknown topic", "/v1/topics/nope/records", `{"records":[{"value":1}]}`, nil, 404, CodeTopicNotFound, ""},
		{"negative partition", "/v1/topics/js/records", rec1(`{"value":1,"partition":-1}`), nil, 400, CodeInvalidPartition, ""},
		{"string partition", "/v1/topics/js/records", rec1(`{"value":1,"partition":"1"}`), nil, 400, CodeInvalidPartition, ""},
		{"fractional partition", "/v1/topics/js/records", rec1(`{"value":1,"partition":1.5}`), nil, 400, CodeInvalidPartition, ""},
		{"exponent partition", "/v1/topics/js/records", rec1(`{"value":1,"partition":1e0}`), nil, 400, CodeInvalidPartition, ""},
		{"huge partition", "/v1/topics/js/records", rec1(`{"value":1,"partition":99999999999}`), nil, 400, CodeInvalidPartition, ""},
		{"partition out of range", "/v1/topics/js/records", rec1(`{"value":1,"partition":2}`), nil, 404, CodePartitionOutOfRange, ""},
		{"string key given a number", "/v1/topics/js/records", rec1(`{"key":5,"value":1}`), nil, 400, CodeInvalidRecord, "key"},
		{"string key given an object", "/v1/topics/js/records", rec1(`{"key":{"id":1},"value":1}`), nil, 400, CodeInvalidRecord, "key"},
		{"string value given a bool", "/v1/topics/str/records", rec1(`{"value":true}`), nil, 400, CodeInvalidRecord, "value"},
		{"binary not base64", "/v1/topics/bin/records", rec1(`{"value":"!!!!"}`), nil, 400, CodeInvalidRecord, "value"},
		{"binary unpadded", "/v1/topics/bin/records", rec1(`{"value":"YQ"}`), nil, 400, CodeInvalidRecord, "value"},
		{"binary url alphabet", "/v1/topics/bin/records", rec1(`{"value":"-_8="}`), nil, 400, CodeInvalidRecord, "value"},
		{"binary line break", "/v1/topics/bin/records", rec1(`{"value":"YWJj\nZGVm"}`), nil, 400, CodeInvalidRecord, "value"},
		{"binary given a number", "/v1/topics/bin/records", rec1(`{"key":12,"value":"YQ=="}`), nil, 400, CodeInvalidRecord, "key"},
		{"header value number", "/v1/topics/js/records", rec1(`{"value":1,"headers":[{"key":"a","value":1}]}`), nil, 400, CodeInvalidRecord, "headers"},
		{"header without key", "/v1/topics/js/records", rec1(`{"value":1,"headers":[{"value":"v"}]}`), nil, 400, CodeInvalidRecord, "headers"},
		{"header key null", "/v1/topics/js/records", rec1(`{"value":1,"headers":[{"key":null,"value":"v"}]}`), nil, 400, CodeInvalidRecord, "headers"},
		{"header unknown field", "/v1/topics/js/records", rec1(`{"value":1,"headers":[{"key":"a","val":"v"}]}`), nil, 400, CodeInvalidRecord, "headers"},
		{"header object nested", "/v1/topics/js/records", rec1(`{"value":1,"headers":{"a":{"b":"c"}}}`), nil, 400, CodeInvalidRecord, "headers"},
		{"headers a string", "/v1/topics/js/records", rec1(`{"value":1,"headers":"a=b"}`), nil, 400, CodeInvalidRecord, "headers"},
		{"timestamp words", "/v1/topics/js/records", rec1(`{"value":1,"timestamp":"yesterday"}`), nil, 400, CodeInvalidRecord, "timestamp"},
		{"timestamp negative", "/v1/topics/js/records", rec1(`{"value":1,"timestamp":-5}`), nil, 400, CodeInvalidRecord, "timestamp"},
		{"timestamp fractional", "/v1/topics/js/records", rec1(`{"value":1,"timestamp":1.5}`), nil, 400, CodeInvalidRecord, "timestamp"},
		{"timestamp bool", "/v1/topics/js/records", rec1(`{"value":1,"timestamp":true}`), nil, 400, CodeInvalidRecord, "timestamp"},
		{"timestamp too old", "/v1/topics/bounded/records", rec1(`{"value":1,"timestamp":` + strconv.FormatInt(now-1001, 10) + `}`), nil, 400, CodeTimestampOutOfRange, ""},
		{"timestamp too new", "/v1/topics/bounded/records", rec1(`{"value":1,"timestamp":` + strconv.FormatInt(now+1001, 10) + `}`), nil, 400, CodeTimestampOutOfRange, ""},
		{"timestamp beyond default after.max.ms", "/v1/topics/js/records", rec1(`{"value":1,"timestamp":` + strconv.FormatInt(now+86400001, 10) + `}`), nil, 400, CodeTimestampOutOfRange, ""},
		{"record too large", "/v1/topics/bounded/records", rec1(`{"value":"12345678901"}`), nil, 413, CodeRecordTooLarge, ""},
		{"key and headers count", "/v1/topics/bounded/records", rec1(`{"key":"abc","value":1,"headers":{"hdr":"xyzw"}}`), nil, 413, CodeRecordTooLarge, ""},
		{"wrong method", "/v1/topics/js/records", ``, nil, 405, CodeMethodNotAllowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{MaxRecordsPerRequest: 3, MaxBodyBytes: 4096})
			e.createTopic("js", 2, nil)
			e.createTopic("str", 1, map[string]string{"value.format": "string"})
			e.createTopic("bin", 1, map[string]string{"key.format": "binary", "value.format": "binary"})
			e.createTopic("bounded", 1, map[string]string{
				"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "1000", "max.message.bytes": "10"})
			method := "POST"
			if tc.body == "" {
				method = "GET"
			}
			rec := e.do(method, tc.path, tc.body, tc.headers...)
			p := wantProblem(t, rec, tc.status, tc.code)
			if tc.field != "" {
				if p["field"] != tc.field || jsonNumber(t, p["record"]) != 1 {
					t.Errorf("problem names record %v field %v, want record 1 field %s: %s", p["record"], p["field"], tc.field, rec.Body)
				}
				if !strings.Contains(p["detail"].(string), "records[1]."+tc.field) {
					t.Errorf("detail %q does not say which record and field", p["detail"])
				}
			}
			if _, calls, _ := e.c.stats(); calls != 0 {
				t.Errorf("the writer was called %d times", calls)
			}
		})
	}
}

func TestProduceWriterErrors(t *testing.T) {
	for _, tc := range []struct {
		err        error
		status     int
		code       Code
		retryAfter bool
	}{
		{writer.ErrBufferFull, 429, CodeBufferFull, true},
		{fmt.Errorf("writer: flush: %w", writer.ErrStore), 503, CodeStoreUnavailable, true},
		{fmt.Errorf("writer: flush: %w", writer.ErrCommit), 503, CodeCommitFailed, true},
		{fmt.Errorf("writer: settle: %w: %w", writer.ErrCommit, writer.ErrOutcomeUnknown), 503, CodeCommitOutcomeUnknown, true},
		{fmt.Errorf("%w: partition 9 of 1", writer.ErrInvalid), 400, CodeInvalidRequest, false},
		{writer.ErrClosed, 503, CodeShuttingDown, true},
		{writer.ErrTooLarge, 413, CodeRequestTooLarge, false},
		{fmt.Errorf("writer: commit: %w", catalog.ErrTopicNotFound), 404, CodeTopicNotFound, false},
		{fmt.Errorf("writer: commit: %w", catalog.ErrPartitionOutOfRange), 404, CodePartitionOutOfRange, false},
		{errors.New("something odd"), 500, CodeInternal, false},
	} {
		t.Run(string(tc.code), func(t *testing.T) {
			e := newEnv(t, Config{})
			e.createTopic("t", 1, nil)
			e.c.produceErr = tc.err
			rec := e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1}]}`)
			wantProblem(t, rec, tc.status, tc.code)
			if got := rec.Header().Get("Retry-After"); (got != "") != tc.retryAfter || tc.retryAfter && got != "1" {
				t.Errorf("Retry-After %q", got)
			}
		})
	}
}

func TestCreateTimeBounds(t *testing.T) {
	now := testNow.UnixMilli()
	for _, tc := range []struct {
		topic string
		ts    string
		ok    bool
		want  int64
	}{
		{"bounded", strconv.FormatInt(now-1000, 10), true, now - 1000},
		{"bounded", strconv.FormatInt(now-1001, 10), false, 0},
		{"bounded", strconv.FormatInt(now+1000, 10), true, now + 1000},
		{"bounded", strconv.FormatInt(now+1001, 10), false, 0},
		{"bounded", `"2023-11-14T22:13:20.5Z"`, true, now + 500},
		{"bounded", `"2023-11-14T23:13:20+01:00"`, true, now},
		{"bounded", `"2023-11-14T22:13:22Z"`, false, 0},
		{"bounded", `0`, false, 0},
		{"bounded", `null`, true, now},
		{"default", `0`, true, 0}, // before.max.ms defaults to unbounded
		{"default", strconv.FormatInt(now+86400000, 10), true, now + 86400000},
		{"default", strconv.FormatInt(now+86400001, 10), false, 0},
	} {
		e := newEnv(t, Config{})
		e.createTopic("bounded", 1, map[string]string{"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "1000"})
		e.createTopic("default", 1, nil)
		rec := e.do("POST", "/v1/topics/"+tc.topic+"/records", `{"records":[{"value":1,"timestamp":`+tc.ts+`}]}`)
		if !tc.ok {
			p := wantProblem(t, rec, 400, CodeTimestampOutOfRange)
			if jsonNumber(t, p["now"]) != now {
				t.Errorf("%s %s: problem now %v", tc.topic, tc.ts, p["now"])
			}
			if len(e.c.produced) != 0 {
				t.Errorf("%s %s: written", tc.topic, tc.ts)
			}
			continue
		}
		if rec.Code != 200 {
			t.Errorf("%s %s: %d %s", tc.topic, tc.ts, rec.Code, rec.Body)
			continue
		}
		if got := e.c.produced[0].Timestamp; got != tc.want {
			t.Errorf("%s %s: timestamp %d, want %d", tc.topic, tc.ts, got, tc.want)
		}
	}
}

func TestLogAppendTime(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	// The producer's timestamp is ignored, even one far outside any bound.
	rec := e.do("POST", "/v1/topics/lat/records", `{"records":[{"value":1,"timestamp":5},{"value":2}]}`)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	for i, r := range e.c.produced {
		if !r.LogAppendTime || r.Timestamp != 0 {
			t.Errorf("record %d: LogAppendTime %v timestamp %d", i, r.LogAppendTime, r.Timestamp)
		}
	}
	rec = e.do("GET", "/v1/topics/lat/partitions/0/records?offset=0", "")
	if !strings.Contains(rec.Body.String(), `"timestamp":`+strconv.FormatInt(e.c.stampTime, 10)) {
		t.Errorf("fetched %s: want the writer's stamp %d", rec.Body, e.c.stampTime)
	}
}

func TestProduceTopicCache(t *testing.T) {
	e := newEnv(t, Config{})
	e.createTopic("t", 1, nil)
	reads := func() int { e.c.mu.Lock(); defer e.c.mu.Unlock(); return e.c.topicReads }
	for i := 0; i < 3; i++ {
		if rec := e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1}]}`); rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	if n := reads(); n != 1 {
		t.Errorf("three produces read the catalog %d times, want 1", n)
	}

	// Grown behind this node's back: a partition beyond the cached count re-reads.
	if _, err := e.c.UpdateTopic(context.Background(), "t", 4, nil); err != nil {
		t.Fatal(err)
	}
	if rec := e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1,"partition":3}]}`); rec.Code != 200 {
		t.Fatalf("produce to a new partition: %d %s", rec.Code, rec.Body)
	}
	if n := reads(); n != 2 {
		t.Errorf("catalog reads %d, want 2", n)
	}

	// Deleted behind this node's back: the commit refuses, and the entry is dropped.
	if err := e.c.DeleteTopic(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1}]}`), 404, CodeTopicNotFound)
	wantProblem(t, e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1}]}`), 404, CodeTopicNotFound)
	if n := reads(); n != 3 {
		t.Errorf("catalog reads %d, want 3 (the second produce after the delete asks the catalog)", n)
	}
}

func TestRoleUnavailable(t *testing.T) {
	e := newEnv(t, Config{}, func(d *testDeps) { d.Writer = nil; d.Reader = nil })
	e.createTopic("t", 1, nil)
	rec := e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1}]}`)
	wantProblem(t, rec, 503, CodeRoleUnavailable)
	if rec.Header().Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	wantProblem(t, e.do("GET", "/v1/topics/t/partitions/0/records", ""), 503, CodeRoleUnavailable)
	// Topic administration still works.
	if rec := e.do("GET", "/v1/topics/t", ""); rec.Code != 200 {
		t.Errorf("get topic: %d", rec.Code)
	}

	e = newEnv(t, Config{}, func(d *testDeps) { d.Catalog = nil })
	wantProblem(t, e.do("GET", "/v1/topics", ""), 503, CodeRoleUnavailable)
	wantProblem(t, e.do("POST", "/v1/topics/t/records", `{"records":[{"value":1}]}`), 503, CodeRoleUnavailable)
	if rec := e.do("GET", "/healthz", ""); rec.Code != 200 {
		t.Errorf("healthz: %d", rec.Code)
	}
}
