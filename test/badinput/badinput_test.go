// Package badinput sends the full HTTP stack — the real binary, `strata serve` against
// Postgres and MinIO — every kind of malformed or hostile input we could think of, and
// requires of each a clear 4xx (never a 5xx, never a hang) that changes nothing:
// topics, configs, partition watermarks, groups and their offsets, and the bucket's
// objects are the same after the suite as before. Every case is a subtest, so the
// output lists them all. The fuzz targets (fuzz_test.go) feed the same routes random
// input through an in-process node.
package badinput

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/gobin"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/s3"
)

func TestMain(m *testing.M) {
	code := m.Run()
	gobin.Cleanup()
	os.Exit(code)
}

// server is one `strata serve` process and what it writes to.
type server struct {
	url   string
	store objstore.Store
	cli   *client.Client
}

func startServer(t *testing.T) *server {
	t.Helper()
	bin := gobin.Build(t, "cmd/strata")
	dsn := testsvc.PostgresDSN(t)
	m := testsvc.MinIO(t)
	bucket := testsvc.BucketName()
	st, err := s3.New(context.Background(), s3.Config{Bucket: bucket, Prefix: "bad", Endpoint: m.Endpoint, Region: m.Region,
		PathStyle: true, AccessKey: m.AccessKey, SecretKey: m.SecretKey}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"endpoint": {m.Endpoint}, "path_style": {"true"}}
	if m.Region != "" {
		q.Set("region", m.Region)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_ACCESS_KEY_ID="+m.AccessKey, "AWS_SECRET_ACCESS_KEY="+m.SecretKey)
	addr := fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))
	var out bytes.Buffer
	var outMu sync.Mutex
	cmd := exec.Command(bin, "serve", "--catalog", dsn, "--bucket", "s3://"+bucket+"/bad?"+q.Encode(), "--listen", addr,
		"--log-level", "warn", "--roles", "writer,reader", "--body-timeout", "2s", "--push-allow", "hooks.example.com")
	cmd.Env = env
	cmd.Stdout = lockedWriter{&out, &outMu}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		outMu.Lock()
		defer outMu.Unlock()
		if t.Failed() {
			t.Logf("server log:\n%s", out.String())
		} else if strings.Contains(out.String(), `"level":"ERROR"`) {
			t.Logf("server logged errors:\n%s", out.String())
		}
	})
	testwait.NoError(t, time.Minute, "the server to be ready", func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: HTTP %d", resp.StatusCode)
		}
		return nil
	})
	return &server{url: "http://" + addr, store: st, cli: client.New("http://" + addr)}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// state is everything a bad request must not change.
type state struct {
	Topics  string
	Parts   map[string]string
	Groups  string
	Offsets map[string]string
	Objects []string
	Push    string // the push subscription of share group pg
	PG      string // share group pg, its configs with it
}

