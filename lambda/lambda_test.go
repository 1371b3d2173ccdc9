package lambda

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// sampleHTTPAPIEvent is an API Gateway HTTP API payload 2.0 event as AWS documents it
// (a GET on the default stage), for the parts this package reads.
const sampleHTTPAPIEvent = `{
  "version": "2.0",
  "routeKey": "$default",
  "rawPath": "/v1/topics/orders%2Fx/partitions/0/records",
  "rawQueryString": "offset=earliest&max_records=5",
  "cookies": ["a=1", "b=2"],
  "headers": {
    "accept": "application/json",
    "host": "abcdef1234.execute-api.eu-west-1.amazonaws.com",
    "x-forwarded-for": "203.0.113.7",
    "x-custom": "one,two"
  },
  "requestContext": {
    "accountId": "123456789012",
    "apiId": "abcdef1234",
    "domainName": "abcdef1234.execute-api.eu-west-1.amazonaws.com",
    "domainPrefix": "abcdef1234",
    "http": {"method": "GET", "path": "/v1/topics/orders%2Fx/partitions/0/records", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7", "userAgent": "curl/8.5.0"},
    "requestId": "JKJaXmPLvHcESHA=",
    "routeKey": "$default",
    "stage": "$default",
    "time": "10/Mar/2024:16:10:12 +0000",
    "timeEpoch": 1710087012000
  },
  "isBase64Encoded": false
}`

// seen is what the echo handler observed.
type seen struct {
	method, path, rawPath, query, host, remote, cookie, custom, reqID, body string
	ctxHasDeadline                                                          bool
}

func echoHandler(got *seen, respond func(w http.ResponseWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, dl := r.Context().Deadline()
		*got = seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, r.RemoteAddr,
			r.Header.Get("Cookie"), r.Header.Get("X-Custom"), r.Header.Get("X-Request-Id"), string(b), dl}
		respond(w)
	})
}

type countFlusher struct{ n atomic.Int32 }

func (f *countFlusher) Flush(context.Context) error { f.n.Add(1); return nil }

