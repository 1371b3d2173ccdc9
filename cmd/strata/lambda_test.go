package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/lambda"
	"github.com/strata-io/strata/lambda/secretstest"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/open"
)

const lambdaTestKey = "lambda-test-key-0123456789abcdef"

// lambdaEvent is an API Gateway HTTP API (payload 2.0) event, or a Function URL event
// when domain is a lambda-url domain.
func lambdaEvent(method, path, query, body, auth, domain string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"host": domain, "user-agent": "lambda-test", "x-forwarded-proto": "https"}
	if body != "" {
		h["content-type"] = "application/json"
	}
	if auth != "" {
		h["authorization"] = auth
	}
	for k, v := range headers {
		h[k] = v
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, RawQueryString: query, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", APIID: "abcdef1234", DomainName: domain, Stage: "$default",
			RequestID: fmt.Sprintf("req-%d", time.Now().UnixNano()), TimeEpoch: time.Now().UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.9", UserAgent: "lambda-test"},
		},
	}
}

const (
	gatewayDomain = "abcdef1234.execute-api.eu-west-1.amazonaws.com"
	fnURLDomain   = "xyz987.lambda-url.eu-west-1.on.aws"
)

// TestLambdaHandlerPostgresMinIO invokes the Lambda handler in-process, wired exactly
// as `strata lambda` wires it from STRATA_* variables, with API Gateway v2 and Function
// URL events against Postgres and MinIO.
func TestLambdaHandlerPostgresMinIO(t *testing.T) {
	dsn := os.Getenv("STRATA_TEST_POSTGRES")
	endpoint := os.Getenv("STRATA_TEST_S3_ENDPOINT")
	if dsn == "" || endpoint == "" {
		testsvc.Unavailable(t, "set STRATA_TEST_POSTGRES and STRATA_TEST_S3_* (eval \"$(scripts/services.sh)\")")
	}
	bucket := fmt.Sprintf("strata-lambda-%d", time.Now().UnixNano())
	bucketURL := fmt.Sprintf("s3://%s:%s@%s/fn?endpoint=%s&path_style=true&region=%s",
		url.PathEscape(os.Getenv("STRATA_TEST_S3_ACCESS_KEY")), url.PathEscape(os.Getenv("STRATA_TEST_S3_SECRET_KEY")),
		bucket, endpoint, os.Getenv("STRATA_TEST_S3_REGION"))
	vars := map[string]string{
		"STRATA_CATALOG":       testDatabase(t, dsn),
		"STRATA_BUCKET":        bucketURL,
		"STRATA_CREATE_BUCKET": "true",
		"STRATA_API_KEYS":      lambdaTestKey,
		"STRATA_LOG_LEVEL":     "warn",
		"STRATA_STREAMING":     "true",
		"STRATA_ROLES":         "writer,reader,compactor",
		// The shortest allowed: segments settle (and may be compacted) after twice this.
		"STRATA_COMMIT_TIMEOUT": "3s",
	}
	c, sf, streaming := lambdaFlags()
	if _, err := c.parse(nil, func(k string) string { return vars[k] }); err != nil {
		t.Fatal(err)
	}
	if !*streaming {
		t.Fatal("STRATA_STREAMING was not read")
	}
	var logs lockedBuffer
	e := &env{stdout: io.Discard, stderr: &logs, getenv: func(k string) string { return vars[k] }}
	h, n, err := startLambda(t.Context(), e, c, sf, *streaming)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stopLambda(n, 10*time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("node log:\n%s", logs.String())
		}
	})
	if spec, _ := sf.spec(); !strings.Contains(spec.catalogName, "default_query_exec_mode=exec") || !strings.Contains(spec.catalogName, "pool_max_conns=2") {
		t.Errorf("catalog URL not set up for RDS Proxy: %s", spec.catalogName)
	}

	invoke := func(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		t.Helper()
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, err := h.Handle(ctx, b)
		if err != nil {
			t.Fatalf("%s %s: %v", ev.RequestContext.HTTP.Method, ev.RawPath, err)
		}
		resp, ok := out.(events.APIGatewayV2HTTPResponse)
		if !ok {
			t.Fatalf("%s %s: answer %T", ev.RequestContext.HTTP.Method, ev.RawPath, out)
		}
		return resp
	}
	bearer := "Bearer " + lambdaTestKey

	// Probes are open; the API is not.
	if r := invoke(lambdaEvent("GET", "/healthz", "", "", "", gatewayDomain, nil)); r.StatusCode != 200 {
		t.Fatalf("healthz: %d %s", r.StatusCode, r.Body)
	}
	if r := invoke(lambdaEvent("POST", "/v1/topics", "", `{"name":"orders","partitions":2}`, bearer, gatewayDomain, nil)); r.StatusCode != 201 {
		t.Fatalf("create topic: %d %s", r.StatusCode, r.Body)
	}

	produce := `{"records":[{"key":"k1","value":{"n":1},"partition":1},{"key":"k2","value":{"n":2},"partition":1},{"value":"three","partition":0}]}`
	for _, auth := range []string{"", "Bearer wrong-key-0123456789abcdef", "Basic " + lambdaTestKey} {
		r := invoke(lambdaEvent("POST", "/v1/topics/orders/records", "", produce, auth, gatewayDomain, nil))
		if r.StatusCode != 401 || !strings.Contains(r.Body, `"code":"unauthorized"`) || !strings.HasPrefix(r.Headers["Www-Authenticate"], "Bearer") {
			t.Fatalf("produce with Authorization %q: %d %v %s", auth, r.StatusCode, r.Headers, r.Body)
		}
	}
	// Nothing was written: no offsets, no objects.
	r := invoke(lambdaEvent("GET", "/v1/topics/orders/partitions", "", "", bearer, gatewayDomain, nil))
	if r.StatusCode != 200 || strings.Count(r.Body, `"high_watermark":0`) != 2 {
		t.Fatalf("partitions after refused produces: %d %s", r.StatusCode, r.Body)
	}
	if keys := listObjects(t, bucketURL); len(keys) != 0 {
		t.Fatalf("refused produces left objects: %v", keys)
	}

	r = invoke(lambdaEvent("POST", "/v1/topics/orders/records", "", produce, bearer, gatewayDomain, nil))
	if r.StatusCode != 200 {
		t.Fatalf("produce: %d %s", r.StatusCode, r.Body)
	}
	if want := `{"offsets":[{"partition":1,"offset":0},{"partition":1,"offset":1},{"partition":0,"offset":0}]}`; strings.TrimSpace(r.Body) != want {
		t.Fatalf("produce answered %s, want %s", r.Body, want)
	}
	// The flush happened inside the invocation: one segment object exists now.
	if keys := listObjects(t, bucketURL); len(keys) != 1 {
		t.Fatalf("after one produce invocation: objects %v, want one segment", keys)
	}

	r = invoke(lambdaEvent("GET", "/v1/topics/orders/partitions/1/records", "offset=0", "", bearer, gatewayDomain, nil))
	var fetched struct {
		Records []struct {
			Offset int64           `json:"offset"`
			Key    string          `json:"key"`
			Value  json.RawMessage `json:"value"`
		} `json:"records"`
		NextOffset    int64 `json:"next_offset"`
		HighWatermark int64 `json:"high_watermark"`
	}
	if r.StatusCode != 200 {
		t.Fatalf("fetch: %d %s", r.StatusCode, r.Body)
	}
	if err := json.Unmarshal([]byte(r.Body), &fetched); err != nil {
		t.Fatalf("fetch body %s: %v", r.Body, err)
	}
	if len(fetched.Records) != 2 || fetched.Records[0].Key != "k1" || string(fetched.Records[1].Value) != `{"n":2}` ||
		fetched.Records[1].Offset != 1 || fetched.NextOffset != 2 || fetched.HighWatermark != 2 {
		t.Fatalf("fetched %s", r.Body)
	}

	// A long-poll at the end of the log waits (nothing listens for notifications here:
	// it polls) and answers empty.
	start := time.Now()
	r = invoke(lambdaEvent("GET", "/v1/topics/orders/partitions/0/records", "offset=1&wait_ms=300", "", bearer, gatewayDomain, nil))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `"records":[]`) || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("long-poll: %d %s after %s", r.StatusCode, r.Body, time.Since(start))
	}

	// A tail through the HTTP API cannot stream.
	sse := map[string]string{"accept": "text/event-stream"}
	r = invoke(lambdaEvent("GET", "/v1/topics/orders/partitions/1/records", "offset=earliest", "", bearer, gatewayDomain, sse))
	if r.StatusCode != 406 || !strings.Contains(r.Body, `"code":"streaming_unsupported"`) {
		t.Fatalf("SSE via HTTP API: %d %s", r.StatusCode, r.Body)
	}
	// Through a streaming Function URL it does.
	b, _ := json.Marshal(lambdaEvent("GET", "/v1/topics/orders/partitions/1/records", "offset=earliest", "", bearer, fnURLDomain, sse))
	out, err := h.Handle(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	sr, ok := out.(*events.LambdaFunctionURLStreamingResponse)
	if !ok {
		t.Fatalf("Function URL tail answered %T", out)
	}
	if sr.StatusCode != 200 || sr.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("Function URL tail: %d %v", sr.StatusCode, sr.Headers)
	}
	ids := readEventIDs(t, sr.Body, 2)
	sr.Close()
	if strings.Join(ids, ",") != "0,1" {
		t.Fatalf("tail event ids %v, want 0,1", ids)
	}

	// A scheduled event runs a compaction pass: once the two writer segments have
	// settled, the pass merges partition 1's chunks into an object of its own; the
	// records read back the same.
	r = invoke(lambdaEvent("POST", "/v1/topics/orders/records", "", `{"records":[{"key":"k3","value":{"n":3},"partition":1}]}`, bearer, gatewayDomain, nil))
	if r.StatusCode != 200 {
		t.Fatalf("second produce: %d %s", r.StatusCode, r.Body)
	}
	before := listObjects(t, bucketURL)
	if len(before) != 2 {
		t.Fatalf("objects before compaction: %v, want the two writer segments", before)
	}
	time.Sleep(catalog.SettleAge(3*time.Second) + 500*time.Millisecond) // waits out the settle age: no pass compacts before it
	sched, _ := json.Marshal(events.CloudWatchEvent{Version: "0", ID: "cdc73f9d-aea9-11e3-9d5a-835b769c0d9c", DetailType: "Scheduled Event",
		Source: "aws.events", AccountID: "123456789012", Region: "eu-west-1", Time: time.Now(),
		Resources: []string{"arn:aws:events:eu-west-1:123456789012:rule/strata-compactor"}, Detail: json.RawMessage(`{}`)})
	if _, err := h.Handle(t.Context(), sched); err != nil {
		t.Fatalf("scheduled event: %v", err)
	}
	after := listObjects(t, bucketURL)
	if len(after) <= len(before) {
		t.Fatalf("objects after a compaction pass: %v; want a merged object beside %v", after, before)
	}
	r = invoke(lambdaEvent("GET", "/v1/topics/orders/partitions/1/records", "offset=0", "", bearer, gatewayDomain, nil))
	if r.StatusCode != 200 || !strings.Contains(r.Body, `"key":"k1"`) || !strings.Contains(r.Body, `"key":"k3"`) || !strings.Contains(r.Body, `"next_offset":3`) {
		t.Fatalf("fetch after compaction: %d %s", r.StatusCode, r.Body)
	}

	// Without the compactor role a scheduled event fails, saying so, rather than
	// pretend a pass ran.
	c2, sf2, _ := lambdaFlags()
	vars2 := map[string]string{"STRATA_CATALOG": vars["STRATA_CATALOG"], "STRATA_BUCKET": bucketURL, "STRATA_LOG_LEVEL": "warn"}
	if _, err := c2.parse(nil, func(k string) string { return vars2[k] }); err != nil {
		t.Fatal(err)
	}
	h2, n2, err := startLambda(t.Context(), e, c2, sf2, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stopLambda(n2, 10*time.Second)
	if _, err := h2.Handle(t.Context(), sched); !errors.Is(err, lambda.ErrNoCompactor) {
		t.Fatalf("scheduled event without the compactor role: %v, want lambda.ErrNoCompactor", err)
	}
}

