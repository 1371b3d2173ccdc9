package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What a person meets using the verbs against a real server (strata dev in process).

func TestConsumePastTheEnd(t *testing.T) {
	url := startDevInProcess(t)
	vars := map[string]string{"STRATA_SERVER": url}
	mustRun(t, vars, "", "topics", "create", "t")
	mustRun(t, vars, "{\"value\":1}\n{\"value\":2}\n{\"value\":3}\n", "produce", "t")

	// Beyond the end: the server's 416, in its words, and exit 1; nothing printed.
	code, stdout, stderr := runCLI(t, vars, "", "consume", "t", "--from", "999")
	want := `strata consume: Offset out of range: offset 999 is beyond the high watermark 3 of partition 0 of topic "t": use an offset from 0 to 3`
	if code != 1 || stdout != "" || !strings.Contains(stderr, want) {
		t.Errorf("consume --from 999: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, want)
	}
	// At the end exactly: nothing to read, which is not an error.
	if code, stdout, stderr := runCLI(t, vars, "", "consume", "t", "--from", "3"); code != 0 || stdout != "" {
		t.Errorf("consume --from 3: exit %d, %q %q", code, stdout, stderr)
	}

	// With --follow it says it waits, and prints from the offset asked for once it comes.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	errOut := &lockedBuffer{}
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: errOut, getenv: func(k string) string { return vars[k] }}
	done := make(chan int, 1)
	go func() { done <- run(ctx, e, []string{"consume", "t", "--from", "5", "--follow", "--max", "1"}) }()
	for !strings.Contains(errOut.String(), "waiting for offset 5") {
		select {
		case code := <-done:
			t.Fatalf("consume --follow ended with %d: %s", code, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if got := errOut.String(); !strings.Contains(got, "partition 0 of t ends at offset 3; waiting for offset 5") {
		t.Errorf("stderr %q", got)
	}
	mustRun(t, vars, "{\"value\":4}\n{\"value\":5}\n{\"value\":6}\n", "produce", "t")
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), `"offset":5,`) || strings.Count(out.String(), "\n") != 1 {
			t.Errorf("consume --follow from 5: exit %d, printed %q; want the record at offset 5 alone", code, out.String())
		}
	case <-ctx.Done():
		t.Fatal("consume --follow --max 1 did not end")
	}
}

func TestGroupsThatDoNotExist(t *testing.T) {
	url := startDevInProcess(t)
	env := map[string]string{"STRATA_SERVER": url}
	mustRun(t, env, "", "topics", "create", "t", "--partitions", "2")
	for _, args := range [][]string{{"groups", "describe", "nosuch"}, {"groups", "delete", "nosuch"}} {
		code, _, stderr := runCLI(t, env, "", args...)
		if code != 1 || !strings.Contains(stderr, `Group not found: group "nosuch" does not exist`) {
			t.Errorf("strata %s: exit %d, %q", strings.Join(args, " "), code, stderr)
		}
	}
	code, _, stderr := runCLI(t, env, "", "groups", "reset", "nosuch", "--topic", "t", "--to", "earliest")
	if code != 1 || !strings.Contains(stderr, `Group not found: group "nosuch" does not exist (--create makes it`) {
		t.Errorf("groups reset of a group that does not exist: exit %d, %q", code, stderr)
	}
	if code, _, _ := runCLI(t, env, "", "groups", "describe", "nosuch"); code != 1 {
		t.Error("the refused reset made the group")
	}
	stdout := mustRun(t, env, "", "groups", "reset", "nosuch", "--topic", "t", "--to", "latest", "--create")
	if !strings.Contains(stdout, "t      0          0") && !strings.Contains(stdout, "PARTITION") {
		t.Errorf("groups reset --create: %q", stdout)
	}
	// Now it exists, empty: described, not refused.
	if stdout := mustRun(t, env, "", "groups", "describe", "nosuch"); !strings.Contains(stdout, "State:     empty") {
		t.Errorf("groups describe of the new empty group: %q", stdout)
	}
	mustRun(t, env, "", "groups", "delete", "nosuch")
}

