package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorded is what a fake server saw of one request.
type recorded struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// fake serves canned answers by "METHOD path" and records every request.
type fake struct {
	t        *testing.T
	mu       sync.Mutex
	reqs     []recorded
	handlers map[string]http.HandlerFunc
}

func newFake(t *testing.T, handlers map[string]http.HandlerFunc) (*fake, *httptest.Server) {
	f := &fake{t: t, handlers: handlers}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		f.mu.Unlock()
		h, ok := handlers[r.Method+" "+r.URL.Path]
		if !ok {
			problemAnswer(w, 404, "not_found", "no route "+r.Method+" "+r.URL.Path, "")
			return
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fake) last() recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		f.t.Fatal("no request recorded")
	}
	return f.reqs[len(f.reqs)-1]
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func jsonAnswer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

func problemAnswer(w http.ResponseWriter, status int, code, detail, retryAfter string) {
	w.Header().Set("Content-Type", "application/problem+json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail})
}

// sameJSON compares two JSON texts by value.
func sameJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON mismatch\n got: %s\nwant: %s", got, want)
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "://"} {
		c := New(u)
		if _, err := c.ListTopics(t.Context()); err == nil || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("New(%q).ListTopics: err = %v, want a base URL error", u, err)
		}
	}
}

