package connect

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type fakeSourceContext struct{ offs []Offset }

func (f fakeSourceContext) Offsets(context.Context) ([]Offset, error)         { return f.offs, nil }
func (fakeSourceContext) Logger() *slog.Logger                                { return slog.New(slog.DiscardHandler) }
func (fakeSourceContext) ReportMetrics(context.Context, map[string]any) error { return nil }

func pollLines(t *testing.T, task SourceTask) ([]string, []Offset) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	b, err := task.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range b.Records {
		if r.Err != nil {
			out = append(out, "ERR "+string(r.Value.([]byte)))
			continue
		}
		out = append(out, encode(r.Value))
	}
	return out, b.Offsets
}

// TestFileSource: lines in batches, a partial last line held until its newline, blank
// lines skipped, a bad line marked, resumption at a stored position, and a file that
// appears later.
func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	if err := os.WriteFile(a, []byte("{\"n\":1}\r\n\n{\"n\":2}\nnot json\n{\"n\":3"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]string{"task.files": a + "," + b, "topic": "t", "batch.size": "2", "poll.interval.ms": "10"}
	src := FileSourceConnector{Dirs: allowDirs(t, dir)}
	task := src.NewTask()
	if err := task.Start(t.Context(), cfg, fakeSourceContext{}); err != nil {
		t.Fatal(err)
	}
	got, offs := pollLines(t, task)
	if !slices.Equal(got, []string{`{"n":1}`, `{"n":2}`}) || len(offs) != 1 || encode(offs[0].Offset) != `{"position":18}` {
		t.Fatalf("first poll: %v %v", got, offs)
	}
	got, offs = pollLines(t, task)
	if !slices.Equal(got, []string{"ERR not json"}) || encode(offs[0].Offset) != `{"position":27}` {
		t.Fatalf("second poll (the partial line waits): %v %v", got, offs)
	}
	if got, _ := pollLines(t, task); got != nil {
		t.Fatalf("a poll with nothing complete: %v", got)
	}
	f, _ := os.OpenFile(a, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("}\n")
	f.Close()
	os.WriteFile(b, []byte("[1]\n"), 0o644)
	got, offs = pollLines(t, task)
	slices.Sort(got) // the files are taken in turn
	if !slices.Equal(got, []string{`[1]`, `{"n":3}`}) || len(offs) != 2 {
		t.Fatalf("after the newline and the new file: %v %v", got, offs)
	}
	task.Stop()

	// A new instance resumes at the stored positions.
	task = src.NewTask()
	stored := []Offset{{Partition: map[string]any{"filename": a}, Offset: map[string]any{"position": json.Number("18")}}}
	if err := task.Start(t.Context(), cfg, fakeSourceContext{offs: stored}); err != nil {
		t.Fatal(err)
	}
	got, _ = pollLines(t, task)
	if !slices.Equal(got, []string{"ERR not json", `{"n":3}`}) {
		t.Fatalf("resumed: %v", got)
	}
	task.Stop()

	tasks, err := FileSourceConnector{}.TaskConfigs(map[string]string{"file": "/a", "files": "/b,/c"}, 2)
	if err != nil || len(tasks) != 2 || tasks[0]["task.files"] != "/a,/c" || tasks[1]["task.files"] != "/b" {
		t.Fatalf("task configs %v %v", tasks, err)
	}
}

// allowDirs allows the file connectors dirs.
func allowDirs(t *testing.T, dirs ...string) FileDirs {
	t.Helper()
	d, err := NewFileDirs(dirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type fakeSinkContext struct{}

func (fakeSinkContext) Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	es, _ := os.ReadDir(dir)
	out := map[string]string{}
	for _, e := range es {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

// TestFileSink: files named by their first offset, rotated at flush.size, durable only
// once written; reopening at a committed offset removes what was written beyond it.
func TestFileSink(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{"my-topic", 2}
	sink := FileSinkConnector{Dirs: allowDirs(t, dir)}
	task := sink.NewTask()
	ctx := t.Context()
	if err := task.Start(ctx, map[string]string{"directory": dir, "flush.size": "2"}, fakeSinkContext{}); err != nil {
		t.Fatal(err)
	}
	if err := task.Open(ctx, map[TopicPartition]int64{tp: 10}); err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{Topic: tp.Topic, Partition: 2, Offset: 10, Value: map[string]any{"a": json.Number("1")}},
		{Topic: tp.Topic, Partition: 2, Offset: 11, Value: "text"},
		{Topic: tp.Topic, Partition: 2, Offset: 13, Value: "two\nlines"},
	}
	if err := task.Put(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); len(got) != 1 || got["my-topic-2-00000000000000000010.jsonl"] != "{\"a\":1}\ntext\n" {
		t.Fatalf("after a full file: %v", got)
	}
	durable, err := task.PreCommit(ctx)
	if err != nil || durable[tp] != 14 {
		t.Fatalf("durable %v %v", durable, err)
	}
	if got := files(t, dir)["my-topic-2-00000000000000000013.jsonl"]; got != "\"two\\nlines\"\n" {
		t.Fatalf("the partial file: %q", got)
	}
	// Nothing new: the same offsets, no empty file.
	if durable, _ := task.PreCommit(ctx); durable[tp] != 14 || len(files(t, dir)) != 2 {
		t.Fatalf("an idle pre-commit: %v %v", durable, files(t, dir))
	}
	// A crash left a temporary file; a new instance opens at 13 (the offsets commit of
	// the last file was lost): the file at 13 goes, the one at 10 stays.
	os.WriteFile(filepath.Join(dir, ".tmp-0123456789ab-my-topic-2-00000000000000000015.jsonl"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "other-0-00000000000000000099.jsonl"), []byte("y\n"), 0o644)
	task = sink.NewTask()
	task.Start(ctx, map[string]string{"directory": dir}, fakeSinkContext{})
	if err := task.Open(ctx, map[TopicPartition]int64{tp: 13}); err != nil {
		t.Fatal(err)
	}
	got := files(t, dir)
	if _, ok := got["my-topic-2-00000000000000000013.jsonl"]; ok || len(got) != 2 || got["other-0-00000000000000000099.jsonl"] == "" {
		t.Fatalf("after reopening at 13: %v", got)
	}
	if err := task.Put(ctx, []Record{{Topic: "nope", Partition: 0, Offset: 1, Value: "x"}}); err == nil {
		t.Fatal("a record of a partition not open was taken")
	}
	var bad *BadRecordError
	err = task.Put(ctx, []Record{{Topic: tp.Topic, Partition: 2, Offset: 13, Value: "ok"}, {Topic: tp.Topic, Partition: 2, Offset: 14, Value: make(chan int)}})
	if !errors.As(err, &bad) || bad.Index != 1 {
		t.Fatalf("an unwritable value: %v", err)
	}
}

func FuzzParseFileName(f *testing.F) {
	f.Add("my-topic-2-00000000000000000010.jsonl")
	f.Add("a-b-c.jsonl")
	f.Add(".tmp-x-t-0-1.jsonl")
	f.Fuzz(func(t *testing.T, name string) {
		tp, start, ok := parseFileName(name)
		if !ok {
			return
		}
		if tp.Partition < 0 || start < 0 {
			return // not a name the sink writes; Open never matches it to an open partition
		}
		if back := fileName(tp, start); !strings.HasSuffix(back, ".jsonl") {
			t.Fatalf("%q → %v %d → %q", name, tp, start, back)
		}
		if tp2, start2, ok := parseFileName(fileName(tp, start)); !ok || tp2 != tp || start2 != start {
			t.Fatalf("%v %d does not round-trip: %v %d %v", tp, start, tp2, start2, ok)
		}
	})
}

func FuzzLineRecord(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2]`, `1 2`, `{`, `"x"`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r := lineRecord("t", line)
		if r.Err != nil {
			if string(r.Value.([]byte)) != string(line) {
				t.Fatal("a bad line's bytes changed")
			}
			return
		}
		if _, err := (jsonConverter{}).FromConnect(r.Value); err != nil {
			t.Fatalf("a line read as JSON does not encode: %v", err)
		}
	})
}

func FuzzConfigMap(f *testing.F) {
	for _, s := range []string{`{"a":"b","n":1,"t":true,"z":null}`, `{"a":{}}`, `[]`, `{"a":1e999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c configMap
		if err := c.UnmarshalJSON(b); err != nil {
			return
		}
		for k, v := range c {
			if !json.Valid([]byte(quoteJSON(k))) || !json.Valid([]byte(quoteJSON(v))) {
				t.Fatalf("%q: %q", k, v)
			}
		}
	})
}

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestParseFailpoints(t *testing.T) {
	f, err := parseFailpoints("source.after_poll=3, sink.after_put=1")
	if err != nil || f.at[fpSourceAfterPoll] != 3 || f.at[fpSinkAfterPut] != 1 {
		t.Fatalf("%+v %v", f, err)
	}
	for _, bad := range []string{"source.after_poll", "nope=1", "sink.after_put=0"} {
		if _, err := parseFailpoints(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	f.hit(fpSourceAfterCommit) // not armed: nothing happens
}

func TestProvidersResolve(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.properties"), []byte("# c\n! c\nuser = alice\npass: s3=cret\n"), 0o600)
	t.Setenv("CONN_X", "42")
	p, err := NewProviders([]string{"CONN_"}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	out, errs := p.Resolve(map[string]string{
		"a": "${file:" + dir + "/p.properties:user}/${file:" + dir + "/p.properties:pass}",
		"b": "n=${env:CONN_X}",
		"c": "${env:CONN_MISSING}",
		"d": "${file:" + dir + "/p.properties:nokey}",
		"e": "plain",
	})
	if out["a"] != "alice/s3=cret" || out["b"] != "n=42" || out["e"] != "plain" {
		t.Fatalf("resolved %v", out)
	}
	if !strings.Contains(errs["c"], "is not set") || !strings.Contains(errs["d"], `no key "nokey"`) || len(errs) != 2 {
		t.Fatalf("errors %v", errs)
	}
	off := Providers{}
	if _, errs := off.Resolve(map[string]string{"a": "${env:CONN_X}", "b": "${file:/etc/hosts}"}); !strings.Contains(errs["a"], "off") || !strings.Contains(errs["b"], "off") {
		t.Fatalf("providers off: %v", errs)
	}
	if _, err := NewProviders(nil, []string{"relative"}); err == nil {
		t.Fatal("a relative directory was allowed")
	}
}

func TestMaskConfig(t *testing.T) {
	got := maskConfig(map[string]string{"db.password": "p", "api.key": "k", "token": "${env:T}", "secret.empty": "", "file": "/x", "pw": "z"},
		[]ConfigKey{{Name: "pw", Type: TypePassword}})
	want := map[string]string{"db.password": hidden, "api.key": hidden, "token": "${env:T}", "secret.empty": "", "file": "/x", "pw": hidden}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
