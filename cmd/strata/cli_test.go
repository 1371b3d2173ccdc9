package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	catopen "github.com/strata-io/strata/catalog/open"
	"github.com/strata-io/strata/client"
)

// runCLI runs one command line in-process with the given environment and stdin.
func runCLI(t *testing.T, vars map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	code = run(t.Context(), e, args)
	return code, out.String(), errOut.String()
}

func TestUsageAndExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{nil, 2, "", "Usage: strata COMMAND"},
		{[]string{"help"}, 0, "Usage: strata COMMAND", ""},
		{[]string{"-h"}, 0, "Usage: strata COMMAND", ""},
		{[]string{"-help"}, 0, "Usage: strata COMMAND", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus" for "strata"`},
		{[]string{"topics"}, 2, "", "Usage: strata topics VERB"},
		{[]string{"topics", "-h"}, 0, "Usage: strata topics VERB", ""},
		{[]string{"topics", "frobnicate"}, 2, "", `unknown command "frobnicate" for "strata topics"`},
		{[]string{"version"}, 0, "strata ", ""},
		{[]string{"--version"}, 0, "strata ", ""},
		{[]string{"version", "x"}, 2, "", `unexpected argument "x"`},
		{[]string{"topics", "create"}, 2, "", "missing the topic name: strata topics create NAME"},
		{[]string{"topics", "create", "a", "b"}, 2, "", "one topic name expected, got 2 arguments"},
		{[]string{"topics", "create", "a", "--partitions", "0"}, 2, "", "--partitions 0: want between 1 and 10000"},
		{[]string{"topics", "create", "a", "--config", "novalue"}, 2, "", `--config "novalue": want KEY=VALUE`},
		{[]string{"topics", "create", "a", "--config", "a=1", "--config", "a=2"}, 2, "", "--config: a given twice"},
		{[]string{"topics", "alter", "a"}, 2, "", "nothing to change"},
		{[]string{"topics", "alter", "a", "--config", "x=1", "--delete-config", "x"}, 2, "", "x is both set"},
		{[]string{"topics", "list", "--server", "localhost:8080"}, 2, "", `--server "localhost:8080": want the server's base URL`},
		{[]string{"produce", "t", "--batch", "0"}, 2, "", "--batch 0: want between 1 and 10000"},
		{[]string{"produce", "t", "--file", "/does/not/exist"}, 2, "", "--file: open /does/not/exist"},
		{[]string{"consume", "t", "--from", "yesterday"}, 2, "", `--from "yesterday": want beginning, end, an offset`},
		{[]string{"consume", "t", "--partition", "-1"}, 2, "", `--partition "-1": want a partition number`},
		{[]string{"consume", "t", "--max", "x"}, 2, "", `invalid argument "x" for "--max" flag: want a whole number`},
		{[]string{"consume", "t", "-max", "x"}, 2, "", `invalid argument "x" for "--max" flag: want a whole number`},
		{[]string{"dev", "--linger", "5"}, 2, "", "want a duration such as 50ms"},
		{[]string{"dev", "extra"}, 2, "", `unexpected argument "extra"`},
	} {
		code, stdout, stderr := runCLI(t, nil, "", tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.wantStdout) || !strings.Contains(stderr, tc.wantStderr) {
			t.Errorf("strata %s: exit %d, stdout %q, stderr %q\nwant exit %d, stdout containing %q, stderr containing %q",
				strings.Join(tc.args, " "), code, stdout, stderr, tc.code, tc.wantStdout, tc.wantStderr)
		}
		if code == 2 && len(tc.args) > 1 && tc.args[0] != "topics" && !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("strata %s: a usage error should point at -h: %q", strings.Join(tc.args, " "), stderr)
		}
	}
}

