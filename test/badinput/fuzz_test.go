package badinput

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

// The fuzz targets feed every request parser of the API random input through the
// whole handler of an in-process node (SQLite and the filesystem store, every role):
// no input may cause a 5xx or a panic, and a refused produce writes nothing. The
// record codecs are fuzzed by round trips: what is produced in each format is fetched
// back unchanged. (api's FuzzProduceParse covers the produce body decoder alone.)

// startNode starts an in-process node on SQLite and the filesystem store under a
// temporary directory, with the writer and the reader, stopped when the test ends.
func startNode(tb testing.TB, wcfg writer.Config, acfg api.Config) *nodetest.Node {
	tb.Helper()
	return nodetest.Start(tb, nodetest.Log(slog.New(slog.DiscardHandler)), nodetest.Mutate(func(c *node.Config) {
		c.WriterConfig, c.ReaderConfig, c.API = wcfg, reader.Config{}, acfg
		c.PushConfig.Allow = []string{"hooks.example.com"}
	}))
}

// stack is an in-process node's handler.
type stack struct {
	h   http.Handler
	cat catalog.Backend
}

func newStack(tb testing.TB) *stack {
	tb.Helper()
	n := startNode(tb, writer.Config{Linger: time.Millisecond}, api.Config{})
	ctx := context.Background()
	cat := n.Catalog
	s := &stack{h: n.API.Handler(), cat: cat}
	for _, tp := range []struct {
		name    string
		configs map[string]string
	}{
		{"orders", nil},
		{"strs", map[string]string{"value.format": "string", "key.format": "string"}},
		{"bins", map[string]string{"value.format": "binary", "key.format": "binary"}},
	} {
		if _, err := cat.CreateTopic(ctx, tp.name, 2, tp.configs); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func (s *stack) do(method, target, ctype string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://strata.test/", bytes.NewReader(body))
	req.URL.Path, req.URL.RawQuery, _ = strings.Cut(target, "?")
	req.RequestURI = ""
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec
}

// watermarks sums every partition's high watermark: what a refused produce must not
// move.
func (s *stack) watermarks(tb testing.TB) int64 {
	var sum int64
	ts, err := s.cat.Topics(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range ts {
		ps, err := s.cat.Partitions(context.Background(), t.ID)
		if err != nil {
			tb.Fatal(err)
		}
		for _, p := range ps {
			sum += p.HighWatermark
		}
	}
	return sum
}

func noServerError(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body.String())
	}
}

// route is one body-taking route of a fuzz target.
type route struct{ method, path string }

// fuzzRoutes is a fuzz target posting its input as a JSON body to one of routes,
// chosen by its first argument.
func fuzzRoutes(f *testing.F, routes []route, seeds map[int][]string) {
	for i, ss := range seeds {
		for _, s := range ss {
			f.Add(byte(i), []byte(s))
		}
	}
	s := newStack(f)
	f.Fuzz(func(t *testing.T, which byte, body []byte) {
		r := routes[int(which)%len(routes)]
		noServerError(t, r.path, s.do(r.method, r.path, "application/json", body))
	})
}

// FuzzTopicRequests: create, alter, delete records.
func FuzzTopicRequests(f *testing.F) {
	fuzzRoutes(f, []route{{"POST", "/v1/topics"}, {"PATCH", "/v1/topics/orders"}, {"POST", "/v1/topics/orders/partitions/0/records:delete"}},
		map[int][]string{
			0: {`{"name":"a","partitions":1}`, `{"name":"b","partitions":3,"configs":{"retention.ms":"1000","cleanup.policy":"compact"}}`,
				`{"name":"c","partitions":"1"}`, `{"name":"../x","partitions":-1}`, `{"name":"d","partitions":1,"configs":{"value.format":5}}`},
			1: {`{"partitions":3}`, `{"configs":{"retention.ms":""}}`, `{"partitions":1}`, `{"configs":{"x":"y"}}`, `[]`},
			2: {`{"before_offset":0}`, `{"offset":0}`, `{"offset":-1}`},
		})
}

// FuzzGroupRequests: heartbeat, commit offsets, reset offsets.
func FuzzGroupRequests(f *testing.F) {
	fuzzRoutes(f, []route{{"POST", "/v1/groups/g/heartbeat"}, {"POST", "/v1/groups/g/offsets"}, {"POST", "/v1/groups/g/offsets:reset"}},
		map[int][]string{
			0: {`{"member_id":"m1","member_epoch":0,"topics":["orders"]}`, `{"member_id":"m1","member_epoch":-1}`,
				`{"member_id":"m2","member_epoch":0,"topics":["orders","strs"],"owned":[{"topic":"orders","partitions":[0,1]}],"session_timeout_ms":6000,"assignor":"range"}`,
				`{"member_id":"","member_epoch":99}`},
			1: {`{"offsets":[{"topic":"orders","partition":0,"offset":0}]}`,
				`{"member_id":"m1","member_epoch":1,"offsets":[{"topic":"orders","partition":1,"offset":5,"metadata":"x"}]}`,
				`{"offsets":[{"topic":"orders","partition":-1,"offset":-1}]}`},
			2: {`{"topic":"orders","to":"earliest"}`, `{"topic":"orders","to":"latest","partitions":[0]}`, `{"topic":"orders","offset":3}`},
		})
}

// FuzzProducerRequests: init producer, and the multi-topic produce with producers and
// group offsets.
func FuzzProducerRequests(f *testing.F) {
	fuzzRoutes(f, []route{{"POST", "/v1/producers"}, {"POST", "/v1/records"}},
		map[int][]string{
			0: {``, `{}`, `{"transactional_id":"tx-1"}`, `{"transactional_id":""}`, `{"transactional_id":5}`},
			1: {`{"records":[{"topic":"orders","value":1,"partition":0}]}`, `{"topics":{"orders":{"records":[{"value":1}]}}}`,
				`{"records":[{"topic":"strs","value":"a"}],"group_offsets":{"group":"g","member_id":"m","member_epoch":1,"offsets":[{"topic":"orders","partition":0,"offset":1}]}}`},
		})
}

// FuzzProduceHandler posts a produce body to a topic of each record format; a refused
// one must leave every watermark where it was.
func FuzzProduceHandler(f *testing.F) {
	for _, seed := range []struct {
		topic byte
		body  string
	}{
		{0, `{"records":[{"key":"k","value":{"a":1},"partition":1,"headers":[{"key":"h","value":"v"}],"timestamp":1700000000000}]}`},
		{1, `{"records":[{"key":"k","value":"text"}]}`},
		{2, `{"records":[{"key":"AAE=","value":"/w=="}]}`},
		{0, `{"records":[{"value":1,"partition":0}],"producer":{"id":1,"epoch":0,"sequences":{"0":0}}}`},
		{1, `{"records":[{"value":5}]}`},
	} {
		f.Add(seed.topic, []byte(seed.body))
	}
	s := newStack(f)
	topics := []string{"orders", "strs", "bins"}
	f.Fuzz(func(t *testing.T, topic byte, body []byte) {
		before := s.watermarks(t)
		rec := s.do("POST", "/v1/topics/"+topics[int(topic)%3]+"/records", "application/json", body)
		noServerError(t, "produce", rec)
		if rec.Code >= 400 {
			if after := s.watermarks(t); after != before {
				t.Fatalf("refused with %d, yet the watermarks moved from %d to %d", rec.Code, before, after)
			}
		}
	})
}

// FuzzFetchQuery fuzzes the fetch and offset-for-time routes' path and query.
func FuzzFetchQuery(f *testing.F) {
	for _, seed := range [][2]string{
		{"0", "offset=0"}, {"1", "offset=earliest&max_records=5&max_bytes=100"}, {"0", "offset=latest"},
		{"-1", "offset=-1"}, {"x", "offset=%zz"}, {"0", "offset=0&format=base64"}, {"0", "offset=99999999999999999999"},
		{"1", "timestamp=2024-01-01T00:00:00Z"},
	} {
		f.Add(seed[0], seed[1])
	}
	s := newStack(f)
	f.Fuzz(func(t *testing.T, part, query string) {
		if strings.ContainsAny(part, "/?#") || strings.Contains(query, "wait_ms") {
			return // another route; long polls are not parsers
		}
		noServerError(t, "fetch", s.do("GET", "/v1/topics/orders/partitions/"+part+"/records?"+query, "", nil))
		noServerError(t, "offsets", s.do("GET", "/v1/topics/orders/partitions/"+part+"/offsets?"+query, "", nil))
	})
}

// FuzzRecordRoundTrip produces a key and value in each format and fetches them back:
// binary bytes exactly, UTF-8 text exactly, JSON values as the same JSON value.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"a":[1,2.5,"x",null,true]}`), "h")
	f.Add([]byte{0, 0xff}, []byte{0x80, 0, 1}, "")
	f.Add([]byte("ключ"), []byte(`"☃"`), "e\u0301")
	f.Add([]byte(""), []byte(`123456789012345678901234567890`), "x")
	s := newStack(f)
	srv := httptest.NewServer(s.h)
	f.Cleanup(srv.Close)
	cli := client.New(srv.URL)
	var n [3]int64
	f.Fuzz(func(t *testing.T, key, value []byte, header string) {
		if len(key)+len(value)+len(header) > 4096 {
			return
		}
		check := func(topic string, p int, k, v json.RawMessage, headers bool, same func(got json.RawMessage) bool) {
			rec := map[string]any{"key": k, "value": v, "partition": 0}
			if headers && utf8.ValidString(header) {
				rec["headers"] = []map[string]string{{"key": "h", "value": header}}
			}
			body, _ := json.Marshal(map[string]any{"records": []any{rec}})
			resp := s.do("POST", "/v1/topics/"+topic+"/records", "application/json", body)
			if resp.Code != 200 {
				t.Fatalf("produce %s: %d %s", body, resp.Code, resp.Body.String())
			}
			fetch := s.do("GET", fmt.Sprintf("/v1/topics/%s/partitions/0/records?offset=%d&max_records=1", topic, n[p]), "", nil)
			n[p]++
			var out struct {
				Records []struct {
					Value   json.RawMessage `json:"value"`
					Headers json.RawMessage `json:"headers"`
				} `json:"records"`
			}
			if fetch.Code != 200 || json.Unmarshal(fetch.Body.Bytes(), &out) != nil || len(out.Records) != 1 {
				t.Fatalf("fetch %s: %d %s", topic, fetch.Code, fetch.Body.String())
			}
			if !same(out.Records[0].Value) {
				t.Fatalf("%s: produced %s, fetched %s", topic, v, out.Records[0].Value)
			}
			// The Go client's decoding of the same record, as stored bytes.
			res, err := cli.Fetch(context.Background(), topic, 0, client.FetchOptions{Offset: n[p] - 1, MaxRecords: 1, Base64: true})
			if err != nil || len(res.Records) != 1 {
				t.Fatalf("client fetch %s: %v", topic, err)
			}
			if stored, err := res.Records[0].ValueBytes(); err != nil || !same(storedAs(topic, stored)) {
				t.Fatalf("%s: client read stored bytes %q (%v)", topic, stored, err)
			}
		}
		b64 := func(b []byte) json.RawMessage { r, _ := json.Marshal(base64.StdEncoding.EncodeToString(b)); return r }
		check("bins", 2, b64(key), b64(value), true, func(got json.RawMessage) bool {
			var s string
			_ = json.Unmarshal(got, &s)
			b, err := base64.StdEncoding.DecodeString(s)
			return err == nil && bytes.Equal(b, value)
		})
		if utf8.Valid(value) && utf8.Valid(key) {
			ks, _ := json.Marshal(string(key))
			vs, _ := json.Marshal(string(value))
			check("strs", 1, ks, vs, false, func(got json.RawMessage) bool {
				var s string
				return json.Unmarshal(got, &s) == nil && s == string(value)
			})
		}
		// A JSON value in a request must be valid UTF-8 (the whole body must be):
		// json.Valid accepts invalid bytes inside strings, which the API refuses.
		if json.Valid(value) && utf8.Valid(value) {
			ks, _ := json.Marshal(string(bytes.ToValidUTF8(key, nil)))
			check("orders", 0, ks, value, false, func(got json.RawMessage) bool { return sameJSON(got, value) })
		}
	})
}

