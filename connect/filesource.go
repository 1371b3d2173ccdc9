package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/ctxwait"
)

// FileSourceConnector reads JSON lines from files into a topic, one record per line
// (the line's JSON value), resumable by byte position: each file is a source partition
// {"filename": PATH} whose offset is {"position": BYTES} after the last line committed,
// as Kafka Connect's FileStreamSource keeps it. Files are shared out over the tasks;
// a file that does not exist yet is waited for, and one that grows is followed. A line
// that is not JSON is a bad record (errors.tolerance decides). Files are read only where
// Dirs allows (FileDirs): checked when the connector is validated, and again before each
// file is opened.
type FileSourceConnector struct {
	Dirs FileDirs
}

// FileSourceClass is the file source's class.
const FileSourceClass = "io.strata.connect.file.FileSourceConnector"

func (FileSourceConnector) Class() string   { return FileSourceClass }
func (FileSourceConnector) Version() string { return "1.0" }

const groupFile = "File"

func (FileSourceConnector) Config() []ConfigKey {
	return []ConfigKey{
		{Name: "file", Type: TypeString, Default: "", Importance: "HIGH", Group: groupFile, DisplayName: "File",
			Doc: "Source file path (absolute); or use files."},
		{Name: "files", Type: TypeList, Default: "", Importance: "HIGH", Group: groupFile, DisplayName: "Files",
			Doc: "Source file paths (absolute), shared out over the tasks."},
		{Name: "topic", Type: TypeString, NoDefault: true, Importance: "HIGH", Group: groupFile, DisplayName: "Topic",
			Doc: "The topic to publish data to."},
		{Name: "batch.size", Type: TypeInt, Default: "10000", Importance: "LOW", Group: groupFile, DisplayName: "Batch size",
			Doc: "The most lines one poll (one transaction) takes.", Check: atLeast(1)},
		{Name: "poll.interval.ms", Type: TypeLong, Default: "100", Importance: "LOW", Group: groupFile, DisplayName: "Poll interval",
			Doc: "How long to wait at the end of every file before looking again.", Check: atLeast(1)},
	}
}

// ValidateConfig checks what one key's check cannot: a file is named, each absolute and
// where the file connectors may read.
func (c FileSourceConnector) ValidateConfig(cfg map[string]string) map[string]string {
	files := sourceFiles(cfg)
	if len(files) == 0 {
		return map[string]string{"files": "Set file or files: the paths to read"}
	}
	for _, f := range files {
		if !strings.HasPrefix(f, "/") {
			return map[string]string{"files": fmt.Sprintf("Invalid value %s for configuration files: give absolute paths", f)}
		}
		if _, err := c.Dirs.Check(f); err != nil {
			return map[string]string{"files": fmt.Sprintf("Invalid value %s for configuration files: %v", f, err)}
		}
	}
	return nil
}

func sourceFiles(cfg map[string]string) []string {
	files := splitList(cfg["files"])
	if f := strings.TrimSpace(cfg["file"]); f != "" {
		files = append([]string{f}, files...)
	}
	return files
}

// TaskConfigs deals the files out round-robin to at most maxTasks tasks.
func (FileSourceConnector) TaskConfigs(cfg map[string]string, maxTasks int) ([]map[string]string, error) {
	files := sourceFiles(cfg)
	n := min(maxTasks, len(files))
	if n == 0 {
		return nil, errors.New("no files to read")
	}
	parts := make([][]string, n)
	for i, f := range files {
		parts[i%n] = append(parts[i%n], f)
	}
	out := make([]map[string]string, n)
	for i := range out {
		out[i] = map[string]string{"task.files": strings.Join(parts[i], ",")}
	}
	return out, nil
}

func (c FileSourceConnector) NewTask() SourceTask { return &fileSourceTask{dirs: c.Dirs} }

type fileSourceTask struct {
	dirs  FileDirs
	files []*sourceFile
	topic string
	batch int
	poll  time.Duration
	next  int
	log   *slog.Logger
}

// sourceFile is one file being read: pos is the position after the last line handed
// out, buf what was read beyond it.
type sourceFile struct {
	path string
	f    *os.File
	pos  int64
	buf  []byte
}

