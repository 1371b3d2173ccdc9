package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestQuotaVerbs: strata quotas set and list against a dev server: set, read back,
// remove; a bad key is the server's refusal (exit 1) and changes nothing; a missing
// entity is a usage error (exit 2).
func TestQuotaVerbs(t *testing.T) {
	dir := t.TempDir()
	p := startInProcess(t, nil, "dev", "--data", filepath.Join(dir, "dev"), "--listen", "127.0.0.1:0", "--kafka-listen", "")
	if p.url == "" {
		t.Fatalf("dev did not serve:\n%s", p.out)
	}
	vars := map[string]string{"STRATA_SERVER": p.url}
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, vars, "", args...)
		if code != want {
			t.Fatalf("strata %s: exit %d, want %d: %s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	cli(0, "quotas", "set", "--user", "User:alice", "--quota", "producer_byte_rate=1048576", "--quota", "topic_count=5")
	cli(0, "quotas", "set", "--user-default", "--client-id", "ingest", "--quota", "request_percentage=25")
	out := cli(0, "quotas", "list")
	for _, want := range []string{"User:alice", "producer_byte_rate=1048576 topic_count=5", "<default>", "ingest", "request_percentage=25"} {
		if !strings.Contains(out, want) {
			t.Errorf("quotas list lacks %q:\n%s", want, out)
		}
	}
	if out := cli(1, "quotas", "set", "--user", "User:alice", "--quota", "produce_rate=1"); !strings.Contains(out, "unknown quota key") {
		t.Errorf("a bad key: %s", out)
	}
	cli(2, "quotas", "set", "--quota", "producer_byte_rate=1")
	cli(0, "quotas", "set", "--user", "User:alice", "--remove", "topic_count")
	out = cli(0, "quotas", "list", "--user", "User:alice")
	if strings.Contains(out, "topic_count") || !strings.Contains(out, "producer_byte_rate=1048576") || strings.Contains(out, "ingest") {
		t.Errorf("quotas list --user User:alice after removing topic_count:\n%s", out)
	}
}
