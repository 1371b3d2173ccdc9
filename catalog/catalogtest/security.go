package catalogtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/catalog"
)

// runSecurity runs the conformance suite of catalog.Security, with the audit records
// the administrative methods of the other interfaces write. open returns a fresh
// catalog for each subtest (audit and ACLs are counted whole).
func runSecurity(t *testing.T, open func(t *testing.T) catalog.Backend) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c catalog.Backend)
	}{
		{"keys/lifecycle", testKeyLifecycle},
		{"keys/expiry", testKeyExpiry},
		{"acls/set", testACLSet},
		{"acls/delete_by_filter", testACLDelete},
		{"version/bumps_on_change_only", testSecurityVersion},
		{"watch/notified", testSecurityWatch},
		{"audit/one_per_action", testAuditOnePerAction},
		{"audit/none_for_failed_actions", testAuditNoneOnFailure},
		{"audit/none_without_record", testAuditNoneWithoutRecord},
		{"producers/owner", testProducerOwner},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func testKey(id, principal string) catalog.APIKey {
	return catalog.APIKey{ID: id, Principal: principal, Digest: sha256.Sum256([]byte("secret of " + id)), Description: "for " + id, CreatedBy: "User:admin"}
}

func testKeyLifecycle(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	before, err := c.Keys(ctx)
	if err != nil || len(before) != 0 {
		t.Fatalf("Keys of a fresh catalog = %v, %v", before, err)
	}
	k, err := c.CreateKey(ctx, testKey("key-a", "User:alice"))
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != "key-a" || k.Principal != "User:alice" || k.Digest != sha256.Sum256([]byte("secret of key-a")) ||
		k.Description != "for key-a" || k.CreatedBy != "User:admin" || k.CreatedAt.IsZero() || !k.ExpiresAt.IsZero() || !k.RevokedAt.IsZero() {
		t.Fatalf("created %+v", k)
	}
	if _, err := c.CreateKey(ctx, testKey("key-b", "User:bob")); err != nil {
		t.Fatal(err)
	}
	dupID := testKey("key-a", "User:carol")
	dupID.Digest = sha256.Sum256([]byte("other"))
	if _, err := c.CreateKey(ctx, dupID); !errors.Is(err, catalog.ErrKeyExists) {
		t.Errorf("a second key-a: %v, want ErrKeyExists", err)
	}
	dupDigest := testKey("key-c", "User:carol")
	dupDigest.Digest = k.Digest
	if _, err := c.CreateKey(ctx, dupDigest); !errors.Is(err, catalog.ErrKeyExists) {
		t.Errorf("a second key with key-a's digest: %v, want ErrKeyExists", err)
	}
	r, err := c.RevokeKey(ctx, "key-a")
	if err != nil || r.RevokedAt.IsZero() || r.Live(r.RevokedAt.Add(-time.Hour)) {
		t.Fatalf("RevokeKey = %+v, %v", r, err)
	}
	if _, err := c.RevokeKey(ctx, "key-a"); !errors.Is(err, catalog.ErrKeyNotFound) {
		t.Errorf("revoking twice: %v, want ErrKeyNotFound", err)
	}
	if _, err := c.RevokeKey(ctx, "key-zz"); !errors.Is(err, catalog.ErrKeyNotFound) {
		t.Errorf("revoking an unknown key: %v, want ErrKeyNotFound", err)
	}
	ks, err := c.Keys(ctx)
	if err != nil || len(ks) != 2 || ks[0].ID != "key-a" || ks[0].RevokedAt.IsZero() || ks[1].ID != "key-b" || !ks[1].RevokedAt.IsZero() {
		t.Fatalf("Keys = %+v, %v", ks, err)
	}
}

func testKeyExpiry(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	_, now, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := testKey("key-x", "User:x")
	k.ExpiresAt = now.Add(time.Hour).Truncate(time.Millisecond)
	got, err := c.CreateKey(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ExpiresAt.Equal(k.ExpiresAt) {
		t.Errorf("expiry stored as %v, want %v", got.ExpiresAt, k.ExpiresAt)
	}
	if !got.Live(now) || got.Live(k.ExpiresAt) {
		t.Errorf("Live before and at expiry: %v %v", got.Live(now), got.Live(k.ExpiresAt))
	}
}

func binding(principal string, t acl.ResourceType, name string, pat acl.PatternType, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{Principal: principal, Host: "*", Resource: t, Name: name, Pattern: pat, Operation: op, Permission: perm}
}

func wantACLs(t *testing.T, c catalog.Backend, want ...acl.Binding) {
	t.Helper()
	got, err := c.ACLs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ACLs = %v, want %v", got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Fatalf("ACLs = %v, want %v", got, want)
		}
	}
}