func TestBasePathPrefixAndHeaders(t *testing.T) {
	f, srv := newFake(t, map[string]http.HandlerFunc{
		"GET /strata/v1/topics": jsonAnswer(`{"topics":[]}`),
	})
	c := New(srv.URL+"/strata/", WithAPIKey("sekret"), WithUserAgent("test-agent/1"))
	if _, err := c.ListTopics(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if got := r.Header.Get("Authorization"); got != "Bearer sekret" {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("User-Agent"); got != "test-agent/1" {
		t.Errorf("User-Agent = %q", got)
	}
	if got := New(srv.URL).userAgent; got != DefaultUserAgent {
		t.Errorf("default user agent = %q", got)
	}
}

func TestTopics(t *testing.T) {
	topicJSON := `{"name":"orders","id":7,"partitions":3,"configs":{"retention.ms":"1000"},"created_at":"2026-01-02T03:04:05Z"}`
	f, srv := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/topics":                            jsonAnswer(topicJSON),
		"GET /v1/topics/orders":                      jsonAnswer(topicJSON),
		"PATCH /v1/topics/orders":                    jsonAnswer(topicJSON),
		"DELETE /v1/topics/orders":                   func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) },
		"GET /v1/topics/orders/partitions":           jsonAnswer(`{"partitions":[{"partition":0,"log_start_offset":2,"high_watermark":10},{"partition":1,"log_start_offset":0,"high_watermark":0}]}`),
		"GET /v1/topics/orders/partitions/1/offsets": jsonAnswer(`{"offset":42}`),
	})
	c := New(srv.URL)
	ctx := t.Context()
	want := Topic{Name: "orders", ID: 7, Partitions: 3, Configs: map[string]string{"retention.ms": "1000"}, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

	got, err := c.CreateTopic(ctx, "orders", 3, map[string]string{"retention.ms": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CreateTopic = %+v, want %+v", got, want)
	}
	sameJSON(t, f.last().Body, `{"name":"orders","partitions":3,"configs":{"retention.ms":"1000"}}`)
	if ct := f.last().Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}

	if got, err = c.Topic(ctx, "orders"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Topic = %+v, %v", got, err)
	}

	if _, err = c.AlterTopic(ctx, "orders", TopicAlter{Partitions: 5, Configs: map[string]string{"retention.ms": "5"}, DeleteConfigs: []string{"cleanup.policy"}}); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, f.last().Body, `{"partitions":5,"configs":{"retention.ms":"5","cleanup.policy":null}}`)
	if _, err = c.AlterTopic(ctx, "orders", TopicAlter{Configs: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, f.last().Body, `{"configs":{"a":"b"}}`)

	if err := c.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(); r.Method != "DELETE" || r.Path != "/v1/topics/orders" {
		t.Errorf("delete sent %s %s", r.Method, r.Path)
	}

	parts, err := c.Partitions(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	wantParts := []Partition{{Partition: 0, LogStartOffset: 2, HighWatermark: 10}, {Partition: 1}}
	if !reflect.DeepEqual(parts, wantParts) {
		t.Errorf("Partitions = %+v, want %+v", parts, wantParts)
	}

	off, err := c.OffsetForTime(ctx, "orders", 1, time.UnixMilli(1700000000123))
	if err != nil || off != 42 {
		t.Errorf("OffsetForTime = %d, %v; want 42", off, err)
	}
	if q := f.last().Query; q != "timestamp=1700000000123" {
		t.Errorf("OffsetForTime query = %q", q)
	}
}

func TestListTopicsShapes(t *testing.T) {
	for _, body := range []string{
		`{"topics":[{"name":"a","partitions":1},{"name":"b","partitions":2}]}`,
		`[{"name":"a","partitions":1},{"name":"b","partitions":2}]`,
	} {
		_, srv := newFake(t, map[string]http.HandlerFunc{"GET /v1/topics": jsonAnswer(body)})
		got, err := New(srv.URL).ListTopics(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := []Topic{{Name: "a", Partitions: 1}, {Name: "b", Partitions: 2}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ListTopics(%s) = %+v", body, got)
		}
	}
}

func TestErrors(t *testing.T) {
	_, srv := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/topics/missing": func(w http.ResponseWriter, r *http.Request) {
			problemAnswer(w, 404, "topic_not_found", `topic "missing" not found`, "")
		},
		"GET /v1/topics/busy": func(w http.ResponseWriter, r *http.Request) {
			problemAnswer(w, 429, "buffer_full", "writer buffer full", "3")
		},
		"GET /v1/topics/proxy": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			io.WriteString(w, "<html>bad gateway</html>\n")
		},
	})
	c := New(srv.URL)
	for _, tc := range []struct {
		topic     string
		want      Error
		retryable bool
		msg       string
	}{
		{"missing", Error{Status: 404, Code: "topic_not_found", Title: "Not Found", Detail: `topic "missing" not found`}, false, `topic "missing" not found (code topic_not_found, HTTP 404)`},
		{"busy", Error{Status: 429, Code: "buffer_full", Title: "Too Many Requests", Detail: "writer buffer full", RetryAfter: 3 * time.Second}, true, "writer buffer full (code buffer_full, HTTP 429)"},
		{"proxy", Error{Status: 502, Detail: "<html>bad gateway</html>"}, false, "<html>bad gateway</html> (HTTP 502)"},
	} {
		_, err := c.Topic(t.Context(), tc.topic)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Topic(%s): err = %v, want *Error", tc.topic, err)
		}
		if *e != tc.want {
			t.Errorf("Topic(%s): %+v, want %+v", tc.topic, *e, tc.want)
		}
		if e.Retryable() != tc.retryable || IsRetryable(err) != tc.retryable {
			t.Errorf("Topic(%s): Retryable = %v, want %v", tc.topic, e.Retryable(), tc.retryable)
		}
		if e.Error() != tc.msg {
			t.Errorf("Topic(%s): Error() = %q, want %q", tc.topic, e.Error(), tc.msg)
		}
		if !strings.HasPrefix(err.Error(), "describe topic "+tc.topic+": ") {
			t.Errorf("wrapped error %q does not say what was being done", err)
		}
		if StatusOf(err) != tc.want.Status || HasCode(err, tc.want.Code) != (tc.want.Code != "") {
			t.Errorf("StatusOf/HasCode disagree for %v", err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"2", 2 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"999999", time.Hour, true}, // capped
		{"Wed, 02 Dec 2026 11:00:05 GMT", 5 * time.Second, true},
		{"Wed, 02 Dec 2026 10:59:00 GMT", 0, true}, // in the past: now
		{"soon", 0, false},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRetries(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	_, srv := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/topics/t/records": func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			switch n {
			case 1:
				problemAnswer(w, 429, "buffer_full", "busy", "2")
			case 2:
				problemAnswer(w, 503, "store_unavailable", "down", "")
			default:
				jsonAnswer(`{"offsets":[{"partition":0,"offset":9}]}`)(w, r)
			}
		},
		"POST /v1/topics/bad/records": func(w http.ResponseWriter, r *http.Request) {
			problemAnswer(w, 400, "invalid_record", "bad", "1")
		},
		"POST /v1/topics/down/records": func(w http.ResponseWriter, r *http.Request) {
			problemAnswer(w, 503, "store_unavailable", "down", "")
		},
	})
	var slept []time.Duration
	c := New(srv.URL, WithRetries(3, 50*time.Millisecond))
	c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	recs := []Record{{Value: String("x")}}

	offs, err := c.Produce(t.Context(), "t", recs)
	if err != nil || !reflect.DeepEqual(offs, []Offset{{Partition: 0, Offset: 9}}) {
		t.Fatalf("Produce = %v, %v", offs, err)
	}
	// Retry-After first, then the backoff for the second attempt (50ms << 1).
	if want := []time.Duration{2 * time.Second, 100 * time.Millisecond}; !reflect.DeepEqual(slept, want) {
		t.Errorf("slept %v, want %v", slept, want)
	}

	slept = nil
	if _, err := c.Produce(t.Context(), "bad", recs); StatusOf(err) != 400 || len(slept) != 0 {
		t.Errorf("400: err = %v after %d sleeps, want no retry", err, len(slept))
	}

	slept = nil
	if _, err := c.Produce(t.Context(), "down", recs); StatusOf(err) != 503 || len(slept) != 3 {
		t.Errorf("503 forever: err = %v after %d sleeps, want 3 retries then the error", err, len(slept))
	}

	// Without WithRetries nothing is retried.
	calls = 0
	if _, err := New(srv.URL).Produce(t.Context(), "t", recs); StatusOf(err) != 429 {
		t.Errorf("no retries: err = %v, want the 429", err)
	}
}

