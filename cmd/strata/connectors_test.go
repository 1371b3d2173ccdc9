package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConnectorsCLI drives the connector verbs against `strata dev` (which runs the
// connect role): a file source into a topic, a file sink out of it, then the life-cycle
// verbs, offsets and validation.
func TestConnectorsCLI(t *testing.T) {
	dir := t.TempDir()
	url := startDevInProcessAt(t, t.TempDir(), "--connect-file-dirs", dir)
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out")
	if err := os.WriteFile(in, []byte("{\"a\":1}\n{\"a\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := func(want int, stdin string, args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(t, nil, stdin, append(args, "--server", url)...)
		if code != want {
			t.Fatalf("strata %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, stdout, stderr)
		}
		return stdout + stderr
	}
	cli(0, "", "topics", "create", "lines")
	if got := cli(0, "", "connectors", "create", "src", "--config", "connector.class=FileSource", "--config", "file="+in, "--config", "topic=lines"); !strings.Contains(got, "connector src (source): 1 task(s)") {
		t.Fatalf("create: %s", got)
	}
	cli(0, `{"connector.class":"FileSink","directory":"`+out+`","topics":"lines","offset.flush.interval.ms":100}`, "connectors", "create", "sink", "--config-file", "-")
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(out, "lines-0-00000000000000000000.jsonl"))
		if string(b) == "{\"a\":1}\n{\"a\":2}\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink's file: %q", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := cli(0, "", "connectors", "list"); !strings.Contains(got, "src   source  RUNNING  1/1") || !strings.Contains(got, "sink  sink    RUNNING  1/1") {
		t.Fatalf("list:\n%s", got)
	}
	if got := cli(0, "", "connectors", "describe", "src"); !strings.Contains(got, "State:     RUNNING") || !strings.Contains(got, "topic=lines") {
		t.Fatalf("describe:\n%s", got)
	}
	cli(0, "", "connectors", "pause", "src")
	cli(0, "", "connectors", "resume", "src")
	if got := cli(1, "", "connectors", "offsets", "src", "--reset"); !strings.Contains(got, "400: Connectors must be in the STOPPED state") {
		t.Fatalf("reset while running: %s", got)
	}
	cli(0, "", "connectors", "stop", "src")
	if got := cli(0, "", "connectors", "offsets", "src"); !strings.Contains(got, `"offset":{"position":16}`) {
		t.Fatalf("offsets: %s", got)
	}
	patch := `{"offsets":[{"partition":{"filename":"` + in + `"},"offset":{"position":8}}]}`
	if got := cli(0, patch, "connectors", "offsets", "src", "--set", "-"); !strings.Contains(got, "altered successfully") {
		t.Fatalf("set offsets: %s", got)
	}
	if got := cli(0, "", "connectors", "offsets", "src", "--reset"); !strings.Contains(got, "reset successfully") {
		t.Fatalf("reset offsets: %s", got)
	}
	cli(0, "", "connectors", "restart", "src", "--include-tasks")
	if got := cli(1, "", "connectors", "validate", "--config", "connector.class=FileSource", "--config", "tasks.max=x"); !strings.Contains(got, "tasks.max: Invalid value x") ||
		!strings.Contains(got, "topic: Missing required configuration") {
		t.Fatalf("validate: %s", got)
	}
	if got := cli(0, "", "connectors", "plugins"); !strings.Contains(got, "io.strata.connect.file.FileSourceConnector") {
		t.Fatalf("plugins: %s", got)
	}
	cli(0, "", "connectors", "delete", "src")
	if got := cli(1, "", "connectors", "describe", "src"); !strings.Contains(got, "404: Connector src not found") {
		t.Fatalf("describe a deleted connector: %s", got)
	}
	cli(2, "", "connectors", "create")
	cli(2, "", "connectors")
}
