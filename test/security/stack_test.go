// Package security_test proves authentication, authorization and audit end to end: a
// whole node (internal/node, the way strata serve starts it) with authentication on,
// its HTTP API and its Kafka listener, over SQLite and the filesystem store.
package security_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/api"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/internal/node"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/kafka"
	"github.com/strata-io/strata/reader"
	"github.com/strata-io/strata/writer"
)

const bootKey = "bootstrap-0123456789abcdef0123456789"

// stack is one node with authentication on: HTTP at url, Kafka at kafka.
type stack struct {
	t     *testing.T
	url   string
	kafka string
	node  *nodetest.Node
	cat   catalog.Backend
	logs  *nodetest.Logs
}

func startStack(t *testing.T) *stack { return startStackWith(t, 0) }

// startStackWith starts a stack whose access logs sample this share of requests; mutate
// adjusts the node's config (the connect role, for one).
func startStackWith(t *testing.T, accessSample float64, mutate ...func(*node.Config)) *stack {
	t.Helper()
	return startStackOpts(t, stackOpts{accessSample: accessSample, mutate: mutate})
}

// stackOpts are what tests change of a stack.
type stackOpts struct {
	accessSample float64
	// memory is the node's memory budget (0: none), shared with the Kafka listener;
	// the reader's cache then takes 16 MiB of it.
	memory int64
	// kafka, when set, changes the listener's configuration.
	kafka func(*kafka.Config)
	// mutate adjusts the node's config (the connect role, for one).
	mutate []func(*node.Config)
}

func startStackOpts(t *testing.T, o stackOpts) *stack {
	t.Helper()
	opts := []nodetest.Option{
		nodetest.CatalogOptions(catalog.Options{MaxTimestampAfterMs: -1}),
		nodetest.Keys(bootKey),
		nodetest.Kafka(func(c *kafka.Config) {
			c.AccessLogSample = o.accessSample
			if o.kafka != nil {
				o.kafka(c)
			}
		}),
		nodetest.Mutate(func(c *node.Config) {
			c.WriterConfig = writer.Config{Linger: 5 * time.Millisecond}
			c.ReaderConfig = reader.Config{PollInterval: 100 * time.Millisecond}
			c.API = api.Config{AccessLogSample: o.accessSample}
		}),
	}
	if o.memory > 0 {
		opts = append(opts, nodetest.Memory(o.memory))
	}
	n := nodetest.Start(t, append(opts, nodetest.Mutate(o.mutate...))...)
	return &stack{t: t, url: n.URL, kafka: n.KafkaAddr, node: n, cat: n.Catalog, logs: n.Logs}
}

// response is an HTTP answer, read whole.
type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not JSON: %v: %s", r.status, err, r.body)
	}
	return m
}

// do sends a request with key (none when ""); headers are name, value pairs.
func (s *stack) do(key, method, path, body string, headers ...string) response {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && req.Header.Get("Accept") == "text/event-stream" {
		return response{status: resp.StatusCode, header: resp.Header} // a stream: it does not end
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return response{status: resp.StatusCode, body: b, header: resp.Header}
}

// must sends a request as the bootstrap superuser and requires want.
func (s *stack) must(want int, method, path, body string) response {
	s.t.Helper()
	r := s.do(bootKey, method, path, body)
	if r.status != want {
		s.t.Fatalf("%s %s as bootstrap: %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r
}

// key makes a catalog key for principal and answers its id and secret.
func (s *stack) key(principal string) (id, secret string) {
	s.t.Helper()
	m := s.must(http.StatusCreated, "POST", "/v1/keys", fmt.Sprintf(`{"principal":%q}`, principal)).json(s.t)
	return m["id"].(string), m["secret"].(string)
}

// grant is one ACL binding, allowing unless deny.
type grant struct {
	op       acl.Operation
	typ      acl.ResourceType
	name     string
	prefixed bool
	deny     bool
	// refused, when set, is what a request refused for want of this grant names
	// (describe for a grant of read that implies it; the topic for create on the
	// cluster); otherwise the grant's operation on the case's resource.
	refused *refusal
}

// refusal is what a 403 names.
type refusal struct {
	op   acl.Operation
	typ  acl.ResourceType
	name string
}

func (g grant) String() string {
	p := "literal"
	if g.prefixed {
		p = "prefixed"
	}
	return fmt.Sprintf("%s %s %s %q", g.op, g.typ, p, g.name)
}

// allow stores g for principal through the API, and waits until the node's guard has
// it (the guard refreshes on the catalog's notification).
func (s *stack) allow(principal string, g grant) {
	s.t.Helper()
	pattern, perm, name := "literal", "allow", g.name
	if g.prefixed {
		pattern = "prefixed"
	}
	if g.deny {
		perm = "deny"
	}
	body := fmt.Sprintf(`{"principal":%q,"resource_type":%q,"resource_name":%q,"pattern_type":%q,"operation":%q,"permission":%q}`,
		principal, g.typ, name, pattern, g.op, perm)
	s.must(http.StatusCreated, "POST", "/v1/acls", body)
	s.sync()
}

// sync makes the guard reload keys and ACLs now (it would within its poll interval).
func (s *stack) sync() {
	s.t.Helper()
	if err := s.node.Guard.Refresh(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
}

// topic creates a topic as the bootstrap superuser, with n records in partition 0.
func (s *stack) topic(name string, partitions, records int) {
	s.t.Helper()
	s.must(http.StatusCreated, "POST", "/v1/topics", fmt.Sprintf(`{"name":%q,"partitions":%d}`, name, partitions))
	if records > 0 {
		var recs []string
		for i := range records {
			recs = append(recs, fmt.Sprintf(`{"value":%d,"partition":0}`, i))
		}
		s.must(http.StatusOK, "POST", "/v1/topics/"+name+"/records", `{"records":[`+strings.Join(recs, ",")+`]}`)
	}
}

// wantForbidden checks a 403 forbidden naming op on the resource.
func wantForbidden(t *testing.T, what string, r response, op acl.Operation, typ acl.ResourceType, name string) {
	t.Helper()
	if r.status != http.StatusForbidden {
		t.Fatalf("%s: %d %s, want 403 forbidden (%s %s %s)", what, r.status, r.body, op, typ, name)
	}
	m := r.json(t)
	if m["code"] != "forbidden" || m["operation"] != op.String() || m["resource_type"] != typ.String() || m["resource"] != name {
		t.Fatalf("%s: %s, want forbidden to %s %s %s", what, r.body, op, typ, name)
	}
}