func listObjects(t *testing.T, bucketURL string) []string {
	t.Helper()
	st, err := open.Open(t.Context(), bucketURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := st.List(t.Context(), "", func(i objstore.Info) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// readEventIDs reads a Server-Sent Events stream until it has n ids.
func readEventIDs(t *testing.T, r io.Reader, n int) []string {
	t.Helper()
	ids := make(chan []string, 1)
	go func() {
		var got []string
		sc := bufio.NewScanner(r)
		for sc.Scan() && len(got) < n {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				got = append(got, id)
			}
		}
		ids <- got
	}()
	select {
	case got := <-ids:
		return got
	case <-time.After(20 * time.Second):
		t.Fatal("no events from the tail within 20s")
		return nil
	}
}

func TestLambdaCatalogParams(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@proxy:5432/strata", "postgres://u:xxxxx@proxy:5432/strata?default_query_exec_mode=exec&pool_max_conns=2"},
		{"postgres://u:p@proxy/strata?sslmode=require", "postgres://u:xxxxx@proxy/strata?default_query_exec_mode=exec&pool_max_conns=2&sslmode=require"},
		{"postgres://proxy/s?default_query_exec_mode=simple_protocol&pool_max_conns=5", "postgres://proxy/s?default_query_exec_mode=simple_protocol&pool_max_conns=5"},
		{"host=proxy user=u password=p dbname=strata", "host=proxy user=u password=xxxxx dbname=strata default_query_exec_mode='exec' pool_max_conns='2'"},
	} {
		c, sf, _ := lambdaFlags()
		if _, err := c.parse(nil, func(k string) string {
			return map[string]string{"STRATA_CATALOG": tc.in, "STRATA_BUCKET": "s3://bucket/p"}[k]
		}); err != nil {
			t.Fatal(err)
		}
		spec, bad := sf.spec()
		if len(bad) > 0 || spec.catalogName != tc.want {
			t.Errorf("lambda --catalog %q: %q, %q; want %q", tc.in, spec.catalogName, bad, tc.want)
		}
	}
}

// lambdaSecretsEnv is the environment that has the lambda command read its API keys
// (and PGPASSWORD) from Secrets Manager — a stand-in, through the real SDK client — not
// from the plain environment; check says whether each was read once and the output
// holds no key.
func lambdaSecretsEnv(t *testing.T) (vars []string, check func(output string)) {
	keysARN := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:strata-api-keys-AbC"
	catalogARN := "arn:aws:secretsmanager:eu-west-1:123456789012:secret:strata-catalog-XyZ"
	sm := secretstest.New(t, map[string]string{keysARN: lambdaTestKey, catalogARN: `{"username":"strata","password":"unused-here"}`})
	vars = []string{
		"STRATA_SECRETS=STRATA_API_KEYS=" + keysARN + ",PGPASSWORD=" + catalogARN + "#password",
		"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + sm.URL,
		"AWS_REGION=eu-west-1", "AWS_ACCESS_KEY_ID=AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY=example",
	}
	return vars, func(output string) {
		t.Helper()
		if sm.Reads(keysARN) != 1 || sm.Reads(catalogARN) != 1 {
			t.Errorf("secrets read %d and %d times, want once each at start-up", sm.Reads(keysARN), sm.Reads(catalogARN))
		}
		if strings.Contains(output, lambdaTestKey) {
			t.Error("the output shows the API key")
		}
	}
}

func TestLambdaCommandOutsideLambda(t *testing.T) {
	var stderr strings.Builder
	e := &env{stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }}
	if code := run(t.Context(), e, []string{"lambda"}); code != 2 || !strings.Contains(stderr.String(), "AWS_LAMBDA_RUNTIME_API") {
		t.Errorf("strata lambda outside Lambda: exit %d, %s", code, stderr.String())
	}
}