func TestHTTPAPIEvent(t *testing.T) {
	var got seen
	fl := &countFlusher{}
	h := New(echoHandler(&got, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Vary", "Accept")
		w.Header().Add("Vary", "Authorization")
		w.Header().Add("Set-Cookie", "s=1")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"ok":true}`)
	}), fl, nil, Config{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := h.Handle(ctx, json.RawMessage(sampleHTTPAPIEvent))
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(events.APIGatewayV2HTTPResponse)
	if !ok {
		t.Fatalf("answer is %T, want events.APIGatewayV2HTTPResponse", out)
	}
	want := seen{
		method: "GET", path: "/v1/topics/orders/x/partitions/0/records", rawPath: "/v1/topics/orders%2Fx/partitions/0/records",
		// max_bytes is added: the fetch is capped to fit a Lambda response.
		query: "max_bytes=2097152&max_records=5&offset=earliest",
		host:  "abcdef1234.execute-api.eu-west-1.amazonaws.com", remote: "203.0.113.7:0",
		cookie: "a=1; b=2", custom: "one,two", reqID: "JKJaXmPLvHcESHA=", ctxHasDeadline: true,
	}
	if got != want {
		t.Errorf("handler saw\n%+v\nwant\n%+v", got, want)
	}
	if resp.StatusCode != 201 || resp.Body != `{"ok":true}` || resp.IsBase64Encoded {
		t.Errorf("response %d %q base64=%v", resp.StatusCode, resp.Body, resp.IsBase64Encoded)
	}
	if resp.Headers["Content-Type"] != "application/json" || resp.Headers["Vary"] != "Accept,Authorization" {
		t.Errorf("headers %v", resp.Headers)
	}
	if len(resp.Cookies) != 1 || resp.Cookies[0] != "s=1" || resp.Headers["Set-Cookie"] != "" {
		t.Errorf("cookies %v, headers %v", resp.Cookies, resp.Headers)
	}
	if n := fl.n.Load(); n != 1 {
		t.Errorf("flushed %d times, want once per invocation", n)
	}
}

// TestRequestConversion covers bodies, stages and the fetch cap, with events built from
// the library's types.
func TestRequestConversion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		method    string
		rawPath   string
		stage     string
		query     string
		body      string
		b64       bool
		wantPath  string
		wantQuery string
		wantBody  string
		wantCode  int
	}{
		{name: "json body", method: "POST", rawPath: "/v1/topics/o/records", body: `{"records":[]}`,
			wantPath: "/v1/topics/o/records", wantBody: `{"records":[]}`, wantCode: 200},
		{name: "base64 body", method: "POST", rawPath: "/v1/topics/o/records", b64: true,
			body: base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff}), wantPath: "/v1/topics/o/records", wantBody: "\x00\x01\x02\xff", wantCode: 200},
		{name: "bad base64", method: "POST", rawPath: "/x", b64: true, body: "!!!", wantCode: 400},
		{name: "named stage", method: "GET", rawPath: "/prod/v1/topics", stage: "prod", wantPath: "/v1/topics", wantCode: 200},
		{name: "stage-like prefix kept", method: "GET", rawPath: "/production/v1", stage: "prod", wantPath: "/production/v1", wantCode: 200},
		{name: "small max_bytes kept", method: "GET", rawPath: "/v1/topics/o/partitions/0/records", query: "max_bytes=100",
			wantPath: "/v1/topics/o/partitions/0/records", wantQuery: "max_bytes=100", wantCode: 200},
		{name: "large max_bytes capped", method: "GET", rawPath: "/v1/topics/o/partitions/0/records", query: "max_bytes=99999999&offset=3",
			wantPath: "/v1/topics/o/partitions/0/records", wantQuery: "max_bytes=2097152&offset=3", wantCode: 200},
		{name: "bad max_bytes left to the API", method: "GET", rawPath: "/v1/topics/o/partitions/0/records", query: "max_bytes=lots",
			wantPath: "/v1/topics/o/partitions/0/records", wantQuery: "max_bytes=lots", wantCode: 200},
		{name: "produce not capped", method: "POST", rawPath: "/v1/topics/o/records", query: "x=1",
			wantPath: "/v1/topics/o/records", wantQuery: "x=1", wantCode: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got seen
			h := New(echoHandler(&got, func(w http.ResponseWriter) {}), nil, nil, Config{}, nil)
			ev := events.APIGatewayV2HTTPRequest{
				Version: "2.0", RouteKey: "$default", RawPath: tc.rawPath, RawQueryString: tc.query,
				Headers: map[string]string{"content-type": "application/json"}, Body: tc.body, IsBase64Encoded: tc.b64,
				RequestContext: events.APIGatewayV2HTTPRequestContext{
					Stage: cmpOr(tc.stage, "$default"), DomainName: "x.execute-api.us-east-1.amazonaws.com",
					HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: tc.method, Path: tc.rawPath},
				},
			}
			out := invoke(t, h, ev)
			resp := out.(events.APIGatewayV2HTTPResponse)
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.wantCode, resp.Body)
			}
			if tc.wantCode != 200 {
				if !strings.Contains(resp.Body, `"code":"invalid_request"`) {
					t.Errorf("body %s", resp.Body)
				}
				return
			}
			if got.path != tc.wantPath || got.query != tc.wantQuery || got.body != tc.wantBody || got.method != tc.method {
				t.Errorf("saw %s %s ? %s body %q", got.method, got.path, got.query, got.body)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func invoke(t *testing.T, h *Handler, ev any) any {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Handle(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBinaryResponseIsBase64(t *testing.T) {
	var got seen
	payload := []byte{0x00, 0xff, 0x10, 'a'}
	h := New(echoHandler(&got, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/vnd.kafka.v2+binary")
		w.Write(payload)
	}), nil, nil, Config{}, nil)
	resp := invoke(t, h, httpEvent("GET", "/bin", "x.execute-api.us-east-1.amazonaws.com")).(events.APIGatewayV2HTTPResponse)
	if !resp.IsBase64Encoded || resp.Body != base64.StdEncoding.EncodeToString(payload) {
		t.Errorf("binary body %q base64=%v", resp.Body, resp.IsBase64Encoded)
	}
}

func httpEvent(method, path, domain string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, Headers: map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", DomainName: domain,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	}
}

func TestFunctionURLBuffered(t *testing.T) {
	var got seen
	h := New(echoHandler(&got, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hi")
	}), nil, nil, Config{}, nil)
	ev := httpEvent("GET", "/healthz", "abc123.lambda-url.us-east-1.on.aws")
	out := invoke(t, h, events.LambdaFunctionURLRequest{
		Version: ev.Version, RawPath: ev.RawPath, Headers: ev.Headers,
		RequestContext: events.LambdaFunctionURLRequestContext{DomainName: ev.RequestContext.DomainName,
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET", Path: "/healthz"}},
	})
	resp, ok := out.(events.LambdaFunctionURLResponse)
	if !ok {
		t.Fatalf("answer is %T, want events.LambdaFunctionURLResponse", out)
	}
	if resp.StatusCode != 200 || resp.Body != "hi" || got.path != "/healthz" {
		t.Errorf("response %d %q, path %q", resp.StatusCode, resp.Body, got.path)
	}
}

// TestFunctionURLStreaming: in streaming mode the answer returns once the headers are
// written, and the body arrives as the handler writes it.
func TestFunctionURLStreaming(t *testing.T) {
	second := make(chan struct{})
	fl := &countFlusher{}
	tail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		w.Header().Set("X-Late", "ignored")
		<-second
		io.WriteString(w, "data: 2\n\n")
	})
	buffered := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotAcceptable)
	})
	h := New(buffered, fl, nil, Config{Stream: tail}, nil)
	// The same request through API Gateway gets the buffered handler.
	if resp := invoke(t, h, httpEvent("GET", "/v1/topics/o/partitions/0/records", "x.execute-api.us-east-1.amazonaws.com")).(events.APIGatewayV2HTTPResponse); resp.StatusCode != http.StatusNotAcceptable {
		t.Fatalf("API Gateway event with Stream set: %d, want the buffered handler's 406", resp.StatusCode)
	}
	fl.n.Store(0)
	out := invoke(t, h, httpEvent("GET", "/v1/topics/o/partitions/0/records", "abc123.lambda-url.us-east-1.on.aws"))
	sr, ok := out.(*events.LambdaFunctionURLStreamingResponse)
	if !ok {
		t.Fatalf("answer is %T, want a streaming response", out)
	}
	if sr.StatusCode != 200 || sr.Headers["Content-Type"] != "text/event-stream" || sr.Headers["X-Late"] != "" {
		t.Fatalf("prelude %d %v", sr.StatusCode, sr.Headers)
	}
	buf := make([]byte, 9)
	if _, err := io.ReadFull(sr.Body, buf); err != nil || string(buf) != "data: 1\n\n" {
		t.Fatalf("first event %q %v", buf, err)
	}
	close(second)
	rest, err := io.ReadAll(sr.Body)
	if err != nil || string(rest) != "data: 2\n\n" {
		t.Fatalf("rest %q %v", rest, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for fl.n.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if fl.n.Load() != 1 {
		t.Errorf("flushed %d times after the stream", fl.n.Load())
	}
	// The runtime closing the body ends a handler that is still streaming.
	ended := make(chan struct{})
	h2 := New(http.NotFoundHandler(), nil, nil, Config{Stream: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		<-r.Context().Done()
		close(ended)
	})}, nil)
	sr = invoke(t, h2, httpEvent("GET", "/t", "abc123.lambda-url.us-east-1.on.aws")).(*events.LambdaFunctionURLStreamingResponse)
	sr.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the body did not end the request")
	}
}

type fakeCompactor struct {
	passes atomic.Int32
	err    error
}

func (c *fakeCompactor) Pass(context.Context) error { c.passes.Add(1); return c.err }

func TestScheduledEvents(t *testing.T) {
	scheduled := events.CloudWatchEvent{Version: "0", ID: "89d1a02d-5ec7-412e-82f5-13505f849b41", DetailType: "Scheduled Event",
		Source: "aws.events", AccountID: "123456789012", Region: "us-east-1", Time: time.Now(),
		Resources: []string{"arn:aws:events:us-east-1:123456789012:rule/strata-compactor"}, Detail: json.RawMessage(`{}`)}
	c := &fakeCompactor{}
	h := New(http.NotFoundHandler(), nil, c, Config{}, nil)
	for _, ev := range []any{scheduled, map[string]string{"action": "compact"}} {
		b, _ := json.Marshal(ev)
		if _, err := h.Handle(context.Background(), b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	if n := c.passes.Load(); n != 2 {
		t.Errorf("%d passes, want 2", n)
	}
	c.err = errors.New("boom")
	b, _ := json.Marshal(scheduled)
	if _, err := h.Handle(context.Background(), b); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing pass: %v", err)
	}
	noComp := New(http.NotFoundHandler(), nil, nil, Config{}, nil)
	if _, err := noComp.Handle(context.Background(), b); !errors.Is(err, ErrNoCompactor) {
		t.Errorf("no compactor: %v", err)
	}
}

func TestUnsupportedEvents(t *testing.T) {
	h := New(http.NotFoundHandler(), nil, nil, Config{}, nil)
	for _, ev := range []string{
		`[]`,
		`{}`,
		`{"Records":[{"eventSource":"aws:sqs"}]}`,
		`{"version":"1.0","httpMethod":"GET","path":"/"}`,
		`{"version":"1.0","requestContext":{"http":{"method":"GET"}}}`,
	} {
		if _, err := h.Handle(context.Background(), json.RawMessage(ev)); !errors.Is(err, ErrUnsupportedEvent) {
			t.Errorf("%s: %v, want ErrUnsupportedEvent", ev, err)
		}
	}
}
