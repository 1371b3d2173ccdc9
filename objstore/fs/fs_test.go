package fs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/objstore"
	"github.com/strata-io/strata/objstore/fs"
	"github.com/strata-io/strata/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	var roots sync.Map // store → its directory, for the read-back
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		dir := t.TempDir()
		s, err := fs.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		roots.Store(s, dir)
		return s
	}, objstoretest.WithReadBack(objstoretest.ReadBack{New: func(t *testing.T, s objstore.Store) objstoretest.Reader {
		dir, _ := roots.Load(s)
		return fileReader(dir.(string))
	}}))
}

// fileReader reads the store's directory as plain files: an object is a file at its
// key's path, nothing else.
type fileReader string

func (r fileReader) List(t *testing.T) []objstoretest.RawObject {
	var out []objstoretest.RawObject
	err := filepath.WalkDir(string(r), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(string(r), path)
		out = append(out, objstoretest.RawObject{Key: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (r fileReader) Get(t *testing.T, key string) objstoretest.RawObject {
	b, err := os.ReadFile(filepath.Join(string(r), filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return objstoretest.RawObject{Key: key, Size: int64(len(b)), Body: b}
}

// TestNoLeftovers checks what the suite cannot see through the interface: temporary files
// are removed and Delete leaves no empty directories behind.
func TestNoLeftovers(t *testing.T) {
	dir := t.TempDir()
	s, err := fs.New(filepath.Join(dir, "root"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, k := range []string{"a/b/c", "a/b/d", "e"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "a/b/c", []byte("different")); err == nil {
		t.Fatal("overwrite accepted")
	}
	if err := s.Put(ctx, "a/b/c", []byte("a/b/c")); err != nil {
		t.Fatal(err)
	}
	var files []string
	walk := func() {
		files = files[:0]
		filepath.WalkDir(s.Root(), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(s.Root(), p)
			files = append(files, filepath.ToSlash(rel))
			return nil
		})
	}
	walk()
	if got, want := strings.Join(files, " "), ". a a/b a/b/c a/b/d e"; got != want {
		t.Errorf("tree = %s, want %s", got, want)
	}
	for _, k := range []string{"a/b/c", "a/b/d"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	walk()
	if got, want := strings.Join(files, " "), ". e"; got != want {
		t.Errorf("tree after deletes = %s, want %s", got, want)
	}
}

// TestTempFilesHidden: a temporary left by a crash is never listed and its name cannot
// be used as a key.
func TestTempFilesHidden(t *testing.T) {
	s, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Root(), ".strata-tmp-123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "x/.strata-tmp-9", []byte("x")); err == nil {
		t.Error("Put of a temporary file name accepted")
	}
	n := 0
	if err := s.List(t.Context(), "", func(objstore.Info) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("List = %d objects, %v; want 0", n, err)
	}
}

func TestNewRefusesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.New(p); err == nil {
		t.Error("New on a regular file succeeded")
	}
}

// TestPutDeleteRace: Delete removes the directories it empties while puts create files
// in them; no put may fail for it.
func TestPutDeleteRace(t *testing.T) {
	s, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 60 {
				k := fmt.Sprintf("d1/d2/d3/%d-%d", w, i)
				if err := s.Put(ctx, k, []byte(k)); err != nil {
					t.Error(err)
					return
				}
				if err := s.Delete(ctx, k); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n := 0
	if err := s.List(ctx, "", func(objstore.Info) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("List after the race = %d objects, %v; want 0", n, err)
	}
}
