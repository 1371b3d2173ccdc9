package security

import (
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/acl"
	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/catalog/sqlite"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

const bootKey = "bootstrap-key-0123456789abcdef"

func openCatalog(t *testing.T) *sqlite.Catalog {
	t.Helper()
	c, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func addKey(t *testing.T, c *sqlite.Catalog, id, principal, secret string, expires time.Time) {
	t.Helper()
	if _, err := c.CreateKey(t.Context(), catalog.APIKey{ID: id, Principal: principal, Digest: sha256.Sum256([]byte(secret)), ExpiresAt: expires}); err != nil {
		t.Fatal(err)
	}
}

func TestStaticKeys(t *testing.T) {
	g := New(Config{StaticKeys: []string{bootKey}}, nil)
	if !g.Enabled() {
		t.Fatal("a guard with static keys is not enabled")
	}
	id, err := g.Authenticate(t.Context(), bootKey)
	if err != nil || id.Principal != BootstrapPrincipal || id.KeyID != StaticKeyID(bootKey) {
		t.Fatalf("Authenticate(static) = %+v, %v", id, err)
	}
	if _, err := g.Authenticate(t.Context(), bootKey+"x"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a wrong key: %v", err)
	}
	id, err = g.AuthenticatePlain(t.Context(), StaticKeyID(bootKey), bootKey)
	if err != nil || id.Principal != BootstrapPrincipal {
		t.Fatalf("AuthenticatePlain(static) = %+v, %v", id, err)
	}
	if !g.Allowed(broker.Principal{Name: BootstrapPrincipal}, acl.OpAlter, acl.Cluster()) {
		t.Fatal("the bootstrap principal is not a superuser")
	}
	if g.Allowed(broker.Principal{Name: "User:other"}, acl.OpRead, acl.Topic("t")) {
		t.Fatal("a principal without ACLs was allowed")
	}
	if New(Config{}, nil).Enabled() || !New(Config{Required: true}, nil).Enabled() {
		t.Fatal("Enabled: keyless guard enabled, or Required not")
	}
}

func TestCatalogKeysAndACLs(t *testing.T) {
	ctx := t.Context()
	c := openCatalog(t)
	addKey(t, c, "key-alice", "User:alice", "alice-secret-0123456789", time.Time{})
	addKey(t, c, "key-bob", "User:bob", "bob-secret-0123456789", time.Time{})
	if err := c.CreateACL(ctx, acl.Binding{Principal: "User:alice", Host: "*", Resource: acl.TypeTopic, Name: "orders", Pattern: acl.PatternLiteral, Operation: acl.OpRead, Permission: acl.PermissionAllow}); err != nil {
		t.Fatal(err)
	}
	g := New(Config{Required: true, Superusers: []string{"User:ops"}}, c)
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := g.Authenticate(ctx, "alice-secret-0123456789")
	if err != nil || id.Principal != "User:alice" || id.KeyID != "key-alice" {
		t.Fatalf("Authenticate = %+v, %v", id, err)
	}
	alice := broker.Principal{Name: "User:alice", Host: "10.0.0.1"}
	if !g.Allowed(alice, acl.OpRead, acl.Topic("orders")) || !g.Allowed(alice, acl.OpDescribe, acl.Topic("orders")) {
		t.Fatal("alice may not read orders")
	}
	if g.Allowed(alice, acl.OpWrite, acl.Topic("orders")) || g.Allowed(broker.Principal{Name: "User:bob"}, acl.OpRead, acl.Topic("orders")) {
		t.Fatal("an operation or principal without an ACL was allowed")
	}
	if !g.Allowed(broker.Principal{Name: "User:ops"}, acl.OpDelete, acl.Topic("anything")) {
		t.Fatal("a configured superuser was refused")
	}

	// SASL/PLAIN: the username must be the key's own id.
	if id, err := g.AuthenticatePlain(ctx, "key-alice", "alice-secret-0123456789"); err != nil || id.Principal != "User:alice" {
		t.Fatalf("AuthenticatePlain = %+v, %v", id, err)
	}
	_, err = g.AuthenticatePlain(ctx, "key-bob", "alice-secret-0123456789")
	if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "not the id of the key") {
		t.Fatalf("alice's secret under bob's id: %v", err)
	}
	if _, err := g.AuthenticatePlain(ctx, "key-alice", "wrong"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a wrong secret: %v", err)
	}

	// Revocation: refused once refreshed, tracked connections cut, new tracking refused.
	var cut atomic.Int32
	release, ok := g.Track("key-alice", func() { cut.Add(1) })
	if !ok {
		t.Fatal("Track of a live key refused")
	}
	defer release()
	if _, err := c.RevokeKey(ctx, "key-alice"); err != nil {
		t.Fatal(err)
	}
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if cut.Load() != 1 {
		t.Fatalf("cut %d times after revocation, want 1", cut.Load())
	}
	if _, err := g.Authenticate(ctx, "alice-secret-0123456789"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a revoked key: %v", err)
	}
	if _, ok := g.Track("key-alice", func() {}); ok {
		t.Fatal("Track of a revoked key accepted")
	}
	if _, err := g.Authenticate(ctx, "bob-secret-0123456789"); err != nil {
		t.Fatalf("another key after the revocation: %v", err)
	}
}

// TestRunCutsWithinPollInterval: a running guard sees a revocation through the
// catalog's notification, and an expiry through its poll, and cuts the key's tracked
// connections within a second.
func TestRunCutsWithinPollInterval(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	c := openCatalog(t)
	_, now, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addKey(t, c, "key-r", "User:r", "revoked-secret-0123456789", time.Time{})
	addKey(t, c, "key-e", "User:e", "expiring-secret-0123456789", now.Add(1500*time.Millisecond))
	g := New(Config{Required: true}, c)
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	cuts := make(chan string, 2)
	for _, id := range []string{"key-r", "key-e"} {
		release, ok := g.Track(id, func() { cuts <- id })
		if !ok {
			t.Fatalf("Track(%s) refused", id)
		}
		defer release()
	}
	revoked := time.Now()
	if _, err := c.RevokeKey(ctx, "key-r"); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-cuts:
		if id != "key-r" {
			t.Fatalf("cut %s, want key-r", id)
		}
		if d := time.Since(revoked); d > time.Second {
			t.Fatalf("revocation cut after %v", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("revoked key not cut within 2s")
	}
	expiry := now.Add(1500 * time.Millisecond)
	select {
	case id := <-cuts:
		if id != "key-e" {
			t.Fatalf("cut %s, want key-e", id)
		}
		if late := time.Until(expiry); late > 100*time.Millisecond {
			t.Fatalf("expiring key cut %v before its expiry", late)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("expired key not cut")
	}
	if _, err := g.Authenticate(ctx, "expiring-secret-0123456789"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("an expired key: %v", err)
	}
}

// TestLazyRefresh: without Run (Lambda), a stale view is refreshed when used.
func TestLazyRefresh(t *testing.T) {
	ctx := t.Context()
	c := openCatalog(t)
	g := New(Config{Required: true, PollInterval: 10 * time.Millisecond}, c)
	addKey(t, c, "key-l", "User:l", "lazy-secret-0123456789", time.Time{})
	time.Sleep(20 * time.Millisecond) // the view grows older than its poll interval: stale
	if id, err := g.Authenticate(ctx, "lazy-secret-0123456789"); err != nil || id.KeyID != "key-l" {
		t.Fatalf("a key created before first use: %+v, %v", id, err)
	}
}

func TestCertRules(t *testing.T) {
	for _, tc := range []struct {
		rules, dn, want string
		err             bool
	}{
		{"", "CN=alice,OU=eng,O=Acme", "User:CN=alice,OU=eng,O=Acme", false},
		{"DEFAULT", "CN=alice", "User:CN=alice", false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, "CN=svc-a,OU=ServiceUsers,O=Acme", "User:svc-a", false},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, "CN=bob,OU=People,O=Acme", "User:CN=bob,OU=People,O=Acme", false},
		{`RULE:^CN=(.*?),.*$/$1/L`, "CN=ALICE,O=Acme", "User:alice", false},
		{`RULE:^CN=(.*?),.*$/$1/U`, "CN=alice,O=Acme", "User:ALICE", false},
		{`RULE:^CN=([a-z]+)$/$1/`, "CN=Bob1,O=x", "", true},
		{`RULE:^O=(.*)$/a\/b/`, "O=x", "User:a/b", false},
	} {
		cr, err := ParseCertRules(tc.rules)
		if err != nil {
			t.Fatalf("ParseCertRules(%q): %v", tc.rules, err)
		}
		got, err := cr.Principal(tc.dn)
		if tc.err {
			if !errors.Is(err, ErrAuthFailed) {
				t.Errorf("%q on %q = %q, %v; want a refusal", tc.rules, tc.dn, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q on %q = %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
	for _, bad := range []string{"RULE:abc", "RULE:a/b", "FOO", "DEFAULT DEFAULT", "RULE:(/x/"} {
		if _, err := ParseCertRules(bad); err == nil {
			t.Errorf("ParseCertRules(%q) accepted", bad)
		}
	}
}

// deaf is a catalog whose notifications never come.
type deaf struct{ *sqlite.Catalog }

func (deaf) WatchSecurity(ctx context.Context, fn func()) error {
	<-ctx.Done()
	return nil
}

// TestPollingFallback: with notifications lost, a revocation is still seen and its
// connections cut within the poll interval.
func TestPollingFallback(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	c := openCatalog(t)
	addKey(t, c, "key-p", "User:p", "polled-secret-0123456789", time.Time{})
	g := New(Config{Required: true}, deaf{c})
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	cut := make(chan time.Time, 1)
	release, ok := g.Track("key-p", func() { cut <- time.Now() })
	if !ok {
		t.Fatal("Track refused")
	}
	defer release()
	revoked := time.Now()
	if _, err := c.RevokeKey(ctx, "key-p"); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-cut:
		if d := at.Sub(revoked); d > time.Second {
			t.Fatalf("cut %v after the revocation", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("not cut without notifications")
	}
}

// TestNewKeyWorksAtOnce: a key made a moment ago (here, with neither notification nor
// poll to tell the guard) authenticates at its first use: an unknown key makes the
// guard look at the catalog again.
func TestNewKeyWorksAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	c := openCatalog(t)
	g := New(Config{Required: true, PollInterval: time.Hour}, deaf{c})
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// A miss looks again at most once per missInterval; each key below is made just
	// after another miss looked, and still works at its first use (its miss waits for
	// the next look instead of answering from a view older than the key).
	if _, err := g.Authenticate(ctx, "wrong-secret-0123456789"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a wrong key: %v", err)
	}
	addKey(t, c, "key-n", "User:n", "new-secret-0123456789", time.Time{})
	if id, err := g.Authenticate(ctx, "new-secret-0123456789"); err != nil || id.KeyID != "key-n" {
		t.Fatalf("a new key's first use: %+v, %v", id, err)
	}
	addKey(t, c, "key-m", "User:m", "newer-secret-0123456789", time.Time{})
	if id, err := g.AuthenticatePlain(ctx, "key-m", "newer-secret-0123456789"); err != nil || id.KeyID != "key-m" {
		t.Fatalf("a new key's first SASL use: %+v, %v", id, err)
	}
}

// FuzzCertRules: any rule list either parses or is refused, and a parsed one maps any
// subject without panicking, to a User: principal or a refusal.
func FuzzCertRules(f *testing.F) {
	for _, s := range []string{"", "DEFAULT", `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, `RULE:^O=(.*)$/a\/b/U`, "RULE:(/x/", "RULE:a/b"} {
		f.Add(s, "CN=alice,OU=ServiceUsers,O=Acme")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		cr, err := ParseCertRules(rules)
		if err != nil {
			return
		}
		if p, err := cr.Principal(dn); err == nil && !strings.HasPrefix(p, "User:") {
			t.Fatalf("principal %q", p)
		}
	})
}

// TestGuardFeedsSecurityChanges: the guard answers the security version it holds and
// calls its watchers when a refresh finds a new one (the quota enforcer's feed), and
// not when nothing changed.
func TestGuardFeedsSecurityChanges(t *testing.T) {
	ctx := t.Context()
	c := openCatalog(t)
	g := New(Config{Required: true}, c)
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	calls := make(chan struct{}, 10)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.WatchSecurity(wctx, func() { calls <- struct{}{} }) }()
	watchers := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.watchers)
	}
	testwait.Until(t, 5*time.Second, "WatchSecurity registers its watcher", func() bool { return watchers() == 1 })
	addKey(t, c, "key-w", "User:w", "watched-secret-0123456789", time.Time{})
	want, _, err := c.SecurityVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 {
		t.Fatalf("the watcher was called %d times by a refresh that found a new version, want once", len(calls))
	}
	got, _, _ := g.SecurityVersion(ctx)
	if got != want {
		t.Fatalf("guard's version %d, want the catalog's %d", got, want)
	}
	for len(calls) > 0 {
		<-calls
	}
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 {
		t.Fatal("the watcher was called by a refresh that found the same version")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if left := watchers(); left != 0 {
		t.Fatalf("%d watchers left after their context ended", left)
	}
}
