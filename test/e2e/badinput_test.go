package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBadInputChangesNothing sends the full stack every kind of bad input a user can
// send: each gets a clear 4xx with its stable code, and afterwards nothing is written:
// every partition's high watermark is 0, the object store holds no segment, the writer
// never flushed, no topic was created or changed.
func TestBadInputChangesNothing(t *testing.T) {
	s := newStack(t, stackOptions{backend: embedded})
	base := s.url
	// orders: the defaults (key string, value json); strs: string values; bins: binary
	// keys and values; small: a 100-byte record limit.
	createTopic(t, base, "orders", 3, nil)
	createTopic(t, base, "strs", 2, map[string]string{"value.format": "string"})
	createTopic(t, base, "bins", 1, map[string]string{"key.format": "binary", "value.format": "binary"})
	createTopic(t, base, "small", 1, map[string]string{"max.message.bytes": "100"})
	topics := map[string]int{"orders": 3, "strs": 2, "bins": 1, "small": 1}

	for _, c := range append(badProduceCases(), badFetchAndAdminCases()...) {
		checkBadInput(t, base, c)
	}
	checkNothingWritten(t, s, base, topics)

	// The node still works, and the first good record takes offset 0.
	out, offs, r, err := produceOnce(t.Context(), base, "strs", recordsBody(`{"value":"finally","partition":1}`))
	if err != nil || out != acked || len(offs) != 1 || offs[0] != (producedOffset{1, 0}) {
		t.Fatalf("good produce after bad input: HTTP %d %s %v", r.status, r.body, err)
	}
}

// badInputCase is one bad request of TestBadInputChangesNothing and the problem it must
// answer.
type badInputCase struct {
	name        string
	method      string
	path        string
	contentType string
	body        []byte
	chunked     bool // send the body without a Content-Length
	header      map[string]string
	status      int
	code        string
}

const jsonCT = "application/json"

// longName is a 5,000-character topic name.
var longName = strings.Repeat("a", 5000)

// recordsBody is a produce body holding the records given as JSON.
func recordsBody(fields string) []byte { return []byte(`{"records":[` + fields + `]}`) }

func badProduce(name, topic string, body []byte, status int, code string) badInputCase {
	return badInputCase{name: name, method: http.MethodPost, path: "/v1/topics/" + topic + "/records", contentType: jsonCT, body: body, status: status, code: code}
}

func badGet(name, path string, status int, code string) badInputCase {
	return badInputCase{name: name, method: http.MethodGet, path: path, status: status, code: code}
}