func testACLSet(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	a := binding("User:alice", acl.TypeTopic, "orders", acl.PatternLiteral, acl.OpRead, acl.PermissionAllow)
	b := binding("User:alice", acl.TypeTopic, "orders-", acl.PatternPrefixed, acl.OpWrite, acl.PermissionDeny)
	g := binding(acl.WildcardPrincipal, acl.TypeCluster, acl.ClusterName, acl.PatternLiteral, acl.OpDescribeConfigs, acl.PermissionAllow)
	for _, x := range []acl.Binding{a, b, g, a} { // a twice: a set
		if err := c.CreateACL(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	wantACLs(t, c, a, b, g)
	bad := a
	bad.Principal = "alice"
	if err := c.CreateACL(ctx, bad); !errors.Is(err, acl.ErrInvalid) {
		t.Errorf("an invalid binding: %v, want acl.ErrInvalid", err)
	}
	wantACLs(t, c, a, b, g)
}

func testACLDelete(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	a := binding("User:alice", acl.TypeTopic, "orders", acl.PatternLiteral, acl.OpRead, acl.PermissionAllow)
	b := binding("User:alice", acl.TypeTopic, "ord", acl.PatternPrefixed, acl.OpWrite, acl.PermissionAllow)
	d := binding("User:bob", acl.TypeGroup, "orders", acl.PatternLiteral, acl.OpRead, acl.PermissionAllow)
	for _, x := range []acl.Binding{a, b, d} {
		if err := c.CreateACL(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	name := "orders"
	f := acl.MatchAll()
	f.Resource, f.Name, f.Pattern = acl.TypeTopic, &name, acl.PatternMatch
	got, err := c.DeleteACLs(ctx, f)
	if err != nil || len(got) != 2 {
		t.Fatalf("DeleteACLs(match topic orders) = %v, %v; want the literal and the prefixed one", got, err)
	}
	wantACLs(t, c, d)
	got, err = c.DeleteACLs(ctx, f)
	if err != nil || len(got) != 0 {
		t.Fatalf("DeleteACLs again = %v, %v; want none", got, err)
	}
	if _, err := c.DeleteACLs(ctx, acl.Filter{}); !errors.Is(err, acl.ErrInvalid) {
		t.Errorf("an invalid filter: %v", err)
	}
	wantACLs(t, c, d)
}

func securityVersion(t *testing.T, c catalog.Backend) int64 {
	t.Helper()
	v, now, err := c.SecurityVersion(t.Context())
	if err != nil || now.IsZero() {
		t.Fatalf("SecurityVersion = %d, %v, %v", v, now, err)
	}
	return v
}

func testSecurityVersion(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	v0 := securityVersion(t, c)
	if _, err := c.CreateKey(ctx, testKey("key-v", "User:v")); err != nil {
		t.Fatal(err)
	}
	v1 := securityVersion(t, c)
	if v1 <= v0 {
		t.Fatalf("version %d after a key, was %d", v1, v0)
	}
	if _, err := c.CreateKey(ctx, testKey("key-v", "User:v")); !errors.Is(err, catalog.ErrKeyExists) {
		t.Fatal(err)
	}
	if _, err := c.RevokeKey(ctx, "no-such"); !errors.Is(err, catalog.ErrKeyNotFound) {
		t.Fatal(err)
	}
	if v := securityVersion(t, c); v != v1 {
		t.Fatalf("version %d after failed changes, was %d", v, v1)
	}
	if err := c.CreateACL(ctx, binding("User:v", acl.TypeTopic, "t", acl.PatternLiteral, acl.OpRead, acl.PermissionAllow)); err != nil {
		t.Fatal(err)
	}
	v2 := securityVersion(t, c)
	if v2 <= v1 {
		t.Fatalf("version %d after an ACL, was %d", v2, v1)
	}
	if _, err := c.RevokeKey(ctx, "key-v"); err != nil {
		t.Fatal(err)
	}
	if v := securityVersion(t, c); v <= v2 {
		t.Fatalf("version %d after a revocation, was %d", v, v2)
	}
}

func testSecurityWatch(t *testing.T, c catalog.Backend) {
	ctx, cancel := context.WithCancel(t.Context())
	notified := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- c.WatchSecurity(ctx, func() {
			select {
			case notified <- struct{}{}:
			default:
			}
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchSecurity = %v after its context ended", err)
		}
	}()
	// The watch may or may not call fn once as it starts; what counts is a call after
	// a change made once it surely listens. Changes are retried until one is seen.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		for len(notified) > 0 {
			<-notified
		}
		b := binding("User:w", acl.TypeTopic, Name(t, "w"), acl.PatternLiteral, acl.OpRead, acl.PermissionAllow)
		if err := c.CreateACL(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		select {
		case <-notified:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Fatal("no notification after ACL changes for 10s")
}

func audit(action, resType, res string) catalog.Audit {
	return catalog.Audit{Principal: "User:auditor", Action: action, ResourceType: resType, Resource: res, Details: map[string]any{"n": 1.0}}
}

func auditLog(t *testing.T, c catalog.Backend) []catalog.AuditRecord {
	t.Helper()
	rs, err := c.AuditLog(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// testAuditOnePerAction: every administrative method writes the record its context
// carries, once, with the database clock.
func testAuditOnePerAction(t *testing.T, c catalog.Backend) {
	bg := t.Context()
	name := Name(t, "audited")
	with := func(action, typ, res string) context.Context { return catalog.WithAudit(bg, audit(action, typ, res)) }
	steps := []struct {
		action string
		do     func(ctx context.Context) error
	}{
		{"topic.create", func(ctx context.Context) error { _, err := c.CreateTopic(ctx, name, 2, nil); return err }},
		{"topic.alter", func(ctx context.Context) error {
			_, err := c.UpdateTopic(ctx, name, 3, map[string]string{"retention.ms": "60000"})
			return err
		}},
		{"records.delete", func(ctx context.Context) error {
			tp, err := c.Topic(bg, name)
			if err == nil {
				_, err = c.DeleteRecords(ctx, tp.ID, 0, 0)
			}
			return err
		}},
		{"group.reset_offsets", func(ctx context.Context) error {
			return c.ResetOffsets(ctx, "g-"+name, []catalog.CommitOffset{{Topic: name, Partition: 0, Offset: 0}})
		}},
		{"group.delete", func(ctx context.Context) error { return c.DeleteGroup(ctx, "g-"+name) }},
		{"key.create", func(ctx context.Context) error { _, err := c.CreateKey(ctx, testKey("key-au", "User:au")); return err }},
		{"key.revoke", func(ctx context.Context) error { _, err := c.RevokeKey(ctx, "key-au"); return err }},
		{"acl.create", func(ctx context.Context) error {
			return c.CreateACL(ctx, binding("User:au", acl.TypeTopic, name, acl.PatternLiteral, acl.OpRead, acl.PermissionAllow))
		}},
		{"acl.delete", func(ctx context.Context) error { _, err := c.DeleteACLs(ctx, acl.MatchAll()); return err }},
		{"topic.delete", func(ctx context.Context) error { return c.DeleteTopic(ctx, name) }},
		{"connector.create", func(ctx context.Context) error {
			_, _, err := c.PutConnector(ctx, catalog.ConnectorSpec{Name: name, Type: catalog.ConnectorSource, Config: cfgOf("a", "1"),
				Tasks: []map[string]string{cfgOf("t", "0")}, Principal: "User:au"}, false)
			return err
		}},
		{"connector.config", func(ctx context.Context) error {
			_, _, err := c.PutConnector(ctx, catalog.ConnectorSpec{Name: name, Type: catalog.ConnectorSource, Config: cfgOf("a", "2"),
				Tasks: []map[string]string{cfgOf("t", "0")}, Principal: "User:other"}, true)
			return err
		}},
		{"connector.pause", func(ctx context.Context) error { return c.SetTargetState(ctx, name, catalog.StatePaused) }},
		{"connector.restart_tasks", func(ctx context.Context) error { _, err := c.RestartTasks(ctx, name, -1, false); return err }},
		{"connector.topics.reset", func(ctx context.Context) error { return c.ResetConnectorTopics(ctx, name) }},
		{"connector.stop", func(ctx context.Context) error { return c.SetTargetState(ctx, name, catalog.StateStopped) }},
		{"connector.offsets.alter", func(ctx context.Context) error {
			return c.AlterConnectorOffsets(ctx, name, []catalog.SourceOffset{{Partition: `{"f":1}`, Offset: `{"p":2}`}}, false)
		}},
		{"connector.offsets.reset", func(ctx context.Context) error { return c.AlterConnectorOffsets(ctx, name, nil, true) }},
		{"connector.delete", func(ctx context.Context) error { return c.DeleteConnector(ctx, name) }},
	}
	_, start, err := c.SecurityVersion(bg)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if err := s.do(with(s.action, "topic", name)); err != nil {
			t.Fatalf("%s: %v", s.action, err)
		}
		rs := auditLog(t, c)
		if len(rs) != i+1 {
			t.Fatalf("after %s: %d audit records, want %d", s.action, len(rs), i+1)
		}
		r := rs[i]
		if r.Action != s.action || r.Principal != "User:auditor" || r.ResourceType != "topic" || r.Resource != name ||
			r.Details["n"] != 1.0 || r.Time.Before(start.Add(-time.Second)) || (i > 0 && r.ID <= rs[i-1].ID) {
			t.Fatalf("after %s: record %+v", s.action, r)
		}
	}
	page, err := c.AuditLog(bg, auditLog(t, c)[4].ID, 2)
	if err != nil || len(page) != 2 || page[0].Action != "key.create" {
		t.Fatalf("AuditLog(after the 5th, 2) = %+v, %v", page, err)
	}
}

// testAuditNoneOnFailure: an action refused inside its transaction leaves no record
// (the record is the transaction's first write, so each of these rolls one back).
func testAuditNoneOnFailure(t *testing.T, c catalog.Backend) {
	bg := t.Context()
	tp := SeedTopic(t, c, "fail", 2, nil)
	ctx := catalog.WithAudit(bg, audit("failing", "topic", tp.Name))
	if _, err := c.CreateKey(bg, testKey("key-f", "User:f")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		what string
		err  error
		want error
	}{
		{"create an existing topic", func() error { _, err := c.CreateTopic(ctx, tp.Name, 1, nil); return err }(), catalog.ErrTopicExists},
		{"shrink a topic", func() error { _, err := c.UpdateTopic(ctx, tp.Name, 1, nil); return err }(), catalog.ErrInvalidPartitions},
		{"delete a missing topic", c.DeleteTopic(ctx, tp.Name+"-missing"), catalog.ErrTopicNotFound},
		{"delete records past the end", func() error { _, err := c.DeleteRecords(ctx, tp.ID, 0, 99); return err }(), catalog.ErrOffsetOutOfRange},
		{"reset to a missing topic", c.ResetOffsets(ctx, "g", []catalog.CommitOffset{{Topic: tp.Name + "-missing", Offset: 0}}), catalog.ErrTopicNotFound},
		{"delete a missing group", c.DeleteGroup(ctx, "no-such-group"), catalog.ErrGroupNotFound},
		{"create a key twice", func() error { _, err := c.CreateKey(ctx, testKey("key-f", "User:f")); return err }(), catalog.ErrKeyExists},
		{"revoke a missing key", func() error { _, err := c.RevokeKey(ctx, "key-none"); return err }(), catalog.ErrKeyNotFound},
		{"delete a missing connector", c.DeleteConnector(ctx, "no-such-connector"), catalog.ErrConnectorNotFound},
		{"pause a missing connector", c.SetTargetState(ctx, "no-such-connector", catalog.StatePaused), catalog.ErrConnectorNotFound},
		{"reset a missing connector's topics", c.ResetConnectorTopics(ctx, "no-such-connector"), catalog.ErrConnectorNotFound},
		{"create an existing connector", func() error {
			spec := catalog.ConnectorSpec{Name: "conn-f", Type: catalog.ConnectorSource, Config: cfgOf()}
			if _, _, err := c.PutConnector(bg, spec, false); err != nil {
				return err
			}
			_, _, err := c.PutConnector(ctx, spec, false)
			return err
		}(), catalog.ErrConnectorExists},
		{"edit a running connector's offsets", c.AlterConnectorOffsets(ctx, "conn-f", nil, true), catalog.ErrConnectorNotStopped},
	} {
		if !errors.Is(f.err, f.want) {
			t.Errorf("%s: %v, want %v", f.what, f.err, f.want)
		}
	}
	if rs := auditLog(t, c); len(rs) != 0 {
		t.Fatalf("failed actions left %d audit records: %+v", len(rs), rs)
	}
}

func testAuditNoneWithoutRecord(t *testing.T, c catalog.Backend) {
	tp := SeedTopic(t, c, "plain", 1, nil)
	if err := c.DeleteTopic(t.Context(), tp.Name); err != nil {
		t.Fatal(err)
	}
	if rs := auditLog(t, c); len(rs) != 0 {
		t.Fatalf("actions without a record to write left %+v", rs)
	}
}

// testProducerOwner: a producer id belongs to the principal that created it, for good
// (a KIP-360 bump, a transactional id initialised again by another, keep it); a
// transactional one also names its transactional id.
func testProducerOwner(t *testing.T, c catalog.Backend) {
	ctx := t.Context()
	owner := func(id int64) catalog.ProducerOwner {
		t.Helper()
		o, err := c.ProducerOwner(ctx, id)
		if err != nil {
			t.Fatalf("owner of %d: %v", id, err)
		}
		return o
	}
	tid := Name(t, "tx")
	tx, err := c.InitProducer(ctx, tid, nil, "User:alice")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.InitProducer(ctx, "", nil, "User:bob")
	if err != nil {
		t.Fatal(err)
	}
	anon, err := c.InitProducer(ctx, "", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := owner(tx.ID); got != (catalog.ProducerOwner{TransactionalID: tid, Principal: "User:alice"}) {
		t.Errorf("transactional producer: %+v", got)
	}
	if got := owner(plain.ID); got != (catalog.ProducerOwner{Principal: "User:bob"}) {
		t.Errorf("plain producer: %+v", got)
	}
	if got := owner(anon.ID); got != (catalog.ProducerOwner{}) {
		t.Errorf("anonymous producer: %+v, want owned by Anonymous", got)
	}
	// The transactional id initialised again by another principal: the same id, the
	// same creator.
	again, err := c.InitProducer(ctx, tid, nil, "User:carol")
	if err != nil || again.ID != tx.ID {
		t.Fatalf("re-init: %+v %v", again, err)
	}
	if got := owner(tx.ID); got != (catalog.ProducerOwner{TransactionalID: tid, Principal: "User:alice"}) {
		t.Errorf("transactional producer initialised again by another: %+v", got)
	}
	// KIP-360: the owner bumps its epoch and keeps the id and the ownership.
	bumped, err := c.InitProducer(ctx, "", &plain, "User:bob")
	if err != nil || bumped.ID != plain.ID || bumped.Epoch != plain.Epoch+1 {
		t.Fatalf("bump: %+v %v", bumped, err)
	}
	if got := owner(plain.ID); got != (catalog.ProducerOwner{Principal: "User:bob"}) {
		t.Errorf("plain producer after a bump: %+v", got)
	}
	// A stale identity gets a new id, the asker's.
	fresh, err := c.InitProducer(ctx, "", &plain, "User:dave")
	if err != nil || fresh.ID == plain.ID {
		t.Fatalf("from a stale identity: %+v %v", fresh, err)
	}
	if got := owner(fresh.ID); got != (catalog.ProducerOwner{Principal: "User:dave"}) {
		t.Errorf("a new id from a stale identity: %+v", got)
	}
	if _, err := c.ProducerOwner(ctx, fresh.ID+1000); !errors.Is(err, catalog.ErrUnknownProducer) {
		t.Errorf("unknown producer: %v, want ErrUnknownProducer", err)
	}
}
