package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSecurityVerbs: strata keys and strata acls against a dev server with a bootstrap
// key: a key made for a principal is refused until an ACL allows it; acls list filters
// and deletes; the usage errors name what is missing.
func TestSecurityVerbs(t *testing.T) {
	dir := t.TempDir()
	p := startInProcess(t, nil, "dev", "--data", filepath.Join(dir, "dev"), "--listen", "127.0.0.1:0",
		"--kafka-listen", "", "--api-keys", bootstrapKey)
	if p.url == "" {
		t.Fatalf("dev did not serve:\n%s", p.out)
	}
	admin := map[string]string{"STRATA_SERVER": p.url, "STRATA_API_KEY": bootstrapKey}
	cli := func(vars map[string]string, want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runCLI(t, vars, "", args...)
		if code != want {
			t.Fatalf("strata %s: exit %d, want %d: %s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out, errOut
	}
	cli(admin, 0, "topics", "create", "orders")
	out, errOut := cli(admin, 0, "keys", "create", "--principal", "User:app", "--description", "the app")
	if !strings.Contains(errOut, "shown this once") {
		t.Errorf("keys create does not say the secret is shown once: %s", errOut)
	}
	secret := ""
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "secret:"); ok {
			secret = strings.TrimSpace(v)
		}
	}
	if len(secret) != 64 {
		t.Fatalf("keys create printed no 64-digit secret:\n%s", out)
	}
	app := map[string]string{"STRATA_SERVER": p.url, "STRATA_API_KEY": secret}
	if _, errOut := cli(app, 1, "topics", "describe", "orders"); !strings.Contains(errOut, "forbidden") {
		t.Errorf("without an ACL: %s", errOut)
	}
	cli(admin, 0, "acls", "create", "--principal", "User:app", "--operation", "read", "--topic", "orders")
	cli(admin, 0, "acls", "create", "--principal", "User:app", "--operation", "write", "--topic", "ord", "--prefixed")
	cli(admin, 0, "acls", "create", "--principal", "User:other", "--operation", "read", "--group", "g", "--deny")
	if out, _ := cli(app, 0, "topics", "describe", "orders"); !strings.Contains(out, "orders") {
		t.Errorf("with read: %s", out)
	}
	out, _ = cli(admin, 0, "acls", "list", "--topic", "orders", "--matching")
	if !strings.Contains(out, "read") || !strings.Contains(out, "prefixed") || strings.Contains(out, "User:other") {
		t.Errorf("acls list --topic orders --matching:\n%s", out)
	}
	out, _ = cli(admin, 0, "acls", "delete", "--principal", "User:app")
	if strings.Count(out, "User:app") != 2 {
		t.Errorf("acls delete --principal User:app:\n%s", out)
	}
	if out, _ := cli(admin, 0, "acls", "list", "--json"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "User:other") {
		t.Errorf("what is left:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"acls", "create", "--operation", "read", "--topic", "t"}, "--principal is required"},
		{[]string{"acls", "create", "--principal", "User:a", "--topic", "t"}, "--operation is required"},
		{[]string{"acls", "create", "--principal", "User:a", "--operation", "read"}, "name the resource"},
		{[]string{"acls", "create", "--principal", "User:a", "--operation", "read", "--topic", "t", "--group", "g"}, "name one resource"},
		{[]string{"acls", "delete"}, "--all"},
		{[]string{"keys", "create"}, "--principal is required"},
		{[]string{"keys", "revoke"}, "one key id expected"},
		{[]string{"keys"}, "create|list|revoke"},
	} {
		if _, errOut := cli(admin, 2, tc.args...); !strings.Contains(errOut, tc.want) {
			t.Errorf("strata %s: %s, want %q", strings.Join(tc.args, " "), errOut, tc.want)
		}
	}
	if _, errOut := cli(admin, 1, "acls", "create", "--principal", "alice", "--operation", "read", "--topic", "t"); !strings.Contains(errOut, "User:NAME") {
		t.Errorf("a principal without its type: %s", errOut)
	}
}