// Every flag of every command appears in --help with its environment variable.
func TestHelpShowsEveryFlagAndEnv(t *testing.T) {
	tr := newTree(t.Context(), discard)
	for c, cmd := range tr.cmds {
		args := append(strings.Fields(cmd.name), "--help")
		code, stdout, _ := runCLI(t, nil, "", args...)
		if code != 0 {
			t.Errorf("strata %s --help: exit %d", cmd.name, code)
		}
		if !strings.Contains(stdout, "Usage: strata "+cmd.name) {
			t.Errorf("strata %s --help: no usage line:\n%s", cmd.name, stdout)
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			if !strings.Contains(stdout, "--"+f.Name) || !strings.Contains(stdout, "env "+envName(cmd.name, f)+"\n") && !strings.Contains(stdout, "env "+envName(cmd.name, f)+" ") {
				t.Errorf("strata %s --help does not show --%s with env %s", cmd.name, f.Name, envName(cmd.name, f))
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("server", "", "")
	fs.String("max-flush-bytes", "", "")
	fs.String("delete-config", "", "")
	_ = fs.SetAnnotation("server", sharedAnnotation, []string{"true"})
	_ = fs.SetAnnotation("max-flush-bytes", sharedAnnotation, []string{"true"})
	for _, tc := range []struct{ cmd, flag, want string }{
		{"topics list", "server", "STRATA_SERVER"},
		{"serve", "max-flush-bytes", "STRATA_MAX_FLUSH_BYTES"},
		{"topics alter", "delete-config", "STRATA_TOPICS_ALTER_DELETE_CONFIG"},
	} {
		if got := envName(tc.cmd, fs.Lookup(tc.flag)); got != tc.want {
			t.Errorf("envName(%q, %q) = %q, want %q", tc.cmd, tc.flag, got, tc.want)
		}
	}
}

func TestParseFlagsEnvAndInterspersed(t *testing.T) {
	newCreate := func() (*command, *int, *stringList, *string) {
		c := newCommand("topics create", "", "")
		p := c.fs.Int("partitions", 1, "")
		var cfg stringList
		c.fs.Var(&cfg, "config", "")
		s := c.fs.String("server", "default", "")
		return c, p, &cfg, s
	}
	for _, tc := range []struct {
		name       string
		args       []string
		env        map[string]string
		pos        []string
		partitions int
		configs    []string
		server     string
	}{
		{"flags after the name", []string{"orders", "--partitions", "3", "--config", "a=1", "--config", "b=2"}, nil, []string{"orders"}, 3, []string{"a=1", "b=2"}, "default"},
		{"flags around the name", []string{"--partitions=4", "orders", "--server", "http://x"}, nil, []string{"orders"}, 4, nil, "http://x"},
		{"double dash", []string{"--", "--orders"}, nil, []string{"--orders"}, 1, nil, "default"},
		{"environment", []string{"orders"}, map[string]string{"STRATA_TOPICS_CREATE_PARTITIONS": "7", "STRATA_TOPICS_CREATE_CONFIG": "a=1  b=2", "STRATA_TOPICS_CREATE_SERVER": "http://env"}, []string{"orders"}, 7, []string{"a=1", "b=2"}, "http://env"},
		{"another command's variable is not ours", []string{"orders"}, map[string]string{"STRATA_PARTITIONS": "7", "STRATA_BENCH_PARTITIONS": "9"}, []string{"orders"}, 1, nil, "default"},
		{"flags beat the environment", []string{"orders", "--partitions", "2", "--config", "c=3"}, map[string]string{"STRATA_TOPICS_CREATE_PARTITIONS": "7", "STRATA_TOPICS_CREATE_CONFIG": "a=1 b=2"}, []string{"orders"}, 2, []string{"c=3"}, "default"},
	} {
		c, p, cfg, s := newCreate()
		pos, err := c.parse(tc.args, func(k string) string { return tc.env[k] })
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(pos, tc.pos) || *p != tc.partitions || !reflect.DeepEqual(cfg.vals, tc.configs) || *s != tc.server {
			t.Errorf("%s: pos %q partitions %d configs %q server %q; want %q %d %q %q", tc.name, pos, *p, cfg.vals, *s, tc.pos, tc.partitions, tc.configs, tc.server)
		}
	}

	c, _, _, _ := newCreate()
	_, err := c.parse([]string{"x"}, func(k string) string {
		if k == "STRATA_TOPICS_CREATE_PARTITIONS" {
			return "three"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), `environment variable STRATA_TOPICS_CREATE_PARTITIONS="three": want a whole number (it sets --partitions)`) {
		t.Errorf("bad env value: %v", err)
	}
}

func TestServeValidation(t *testing.T) {
	base := []string{"serve", "--catalog", "postgres://u:p@db:5432/strata", "--bucket", "s3://bucket/p"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string // each must appear in stderr
	}{
		{"nothing given", []string{"serve"}, nil, []string{"2 problems", "--catalog is required", "or set STRATA_CATALOG", "--bucket is required", "or set STRATA_BUCKET"}},
		{"bad role", append(base, "--roles", "writer,janitor"), nil, []string{`unknown role "janitor"`}},
		{"empty roles", append(base, "--roles", ","), nil, []string{"--roles is empty"}},
		{"tables without the reader", append(base, "--roles", "writer,tables"), nil, []string{"--roles: tables needs reader on the same node"}},
		{"catalog scheme", []string{"serve", "--catalog", "mysql://x/y", "--bucket", "s3://b/p"}, nil, []string{`unsupported scheme "mysql"`}},
		{"empty sqlite", []string{"serve", "--catalog", "sqlite:", "--bucket", "s3://b/p"}, nil, []string{"names no file"}},
		{"buffer below flush", append(base, "--max-flush-bytes", "16MiB", "--buffer-bytes", "8MiB"), nil, []string{"--buffer-bytes 8MiB is below --max-flush-bytes 16MiB", "raise --buffer-bytes"}},
		{"bad size", append(base, "--cache-bytes", "lots"), nil, []string{`size "lots": want a number of bytes`}},
		{"small cache", append(base, "--cache-bytes", "1MiB"), nil, []string{"--cache-bytes 1MiB: want at least one cache block"}},
		{"memory too small", append(base, "--memory-limit", "500MiB", "--cache-bytes", "256MiB"), nil, []string{"--memory-limit 500MiB gives a budget of 300MiB", "raise --memory-limit to at least 720MiB"}},
		{"memory too small for the buffer", append(base, "--memory-limit", "256MiB", "--buffer-bytes", "128MiB"), nil, []string{"twice --buffer-bytes 128MiB", "or lower --cache-bytes or --buffer-bytes"}},
		{"stall timeout", append(base, "--stall-timeout", "10ms"), nil, []string{"--stall-timeout 10ms: want at least 1s"}},
		{"caps", append(base, "--max-streams", "0"), nil, []string{"--max-streams 0: want at least 1"}},
		{"bad listen", append(base, "--listen", "8080"), nil, []string{`--listen "8080": want host:port`}},
		{"bad port", append(base, "--listen", ":http-alt"), nil, []string{"is not a number"}},
		{"linger", append(base, "--linger", "0s"), nil, []string{"--linger 0s: want between 1ms and 1m"}},
		{"commit timeout", append(base, "--commit-timeout", "1s"), nil, []string{"--commit-timeout 1s: want between 3s and 1h"}},
		{"log level", append(base, "--log-level", "loud"), nil, []string{`"loud": use one of debug, info, warn, error`}},
		{"env too", []string{"serve"}, map[string]string{"STRATA_CATALOG": "postgres://u:p@db/x", "STRATA_BUCKET": "s3://b/p", "STRATA_ROLES": "nope"}, []string{`unknown role "nope"`}},
		{"password not echoed", []string{"serve", "--catalog", "postgres://u:hunter2@db:notaport/x", "--bucket", "s3://b/p"}, nil, []string{"not a valid Postgres connection string"}},
		{"password not echoed, keyword DSN", []string{"serve", "--catalog", "host=db password='hunter2", "--bucket", "s3://b/p"}, nil, []string{"not a valid Postgres connection string"}},
		{"missing sqlite file", []string{"serve", "--catalog", "/no/such/catalog.db", "--bucket", "s3://b/p"}, nil, []string{`--catalog "/no/such/catalog.db": no such file`, "sqlite:PATH", "postgres://", "--create"}},
		{"kafka listen", append(base, "--kafka-listen", "9092"), nil, []string{`--kafka-listen "9092": want host:port`}},
		{"kafka advertise", append(base, "--kafka-listen", ":9092", "--kafka-advertise", ":9092"), nil, []string{`--kafka-advertise ":9092": want host:port that clients can reach`}},
		{"kafka shared", append(base, "--kafka-listen", ":9092", "--kafka-shared-address", "lb:0"), nil, []string{`--kafka-shared-address "lb:0": port "0" is not between 1 and 65535`}},
		{"kafka tls half", append(base, "--kafka-listen", ":9092", "--kafka-tls-cert", "c.pem"), nil, []string{"--kafka-tls-cert and --kafka-tls-key go together"}},
		{"kafka lease", append(base, "--kafka-listen", ":9092", "--kafka-node-lease", "100ms"), nil, []string{"--kafka-node-lease 100ms: want between 1s and 10m"}},
		{"kafka frame", append(base, "--kafka-listen", ":9092", "--kafka-max-frame-bytes", "1KiB"), nil, []string{"--kafka-max-frame-bytes 1KiB: want between 64KiB and 1GiB"}},
		{"kafka without the writer", append(base, "--kafka-listen", ":9092", "--roles", "reader,compactor"), nil, []string{"--kafka-listen needs the writer and reader roles"}},
	} {
		code, _, stderr := runCLI(t, tc.env, "", tc.args...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (stderr %q)", tc.name, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q does not say %q", tc.name, stderr, w)
			}
		}
		if strings.Contains(stderr, "hunter2") {
			t.Errorf("%s: stderr shows the password: %q", tc.name, stderr)
		}
	}
}

func TestDevValidation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, nil, "", "dev", "--data", file)
	if code != 2 || !strings.Contains(stderr, "is a file: give a directory") {
		t.Errorf("dev --data FILE: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, map[string]string{"STRATA_LISTEN": "nope"}, "", "dev")
	if code != 2 || !strings.Contains(stderr, `--listen "nope": want host:port`) {
		t.Errorf("dev with STRATA_LISTEN=nope: exit %d, %q", code, stderr)
	}
	// Unsigned OAUTHBEARER tokens can name any principal: never beside authentication.
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--auth-required"}},
		{nil, []string{"--api-keys", "0123456789abcdef0123"}},
		{map[string]string{"STRATA_API_KEYS": "0123456789abcdef0123"}, nil},
	} {
		code, _, stderr := runCLI(t, tc.env, "", append([]string{"dev", "--oauth-unsecured"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, "--oauth-unsecured accepts unsigned tokens") {
			t.Errorf("dev --oauth-unsecured %v (env %v): exit %d, %q", tc.args, tc.env, code, stderr)
		}
	}
}

func TestCatalogFlag(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "catalog.db")
	if err := os.WriteFile(existing, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in     string
		create bool
		name   string
	}{
		{"postgres://u:secret@db:5432/strata?sslmode=disable", false, "postgres://u:xxxxx@db:5432/strata?sslmode=disable"},
		{"postgresql://db/strata", false, "postgresql://db/strata"},
		{"host=db user=u password=secret dbname=strata", false, "host=db user=u password=xxxxx dbname=strata"},
		{"sqlite:./x/catalog.db", true, "./x/catalog.db"},
		{"sqlite:///var/lib/strata/catalog.db", true, "/var/lib/strata/catalog.db"},
		{existing, false, existing},
	} {
		got, err := catalogFlag(tc.in, catopen.Options{Create: tc.create}, nil)
		if err != nil || got.String() != tc.name {
			t.Errorf("catalogFlag(%q) = %q, %v; want %q", tc.in, got, err, tc.name)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"100", 100, true},
		{"8MiB", 8 << 20, true},
		{"8mib", 8 << 20, true},
		{"512KiB", 512 << 10, true},
		{"64 MiB", 64 << 20, true},
		{"1.5MiB", 3 << 19, true},
		{"1GB", 1e9, true},
		{"2g", 2 << 30, true},
		{"1TiB", 1 << 40, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"8XB", 0, false},
		{"-1", 0, false},
		{"1e30", 0, false},
		{"99999999TiB", 0, false},
	} {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for n, want := range map[int64]string{8 << 20: "8MiB", 64 << 20: "64MiB", 1 << 30: "1GiB", 1000: "1000", 1536: "1536", 3 << 10: "3KiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseFrom(t *testing.T) {
	ts := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want startAt
		ok   bool
	}{
		{"beginning", startAt{kind: "beginning"}, true},
		{"earliest", startAt{kind: "beginning"}, true},
		{"end", startAt{kind: "end"}, true},
		{"42", startAt{kind: "offset", offset: 42}, true},
		{"0", startAt{kind: "offset"}, true},
		{"-3", startAt{}, false},
		{"2026-01-02T15:04:05Z", startAt{kind: "time", time: ts}, true},
		{"2026-01-02", startAt{}, false},
	} {
		got, err := parseFrom(tc.in)
		if (err == nil) != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseFrom(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLine(t *testing.T) {
	p := &producer{keyFormat: "string"}
	r, err := p.parseLine([]byte(`{"key":"k","value":{"a":1},"headers":{"h":"v","n":null},"partition":2,"timestamp":"2026-01-02T15:04:05Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != `"k"` || string(r.Value) != `{"a":1}` || *r.Partition != 2 || r.Timestamp.UnixMilli() != 1767366245000 ||
		!reflect.DeepEqual(r.Headers, []client.Header{{Key: "h", Value: []byte("v")}, {Key: "n"}}) {
		t.Errorf("parsed %+v", r)
	}
	r, err = p.parseLine([]byte(`{"value":null,"headers":[{"key":"a","value":"b"}],"timestamp":1700000000000}`))
	if err != nil || r.Value != nil || r.Key != nil || r.Timestamp.UnixMilli() != 1700000000000 || len(r.Headers) != 1 {
		t.Errorf("tombstone: %+v, %v", r, err)
	}

	for _, tc := range []struct {
		p    producer
		line string
		key  string // "" : null key
		err  string
	}{
		{producer{}, `[1,2]`, "", "use --value-only"},
		{producer{}, `{"name":"x"}`, "", `unknown field "name"`},
		{producer{}, `{"key":"k"}`, "", `no "value"`},
		{producer{}, `{"value":1,"partition":-1}`, "", "partition -1"},
		{producer{}, `{"value":1,"timestamp":"yesterday"}`, "", "want unix milliseconds or an RFC 3339 time"},
		{producer{}, `{"value":1,"headers":5}`, "", "headers: want"},
		{producer{valueOnly: true}, `not json`, "", "not valid JSON"},
		{producer{valueOnly: true}, `{"id":"u1"}`, "", ""},
		{producer{valueOnly: true, keyField: "id", keyFormat: "string"}, `{"id":"u1","n":2}`, `"u1"`, ""},
		{producer{valueOnly: true, keyField: "id", keyFormat: "string"}, `{"id":42}`, `"42"`, ""},
		{producer{valueOnly: true, keyField: "id", keyFormat: "json"}, `{"id":42}`, `42`, ""},
		{producer{valueOnly: true, keyField: "id", keyFormat: "binary"}, `{"id":"ab"}`, `"YWI="`, ""},
		{producer{valueOnly: true, keyField: "id", keyFormat: "string"}, `{"other":1}`, "", ""},
		{producer{valueOnly: true, keyField: "id", keyFormat: "string"}, `"just a string"`, "", "not a JSON object"},
		{producer{keyField: "id", keyFormat: "string"}, `{"key":"explicit","value":{"id":"u1"}}`, `"explicit"`, ""},
		{producer{keyField: "id", keyFormat: "string"}, `{"value":{"id":"u1"}}`, `"u1"`, ""},
	} {
		r, err := tc.p.parseLine([]byte(tc.line))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v %s: err %v, want %q", tc.p, tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || string(r.Key) != tc.key {
			t.Errorf("%+v %s: key %s, err %v; want key %s", tc.p, tc.line, r.Key, err, tc.key)
		}
	}
}

// fakeServer answers the API v1 routes the CLI uses from an in-memory log, in the
// shapes the api package writes.
type fakeServer struct {
	mu       sync.Mutex
	topics   map[string]int32
	records  map[int32][]string // per partition: record JSON without offset
	requests []string
	bodies   []string
	failNext int // answer this many produces with 503 first
}

func newFakeServer(t *testing.T) (*fakeServer, string) {
	f := &fakeServer{topics: map[string]int32{}, records: map[int32][]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeServer) problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	if status == 503 {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"status": status, "code": code, "detail": detail, "title": http.StatusText(status)})
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
	f.bodies = append(f.bodies, string(body))
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/topics":
		var req struct {
			Name       string
			Partitions int32
		}
		json.Unmarshal(body, &req)
		if _, ok := f.topics[req.Name]; ok {
			f.problem(w, 409, "topic_exists", fmt.Sprintf("topic %q already exists", req.Name))
			return
		}
		f.topics[req.Name] = req.Partitions
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"name":%q,"id":1,"partitions":%d,"configs":{}}`, req.Name, req.Partitions)
	case r.Method == "GET" && r.URL.Path == "/v1/topics":
		fmt.Fprint(w, `{"topics":[`)
		first := true
		for _, name := range sortedKeys(f.topics) {
			if !first {
				fmt.Fprint(w, ",")
			}
			first = false
			fmt.Fprintf(w, `{"name":%q,"id":1,"partitions":%d,"configs":{}}`, name, f.topics[name])
		}
		fmt.Fprint(w, `]}`)
	case len(parts) >= 3 && parts[1] == "topics":
		n, ok := f.topics[parts[2]]
		if !ok {
			f.problem(w, 404, "topic_not_found", fmt.Sprintf("topic %q not found", parts[2]))
			return
		}
		switch {
		case len(parts) == 3 && r.Method == "GET":
			fmt.Fprintf(w, `{"name":%q,"id":1,"partitions":%d,"configs":{"retention.ms":"1000"}}`, parts[2], n)
		case len(parts) == 3 && r.Method == "PATCH":
			var req struct{ Partitions int32 }
			json.Unmarshal(body, &req)
			if req.Partitions > 0 {
				f.topics[parts[2]] = req.Partitions
			}
			fmt.Fprintf(w, `{"name":%q,"id":1,"partitions":%d,"configs":{}}`, parts[2], f.topics[parts[2]])
		case len(parts) == 3 && r.Method == "DELETE":
			delete(f.topics, parts[2])
			w.WriteHeader(204)
		case len(parts) == 4 && parts[3] == "records" && r.Method == "POST":
			if f.failNext > 0 {
				f.failNext--
				f.problem(w, 503, "commit_failed", "the catalog commit failed; nothing was written; retry")
				return
			}
			var req struct{ Records []json.RawMessage }
			json.Unmarshal(body, &req)
			fmt.Fprint(w, `{"offsets":[`)
			for i, rec := range req.Records {
				if i > 0 {
					fmt.Fprint(w, ",")
				}
				p := int32(0) // one partition is enough for the CLI
				f.records[p] = append(f.records[p], string(rec))
				fmt.Fprintf(w, `{"partition":%d,"offset":%d}`, p, len(f.records[p])-1)
			}
			fmt.Fprint(w, `]}`)
		case len(parts) == 4 && parts[3] == "partitions":
			fmt.Fprint(w, `{"partitions":[`)
			for p := range n {
				if p > 0 {
					fmt.Fprint(w, ",")
				}
				fmt.Fprintf(w, `{"partition":%d,"log_start_offset":0,"high_watermark":%d,"bytes":0}`, p, len(f.records[p]))
			}
			fmt.Fprint(w, `]}`)
		case len(parts) == 6 && parts[5] == "offsets":
			fmt.Fprint(w, `{"offset":1}`)
		case len(parts) == 6 && parts[5] == "records":
			var p int32
			fmt.Sscan(parts[4], &p)
			var off int
			fmt.Sscan(r.URL.Query().Get("offset"), &off)
			recs := f.records[p]
			end := min(off+2, len(recs)) // small pages, to exercise paging
			fmt.Fprint(w, `{"records":[`)
			for i := off; i < end; i++ {
				if i > off {
					fmt.Fprint(w, ",")
				}
				var m map[string]json.RawMessage
				json.Unmarshal([]byte(recs[i]), &m)
				m["offset"] = json.RawMessage(fmt.Sprint(i))
				m["timestamp"] = json.RawMessage("1700000000000")
				b, _ := json.Marshal(m)
				w.Write(b)
			}
			fmt.Fprintf(w, `],"next_offset":%d,"high_watermark":%d,"log_start_offset":0}`, max(end, off), len(recs))
		default:
			f.problem(w, 404, "not_found", "no route")
		}
	default:
		f.problem(w, 404, "not_found", "no route")
	}
}

func TestTopicsVerbs(t *testing.T) {
	f, url := newFakeServer(t)
	env := map[string]string{"STRATA_SERVER": url}
	steps := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=1000"}, 0, "created topic orders with 3 partitions", ""},
		{[]string{"topics", "create", "orders"}, 1, "", "strata topics create: Conflict: topic \"orders\" already exists\n"},
		{[]string{"topics", "list"}, 0, "orders  3", ""},
		{[]string{"topics", "describe", "orders"}, 0, "retention.ms  1000", ""},
		{[]string{"topics", "alter", "orders", "--partitions", "5", "--delete-config", "retention.ms"}, 0, "partitions  3 -> 5", ""},
		{[]string{"topics", "delete", "orders"}, 0, "deleted topic orders", ""},
		{[]string{"topics", "describe", "orders"}, 1, "", "strata topics describe: Not Found: topic \"orders\" not found\n"},
	}
	for _, s := range steps {
		code, stdout, stderr := runCLI(t, env, "", s.args...)
		if code != s.code || !strings.Contains(stdout, s.stdout) || !strings.Contains(stderr, s.stderr) {
			t.Errorf("strata %s: exit %d\nstdout %q\nstderr %q\nwant exit %d, %q, %q", strings.Join(s.args, " "), code, stdout, stderr, s.code, s.stdout, s.stderr)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got, want := f.bodies[0], `{"name":"orders","partitions":3,"configs":{"retention.ms":"1000"}}`; got != want {
		t.Errorf("create body %s, want %s", got, want)
	}
	if want := `{"partitions":5,"configs":{"retention.ms":null}}`; !strings.Contains(strings.Join(f.bodies, "\n"), want) {
		t.Errorf("no alter body %s among %q", want, f.bodies)
	}
}

func TestProduceAndConsume(t *testing.T) {
	f, url := newFakeServer(t)
	env := map[string]string{"STRATA_SERVER": url}
	if code, _, stderr := runCLI(t, env, "", "topics", "create", "t", "--partitions", "2"); code != 0 {
		t.Fatal(stderr)
	}
	f.mu.Lock()
	f.failNext = 1 // the first batch is retried
	f.mu.Unlock()
	var in strings.Builder
	for i := range 5 {
		fmt.Fprintf(&in, "{\"id\":\"u%d\",\"n\":%d}\n", i, i)
		if i == 2 {
			in.WriteString("\n") // blank lines are skipped
		}
	}
	code, _, stderr := runCLI(t, env, in.String(), "produce", "t", "--value-only", "--key-field", "id", "--batch", "2")
	if code != 0 || !strings.Contains(stderr, "produced 5 records to t") {
		t.Fatalf("produce: exit %d, %s", code, stderr)
	}
	f.mu.Lock()
	var posts []string
	for i, r := range f.requests {
		if strings.HasPrefix(r, "POST /v1/topics/t/records") {
			posts = append(posts, f.bodies[i])
		}
	}
	f.mu.Unlock()
	// 3 batches of at most 2, the first sent twice (503, then retried).
	if len(posts) != 4 || posts[0] != posts[1] {
		t.Fatalf("produce sent %d requests: %q", len(posts), posts)
	}
	if want := `{"records":[{"key":"u0","value":{"id":"u0","n":0}},{"key":"u1","value":{"id":"u1","n":1}}]}`; posts[1] != want {
		t.Errorf("first batch %s, want %s", posts[1], want)
	}

	code, stdout, stderr := runCLI(t, env, "", "consume", "t")
	if code != 0 {
		t.Fatalf("consume: exit %d, %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 5 {
		t.Fatalf("consume printed %d lines:\n%s", len(lines), stdout)
	}
	if want := `{"partition":0,"offset":4,"timestamp":1700000000000,"key":"u4","value":{"id":"u4","n":4}}`; lines[4] != want {
		t.Errorf("last line %s, want %s", lines[4], want)
	}
	for _, tc := range []struct {
		args  []string
		lines int
	}{
		{[]string{"consume", "t", "--max", "3"}, 3},
		{[]string{"consume", "t", "--from", "end"}, 0},
		{[]string{"consume", "t", "--from", "3"}, 2},
		{[]string{"consume", "t", "--partition", "1"}, 0},
		{[]string{"consume", "t", "--from", "2026-01-02T15:04:05Z"}, 4}, // the fake answers offset 1
	} {
		code, stdout, stderr := runCLI(t, env, "", tc.args...)
		n := len(strings.Fields(stdout))
		if code != 0 || n != tc.lines {
			t.Errorf("strata %s: exit %d, %d lines (%s)", strings.Join(tc.args, " "), code, n, stderr)
		}
	}
	code, _, stderr = runCLI(t, env, "", "consume", "t", "--partition", "9")
	if code != 1 || !strings.Contains(stderr, "topic t has partitions 0 to 1") {
		t.Errorf("consume --partition 9: exit %d, %s", code, stderr)
	}
	// Progress lines, every --progress when stderr is not a terminal.
	code, _, stderr = runCLI(t, env, strings.Repeat("{\"value\":1}\n", 3), "produce", "t", "--batch", "1", "--progress", "1ns")
	if code != 0 || strings.Count(stderr, "records/s") != 4 || !strings.Contains(stderr, "2 records, ") {
		t.Errorf("produce --progress 1ns: exit %d, stderr %q; want a line per batch and a summary", code, stderr)
	}
	code, _, stderr = runCLI(t, env, "{\"value\":1}\n[oops]\n", "produce", "t")
	if code != 1 || !strings.Contains(stderr, "line 2: not a record object") {
		t.Errorf("produce of a bad line: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCLI(t, env, "{\"value\":1}\n", "produce", "missing")
	if code != 1 || !strings.Contains(stderr, `strata produce: Not Found: topic "missing" not found`) {
		t.Errorf("produce to a missing topic: exit %d, %s", code, stderr)
	}
}

// consume --follow tails over SSE until --max records arrive.
func TestConsumeFollow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/partitions"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"partitions":[{"partition":0,"log_start_offset":0,"high_watermark":0},{"partition":1,"log_start_offset":0,"high_watermark":0}]}`)
		case r.Header.Get("Accept") == "text/event-stream":
			w.Header().Set("Content-Type", "text/event-stream")
			p := strings.Split(r.URL.Path, "/")[5]
			for i := range 2 {
				fmt.Fprintf(w, "id: %d\ndata: {\"offset\":%d,\"timestamp\":1,\"key\":null,\"value\":\"p%s\",\"headers\":[]}\n\n", i, i, p)
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
	code := run(ctx, e, []string{"consume", "t", "--follow", "--max", "4", "--server", srv.URL})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("printed %d lines:\n%s", len(lines), out.String())
	}
	seen := map[string]int{}
	for _, l := range lines {
		var r struct {
			Partition int32
			Value     string
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Value != fmt.Sprintf("p%d", r.Partition) {
			t.Errorf("line %s: %v", l, err)
		}
		seen[r.Value]++
	}
	if seen["p0"] != 2 || seen["p1"] != 2 {
		t.Errorf("per partition %v, want 2 each", seen)
	}
}

// FuzzParseLine feeds produce's line decoder arbitrary input: it must never panic, and
// what it accepts must be JSON the API can take.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"key":"k","value":{"a":1},"headers":{"h":"v"},"partition":2,"timestamp":"2026-01-02T15:04:05Z"}`), false, "")
	f.Add([]byte(`{"value":null,"headers":[{"key":"a","value":null}],"timestamp":1}`), false, "id")
	f.Add([]byte(`{"id":"u1","n":2}`), true, "id")
	f.Add([]byte(`"x"`), true, "")
	f.Fuzz(func(t *testing.T, line []byte, valueOnly bool, keyField string) {
		for _, format := range []string{"string", "json", "binary"} {
			p := &producer{valueOnly: valueOnly, keyField: keyField, keyFormat: format}
			r, err := p.parseLine(line)
			if err != nil {
				continue
			}
			for _, raw := range []json.RawMessage{r.Key, r.Value} {
				if raw != nil && !json.Valid(raw) {
					t.Fatalf("accepted %q with invalid JSON field %q", line, raw)
				}
			}
		}
	})
}