func TestTopicsAlterSaysWhatChanged(t *testing.T) {
	url := startDevInProcess(t)
	env := map[string]string{"STRATA_SERVER": url}
	mustRun(t, env, "", "topics", "create", "t", "--partitions", "2")
	for _, n := range []string{"2", "1"} {
		code, stdout, stderr := runCLI(t, env, "", "topics", "alter", "t", "--partitions", n)
		if code != 1 || stdout != "" || !strings.Contains(stderr, "topic t has 2 partitions, and partitions only grow: ask for more than 2") {
			t.Errorf("topics alter --partitions %s: exit %d, %q %q", n, code, stdout, stderr)
		}
	}
	stdout := mustRun(t, env, "", "topics", "alter", "t", "--partitions", "3", "--config", "retention.ms=1000")
	for _, want := range []string{"altered topic t:", "partitions    2 -> 3", "retention.ms  604800000 (default) -> 1000"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("alter: %q lacks %q", stdout, want)
		}
	}
	stdout = mustRun(t, env, "", "topics", "alter", "t", "--delete-config", "retention.ms")
	if !strings.Contains(stdout, "retention.ms  1000 -> 604800000 (default)") || strings.Contains(stdout, "partitions") {
		t.Errorf("alter --delete-config: %q", stdout)
	}
	// Setting the default explicitly is a change (it no longer follows the default);
	// setting it again is none.
	stdout = mustRun(t, env, "", "topics", "alter", "t", "--config", "cleanup.policy=delete")
	if !strings.Contains(stdout, "cleanup.policy  delete (default) -> delete") {
		t.Errorf("alter to the default value: %q", stdout)
	}
	stdout = mustRun(t, env, "", "topics", "alter", "t", "--config", "cleanup.policy=delete")
	if !strings.Contains(stdout, "topic t unchanged") {
		t.Errorf("alter to the value it has: %q", stdout)
	}
}

// snake is a JSON member name as the API writes them; map keys that are data (config
// names such as retention.ms) have dots.
var snake = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

func TestJSONOutputIsSnakeCase(t *testing.T) {
	dir := t.TempDir()
	url := startDevInProcessAt(t, dir)
	env := map[string]string{"STRATA_SERVER": url}
	mustRun(t, env, "", "topics", "create", "t", "--config", "retention.ms=1000")
	mustRun(t, env, `{"key":"k","value":{"a":1},"headers":{"h":"v"}}`+"\n", "produce", "t")
	mustRun(t, env, "", "groups", "reset", "g", "--topic", "t", "--to", "earliest", "--create")
	for _, args := range [][]string{
		{"topics", "list", "--json"},
		{"topics", "describe", "t", "--json"},
		{"groups", "list", "--json"},
		{"groups", "describe", "g", "--json"},
		{"consume", "t"},
		{"check", "--catalog", filepath.Join(dir, "catalog.db"), "--bucket", "file://" + filepath.Join(dir, "objects"), "--format", "json"},
	} {
		stdout := mustRun(t, env, "", args...)
		dec := json.NewDecoder(strings.NewReader(stdout))
		n := 0
		for dec.More() {
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("strata %s: %v in %q", strings.Join(args, " "), err, stdout)
			}
			n++
			for _, k := range jsonKeys(v, nil) {
				if !snake.MatchString(k) {
					t.Errorf("strata %s: member %q is not snake_case", strings.Join(args, " "), k)
				}
			}
		}
		if n == 0 {
			t.Errorf("strata %s printed no JSON", strings.Join(args, " "))
		}
	}
	// check's report names what the API would: problems is [] rather than null.
	stdout := mustRun(t, env, "", "check", "--catalog", filepath.Join(dir, "catalog.db"), "--bucket", "file://"+filepath.Join(dir, "objects"), "--format", "json")
	if !strings.Contains(stdout, `"problems": []`) || !strings.Contains(stdout, `"segments": `) {
		t.Errorf("check --format json: %s", stdout)
	}
}

func jsonKeys(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out = jsonKeys(x, append(out, k))
		}
	case []any:
		for _, x := range v {
			out = jsonKeys(x, out)
		}
	}
	return out
}

// mustRun runs a command line that must succeed and returns its stdout.
func mustRun(t *testing.T, vars map[string]string, stdin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, vars, stdin, args...)
	if code != 0 {
		t.Fatalf("strata %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}