func (s *server) snapshot(t *testing.T) state {
	t.Helper()
	get := func(path string) string {
		resp, err := http.Get(s.url + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	st := state{Topics: get("/v1/topics"), Parts: map[string]string{}, Groups: get("/v1/groups"), Offsets: map[string]string{}}
	var topics struct {
		Topics []struct {
			Name string `json:"name"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(st.Topics), &topics); err != nil {
		t.Fatalf("topics: %v: %s", err, st.Topics)
	}
	for _, tp := range topics.Topics {
		st.Parts[tp.Name] = get("/v1/topics/" + tp.Name + "/partitions")
	}
	var groups struct {
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
	}
	_ = json.Unmarshal([]byte(st.Groups), &groups)
	for _, g := range groups.Groups {
		st.Offsets[g.Name] = get("/v1/groups/" + g.Name + "/offsets")
	}
	st.Push = get("/v1/share-groups/pg/push")
	st.PG = get("/v1/share-groups/pg")
	err := s.store.List(context.Background(), "", func(i objstore.Info) error {
		st.Objects = append(st.Objects, i.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tc is one bad request.
type tc struct {
	name    string
	method  string
	path    string // raw: sent as written
	ctype   string
	body    []byte
	header  map[string]string
	chunked bool
	// raw, when set, is the whole request written to a TCP connection as is (for
	// requests net/http would refuse to send, or bodies that stop short).
	raw []byte
	// want is the exact status expected; 0 accepts any 4xx.
	want int
	// code is the problem code expected; "" accepts any.
	code string
	// atCommit marks a request only the catalog commit can refuse (the producer's
	// state lives there): its flush's object is already written, with a segment row
	// and no chunk rows, by design (catalog.Catalog.Commit), and the compactor removes
	// it. Every other case must leave the bucket as it was.
	atCommit bool
}

func post(name, path string, body string, want int, code string) tc {
	return tc{name: name, method: http.MethodPost, path: path, ctype: "application/json", body: []byte(body), want: want, code: code}
}

func put(name, path string, body string, want int, code string) tc {
	return tc{name: name, method: http.MethodPut, path: path, ctype: "application/json", body: []byte(body), want: want, code: code}
}

func get(name, path string, want int, code string) tc {
	return tc{name: name, method: http.MethodGet, path: path, want: want, code: code}
}

func nested(open, close string, n int) string {
	return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
}

func cases() []tc {
	const rec = "/v1/topics/orders/records"
	big := `{"records":[{"value":"` + strings.Repeat("x", 17<<20) + `"}]}`
	return []tc{
		// Broken JSON and wrong shapes on produce.
		post("produce: truncated JSON", rec, `{"records":[{"value":1}`, 400, "invalid_json"),
		post("produce: not JSON", rec, `records=1`, 400, "invalid_json"),
		post("produce: empty body", rec, ``, 400, "invalid_json"),
		post("produce: trailing data", rec, `{"records":[{"value":1}]}{}`, 400, "invalid_json"),
		post("produce: invalid UTF-8", rec, "{\"records\":[{\"value\":\"\xff\xfe\xfd\"}]}", 400, "invalid_json"),
		post("produce: NUL bytes", rec, "{\"records\":\x00[]}", 400, "invalid_json"),
		post("produce: value nested 100000 deep", rec, `{"records":[{"value":`+nested("[", "]", 100000)+`}]}`, 400, ""),
		post("produce: body nested 100000 deep", rec, nested(`{"a":`, `}`, 100000), 400, ""),
		post("produce: records is a string", rec, `{"records":"many"}`, 400, "invalid_request"),
		post("produce: records is null", rec, `{"records":null}`, 400, ""),
		post("produce: records empty", rec, `{"records":[]}`, 400, "empty_batch"),
		post("produce: record is a number", rec, `{"records":[5]}`, 400, ""),
		post("produce: partition is a string", rec, `{"records":[{"value":1,"partition":"1"}]}`, 400, ""),
		post("produce: partition 1e400", rec, `{"records":[{"value":1,"partition":1e400}]}`, 400, ""),
		post("produce: partition overflows int32", rec, `{"records":[{"value":1,"partition":99999999999999999999}]}`, 400, ""),
		post("produce: partition -1", rec, `{"records":[{"value":1,"partition":-1}]}`, 0, ""),
		post("produce: partition 2.5", rec, `{"records":[{"value":1,"partition":2.5}]}`, 400, ""),
		post("produce: partition beyond the topic", rec, `{"records":[{"value":1,"partition":3}]}`, 404, "partition_out_of_range"),
		post("produce: unknown top-level field", rec, `{"records":[{"value":1}],"colour":"red"}`, 400, "invalid_request"),
		post("produce: unknown record field", rec, `{"records":[{"value":1,"colour":"red"}]}`, 400, "invalid_request"),
		post("produce: negative timestamp", rec, `{"records":[{"value":1,"timestamp":-5}]}`, 400, ""),
		post("produce: timestamp 1e30", rec, `{"records":[{"value":1,"timestamp":1e30}]}`, 400, ""),
		post("produce: timestamp gibberish", rec, `{"records":[{"value":1,"timestamp":"yesterday"}]}`, 400, ""),
		post("produce: headers a number", rec, `{"records":[{"value":1,"headers":5}]}`, 400, ""),
		post("produce: string topic given a number", "/v1/topics/strs/records", `{"records":[{"value":42}]}`, 400, ""),
		post("produce: binary topic given bad base64", "/v1/topics/bins/records", `{"records":[{"value":"!!!not base64"}]}`, 400, ""),
		post("produce: record over max.message.bytes", "/v1/topics/small/records", `{"records":[{"value":"`+strings.Repeat("y", 300)+`"}]}`, 413, "record_too_large"),
		post("produce: body over 16 MiB", rec, big, 413, "body_too_large"),
		{name: "produce: body over 16 MiB, chunked", method: "POST", path: rec, ctype: "application/json", body: []byte(big), chunked: true, want: 413, code: "body_too_large"},
		{name: "produce: text/plain", method: "POST", path: rec, ctype: "text/plain", body: []byte(`{"records":[{"value":1}]}`), want: 415, code: "unsupported_media_type"},
		{name: "produce: no content type", method: "POST", path: rec, body: []byte(`{"records":[{"value":1}]}`), want: 415, code: "unsupported_media_type"},
		{name: "produce: content type garbage", method: "POST", path: rec, ctype: "application/json; ;;=", body: []byte(`{"records":[{"value":1}]}`), want: 415, code: "unsupported_media_type"},
		post("produce: producer with negative id", rec, `{"records":[{"value":1,"partition":0}],"producer":{"id":-1,"epoch":0,"sequences":{"0":0}}}`, 400, ""),
		post("produce: producer epoch overflows int16", rec, `{"records":[{"value":1,"partition":0}],"producer":{"id":1,"epoch":40000,"sequences":{"0":0}}}`, 400, ""),
		post("produce: producer sequences keyed by a word", rec, `{"records":[{"value":1,"partition":0}],"producer":{"id":1,"epoch":0,"sequences":{"zero":0}}}`, 400, ""),
		post("produce: producer sequence negative", rec, `{"records":[{"value":1,"partition":0}],"producer":{"id":1,"epoch":0,"sequences":{"0":-3}}}`, 400, ""),
		post("produce: idempotent record without partition", rec, `{"records":[{"value":1}],"producer":{"id":1,"epoch":0,"sequences":{"0":0}}}`, 400, ""),
		func() tc {
			c := post("produce: unknown producer id", rec, `{"records":[{"value":1,"partition":0}],"producer":{"id":987654321,"epoch":0,"sequences":{"0":0}}}`, 0, "")
			c.atCommit = true
			return c
		}(),

		// Names: traversal, SQL, lengths.
		post("produce: path traversal in topic", "/v1/topics/..%2F..%2Fetc%2Fpasswd/records", `{"records":[{"value":1}]}`, 0, ""),
		post("produce: topic ..", "/v1/topics/../records", `{"records":[{"value":1}]}`, 0, ""),
		post("produce: SQL in topic name", "/v1/topics/x'%3BDROP%20TABLE%20topics%3B--/records", `{"records":[{"value":1}]}`, 400, "invalid_topic_name"),
		post("produce: unknown topic", "/v1/topics/nosuch/records", `{"records":[{"value":1}]}`, 404, "topic_not_found"),
		post("create topic: SQL in name", "/v1/topics", `{"name":"t'); DROP TABLE topics; --","partitions":1}`, 400, "invalid_topic_name"),
		post("create topic: traversal name", "/v1/topics", `{"name":"../../etc/passwd","partitions":1}`, 400, "invalid_topic_name"),
		post("create topic: name of 300 characters", "/v1/topics", `{"name":"`+strings.Repeat("n", 300)+`","partitions":1}`, 400, "invalid_topic_name"),
		post("create topic: name with a NUL", "/v1/topics", `{"name":"a\u0000b","partitions":1}`, 400, "invalid_topic_name"),
		post("create topic: empty name", "/v1/topics", `{"name":"","partitions":1}`, 400, ""),
		post("create topic: partitions -1", "/v1/topics", `{"name":"neg","partitions":-1}`, 400, ""),
		post("create topic: partitions 0", "/v1/topics", `{"name":"zero","partitions":0}`, 400, ""),
		post("create topic: partitions overflow", "/v1/topics", `{"name":"huge","partitions":99999999999}`, 400, ""),
		post("create topic: partitions 1e9", "/v1/topics", `{"name":"many","partitions":1000000000}`, 400, ""),
		post("create topic: partitions a string", "/v1/topics", `{"name":"strp","partitions":"3"}`, 400, ""),
		post("create topic: unknown config", "/v1/topics", `{"name":"cfg","partitions":1,"configs":{"no.such.config":"1"}}`, 400, "invalid_config"),
		post("create topic: config an object", "/v1/topics", `{"name":"cfg2","partitions":1,"configs":{"retention.ms":{"ms":5}}}`, 400, ""),
		post("create topic: config an array", "/v1/topics", `{"name":"cfg5","partitions":1,"configs":{"retention.ms":[5]}}`, 400, ""),
		post("create topic: config negative", "/v1/topics", `{"name":"cfg3","partitions":1,"configs":{"retention.ms":"-5"}}`, 400, "invalid_config"),
		post("create topic: config nested deep", "/v1/topics", `{"name":"cfg4","partitions":1,"configs":`+nested(`{"a":`, `}`, 5000)+`}`, 400, ""),
		post("create topic: unknown field", "/v1/topics", `{"name":"unk","partitions":1,"replication":3}`, 400, ""),
		post("create topic: already exists", "/v1/topics", `{"name":"orders","partitions":5}`, 409, "topic_exists"),
		{name: "alter topic: fewer partitions", method: "PATCH", path: "/v1/topics/orders", ctype: "application/json", body: []byte(`{"partitions":1}`), want: 400},
		{name: "alter topic: broken JSON", method: "PATCH", path: "/v1/topics/orders", ctype: "application/json", body: []byte(`{"partitions":`), want: 400, code: "invalid_json"},
		{name: "alter topic: unknown config", method: "PATCH", path: "/v1/topics/orders", ctype: "application/json", body: []byte(`{"configs":{"bogus":"1"}}`), want: 400, code: "invalid_config"},
		// A share group's dead-letter topic (KIP-1191): the node's prefix, an existing
		// topic, its opt-in.
		{name: "share group: dead-letter topic without the prefix", method: "PUT", path: "/v1/share-groups/sg1", ctype: "application/json", body: []byte(`{"configs":{"errors.deadletterqueue.topic.name":"orders"}}`), want: 400, code: "invalid_config"},
		{name: "share group: dead-letter topic that does not exist", method: "PUT", path: "/v1/share-groups/sg1", ctype: "application/json", body: []byte(`{"configs":{"errors.deadletterqueue.topic.name":"dlq.nosuch"}}`), want: 400, code: "invalid_config"},
		{name: "share group: dead-letter topic that does not opt in", method: "PUT", path: "/v1/share-groups/sg1", ctype: "application/json", body: []byte(`{"configs":{"errors.deadletterqueue.topic.name":"dlq.closed"}}`), want: 400, code: "invalid_config"},
		{name: "share group: dead-letter topic name invalid", method: "PUT", path: "/v1/share-groups/sg1", ctype: "application/json", body: []byte(`{"configs":{"errors.deadletterqueue.topic.name":"dlq.a/b"}}`), want: 400, code: "invalid_config"},
		{name: "delete topic: unknown", method: "DELETE", path: "/v1/topics/nosuch", want: 404, code: "topic_not_found"},
		{name: "delete topic: SQL in name", method: "DELETE", path: "/v1/topics/orders'%20OR%20'1'='1", want: 400, code: "invalid_topic_name"},

		// Fetch parameters.
		get("fetch: offset -1", "/v1/topics/orders/partitions/0/records?offset=-1", 400, ""),
		get("fetch: offset overflows int64", "/v1/topics/orders/partitions/0/records?offset=99999999999999999999", 400, ""),
		get("fetch: offset 1e3", "/v1/topics/orders/partitions/0/records?offset=1e3", 400, ""),
		get("fetch: offset beyond the high watermark", "/v1/topics/orders/partitions/0/records?offset=1000000", 416, "offset_out_of_range"),
		get("fetch: max_records -5", "/v1/topics/orders/partitions/0/records?offset=0&max_records=-5", 400, ""),
		get("fetch: max_bytes a word", "/v1/topics/orders/partitions/0/records?offset=0&max_bytes=lots", 400, ""),
		get("fetch: wait_ms negative", "/v1/topics/orders/partitions/0/records?offset=0&wait_ms=-1", 400, ""),
		get("fetch: partition a word", "/v1/topics/orders/partitions/zero/records?offset=0", 400, "invalid_partition"),
		get("fetch: partition -1", "/v1/topics/orders/partitions/-1/records?offset=0", 400, "invalid_partition"),
		get("fetch: partition overflows int32", "/v1/topics/orders/partitions/2147483648/records?offset=0", 400, "invalid_partition"),
		get("fetch: partition beyond the topic", "/v1/topics/orders/partitions/7/records?offset=0", 404, "partition_out_of_range"),
		get("offset for time: timestamp gibberish", "/v1/topics/orders/partitions/0/offsets?timestamp=noon", 400, ""),
		get("usage: since a word", "/v1/topics/orders/usage?since=yesterday", 400, "invalid_request"),
		get("usage: since in the future", "/v1/topics/orders/usage?since=2999-01-01T00:00:00Z", 400, "invalid_request"),
		get("usage: since negative", "/v1/topics/orders/usage?since=-1h", 400, "invalid_request"),
		get("usage: since twice", "/v1/topics/orders/usage?since=1h&since=2h", 400, "invalid_parameter"),
		get("usage: unknown parameter", "/v1/topics/orders/usage?window=1h", 400, "invalid_parameter"),
		get("usage: unknown topic", "/v1/topics/nosuch/usage", 404, "topic_not_found"),

		// Groups.
		post("heartbeat: broken JSON", "/v1/groups/g1/heartbeat", `{"member_id":`, 400, "invalid_json"),
		post("heartbeat: epoch a string", "/v1/groups/g1/heartbeat", `{"member_id":"m","member_epoch":"0","topics":["orders"]}`, 400, ""),
		post("heartbeat: session timeout negative", "/v1/groups/g1/heartbeat", `{"member_id":"m","member_epoch":0,"topics":["orders"],"session_timeout_ms":-1}`, 400, ""),
		post("heartbeat: SQL in group name", "/v1/groups/g'%3Bdrop%20table%20groups%3B--/heartbeat", `{"member_id":"m","member_epoch":0,"topics":["orders"]}`, 400, ""),
		post("heartbeat: unknown member epoch 5", "/v1/groups/g1/heartbeat", `{"member_id":"ghost","member_epoch":5,"topics":["orders"]}`, 0, ""),
		post("commit offsets: negative offset", "/v1/groups/g1/offsets", `{"offsets":[{"topic":"orders","partition":0,"offset":-7}]}`, 400, ""),
		post("commit offsets: partition overflow", "/v1/groups/g1/offsets", `{"offsets":[{"topic":"orders","partition":4294967296,"offset":0}]}`, 400, ""),
		post("commit offsets: stale member", "/v1/groups/g1/offsets", `{"member_id":"ghost","member_epoch":3,"offsets":[{"topic":"orders","partition":0,"offset":1}]}`, 0, ""),
		post("reset offsets: broken JSON", "/v1/groups/g1/offsets:reset", `{"to":`, 400, ""),
		post("producers: transactional id of 10000 characters", "/v1/producers", `{"transactional_id":"`+strings.Repeat("t", 10000)+`"}`, 400, ""),
		post("producers: transactional id a number", "/v1/producers", `{"transactional_id":5}`, 400, ""),
		post("multi-topic produce: broken JSON", "/v1/records", `{"records":[`, 400, "invalid_json"),
		post("multi-topic produce: unknown field", "/v1/records", `{"nonsense":true}`, 400, ""),

		// The HTTP layer.
		{name: "route: unknown", method: "GET", path: "/v1/nothing/here", want: 404, code: "not_found"},
		{name: "route: method not allowed", method: "PUT", path: "/v1/topics", want: 405, code: "method_not_allowed"},
		{name: "header: 2 MiB value", method: "GET", path: "/v1/topics", header: map[string]string{"X-Huge": strings.Repeat("h", 2<<20)}, want: 431},
		{name: "URL: 2 MiB path", method: "GET", path: "/v1/topics/" + strings.Repeat("p", 2<<20), want: 431},
		{name: "request line: garbage", raw: []byte("GIBBERISH\r\n\r\n"), want: 400},
		{name: "request: bad Content-Length", raw: []byte("POST /v1/topics/orders/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -5\r\n\r\n"), want: 400},
		// Found by this suite: the query's bad pair was dropped, fetching from the earliest offset.
		get("fetch: offset with bad percent-encoding", "/v1/topics/orders/partitions/0/records?offset=%zz", 400, "invalid_parameter"),
		// Unknown and repeated query parameters: ignored before (?ofset=0 fetched from the
		// start), as unknown JSON fields never were.
		get("fetch: misspelt parameter", "/v1/topics/orders/partitions/0/records?ofset=0", 400, "invalid_parameter"),
		get("fetch: parameter given twice", "/v1/topics/orders/partitions/0/records?offset=0&offset=1", 400, "invalid_parameter"),
		get("list topics: a parameter it does not take", "/v1/topics?limit=5", 400, "invalid_parameter"),
		post("produce: a parameter it does not take", rec+"?sync=true", `{"records":[{"value":1}]}`, 400, "invalid_parameter"),
		post("commit offsets: a parameter it does not take", "/v1/groups/g1/offsets?dry_run=1", `{"offsets":[{"topic":"orders","partition":0,"offset":1}]}`, 400, "invalid_parameter"),
		// What a person typing a name wrong meets.
		post("delete records: beyond the high watermark", "/v1/topics/orders/partitions/0/records:delete", `{"before_offset":100}`, 416, "offset_out_of_range"),
		post("reset offsets: a group that does not exist", "/v1/groups/nosuch/offsets:reset", `{"topic":"orders","to":"earliest"}`, 404, "group_not_found"),
		get("describe group: does not exist", "/v1/groups/nosuch", 404, "group_not_found"),
		{name: "delete group: does not exist", method: "DELETE", path: "/v1/groups/nosuch", want: 404, code: "group_not_found"},
		{name: "alter topic: unknown topic", method: "PATCH", path: "/v1/topics/nosuch", ctype: "application/json", body: []byte(`{"partitions":4}`), want: 404, code: "topic_not_found"},
		// Push subscriptions (the server allows only hooks.example.com; share group pg
		// has a subscription, which must stay as it was).
		put("push: target outside the allow-list", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://evil.example.net/x"}`, 422, "push_target_not_allowed"),
		put("push: plain http without the allow", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"http://hooks.example.com/x"}`, 422, "push_target_not_allowed"),
		put("push: loopback address", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://127.0.0.1/x"}`, 422, "push_target_not_allowed"),
		put("push: cloud metadata address", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://169.254.169.254/latest"}`, 422, "push_target_not_allowed"),
		put("push: batch size out of range", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://hooks.example.com/b","batch_size":5000}`, 400, "invalid_parameter"),
		put("push: concurrency out of range", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://hooks.example.com/b","concurrency":1000}`, 400, "invalid_parameter"),
		put("push: negative timeout", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://hooks.example.com/b","timeout_ms":-1}`, 400, "invalid_parameter"),
		put("push: url and lambda_arn", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://hooks.example.com/b","lambda_arn":"arn:aws:lambda:us-east-1:123456789012:function:f"}`, 400, "invalid_parameter"),
		put("push: malformed lambda_arn", "/v1/share-groups/pg/push", `{"topics":["orders"],"lambda_arn":"arn:aws:s3:::bucket"}`, 400, "invalid_parameter"),
		put("push: no topics", "/v1/share-groups/pg/push", `{"url":"https://hooks.example.com/b"}`, 400, "invalid_parameter"),
		put("push: unknown topic", "/v1/share-groups/pg/push", `{"topics":["nosuch"],"url":"https://hooks.example.com/b"}`, 404, "topic_not_found"),
		put("push: timeout not below the group's lock duration", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://hooks.example.com/b","timeout_ms":30000}`, 400, "invalid_config"),
		put("push: group's lock duration lowered to its subscription's timeout", "/v1/share-groups/pg", `{"configs":{"share.record.lock.duration.ms":"10000"}}`, 400, "invalid_config"),
		put("push: unknown field", "/v1/share-groups/pg/push", `{"topics":["orders"],"url":"https://hooks.example.com/b","retries":3}`, 400, "invalid_request"),
		get("push: describe a group without one", "/v1/share-groups/nosuch/push", 404, "push_subscription_not_found"),
		post("push: pause a group without one", "/v1/share-groups/nosuch/push:pause", ``, 404, "push_subscription_not_found"),
		post("push: rotate the secret of a group without one", "/v1/share-groups/nosuch/push:rotate-secret", ``, 404, "push_subscription_not_found"),
		{name: "push: delete a group without one", method: "DELETE", path: "/v1/share-groups/nosuch/push", want: 404, code: "push_subscription_not_found"},
		// Found by this suite: a stalled body held its request forever (the server runs
		// with --body-timeout 2s).
		{name: "request: body shorter than its Content-Length, then silence",
			raw: []byte("POST /v1/topics/orders/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"records\":["), want: 408, code: "request_timeout"},
	}
}

// TestBadInput runs every case as a subtest against `strata serve` on Postgres and
// MinIO, and then requires that nothing changed.
func TestBadInput(t *testing.T) {
	runCases(t, startServer(t))
}

// TestBadInputSQLite runs the same cases against an in-process node on SQLite and the
// filesystem store: the answers, details included, must be the same (details.txt).
func TestBadInputSQLite(t *testing.T) {
	runCases(t, startSQLiteServer(t))
}

// runCases sets up the topics, data and group to protect, runs every case and
// requires that nothing changed and that each answer is the one in testdata/details.txt.
func runCases(t *testing.T, s *server) {
	ctx := context.Background()
	// Topics of each format, a small one, and a little data and a group to protect.
	for _, tp := range []struct {
		name    string
		n       int32
		configs map[string]string
	}{
		{"orders", 3, nil},
		{"strs", 1, map[string]string{"value.format": "string"}},
		{"bins", 1, map[string]string{"value.format": "binary", "key.format": "binary"}},
		{"small", 1, map[string]string{"max.message.bytes": "100"}},
		{"dlq.closed", 1, nil},
	} {
		if _, err := s.cli.CreateTopic(ctx, tp.name, tp.n, tp.configs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.cli.Produce(ctx, "orders", []client.Record{{Value: json.RawMessage(`{"ok":1}`), Partition: client.Int32(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.cli.CommitOffsets(ctx, "g1", "", 0, []client.GroupOffset{{Topic: "orders", Partition: 0, Offset: 1}}); err != nil {
		t.Logf("commit from outside the group: %v", err)
	}
	if _, err := s.cli.PutPush(ctx, "pg", client.PushSubscriptionRequest{Topics: []string{"orders"}, URL: "https://hooks.example.com/a"}); err != nil {
		t.Fatal(err)
	}
	// pg exists as a share group (a member joined and left), so its description, its
	// configs with it, is part of the state.
	joined, err := s.cli.AcquireShareRecords(ctx, "pg", client.ShareAcquireRequest{Topics: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cli.LeaveShareGroup(ctx, "pg", joined.MemberID); err != nil {
		t.Fatal(err)
	}
	before := s.snapshot(t)

	cs := cases()
	if len(cs) < 40 {
		t.Fatalf("only %d cases", len(cs))
	}
	var commitObjects []string
	answers := &answerLog{}
	defer answers.check(t)
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			objs := s.objects(t)
			defer func() {
				now := s.objects(t)
				if len(now) == len(objs) {
					return
				}
				if c.atCommit {
					commitObjects = append(commitObjects, now[len(now)-1])
					t.Logf("refused at commit: its flush's object stays for the compactor (%d objects before, %d after)", len(objs), len(now))
					return
				}
				t.Errorf("the bucket changed: %d objects before, %d after", len(objs), len(now))
			}()
			status, ctype, body, err := send(s.url, c)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			var prob struct {
				Code   string `json:"code"`
				Detail string `json:"detail"`
			}
			if strings.HasPrefix(ctype, "application/problem+json") {
				_ = json.Unmarshal(body, &prob)
			}
			t.Logf("%d %s %s", status, prob.Code, truncate(body, 160))
			answers.add(c.name, status, prob.Code, prob.Detail)
			for _, bad := range detailProblems(prob.Detail) {
				t.Errorf("detail %q: %s", prob.Detail, bad)
			}
			switch {
			case status >= 500:
				t.Errorf("server error %d: %s", status, truncate(body, 300))
			case status < 400:
				t.Errorf("accepted with %d: %s", status, truncate(body, 300))
			case c.want != 0 && status != c.want:
				t.Errorf("status %d, want %d", status, c.want)
			}
			if c.code != "" && prob.Code != c.code {
				t.Errorf("code %q, want %q", prob.Code, c.code)
			}
			if c.raw == nil && status != 431 && prob.Code == "" {
				t.Errorf("no problem+json code (Content-Type %q)", ctype)
			}
		})
	}
	after := s.snapshot(t)
	after.Objects = slicesDelete(after.Objects, commitObjects)
	if diff := compare(before, after); diff != "" {
		t.Errorf("bad input changed the state:\n%s", diff)
	}
	t.Logf("%d cases, state unchanged: %d topics, %d objects", len(cs), len(before.Parts), len(before.Objects))
}

func (s *server) objects(t *testing.T) []string {
	var keys []string
	if err := s.store.List(context.Background(), "", func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

func slicesDelete(all, drop []string) []string {
	var out []string
	for _, k := range all {
		if !slices.Contains(drop, k) {
			out = append(out, k)
		}
	}
	return out
}

func compare(a, b state) string {
	var d []string
	if a.Topics != b.Topics {
		d = append(d, "topics:\n  "+a.Topics+"\n  "+b.Topics)
	}
	for k, v := range a.Parts {
		if b.Parts[k] != v {
			d = append(d, "partitions of "+k+":\n  "+v+"\n  "+b.Parts[k])
		}
	}
	if a.Groups != b.Groups {
		d = append(d, "groups:\n  "+a.Groups+"\n  "+b.Groups)
	}
	for k, v := range a.Offsets {
		if b.Offsets[k] != v {
			d = append(d, "offsets of "+k+":\n  "+v+"\n  "+b.Offsets[k])
		}
	}
	if strings.Join(a.Objects, ",") != strings.Join(b.Objects, ",") {
		d = append(d, fmt.Sprintf("objects: %d before, %d after", len(a.Objects), len(b.Objects)))
	}
	return strings.Join(d, "\n")
}

// answerWithin bounds every case: a server that neither answers nor closes in this time
// hangs.
const answerWithin = 20 * time.Second

// send sends one case and returns the status, content type and body.
func send(base string, c tc) (int, string, []byte, error) {
	if c.raw != nil {
		return sendRaw(base, c)
	}
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
		if c.chunked {
			body = io.MultiReader(bytes.NewReader(c.body)) // unknown length: chunked
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.method, base+"/", body)
	if err != nil {
		return 0, "", nil, err
	}
	req.URL.Opaque = "//" + req.URL.Host + c.path // the path exactly as written
	if strings.Contains(c.path, "?") {
		p, q, _ := strings.Cut(c.path, "?")
		req.URL.Opaque, req.URL.RawQuery = "//"+req.URL.Host+p, q
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Content-Type"), b, err
}

// sendRaw writes the request bytes itself and waits for the answer.
func sendRaw(base string, c tc) (int, string, []byte, error) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return 0, "", nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(answerWithin))
	if _, err := conn.Write(c.raw); err != nil {
		return 0, "", nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", nil, fmt.Errorf("reading the answer: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Content-Type"), b, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