func TestProduceWire(t *testing.T) {
	f, srv := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/topics/orders/records": jsonAnswer(`{"offsets":[{"partition":2,"offset":10},{"partition":0,"offset":3},{"partition":1,"offset":0}]}`),
		"POST /v1/topics/short/records":  jsonAnswer(`{"offsets":[]}`),
	})
	c := New(srv.URL)
	v, _ := JSON(map[string]int{"n": 1})
	recs := []Record{
		{Key: String("user-1"), Value: v, Headers: []Header{{Key: "trace", Value: []byte("abc")}, {Key: "nil"}}, Timestamp: time.UnixMilli(1700000000123)},
		{Value: nil, Key: String("gone"), Partition: Int32(0)}, // tombstone
		{Value: Binary([]byte{1, 2, 3})},
	}
	offs, err := c.Produce(t.Context(), "orders", recs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Offset{{Partition: 2, Offset: 10}, {Partition: 0, Offset: 3}, {Partition: 1, Offset: 0}}; !reflect.DeepEqual(offs, want) {
		t.Errorf("offsets = %v, want %v", offs, want)
	}
	sameJSON(t, f.last().Body, `{"records":[
		{"key":"user-1","value":{"n":1},"timestamp":1700000000123,
		 "headers":[{"key":"trace","value":"abc"},{"key":"nil","value":null}]},
		{"key":"gone","value":null,"partition":0},
		{"value":"AQID"}]}`)

	n := f.count()
	bad := []Record{{Value: String("v"), Headers: []Header{{Key: "bin", Value: []byte{0xff, 0}}}}}
	if _, err := c.Produce(t.Context(), "orders", bad); err == nil || !strings.Contains(err.Error(), `header "bin": value is not UTF-8`) || f.count() != n {
		t.Errorf("non-UTF-8 header: err = %v, sent %d requests; want a refusal before sending", err, f.count()-n)
	}

	if _, err := c.Produce(t.Context(), "short", recs); err == nil || !strings.Contains(err.Error(), "answer has 0 offsets") {
		t.Errorf("short answer: err = %v", err)
	}
}