// badProduceCases are bad produces: bodies, batches, content types, topics, partitions,
// records and timestamps.
func badProduceCases() []badInputCase {
	long, rec := longName, recordsBody
	future := time.Now().Add(48 * time.Hour).UnixMilli()
	tooMany := make([]map[string]any, 10001)
	for i := range tooMany {
		tooMany[i] = map[string]any{"value": i}
	}
	// 17 MiB of valid JSON: over the 16 MiB default body limit.
	big := produceBody([]map[string]any{{"value": strings.Repeat("x", 17<<20)}})
	produce := badProduce
	return []badInputCase{
		// Malformed bodies.
		produce("malformed JSON", "orders", []byte(`{"records":[{"value":1}`), 400, "invalid_json"),
		produce("not JSON", "orders", []byte(`records: value=1`), 400, "invalid_json"),
		produce("empty body", "orders", nil, 400, "invalid_json"),
		produce("trailing data", "orders", []byte(`{"records":[{"value":1}]} {"x":1}`), 400, "invalid_json"),
		produce("invalid UTF-8", "orders", []byte("{\"records\":[{\"value\":\"\xff\xfe\"}]}"), 400, "invalid_json"),
		produce("records not an array", "orders", []byte(`{"records":{"value":1}}`), 400, "invalid_request"),
		produce("unknown field", "orders", rec(`{"value":1,"colour":"red"}`), 400, "invalid_request"),
		// Empty and oversized batches.
		produce("empty batch", "orders", []byte(`{"records":[]}`), 400, "empty_batch"),
		produce("no records member", "orders", []byte(`{}`), 400, "empty_batch"),
		produce("too many records", "orders", produceBody(tooMany), 400, "too_many_records"),
		produce("oversized body", "orders", big, 413, "body_too_large"),
		{name: "oversized body, chunked", method: http.MethodPost, path: "/v1/topics/orders/records", contentType: jsonCT, body: big, chunked: true, status: 413, code: "body_too_large"},
		produce("record over max.message.bytes", "small", rec(`{"value":"`+strings.Repeat("y", 200)+`"}`), 413, "record_too_large"),
		// Content types.
		{name: "text/plain", method: http.MethodPost, path: "/v1/topics/orders/records", contentType: "text/plain", body: rec(`{"value":1}`), status: 415, code: "unsupported_media_type"},
		{name: "no content type", method: http.MethodPost, path: "/v1/topics/orders/records", body: rec(`{"value":1}`), status: 415, code: "unsupported_media_type"},
		{name: "form content type", method: http.MethodPost, path: "/v1/topics/orders/records", contentType: "application/x-www-form-urlencoded", body: []byte("value=1"), status: 415, code: "unsupported_media_type"},
		// Topics that do not or cannot exist.
		produce("unknown topic", "nosuch", rec(`{"value":1}`), 404, "topic_not_found"),
		produce("invalid topic name", "bad!name", rec(`{"value":1}`), 400, "invalid_topic_name"),
		produce("topic name ..", "..", rec(`{"value":1}`), 400, "invalid_topic_name"),
		produce("5,000-character topic name", long, rec(`{"value":1}`), 400, "invalid_topic_name"),
		// Partitions.
		produce("partition out of range", "orders", rec(`{"value":1,"partition":3}`), 404, "partition_out_of_range"),
		produce("partition far out of range", "orders", rec(`{"value":1,"partition":2147483647}`), 404, "partition_out_of_range"),
		produce("negative partition", "orders", rec(`{"value":1,"partition":-1}`), 400, "invalid_partition"),
		produce("partition as a string", "orders", rec(`{"value":1,"partition":"1"}`), 400, "invalid_partition"),
		produce("fractional partition", "orders", rec(`{"value":1,"partition":1.5}`), 400, "invalid_partition"),
		produce("partition beyond int32", "orders", rec(`{"value":1,"partition":4294967296}`), 400, "invalid_partition"),
		// Values and keys that do not match the topic's formats.
		produce("object for a string value", "strs", rec(`{"value":{"a":1}}`), 400, "invalid_record"),
		produce("number for a string value", "strs", rec(`{"value":42}`), 400, "invalid_record"),
		produce("number for a string key", "orders", rec(`{"key":5,"value":1}`), 400, "invalid_record"),
		produce("not base64 for a binary value", "bins", rec(`{"value":"!!not base64!!"}`), 400, "invalid_record"),
		produce("object for a binary key", "bins", rec(`{"key":{"k":1},"value":"aGk="}`), 400, "invalid_record"),
		produce("good records then a bad one", "strs", rec(`{"value":"ok"},{"value":"fine"},{"value":[1,2]}`), 400, "invalid_record"),
		produce("header value not a string", "orders", rec(`{"value":1,"headers":[{"key":"h","value":7}]}`), 400, "invalid_record"),
		// Timestamps.
		produce("timestamp two days ahead", "orders", rec(fmt.Sprintf(`{"value":1,"timestamp":%d}`, future)), 400, "timestamp_out_of_range"),
		produce("negative timestamp", "orders", rec(`{"value":1,"timestamp":-5}`), 400, "invalid_record"),
		produce("timestamp not a time", "orders", rec(`{"value":1,"timestamp":"yesterday"}`), 400, "invalid_record"),
	}
}