func (t *fileSourceTask) Start(ctx context.Context, cfg map[string]string, sc SourceContext) error {
	g := newGetter(cfg, FileSourceConnector{}.Config())
	t.topic, t.batch = g.str("topic"), int(g.int64("batch.size"))
	t.poll = time.Duration(g.int64("poll.interval.ms")) * time.Millisecond
	t.log = sc.Logger()
	offs, err := sc.Offsets(ctx)
	if err != nil {
		return err
	}
	pos := map[string]int64{}
	for _, o := range offs {
		name, _ := o.Partition["filename"].(string)
		if n, ok := o.Offset["position"].(json.Number); ok && name != "" {
			p, err := n.Int64()
			if err != nil || p < 0 {
				return fmt.Errorf("file source: stored position %s of %s is not a byte position", n, name)
			}
			pos[name] = p
		}
	}
	for _, p := range splitList(cfg["task.files"]) {
		// Checked here as well as at validation: the config may have been stored by a
		// node that allowed more.
		if _, err := t.dirs.Check(p); err != nil {
			return fmt.Errorf("file source: %w", err)
		}
		t.files = append(t.files, &sourceFile{path: p, pos: pos[p]})
	}
	return nil
}

// Poll hands out up to batch.size complete lines from the files, taking them in turn.
// It reads what is there before it looks at ctx, so a task being stopped still sends
// what it can read once (its commit is then the catalog's to refuse).
func (t *fileSourceTask) Poll(ctx context.Context) (SourceBatch, error) {
	for {
		var b SourceBatch
		for i := 0; i < len(t.files) && len(b.Records) < t.batch; i++ {
			sf := t.files[(t.next+i)%len(t.files)]
			recs, err := t.read(sf, t.batch-len(b.Records))
			if err != nil {
				return SourceBatch{}, err
			}
			if len(recs) > 0 {
				b.Records = append(b.Records, recs...)
				b.Offsets = append(b.Offsets, Offset{Partition: map[string]any{"filename": sf.path},
					Offset: map[string]any{"position": json.Number(strconv.FormatInt(sf.pos, 10))}})
			}
		}
		t.next++
		if len(b.Records) > 0 || ctx.Err() != nil {
			return b, nil
		}
		if ctxwait.Sleep(ctx, t.poll) != nil {
			return SourceBatch{}, nil
		}
	}
}

// read takes up to n complete lines of sf and moves its position past them.
func (t *fileSourceTask) read(sf *sourceFile, n int) ([]Record, error) {
	if sf.f == nil {
		// Checked again at every open: a link on the way may have changed since.
		f, err := t.dirs.openChecked(sf.path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // not there yet
		}
		var refused *FileRefusedError
		if errors.As(err, &refused) {
			return nil, fmt.Errorf("file source: %w", err)
		}
		if err != nil {
			return nil, &RetriableError{Err: fmt.Errorf("file source: open %s: %w", sf.path, err)}
		}
		if _, err := f.Seek(sf.pos, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("file source: seek %s to %d: %w", sf.path, sf.pos, err)
		}
		sf.f = f
	}
	var out []Record
	for len(out) < n {
		i := bytes.IndexByte(sf.buf, '\n')
		if i < 0 {
			if len(sf.buf) > maxLine {
				return nil, fmt.Errorf("file source: %s: a line at byte %d is longer than %d bytes", sf.path, sf.pos, maxLine)
			}
			chunk := make([]byte, 256<<10)
			m, err := sf.f.Read(chunk)
			sf.buf = append(sf.buf, chunk[:m]...)
			if m == 0 || errors.Is(err, io.EOF) {
				break // a partial last line waits for its newline
			}
			if err != nil {
				return nil, &RetriableError{Err: fmt.Errorf("file source: read %s: %w", sf.path, err)}
			}
			continue
		}
		line := bytes.TrimSuffix(sf.buf[:i], []byte("\r"))
		sf.pos += int64(i + 1)
		sf.buf = sf.buf[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		out = append(out, lineRecord(t.topic, line))
	}
	return out, nil
}

// maxLine bounds a line: beyond it the file is not JSON lines.
const maxLine = 8 << 20

func lineRecord(topic string, line []byte) Record {
	r := Record{Topic: topic, Partition: -1, Timestamp: -1, Offset: -1}
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	if err == nil && d.More() {
		err = errors.New("more than one JSON value on the line")
	}
	if err != nil {
		r.Value, r.Err = append([]byte(nil), line...), fmt.Errorf("file source: the line is not JSON: %w", err)
		return r
	}
	r.Value = v
	return r
}

func (t *fileSourceTask) Committed(context.Context, SourceBatch) error { return nil }

func (t *fileSourceTask) Stop() error {
	for _, sf := range t.files {
		if sf.f != nil {
			sf.f.Close()
		}
	}
	return nil
}