func TestFetch(t *testing.T) {
	f, srv := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/topics/orders/partitions/2/records": jsonAnswer(`{"records":[
			{"offset":5,"timestamp":1700000000123,"key":"k","value":{"a":1},"headers":[{"key":"h","value":"v"}]},
			{"offset":6,"timestamp":"2026-01-02T03:04:05.5Z","key":null,"value":null,"headers":{"x":"y"}}],
			"next_offset":7,"high_watermark":9,"log_start_offset":1}`),
	})
	c := New(srv.URL)
	res, err := c.Fetch(t.Context(), "orders", 2, FetchOptions{Offset: 5, MaxRecords: 2, MaxBytes: 1024, Wait: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if q := f.last().Query; q != "max_bytes=1024&max_records=2&offset=5&wait_ms=1500" {
		t.Errorf("query = %q", q)
	}
	p := int32(2)
	want := FetchResult{
		Records: []Record{
			{Offset: 5, Partition: &p, Timestamp: time.UnixMilli(1700000000123), Key: json.RawMessage(`"k"`), Value: json.RawMessage(`{"a":1}`), Headers: []Header{{"h", []byte("v")}}},
			{Offset: 6, Partition: &p, Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC), Headers: []Header{{"x", []byte("y")}}},
		},
		NextOffset: 7, HighWatermark: 9, LogStartOffset: 1,
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("Fetch =\n %+v\nwant\n %+v", res, want)
	}
	if k, _ := res.Records[0].KeyBytes(); string(k) != "k" {
		t.Errorf("KeyBytes = %q", k)
	}
	if v, _ := res.Records[0].ValueBytes(); string(v) != `{"a":1}` {
		t.Errorf("ValueBytes = %q", v)
	}
	if k, err := res.Records[1].KeyBytes(); k != nil || err != nil {
		t.Errorf("null KeyBytes = %q, %v", k, err)
	}
	// A fetched record prints as the API renders it.
	b, _ := json.Marshal(res.Records[1])
	sameJSON(t, string(b), `{"partition":2,"offset":6,"timestamp":1767323045500,"key":null,"value":null,"headers":[{"key":"x","value":"y"}]}`)
}

func TestFetchBase64(t *testing.T) {
	f, srv := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/topics/t/partitions/0/records": jsonAnswer(`{"records":[{"offset":0,"key":"AAE=","value":"/w=="}],"next_offset":1,"high_watermark":1}`),
	})
	res, err := New(srv.URL).Fetch(t.Context(), "t", 0, FetchOptions{Base64: true})
	if err != nil {
		t.Fatal(err)
	}
	if q := f.last().Query; q != "format=base64&offset=0" {
		t.Errorf("query = %q", q)
	}
	r := res.Records[0]
	k, err1 := r.KeyBytes()
	v, err2 := r.ValueBytes()
	if err1 != nil || err2 != nil || string(k) != "\x00\x01" || string(v) != "\xff" || r.KeyEncoding != "base64" || r.ValueEncoding != "base64" {
		t.Errorf("base64 record: key %q (%v), value %q (%v), encodings %q %q", k, err1, v, err2, r.KeyEncoding, r.ValueEncoding)
	}
	if _, err := (Record{KeyEncoding: "base64", Key: json.RawMessage(`12`)}).KeyBytes(); err == nil {
		t.Error("a non-string base64 key decoded without error")
	}
}

// A server that cannot show stored bytes in the topic's format falls back to base64
// and says so; the client keeps the bytes exact.
func TestFetchFallbackEncodings(t *testing.T) {
	_, srv := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/topics/t/partitions/0/records": jsonAnswer(`{"records":[{"offset":0,"timestamp":1,
			"key":"/w==","key_encoding":"base64","value":"bm90IGpzb24=","value_encoding":"base64",
			"headers":[{"key":"h","value":"/wA=","encoding":"base64"},{"key":"n","value":null}]}],"next_offset":1,"high_watermark":1}`),
	})
	res, err := New(srv.URL).Fetch(t.Context(), "t", 0, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Records[0]
	k, _ := r.KeyBytes()
	v, _ := r.ValueBytes()
	if string(k) != "\xff" || string(v) != "not json" {
		t.Errorf("key %q value %q", k, v)
	}
	if want := []Header{{"h", []byte{0xff, 0}}, {"n", nil}}; !reflect.DeepEqual(r.Headers, want) {
		t.Errorf("headers %+v, want %+v", r.Headers, want)
	}
	// Printed back, the record says which fields are base64.
	b, _ := json.Marshal(r)
	sameJSON(t, string(b), `{"partition":0,"offset":0,"timestamp":1,"key":"/w==","key_encoding":"base64",
		"value":"bm90IGpzb24=","value_encoding":"base64","headers":[{"key":"h","value":"/wA=","encoding":"base64"},{"key":"n","value":null}]}`)
}
