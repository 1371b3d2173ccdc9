package connect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fileTree is a layout the confinement tests judge paths in: an allowed directory
// holding the node's data directory, links out of it, and a directory outside.
type fileTree struct {
	allowed, outside, data, secret string
	dirs                           FileDirs
}

func newFileTree(t *testing.T) fileTree {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ft := fileTree{allowed: filepath.Join(root, "allowed"), outside: filepath.Join(root, "outside")}
	ft.data = filepath.Join(ft.allowed, "strata-data")
	ft.secret = filepath.Join(ft.outside, "secret.jsonl")
	for _, d := range []string{ft.allowed, ft.outside, ft.data, filepath.Join(ft.allowed, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{ft.secret, filepath.Join(ft.data, "catalog.db"), filepath.Join(ft.allowed, "in.jsonl")} {
		if err := os.WriteFile(f, []byte("{\"secret\":1}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"file-link":  ft.secret,                             // a file outside
		"dir-link":   ft.outside,                            // a directory outside
		"rel-link":   "../outside/secret.jsonl",             // relative, outside
		"dangling":   filepath.Join(ft.outside, "later"),    // nothing there yet
		"data-link":  ft.data,                               // the node's own data
		"inner-link": filepath.Join(ft.allowed, "in.jsonl"), // inside: fine
		"loop":       filepath.Join(ft.allowed, "loop"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ft.allowed, name)); err != nil {
			t.Fatal(err)
		}
	}
	ft.dirs, err = NewFileDirs([]string{ft.allowed}, []OwnDir{{Path: ft.data, What: "the dev data directory (--data)"}})
	if err != nil {
		t.Fatal(err)
	}
	return ft
}

// TestFileDirsCheck: paths are judged where they really lead — links, "..", missing
// ends — and the node's own directories and the kernel's are never allowed.
func TestFileDirsCheck(t *testing.T) {
	ft := newFileTree(t)
	a := func(rel string) string { return ft.allowed + "/" + rel }
	for _, tc := range []struct {
		path string
		want string // the resolved path when allowed, else a fragment of the refusal
		ok   bool
	}{
		{a("in.jsonl"), a("in.jsonl"), true},
		{a("missing.jsonl"), a("missing.jsonl"), true},
		{a("sub/../in.jsonl"), a("in.jsonl"), true},
		{a("new/dir/out"), a("new/dir/out"), true},
		{a("inner-link"), a("in.jsonl"), true},
		{ft.allowed, ft.allowed, true},
		{"/etc/passwd", "is outside the directories the file connectors may use (--connect-file-dirs " + ft.allowed + ")", false},
		{ft.secret, "is outside", false},
		{a("../outside/secret.jsonl"), "is outside", false},
		{a("missing/../../outside/secret.jsonl"), "is outside", false},
		{a("file-link"), "is outside", false},
		{a("rel-link"), "is outside", false},
		{a("dir-link/secret.jsonl"), "is outside", false},
		{a("dir-link/new/dir"), "is outside", false},
		{a("dangling"), "is outside", false},
		{a("loop"), "too many levels of symbolic links", false},
		{ft.data, "the dev data directory (--data): the file connectors may never use it, even when --connect-file-dirs lists it", false},
		{filepath.Join(ft.data, "catalog.db"), "may never use it", false},
		{a("data-link/catalog.db"), "may never use it", false},
		{a("sub/../strata-data/objects"), "may never use it", false},
		{"relative/in.jsonl", "give an absolute path", false},
	} {
		got, err := ft.dirs.Check(tc.path)
		switch {
		case tc.ok && (err != nil || got != tc.want):
			t.Errorf("%s: %q %v, want %s", tc.path, got, err, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path)):
			t.Errorf("%s: %q %v, want a refusal naming it: %s", tc.path, got, err, tc.want)
		}
		var refused *FileRefusedError
		if !tc.ok && !errors.As(err, &refused) {
			t.Errorf("%s: %T is not a *FileRefusedError", tc.path, err)
		}
	}

	// The kernel's directories, even under an allowed root.
	all, err := NewFileDirs([]string{"/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/proc/self/environ", "/proc/1/mem", "/dev/null", "/sys/kernel"} {
		if _, err := all.Check(p); err == nil || !strings.Contains(err.Error(), "may never use it") {
			t.Errorf("%s under /: %v", p, err)
		}
	}
	// Off by default, naming the flag.
	if _, err := (FileDirs{}).Check(a("in.jsonl")); err == nil || !strings.Contains(err.Error(), "file connectors are off on this node") ||
		!strings.Contains(err.Error(), "--connect-file-dirs") {
		t.Errorf("no directories: %v", err)
	}
	// The operator's list: absolute, existing directories.
	for _, bad := range []string{"relative", filepath.Join(ft.allowed, "missing"), filepath.Join(ft.allowed, "in.jsonl")} {
		if _, err := NewFileDirs([]string{bad}, nil); err == nil || !strings.Contains(err.Error(), "--connect-file-dirs") {
			t.Errorf("NewFileDirs(%s): %v", bad, err)
		}
	}
	if d, err := NewFileDirs([]string{" ", ""}, nil); err != nil || d.Enabled() {
		t.Errorf("an empty list: %v %v", d, err)
	}
}

// TestFileConnectorsConfined: the connectors refuse at validation and again in the task
// — before anything is opened or created — and a link changed after the task started
// is caught at the open.
func TestFileConnectorsConfined(t *testing.T) {
	ft := newFileTree(t)
	src, sink := FileSourceConnector{Dirs: ft.dirs}, FileSinkConnector{Dirs: ft.dirs}

	for _, f := range []string{"/etc/passwd", filepath.Join(ft.data, "catalog.db"), filepath.Join(ft.allowed, "file-link")} {
		errs := src.ValidateConfig(map[string]string{"file": f})
		if !strings.Contains(errs["files"], f) || !strings.Contains(errs["files"], "--connect-file-dirs") {
			t.Errorf("validate a source on %s: %v", f, errs)
		}
		task := src.NewTask()
		if err := task.Start(t.Context(), map[string]string{"task.files": f, "topic": "t"}, fakeSourceContext{}); err == nil {
			t.Errorf("a source task started on %s", f)
		}
	}
	if errs := src.ValidateConfig(map[string]string{"file": filepath.Join(ft.allowed, "in.jsonl")}); len(errs) != 0 {
		t.Errorf("validate a source inside: %v", errs)
	}

	// A sink refused creates nothing, wherever it was pointed.
	for _, d := range []string{filepath.Join(ft.outside, "made"), filepath.Join(ft.allowed, "dir-link", "made"), filepath.Join(ft.allowed, "dangling"),
		filepath.Join(ft.data, "made"), filepath.Join(ft.allowed, "..", "outside", "made")} {
		errs := sink.ValidateConfig(map[string]string{"directory": d})
		if !strings.Contains(errs["directory"], d) || !strings.Contains(errs["directory"], "--connect-file-dirs") {
			t.Errorf("validate a sink into %s: %v", d, errs)
		}
		task := sink.NewTask()
		if err := task.Start(t.Context(), map[string]string{"directory": d}, fakeSinkContext{}); err == nil {
			t.Errorf("a sink task started in %s", d)
		}
	}
	for _, gone := range []string{filepath.Join(ft.outside, "made"), filepath.Join(ft.outside, "later"), filepath.Join(ft.data, "made")} {
		if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused sink created %s (%v)", gone, err)
		}
	}
	// Inside: created, written.
	out := filepath.Join(ft.allowed, "out", "deep")
	task := sink.NewTask()
	ctx := t.Context()
	if err := task.Start(ctx, map[string]string{"directory": out, "flush.size": "1"}, fakeSinkContext{}); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	if err := task.Open(ctx, map[TopicPartition]int64{tp: 0}); err != nil {
		t.Fatal(err)
	}
	if err := task.Put(ctx, []Record{{Topic: "t", Partition: 0, Offset: 0, Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	if got := files(t, out); got["t-0-00000000000000000000.jsonl"] != "x\n" {
		t.Fatalf("the sink's files: %v", got)
	}
	// The directory swapped for a link out: the next Open refuses.
	if err := os.Rename(out, out+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ft.outside, out); err != nil {
		t.Fatal(err)
	}
	if err := task.Open(ctx, map[TopicPartition]int64{tp: 1}); err == nil || !strings.Contains(err.Error(), "is outside") {
		t.Fatalf("open after the swap: %v", err)
	}

	// A source whose link changes after it started: refused at the open, nothing read.
	link := filepath.Join(ft.allowed, "moving.jsonl")
	if err := os.Symlink(filepath.Join(ft.allowed, "later.jsonl"), link); err != nil {
		t.Fatal(err)
	}
	st := src.NewTask()
	if err := st.Start(ctx, map[string]string{"task.files": link, "topic": "t", "poll.interval.ms": "10"}, fakeSourceContext{}); err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ft.secret, link); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := st.Poll(pctx)
	if err == nil || !strings.Contains(err.Error(), "is outside") || len(b.Records) != 0 {
		t.Fatalf("poll through a link swapped outside: %v %v", b.Records, err)
	}

	// A FIFO inside is refused, not opened (opening one blocks for a writer).
	fifo := filepath.Join(ft.allowed, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ft2 := src.NewTask()
	if err := ft2.Start(ctx, map[string]string{"task.files": fifo, "topic": "t"}, fakeSourceContext{}); err != nil {
		t.Fatal(err)
	}
	defer ft2.Stop()
	if _, err := ft2.Poll(pctx); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("poll a FIFO: %v", err)
	}
}