// storedAs renders stored bytes the way the topic's value format shows them.
func storedAs(topic string, b []byte) json.RawMessage {
	switch topic {
	case "bins":
		r, _ := json.Marshal(base64.StdEncoding.EncodeToString(b))
		return r
	case "strs":
		r, _ := json.Marshal(string(b))
		return r
	}
	return b
}

// FuzzClientFetchDecode answers the Go client's fetch with arbitrary bytes: it must
// return records or an error, never panic or hang.
func FuzzClientFetchDecode(f *testing.F) {
	for _, seed := range []string{
		`{"records":[{"offset":0,"timestamp":1700000000000,"key":"k","value":{"a":1},"headers":[{"key":"h","value":"v"}]}],"next_offset":1,"high_watermark":1,"log_start_offset":0}`,
		`{"records":[{"offset":1,"timestamp":"2024-01-01T00:00:00Z","key":null,"value":"AAE=","value_encoding":"base64","headers":{"h":"v"}}],"next_offset":2}`,
		`{"records":[{"headers":[{"key":"h","value":"!!","encoding":"base64"}]}]}`,
		`{"records":null}`, `[]`, `{"records":[{"timestamp":1e400}]}`,
	} {
		f.Add(uint16(200), []byte(seed))
	}
	f.Add(uint16(503), []byte(`{"type":"about:blank","code":"store_unavailable","status":503}`))
	var (
		mu     sync.Mutex
		status uint16
		body   []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		st, b := status, body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(st))
		_, _ = w.Write(b)
	}))
	f.Cleanup(srv.Close)
	cli := client.New(srv.URL)
	f.Fuzz(func(t *testing.T, st uint16, b []byte) {
		mu.Lock()
		status, body = 100+st%500, b
		if status < 200 {
			status = 200
		}
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := cli.Fetch(ctx, "t", 0, client.FetchOptions{})
		if err == nil {
			for _, r := range res.Records {
				_, _ = r.KeyBytes()
				_, _ = r.ValueBytes()
			}
		}
	})
}

func sameJSON(a, b []byte) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