// badFetchAndAdminCases are bad fetches and topic administration.
func badFetchAndAdminCases() []badInputCase {
	long, rec, get := longName, recordsBody, badGet
	return []badInputCase{
		// Fetch: offsets and partitions.
		get("negative offset", "/v1/topics/orders/partitions/0/records?offset=-1", 400, "invalid_offset"),
		get("non-numeric offset", "/v1/topics/orders/partitions/0/records?offset=abc", 400, "invalid_offset"),
		get("fractional offset", "/v1/topics/orders/partitions/0/records?offset=1.5", 400, "invalid_offset"),
		get("offset with a sign", "/v1/topics/orders/partitions/0/records?offset=+1", 400, "invalid_offset"),
		get("offset past the end", "/v1/topics/orders/partitions/0/records?offset=5", 416, "offset_out_of_range"),
		get("negative partition in the path", "/v1/topics/orders/partitions/-1/records", 400, "invalid_partition"),
		get("non-numeric partition", "/v1/topics/orders/partitions/zero/records", 400, "invalid_partition"),
		get("fetch partition out of range", "/v1/topics/orders/partitions/3/records", 404, "partition_out_of_range"),
		get("fetch partition beyond int32", "/v1/topics/orders/partitions/99999999999/records", 400, "invalid_partition"),
		get("fetch unknown topic", "/v1/topics/nosuch/partitions/0/records", 404, "topic_not_found"),
		get("fetch invalid topic name", "/v1/topics/bad!name/partitions/0/records", 400, "invalid_topic_name"),
		get("fetch 5,000-character topic name", "/v1/topics/"+long+"/partitions/0/records", 400, "invalid_topic_name"),
		get("negative max_records", "/v1/topics/orders/partitions/0/records?max_records=-5", 400, "invalid_parameter"),
		get("non-numeric wait_ms", "/v1/topics/orders/partitions/0/records?wait_ms=soon", 400, "invalid_parameter"),
		get("unknown format", "/v1/topics/orders/partitions/0/records?format=hex", 400, "invalid_parameter"),
		{name: "tail with a non-numeric Last-Event-ID", method: http.MethodGet, path: "/v1/topics/orders/partitions/0/records",
			header: map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "abc"}, status: 400, code: "invalid_offset"},
		{name: "tail with a negative offset", method: http.MethodGet, path: "/v1/topics/orders/partitions/0/records?offset=-3",
			header: map[string]string{"Accept": "text/event-stream"}, status: 400, code: "invalid_offset"},
		get("offset for a garbage time", "/v1/topics/orders/partitions/0/offsets?timestamp=yesterday", 400, "invalid_timestamp"),
		get("partitions of an unknown topic", "/v1/topics/nosuch/partitions", 404, "topic_not_found"),

		// Topic administration.
		{name: "create: invalid name", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"no spaces allowed","partitions":1}`), status: 400, code: "invalid_topic_name"},
		{name: "create: 5,000-character name", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"` + long + `","partitions":1}`), status: 400, code: "invalid_topic_name"},
		{name: "create: empty name", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"partitions":1}`), status: 400, code: "invalid_topic_name"},
		{name: "create: zero partitions", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"zero","partitions":0}`), status: 400, code: "invalid_partition_count"},
		{name: "create: negative partitions", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"neg","partitions":-2}`), status: 400, code: "invalid_partition_count"},
		{name: "create: partitions as a string", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"strp","partitions":"3"}`), status: 400, code: "invalid_partition_count"},
		{name: "create: bad format config", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"xml","configs":{"value.format":"xml"}}`), status: 400, code: "invalid_config"},
		{name: "create: unknown config", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"unk","configs":{"colour":"red"}}`), status: 400, code: "invalid_config"},
		{name: "create: malformed JSON", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":`), status: 400, code: "invalid_json"},
		{name: "create: wrong content type", method: http.MethodPost, path: "/v1/topics", contentType: "text/plain", body: []byte(`{"name":"plain"}`), status: 415, code: "unsupported_media_type"},
		{name: "create: existing topic", method: http.MethodPost, path: "/v1/topics", contentType: jsonCT, body: []byte(`{"name":"orders","partitions":5}`), status: 409, code: "topic_exists"},
		{name: "alter: shrink partitions", method: http.MethodPatch, path: "/v1/topics/orders", contentType: jsonCT, body: []byte(`{"partitions":2}`), status: 400, code: "invalid_partition_count"},
		{name: "alter: bad config", method: http.MethodPatch, path: "/v1/topics/orders", contentType: jsonCT, body: []byte(`{"configs":{"value.format":"yaml"}}`), status: 400, code: "invalid_config"},
		{name: "alter: unknown topic", method: http.MethodPatch, path: "/v1/topics/nosuch", contentType: jsonCT, body: []byte(`{"partitions":9}`), status: 404, code: "topic_not_found"},
		{name: "delete: invalid name", method: http.MethodDelete, path: "/v1/topics/" + long, status: 400, code: "invalid_topic_name"},
		{name: "wrong method", method: http.MethodPut, path: "/v1/topics/orders/records", contentType: jsonCT, body: rec(`{"value":1}`), status: 405, code: "method_not_allowed"},
	}
}

