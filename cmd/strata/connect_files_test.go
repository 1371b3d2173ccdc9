package main

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectFileDirs: on a node with keys required, the file connectors read and
// write only under --connect-file-dirs, never in the node's own directories even when
// a listed directory holds them, and a refused sink creates nothing; without the flag
// they are refused, naming it.
func TestConnectFileDirs(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	allowed, outside := filepath.Join(root, "allowed"), filepath.Join(root, "outside")
	data, cache := filepath.Join(allowed, "strata-data"), filepath.Join(allowed, "cache")
	for _, d := range []string{allowed, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const key = "files-test-key-0123456789"
	url := startDevInProcessAt(t, data, "--api-keys", key, "--connect-file-dirs", allowed, "--cache-dir", cache)
	create := func(config string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", url+"/connectors", strings.NewReader(`{"name":"c","config":`+config+`}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ path, msg string }{
		{"/etc/passwd", "is outside the directories the file connectors may use (--connect-file-dirs " + allowed + ")"},
		{filepath.Join(data, "catalog.db"), "the dev data directory (--data): the file connectors may never use it, even when --connect-file-dirs lists it"},
		{filepath.Join(data, "objects", "x"), "may never use it"},
		{filepath.Join(cache, "x"), "the block cache's disk tier (--cache-dir)"},
		{filepath.Join(allowed, "..", "outside", "in.jsonl"), "is outside"},
	} {
		code, body := create(`{"connector.class":"FileSource","topic":"t","file":"` + tc.path + `"}`)
		if code != 400 || !strings.Contains(body, tc.msg) || !strings.Contains(body, tc.path) {
			t.Errorf("a source on %s: %d %s", tc.path, code, body)
		}
	}
	made := filepath.Join(outside, "made")
	if code, body := create(`{"connector.class":"FileSink","topics":"t","directory":"` + made + `"}`); code != 400 || !strings.Contains(body, "--connect-file-dirs") {
		t.Errorf("a sink outside: %d %s", code, body)
	}
	if _, err := os.Lstat(made); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused sink created %s (%v)", made, err)
	}
	if code, body := create(`{"connector.class":"FileSink","topics":"t","directory":"` + filepath.Join(allowed, "out") + `"}`); code != 201 {
		t.Errorf("a sink inside: %d %s", code, body)
	}

	// Off by default.
	off := startDevInProcess(t)
	req, _ := http.NewRequest("POST", off+"/connectors", strings.NewReader(`{"name":"c","config":{"connector.class":"FileSource","topic":"t","file":"`+filepath.Join(allowed, "in.jsonl")+`"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "the file connectors are off on this node") || !strings.Contains(string(b), "--connect-file-dirs DIR") {
		t.Errorf("without the flag: %d %s", resp.StatusCode, b)
	}

	// The flag, and its environment variable, take existing absolute directories.
	for _, vars := range []map[string]string{nil, {"STRATA_CONNECT_FILE_DIRS": "relative/dir"}} {
		args := []string{"dev", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--kafka-listen", ""}
		if vars == nil {
			args = append(args, "--connect-file-dirs", filepath.Join(root, "missing"))
		}
		if code, _, stderr := runCLI(t, vars, "", args...); code != 2 || !strings.Contains(stderr, "--connect-file-dirs") {
			t.Errorf("dev with a bad directory (%v): exit %d: %s", vars, code, stderr)
		}
	}
}
