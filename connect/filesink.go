package connect

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/catalog"
)

// FileSinkConnector writes records as JSON lines into a directory, exactly once by
// naming: the records of a partition from offset S go to TOPIC-PARTITION-S.jsonl (S
// zero-padded), written whole (temporary file, fsync, rename) and counted as durable
// only then. A task opening a partition at committed offset C removes the files at C
// and beyond — written by an instance that crashed before committing them — and writes
// from C again, so the files of a partition, in name order, hold each record once. A
// value that is text (StringConverter, ByteArrayConverter) is written as it is; anything
// else as canonical JSON. It writes only where Dirs allows (FileDirs): checked when the
// connector is validated, and again before the directory is created or opened.
type FileSinkConnector struct {
	Dirs FileDirs
}

// FileSinkClass is the file sink's class.
const FileSinkClass = "io.strata.connect.file.FileSinkConnector"

func (FileSinkConnector) Class() string   { return FileSinkClass }
func (FileSinkConnector) Version() string { return "1.0" }

func (FileSinkConnector) Config() []ConfigKey {
	return []ConfigKey{
		{Name: "directory", Type: TypeString, NoDefault: true, Importance: "HIGH", Group: groupFile, DisplayName: "Directory",
			Doc: "Directory (absolute) the files are written to; created if missing.", Check: func(v string) error {
				if !filepath.IsAbs(v) {
					return fmt.Errorf("give an absolute path")
				}
				return nil
			}},
		{Name: "flush.size", Type: TypeInt, Default: "10000", Importance: "LOW", Group: groupFile, DisplayName: "Flush size",
			Doc: "The most records one file holds: a partition's buffer reaching it is written at once.", Check: atLeast(1)},
	}
}

// ValidateConfig refuses a directory the file connectors may not write to.
func (c FileSinkConnector) ValidateConfig(cfg map[string]string) map[string]string {
	dir := strings.TrimSpace(cfg["directory"])
	if dir == "" || !filepath.IsAbs(dir) {
		return nil // the key's own check says so
	}
	if _, err := c.Dirs.Check(dir); err != nil {
		return map[string]string{"directory": fmt.Sprintf("Invalid value %s for configuration directory: %v", dir, err)}
	}
	return nil
}

// TaskConfigs gives every task the same config: the group shares the partitions out.
func (FileSinkConnector) TaskConfigs(cfg map[string]string, maxTasks int) ([]map[string]string, error) {
	out := make([]map[string]string, maxTasks)
	for i := range out {
		out[i] = map[string]string{}
	}
	return out, nil
}

func (c FileSinkConnector) NewTask() SinkTask { return &fileSinkTask{dirs: c.Dirs} }

type fileSinkTask struct {
	dirs  FileDirs
	given string // the directory as configured
	dir   string // and resolved: where the files go
	flush int
	log   *slog.Logger
	parts map[TopicPartition]*sinkFile
}

// sinkFile is one partition's buffer: records from start not written yet.
type sinkFile struct {
	start int64 // offset of the buffer's first record (or of the next one)
	next  int64 // offset after the last record taken
	lines bytes.Buffer
	n     int
}

func (t *fileSinkTask) Start(_ context.Context, cfg map[string]string, sc SinkContext) error {
	g := newGetter(cfg, FileSinkConnector{}.Config())
	t.given, t.flush, t.log = g.str("directory"), int(g.int64("flush.size")), sc.Logger()
	t.parts = map[TopicPartition]*sinkFile{}
	// Checked before anything is created, as well as at validation: the config may
	// have been stored by a node that allowed more.
	dir, err := t.dirs.Check(t.given)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return t.recheck()
}

// recheck resolves the directory again and judges the one it opens: a link on the way
// may have changed since the last check.
func (t *fileSinkTask) recheck() error {
	dir, err := t.dirs.Check(t.given)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	defer d.Close()
	if err := t.dirs.recheckOpened(t.given, d); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	t.dir = dir
	return nil
}

// fileName is where a partition's records from start go.
func fileName(tp TopicPartition, start int64) string {
	return fmt.Sprintf("%s-%d-%020d.jsonl", tp.Topic, tp.Partition, start)
}

