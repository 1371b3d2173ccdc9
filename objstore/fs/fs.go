// Package fs is the filesystem object store of the embedded mode: one directory holds
// every object, a key's slash-separated segments becoming subdirectories.
//
// Puts are create-only and atomic. The body goes to a temporary file in the key's
// directory, is synced, and is then hard-linked to its final name: link(2) fails when the
// name exists, so exactly one of several concurrent puts of a key wins and a reader never
// sees a partial object. The directory is synced afterwards so the new name survives a
// crash.
//
// Unlike S3, a key cannot be both an object and a "directory" of other keys ("a" and
// "a/b"): the second put fails.
package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/strata-io/strata/objstore"
)

// tempPrefix starts the name of every temporary file. Keys whose last segment starts
// with it are refused, so List can skip temporaries without hiding an object. A crash
// between create and link leaves a temporary behind; it is never listed and costs only
// space.
const tempPrefix = ".strata-tmp-"

// Store is an objstore.Store rooted at a directory.
type Store struct {
	root string
}

var _ objstore.Store = (*Store)(nil)

// New returns a store rooted at dir, creating dir if it is missing.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("fs: open: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fs: open %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("fs: open %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("fs: open %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("fs: open %s: not a directory", dir)
	}
	return &Store{root: abs}, nil
}

// Root returns the directory the store is rooted at.
func (s *Store) Root() string { return s.root }

func checkKey(key string) error {
	if err := objstore.CheckKey(key); err != nil {
		return err
	}
	if strings.HasPrefix(key[strings.LastIndexByte(key, '/')+1:], tempPrefix) {
		return fmt.Errorf("%w: %q: names starting with %q are reserved for temporary files", objstore.ErrInvalidKey, key, tempPrefix)
	}
	return nil
}

func (s *Store) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// Put creates key with body, or returns nil if key already holds exactly body, or
// objstore.ErrExists if it holds anything else.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	return s.PutParts(ctx, key, [][]byte{body})
}

// PutParts is Put of the parts laid end to end, written one after another.
func (s *Store) PutParts(ctx context.Context, key string, parts [][]byte) error {
	if err := s.put(ctx, key, parts); err != nil {
		return fmt.Errorf("fs: put %s: %w", key, err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, key string, parts [][]byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	final := s.path(key)
	dir := filepath.Dir(final)
	tmp, err := s.createTemp(dir)
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	// From here on the temporary is removed whatever happens: after a successful link
	// the object lives on under its final name.
	defer os.Remove(tmpName)
	if _, err := objstore.NewPartsReader(parts).WriteTo(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Link(tmpName, final); err != nil {
		if !errors.Is(err, iofs.ErrExist) {
			return err
		}
		// Someone created the key first (perhaps this very put, retried). The winner
		// linked a complete, synced file, so reading it now sees all of it.
		same, err := sameContent(final, parts)
		if err != nil {
			return err
		}
		if !same {
			return objstore.ErrExists
		}
		return nil
	}
	if err := os.Remove(tmpName); err != nil {
		return err
	}
	return syncDir(dir)
}

// createTemp creates a temporary file in dir, creating dir (and syncing the parents of
// what it creates) when missing. Delete removes directories it empties, so a directory
// created here can vanish before the temporary lands in it: try again then (on a
// loaded machine deletes of neighbouring keys can win several times in a row; TestPutDeleteRace
// lost ten).
func (s *Store) createTemp(dir string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.CreateTemp(dir, tempPrefix+"*")
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, iofs.ErrNotExist) || attempt == 100 {
			return nil, err
		}
		if err := s.mkdirAll(dir); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return nil, err
		}
	}
}

