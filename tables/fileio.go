package tables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	icebergio "github.com/apache/iceberg-go/io"

	"github.com/strata-io/strata/objstore"
)

// Store is the part of the object store the tables role and the REST catalog use.
type Store interface {
	Put(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	// List is for the orphan sweep (Role.Maintain).
	List(ctx context.Context, prefix string, fn func(objstore.Info) error) error
}

// fileIO is iceberg-go's file system over the node's own object store: a table's
// files are named by URIs under the bucket's (Config.Location), and read and written
// as the objects of the same keys, through the same store, its metering and its
// faults, whether the bucket is S3 or a directory. Writes are create-only (Store.Put):
// every file a commit writes has a new name, so nothing already referenced is ever
// overwritten.
type fileIO struct {
	ctx   context.Context
	store Store
	base  string // the bucket's URI, no trailing slash
}

var _ icebergio.WriteFileIO = (*fileIO)(nil)

// key maps a URI under the bucket to its object key.
func (f *fileIO) key(name string) (string, error) {
	k, ok := strings.CutPrefix(name, f.base+"/")
	if !ok {
		return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: not under the bucket %s", fs.ErrInvalid, f.base)}
	}
	if err := objstore.CheckKey(k); err != nil {
		return "", &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return k, nil
}

func (f *fileIO) Open(name string) (icebergio.File, error) {
	b, err := f.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(b), name: path.Base(name), size: int64(len(b))}, nil
}

func (f *fileIO) ReadFile(name string) ([]byte, error) {
	k, err := f.key(name)
	if err != nil {
		return nil, err
	}
	b, err := f.store.Get(f.ctx, k)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return b, nil
}

func (f *fileIO) Remove(name string) error {
	k, err := f.key(name)
	if err != nil {
		return err
	}
	return f.store.Delete(f.ctx, k)
}

func (f *fileIO) WriteFile(name string, p []byte) error {
	k, err := f.key(name)
	if err != nil {
		return err
	}
	if err := f.store.Put(f.ctx, k, p); err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

func (f *fileIO) Create(name string) (icebergio.FileWriter, error) {
	if _, err := f.key(name); err != nil {
		return nil, err
	}
	return &memWriter{f: f, name: name}, nil
}

// memWriter buffers a file and puts it whole on Close: data files are bounded by a
// commit's records (Config.MaxBytes), and an object store takes an object whole.
type memWriter struct {
	bytes.Buffer
	f      *fileIO
	name   string
	closed bool
}

func (w *memWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.f.WriteFile(w.name, w.Bytes())
}

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (m *memFile) Close() error               { return nil }
func (m *memFile) Stat() (fs.FileInfo, error) { return fileInfo{m.name, m.size}, nil }

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