// checkBadInput sends c and checks its answer: the problem c names, complete, without
// Retry-After.
func checkBadInput(t *testing.T, base string, c badInputCase) {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, nil)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if c.body != nil {
		req.Body = io.NopCloser(bytes.NewReader(c.body))
		req.ContentLength = int64(len(c.body))
		if c.chunked {
			req.ContentLength = -1
		}
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Errorf("%s: %v", c.name, err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	res := httpResult{status: resp.StatusCode, header: resp.Header, body: body}
	p, ok := res.problem()
	switch {
	case !ok:
		t.Errorf("%s: HTTP %d %s (Content-Type %q), want a problem+json answer %d %s",
			c.name, res.status, truncate(string(body), 200), resp.Header.Get("Content-Type"), c.status, c.code)
		return
	case res.status != c.status || p.Code != c.code:
		t.Errorf("%s: HTTP %d %s (%s), want %d %s", c.name, res.status, p.Code, p.Detail, c.status, c.code)
		return
	}
	if p.Status != res.status || p.Type != "urn:strata:problem:"+c.code || p.Title == "" || p.Detail == "" {
		t.Errorf("%s: incomplete problem body %s", c.name, truncate(string(body), 300))
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		t.Errorf("%s: a %d answer carries Retry-After %q: bad input is not worth retrying", c.name, res.status, ra)
	}
}

// checkNothingWritten: topics and partition counts as created, every watermark at 0, no
// segment in the store, no flush.
func checkNothingWritten(t *testing.T, s *stack, base string, topics map[string]int) {
	t.Helper()
	res := do(t, http.MethodGet, base+"/v1/topics", "", nil)
	var list struct {
		Topics []struct {
			Name       string `json:"name"`
			Partitions int    `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(res.body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Topics) != len(topics) {
		t.Errorf("%d topics after bad input, want %d: %+v", len(list.Topics), len(topics), list.Topics)
	}
	for _, tp := range list.Topics {
		if want, ok := topics[tp.Name]; !ok || tp.Partitions != want {
			t.Errorf("topic %s has %d partitions; want %d (created: %v)", tp.Name, tp.Partitions, want, ok)
		}
	}
	for name := range topics {
		for _, p := range partitions(t, base, name) {
			if p.HighWatermark != 0 || p.Bytes != 0 {
				t.Errorf("%s/%d: high watermark %d, %d bytes after bad input, want 0", name, p.Partition, p.HighWatermark, p.Bytes)
			}
		}
	}
	if keys := s.objects(t); len(keys) != 0 {
		t.Errorf("the store holds %d objects after bad input: %v", len(keys), keys)
	}
	if c := writerCounts(t, base); c.flushes != 0 || c.puts != 0 || c.commits != 0 {
		t.Errorf("the writer flushed after bad input: %+v", c)
	}

}

// TestBadInputStrictness holds input the API accepts today although it is malformed or
// breaks a Kafka rule; each case should be refused with a 400 and write nothing.
func TestBadInputStrictness(t *testing.T) {
	s := newStack(t, stackOptions{backend: embedded})
	createTopic(t, s.url, "plain", 1, nil)
	createTopic(t, s.url, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, s.url, "appendtime", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	for _, c := range []struct {
		name, topic, body string
		codes             []string // any of these
	}{
		// A record is an object: [1] is refused as invalid_request, but JSON null
		// decodes as an empty record and is written as a null-key tombstone.
		{"null record", "plain", `{"records":[null]}`, []string{"invalid_record", "invalid_request"}},
		// Kafka refuses keyless records on compacted topics (INVALID_RECORD,
		// "Compacted topic cannot accept message without key"): compaction keeps the
		// latest value per key, and such a record has none.
		{"keyless record on a compacted topic", "compacted", `{"records":[{"value":1}]}`, []string{"invalid_record"}},
		// LogAppendTime ignores the producer's timestamp, but a timestamp that is not a
		// time at all is malformed input whatever the topic does with it.
		{"garbage timestamp on a LogAppendTime topic", "appendtime", `{"records":[{"value":1,"timestamp":"garbage"}]}`, []string{"invalid_record"}},
		{"negative timestamp on a LogAppendTime topic", "appendtime", `{"records":[{"value":1,"timestamp":-1}]}`, []string{"invalid_record"}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			before := partitions(t, s.url, c.topic)[0].HighWatermark
			res := do(t, http.MethodPost, s.url+"/v1/topics/"+c.topic+"/records", "application/json", []byte(c.body))
			p, _ := res.problem()
			ok := res.status == http.StatusBadRequest
			if ok {
				ok = false
				for _, code := range c.codes {
					ok = ok || p.Code == code
				}
			}
			if !ok {
				t.Errorf("%s: HTTP %d %s, want 400 %s", c.body, res.status, truncate(string(res.body), 200), strings.Join(c.codes, " or "))
			}
			if after := partitions(t, s.url, c.topic)[0].HighWatermark; after != before {
				t.Errorf("%s: high watermark %d → %d: the bad input was written", c.body, before, after)
			}
		})
	}
}