// mkdirAll creates dir and its missing parents up to the root, syncing each parent whose
// entries changed so the new directories survive a crash.
func (s *Store) mkdirAll(dir string) error {
	if dir == s.root {
		return nil
	}
	st, err := os.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is an object, not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if err := s.mkdirAll(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, iofs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func sameContent(path string, parts [][]byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() || st.Size() != objstore.PartsLen(parts) {
		return false, nil
	}
	got := make([]byte, st.Size())
	if _, err := io.ReadFull(f, got); err != nil {
		return false, err
	}
	return objstore.PartsEqual(parts, got), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// open opens key for reading, mapping a missing file (or a directory standing where the
// key would be) to objstore.ErrNotExist.
func (s *Store) open(ctx context.Context, key string) (*os.File, iofs.FileInfo, error) {
	if err := checkKey(key); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil, objstore.ErrNotExist
		}
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, objstore.ErrNotExist
	}
	return f, st, nil
}

// Get returns the whole content of key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	f, st, err := s.open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("fs: get %s: %w", key, err)
	}
	defer f.Close()
	buf := make([]byte, st.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("fs: get %s: %w", key, err)
	}
	return buf, nil
}

// GetRange returns exactly n bytes of key starting at off. A range that does not lie
// inside the object is objstore.ErrRange; n = 0 at any off up to the size is empty.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	f, st, err := s.open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("fs: get %s range %d+%d: %w", key, off, n, err)
	}
	defer f.Close()
	if off < 0 || n < 0 || off > st.Size() || n > st.Size()-off {
		return nil, fmt.Errorf("fs: get %s range %d+%d: object has %d bytes: %w", key, off, n, st.Size(), objstore.ErrRange)
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Errorf("fs: get %s range %d+%d: %w", key, off, n, err)
	}
	return buf, nil
}

// Head returns key's size and modification time.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	f, st, err := s.open(ctx, key)
	if err != nil {
		return objstore.Info{}, fmt.Errorf("fs: head %s: %w", key, err)
	}
	f.Close()
	return objstore.Info{Key: key, Size: st.Size(), Modified: st.ModTime()}, nil
}

// Delete removes key, and the directories its removal leaves empty. A missing key is not
// an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("fs: delete %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fs: delete %s: %w", key, err)
	}
	p := s.path(key)
	st, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("fs: delete %s: %w", key, err)
	}
	if st.IsDir() {
		// A "directory" of other keys, not an object: as on S3, nothing to delete.
		return nil
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("fs: delete %s: %w", key, err)
	}
	dir := filepath.Dir(p)
	// A concurrent Delete may already have removed the emptied directory: then there is
	// nothing left to sync.
	if err := syncDir(dir); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("fs: delete %s: %w", key, err)
	}
	// Empty directories would pile up under time-ordered keys and slow List down.
	// Removing one fails harmlessly when it is not empty, and a put racing with the
	// removal recreates it (see createTemp).
	for dir != s.root {
		if os.Remove(dir) != nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	return nil
}

// List calls fn for every key that starts with prefix (a string prefix, not a directory),
// in lexical key order. It walks only the directories that can hold such keys and
// holds one directory listing per level in memory, never the whole result.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	if err := s.list(ctx, s.root, "", prefix, fn); err != nil {
		return fmt.Errorf("fs: list %q: %w", prefix, err)
	}
	return nil
}

func (s *Store) list(ctx context.Context, dir, keyDir, prefix string, fn func(objstore.Info) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) && dir != s.root {
			return nil // removed by a concurrent Delete
		}
		return err
	}
	// Order entries by the keys they hold: a subdirectory "d" holds keys "d/…", so it
	// sorts as "d/" ("a-c" < "a/b" because '-' < '/'), which makes a depth-first walk
	// yield keys in lexical order.
	type entry struct {
		sortKey string
		e       iofs.DirEntry
	}
	sorted := make([]entry, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			continue
		}
		k := keyDir + name
		if e.IsDir() {
			k += "/"
			if !strings.HasPrefix(k, prefix) && !strings.HasPrefix(prefix, k) {
				continue
			}
		} else if !strings.HasPrefix(k, prefix) {
			continue
		}
		sorted = append(sorted, entry{k, e})
	}
	slices.SortFunc(sorted, func(a, b entry) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, en := range sorted {
		if en.e.IsDir() {
			if err := s.list(ctx, filepath.Join(dir, en.e.Name()), en.sortKey, prefix, fn); err != nil {
				return err
			}
			continue
		}
		if !en.e.Type().IsRegular() {
			continue
		}
		st, err := en.e.Info()
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				continue // deleted since the directory was read
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(objstore.Info{Key: en.sortKey, Size: st.Size(), Modified: st.ModTime()}); err != nil {
			return err
		}
	}
	return nil
}