// parseFileName reads a file name back (topic names may hold '-': parse from the right).
func parseFileName(name string) (TopicPartition, int64, bool) {
	base, ok := strings.CutSuffix(name, ".jsonl")
	i := strings.LastIndexByte(base, '-')
	if !ok || i <= 0 {
		return TopicPartition{}, 0, false
	}
	j := strings.LastIndexByte(base[:i], '-')
	if j <= 0 {
		return TopicPartition{}, 0, false
	}
	start, err1 := strconv.ParseInt(base[i+1:], 10, 64)
	part, err2 := strconv.ParseInt(base[j+1:i], 10, 32)
	if err1 != nil || err2 != nil {
		return TopicPartition{}, 0, false
	}
	return TopicPartition{Topic: base[:j], Partition: int32(part)}, start, true
}

// Open removes each partition's files at its committed offset and beyond: an earlier
// instance wrote them and never committed them.
func (t *fileSinkTask) Open(_ context.Context, parts map[TopicPartition]int64) error {
	if err := t.recheck(); err != nil {
		return err
	}
	entries, err := os.ReadDir(t.dir)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if rest, tmp := strings.CutPrefix(name, ".tmp-"); tmp && len(rest) > 13 {
			name = rest[13:] // a temporary file a crash left: judged by the file it was to become
		}
		tp, start, ok := parseFileName(name)
		if committed, mine := parts[tp]; ok && mine && start >= committed {
			if err := os.Remove(filepath.Join(t.dir, e.Name())); err != nil {
				return fmt.Errorf("file sink: remove uncommitted %s: %w", e.Name(), err)
			}
			t.log.Info("file sink: removed a file written beyond the committed offset", "file", e.Name(), "committed", committed)
		}
	}
	for tp, off := range parts {
		t.parts[tp] = &sinkFile{start: off, next: off}
	}
	return syncDir(t.dir)
}

func (t *fileSinkTask) Put(_ context.Context, recs []Record) error {
	for i, r := range recs {
		sf := t.parts[TopicPartition{r.Topic, r.Partition}]
		if sf == nil {
			return fmt.Errorf("file sink: a record of %s/%d, which is not open", r.Topic, r.Partition)
		}
		line, err := sinkLine(r.Value)
		if err != nil {
			return &BadRecordError{Index: i, Err: err}
		}
		if sf.n == 0 {
			sf.start = r.Offset
		}
		sf.lines.Write(line)
		sf.lines.WriteByte('\n')
		sf.n++
		sf.next = r.Offset + 1
		if sf.n >= t.flush {
			if err := t.write(TopicPartition{r.Topic, r.Partition}, sf); err != nil {
				return err
			}
		}
	}
	return nil
}

// sinkLine is a value as one line.
func sinkLine(v any) ([]byte, error) {
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	case []byte:
		b = x
	default:
		if !jsonable(v) {
			return nil, fmt.Errorf("file sink: cannot write a %T", v)
		}
		return []byte(catalog.MarshalCanonical(v)), nil
	}
	if bytes.ContainsAny(b, "\r\n") {
		j, _ := json.Marshal(string(b)) // a line cannot hold a newline: the text as a JSON string
		return j, nil
	}
	return b, nil
}

// write makes a partition's buffer a file and empties it.
func (t *fileSinkTask) write(tp TopicPartition, sf *sinkFile) error {
	if sf.n == 0 {
		return nil
	}
	if err := writeFileAtomic(t.dir, fileName(tp, sf.start), sf.lines.Bytes()); err != nil {
		return &RetriableError{Err: fmt.Errorf("file sink: %w", err)}
	}
	sf.lines.Reset()
	sf.n = 0
	sf.start = sf.next
	return nil
}

// PreCommit writes every buffer and answers, per partition, the offset after the last
// record written.
func (t *fileSinkTask) PreCommit(context.Context) (map[TopicPartition]int64, error) {
	out := make(map[TopicPartition]int64, len(t.parts))
	tps := make([]TopicPartition, 0, len(t.parts))
	for tp := range t.parts {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].String() < tps[j].String() })
	for _, tp := range tps {
		sf := t.parts[tp]
		if err := t.write(tp, sf); err != nil {
			return nil, err
		}
		out[tp] = sf.next
	}
	return out, nil
}

func (t *fileSinkTask) Close(_ context.Context, tps []TopicPartition) error {
	for _, tp := range tps {
		delete(t.parts, tp)
	}
	return nil
}

func (t *fileSinkTask) Stop() error { return nil }

// writeFileAtomic writes name in dir through a temporary file, fsynced and renamed over
// it, then fsyncs the directory: the file is whole or absent.
func writeFileAtomic(dir, name string, data []byte) error {
	var r [6]byte
	_, _ = rand.Read(r[:])
	tmp := filepath.Join(dir, ".tmp-"+hex.EncodeToString(r[:])+"-"+name)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
