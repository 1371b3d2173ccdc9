package connect_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/catalog"
	"github.com/strata-io/strata/connect"
	"github.com/strata-io/strata/internal/testkit/testwait"
)

// TestFileConnectorsConfinedREST: the REST API refuses file connectors outside the
// allowed directories with a 400 naming the path and the flag (create and config
// replacement; validate lists it on the key), a refused sink creates nothing, and a
// config stored without the check (by an older node) fails its task before anything is
// read or created.
func TestFileConnectorsConfinedREST(t *testing.T) {
	tn := startNode(t, connect.WorkerConfig{})
	tn.createTopic(t, "lines", 1)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.jsonl")
	writeLines(t, secret, `{"secret":1}`)
	if err := os.Symlink(secret, filepath.Join(tn.dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ path, msg string }{
		{"/etc/passwd", "is outside the directories the file connectors may use (--connect-file-dirs"},
		{filepath.Join(tn.data, "catalog.db"), "the test node's data directory: the file connectors may never use it, even when --connect-file-dirs lists it"},
		{filepath.Join(tn.dir, "link.jsonl"), "is outside"},
		{filepath.Join(tn.dir, "..", "node", "catalog.db"), "may never use it"},
		{"/proc/self/environ", "may never use it"},
	} {
		cfg := fmt.Sprintf(`{"connector.class":"FileSource","file":%s,"topic":"lines"}`, quote(tc.path))
		code, body := tn.do(t, "POST", "/connectors", `{"name":"src","config":`+cfg+`}`)
		if code != 400 || !strings.Contains(body, tc.msg) || !strings.Contains(body, tc.path) {
			t.Errorf("create a source on %s: %d %s", tc.path, code, body)
		}
		code, body = tn.do(t, "PUT", "/connectors/src/config", cfg)
		if code != 400 || !strings.Contains(body, tc.msg) {
			t.Errorf("put a source config on %s: %d %s", tc.path, code, body)
		}
		code, body = tn.do(t, "PUT", "/connector-plugins/FileSource/config/validate", cfg[:len(cfg)-1]+`,"name":"src"}`)
		if code != 200 || !strings.Contains(body, `"error_count":1`) || !strings.Contains(body, tc.msg) {
			t.Errorf("validate a source on %s: %d %s", tc.path, code, body)
		}
	}
	made := filepath.Join(outside, "made", "deeper")
	code, body := tn.do(t, "POST", "/connectors", fmt.Sprintf(`{"name":"sink","config":{"connector.class":"FileSink","directory":%s,"topics":"lines"}}`, quote(made)))
	if code != 400 || !strings.Contains(body, "--connect-file-dirs") || !strings.Contains(body, made) {
		t.Errorf("create a sink outside: %d %s", code, body)
	}
	if code, body := tn.do(t, "GET", "/connectors", ""); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("refused connectors were stored: %d %s", code, body)
	}

	// Stored without the check: the task fails, naming the path and the flag, and
	// neither reads nor creates anything.
	for _, spec := range []catalog.ConnectorSpec{
		{Name: "old-src", Type: catalog.ConnectorSource, Config: map[string]string{"connector.class": "FileSource", "file": secret, "topic": "lines"},
			Tasks: []map[string]string{{"task.files": secret}}},
		{Name: "old-sink", Type: catalog.ConnectorSink, Config: map[string]string{"connector.class": "FileSink", "directory": made, "topics": "lines"},
			Tasks: []map[string]string{{}}},
	} {
		if _, _, err := tn.cat.PutConnector(t.Context(), spec, false); err != nil {
			t.Fatal(err)
		}
		st := tn.waitState(t, spec.Name, "FAILED", 1)
		trace := st["tasks"].([]any)[0].(map[string]any)["trace"].(string)
		if !strings.Contains(trace, "is outside the directories the file connectors may use (--connect-file-dirs") {
			t.Errorf("%s: trace %q", spec.Name, trace)
		}
	}
	if got := values(tn.readAll(t, "lines", 0)); len(got) != 0 {
		t.Errorf("the source outside wrote %v", got)
	}
	if _, err := os.Lstat(filepath.Join(outside, "made")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sink outside created its directory (%v)", err)
	}

	// Inside: end to end, a source's lines into a sink's files.
	in, out := filepath.Join(tn.dir, "in.jsonl"), filepath.Join(tn.dir, "out", "lines")
	writeLines(t, in, `{"a":1}`, `{"a":2}`)
	tn.want(t, "POST", "/connectors", fmt.Sprintf(`{"name":"src","config":{"connector.class":"FileSource","file":%s,"topic":"lines"}}`, quote(in)), 201, "")
	tn.want(t, "POST", "/connectors", fmt.Sprintf(`{"name":"sink","config":{"connector.class":"FileSink","directory":%s,"topics":"lines","offset.flush.interval.ms":"100"}}`, quote(out)), 201, "")
	testwait.NoError(t, 20*time.Second, "the sink's file", func() error {
		b, _ := os.ReadFile(filepath.Join(out, "lines-0-00000000000000000000.jsonl"))
		if string(b) != "{\"a\":1}\n{\"a\":2}\n" {
			return fmt.Errorf("file %q", b)
		}
		return nil
	})
}