// TestLambdaRuntimeAPI runs the built binary as Lambda does — no arguments,
// AWS_LAMBDA_RUNTIME_API set, configuration by environment — against a fake Lambda
// Runtime API that hands it two API Gateway events, and checks the answers it posts
// back; then SIGTERM stops it cleanly.
func TestLambdaRuntimeAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildStrata(t)
	produce := `{"records":[{"value":"a","partition":0},{"value":"b","partition":0}]}`
	evs := []events.APIGatewayV2HTTPRequest{
		lambdaEvent("POST", "/v1/topics", "", `{"name":"fn","partitions":1}`, "Bearer "+lambdaTestKey, gatewayDomain, nil),
		lambdaEvent("POST", "/v1/topics/fn/records", "", produce, "", gatewayDomain, nil),
		lambdaEvent("POST", "/v1/topics/fn/records", "", produce, "Bearer "+lambdaTestKey, gatewayDomain, nil),
	}
	type answer struct {
		id   string
		body []byte
	}
	answers := make(chan answer, len(evs))
	next := make(chan int, len(evs))
	for i := range evs {
		next <- i
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		var i int
		select {
		case i = <-next:
		case <-r.Context().Done():
			return
		}
		b, _ := json.Marshal(evs[i])
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", fmt.Sprintf("inv-%d", i))
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:strata-api")
		w.Write(b)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		answers <- answer{r.PathValue("id"), b}
		w.WriteHeader(http.StatusAccepted)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		answers <- answer{r.PathValue("id") + " ERROR", b}
		w.WriteHeader(http.StatusAccepted)
	})
	rt := httptest.NewServer(mux)
	defer rt.Close()

	data := t.TempDir()
	secretsEnv, secretsRead := lambdaSecretsEnv(t)
	cmd := exec.Command(bin)
	cmd.Env = append(append(cleanEnv(),
		"AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(rt.URL, "http://"),
		"STRATA_CATALOG=sqlite:"+filepath.Join(data, "catalog.db"),
		"STRATA_CREATE=true",
		"STRATA_BUCKET=file://"+filepath.Join(data, "objects"),
		"STRATA_LOG_LEVEL=warn",
	), secretsEnv...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := os.MkdirAll(filepath.Join(data, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("strata output:\n%s", out.String())
		}
	}()

	want := []struct {
		status int
		body   string
	}{
		{201, `"name":"fn"`},
		{401, `"code":"unauthorized"`},
		{200, `{"offsets":[{"partition":0,"offset":0},{"partition":0,"offset":1}]}`},
	}
	for i, w := range want {
		select {
		case a := <-answers:
			var resp events.APIGatewayV2HTTPResponse
			if a.id != fmt.Sprintf("inv-%d", i) || json.Unmarshal(a.body, &resp) != nil {
				t.Fatalf("answer %d: %s %s", i, a.id, a.body)
			}
			if resp.StatusCode != w.status || !strings.Contains(resp.Body, w.body) {
				t.Fatalf("answer %d: %d %s; want %d with %s", i, resp.StatusCode, resp.Body, w.status, w.body)
			}
		case err := <-done:
			t.Fatalf("strata exited: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer %d within 30s", i)
		}
	}
	secretsRead(out.String())
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit 20s after SIGTERM")
	}
}
