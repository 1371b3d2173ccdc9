package tables_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/node/nodetest"
	"github.com/strata-io/strata/internal/testkit/testwait"
	"github.com/strata-io/strata/security"
)

const bootKey = "tables-test-boot-key-0123456789abcdef"

// TestLoadNeedsRead: loading a table through the REST catalog is reading its topic: a
// principal without Read on the topic cannot load it (403, ForbiddenException) nor
// see it listed, whether or not it exists; given Read, it can.
func TestLoadNeedsRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	loc := "file://" + filepath.Join(dir, "objects")
	n := nodetest.Start(t, nodetest.InDir(dir), nodetest.Keys(bootKey), tablesRole(loc))
	boot := broker.Principal{Name: security.BootstrapPrincipal}
	if _, err := n.Broker.CreateTopic(ctx, boot, broker.CreateTopicRequest{Name: "secret", Partitions: 1,
		Configs: map[string]string{"iceberg.enabled": "true", "iceberg.commit.interval.ms": "100"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Broker.Produce(ctx, boot, broker.ProduceRequest{Records: []broker.Record{{Topic: "secret", Partition: 0, Value: []byte(`1`), Timestamp: -1}}}); err != nil {
		t.Fatal(err)
	}
	alice, err := n.Broker.CreateKey(ctx, boot, broker.CreateKeyRequest{Principal: "User:alice"})
	if err != nil {
		t.Fatal(err)
	}
	as := func(key string) *rest.Catalog {
		return restCatalog(t, n, nil, rest.WithHeaders(map[string]string{"Authorization": "Bearer " + key}))
	}
	waitRows(t, as(bootKey), "secret", 1)

	get := func(key, path string) (int, string) {
		req, _ := http.NewRequest("GET", n.URL+"/iceberg/v1/namespaces/strata/tables"+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.String()
	}
	testwait.Until(t, 10*time.Second, "alice's key to be known", func() bool {
		code, _ := get(alice.Secret, "")
		return code == http.StatusOK
	})
	for _, name := range []string{"/secret", "/missing"} {
		code, body := get(alice.Secret, name)
		if code != http.StatusForbidden || !strings.Contains(body, "ForbiddenException") {
			t.Fatalf("alice loads %s: %d %s, want 403 ForbiddenException", name, code, body)
		}
	}
	if code, _ := get("wrong-key", "/secret"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d, want 401", code)
	}
	if _, err := as(alice.Secret).LoadTable(ctx, table.Identifier{"strata", "secret"}); err == nil {
		t.Fatal("iceberg-go loaded the table as alice, who may not read the topic")
	}
	_, body := get(alice.Secret, "")
	var list struct{ Identifiers []json.RawMessage }
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Identifiers) != 0 {
		t.Fatalf("alice's list: %s, want no tables", body)
	}

	if err := n.Broker.CreateACL(ctx, boot, acl.Binding{Principal: "User:alice", Host: "*", Resource: acl.TypeTopic, Name: "secret",
		Pattern: acl.PatternLiteral, Operation: acl.OpRead, Permission: acl.PermissionAllow}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "alice to load the table once she may read the topic", func() bool {
		_, err := as(alice.Secret).LoadTable(ctx, table.Identifier{"strata", "secret"})
		return err == nil
	})
}

// TestBadConfig: a bad iceberg.enabled (or commit interval) is refused with the stable
// code invalid_config, naming the config, and creates nothing.
func TestBadConfig(t *testing.T) {
	c := embedded(t)
	n := c.nodes[0]
	for _, cfg := range []string{`{"iceberg.enabled":"yes"}`, `{"iceberg.enabled":"1"}`, `{"iceberg.commit.interval.ms":"-5"}`} {
		resp, err := http.Post(n.URL+"/v1/topics", "application/json", strings.NewReader(`{"name":"bad","partitions":1,"configs":`+cfg+`}`))
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Code    string
			Details map[string]any
		}
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || p.Code != "invalid_config" {
			t.Fatalf("create with %s: %d %+v, want 400 invalid_config", cfg, resp.StatusCode, p)
		}
	}
	if _, err := n.Catalog.Topic(context.Background(), "bad"); err == nil {
		t.Fatal("a refused topic was created")
	}
	// Altering an existing topic the same way is refused too.
	createTableTopic(t, n.Broker, "good")
	req, _ := http.NewRequest("PATCH", n.URL+"/v1/topics/good", strings.NewReader(`{"configs":{"iceberg.enabled":"maybe"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || p.Code != "invalid_config" {
		t.Fatalf("alter to iceberg.enabled=maybe: %d %+v, want 400 invalid_config", resp.StatusCode, p)
	}
}
