package connect

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// FileDirsFlag is the operator's setting that lists the directories the file connectors
// may use (strata serve and strata dev), named in every refusal.
const FileDirsFlag = "--connect-file-dirs"

// FileDirs confines the file connectors (filesource.go, filesink.go): a connector's
// author must not read or write what the server process can but the author could not —
// /etc/passwd, the catalog's files, another connector's output elsewhere. A path is
// allowed only when, with every symbolic link and ".." resolved, it lies under one of
// the directories the operator listed, and under none of the node's own (its data
// directory, the SQLite catalog's directory, the object store's and the block cache's
// directories) nor the kernel's (/proc, /dev, /sys). The zero FileDirs allows nothing:
// the file connectors are then refused, naming the flag.
type FileDirs struct {
	allowed []string // resolved
	denied  []deniedDir
}

// deniedDir is a directory no file connector may use, with what it is, for the refusal.
type deniedDir struct {
	path, what string
}

// OwnDir is one of the node's own directories: never allowed to the file connectors,
// even when a listed directory contains it or is it.
type OwnDir struct {
	Path string
	// What names it in a refusal: "the dev data directory (--data)".
	What string
}

// systemDirs hold the kernel's views of processes and devices: reading them leaks the
// node's environment and memory (/proc/self/environ, /proc/self/mem), so no listing
// allows them.
var systemDirs = []string{"/proc", "/dev", "/sys"}

// NewFileDirs checks the operator's list — absolute paths of existing directories — and
// resolves it and the node's own directories (which need not exist yet).
func NewFileDirs(allowed []string, own []OwnDir) (FileDirs, error) {
	var d FileDirs
	for _, a := range allowed {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if !filepath.IsAbs(a) {
			return FileDirs{}, fmt.Errorf("%s %q: give an absolute path", FileDirsFlag, a)
		}
		real, err := filepath.EvalSymlinks(a)
		if err != nil {
			return FileDirs{}, fmt.Errorf("%s %q: %w", FileDirsFlag, a, err)
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			return FileDirs{}, fmt.Errorf("%s %q: not a directory", FileDirsFlag, a)
		}
		d.allowed = append(d.allowed, real)
	}
	for _, s := range systemDirs {
		d.denied = append(d.denied, deniedDir{path: s, what: "the kernel's " + s})
	}
	for _, o := range own {
		if o.Path == "" {
			continue
		}
		abs, err := filepath.Abs(o.Path)
		if err != nil {
			return FileDirs{}, fmt.Errorf("the node's directory %s: %w", o.Path, err)
		}
		// Both spellings: the one given, and the one the file system resolves it to.
		d.denied = append(d.denied, deniedDir{path: filepath.Clean(abs), what: o.What})
		if real, err := resolvePath(abs); err == nil && real != filepath.Clean(abs) {
			d.denied = append(d.denied, deniedDir{path: real, what: o.What})
		}
	}
	return d, nil
}

// Enabled says whether any directory is allowed.
func (d FileDirs) Enabled() bool { return len(d.allowed) > 0 }

// Allowed lists the allowed directories, resolved.
func (d FileDirs) Allowed() []string { return append([]string(nil), d.allowed...) }

// FileRefusedError is Check's refusal of a path: a setting to fix, never a failure
// that passes by itself.
type FileRefusedError struct{ msg string }

func (e *FileRefusedError) Error() string { return e.msg }

func refusef(format string, args ...any) error {
	return &FileRefusedError{msg: fmt.Sprintf(format, args...)}
}

// Check resolves path and answers it resolved when the file connectors may use it, or
// why not (a *FileRefusedError naming the path and the flag). It opens and creates
// nothing.
func (d FileDirs) Check(path string) (string, error) {
	if len(d.allowed) == 0 {
		return "", refusef("%s: the file connectors are off on this node (strata serve or strata dev %s DIR[,DIR...] allows files under DIR)", path, FileDirsFlag)
	}
	if !filepath.IsAbs(path) {
		return "", refusef("%s: give an absolute path under %s (%s)", path, strings.Join(d.allowed, ","), FileDirsFlag)
	}
	real, err := resolvePath(path)
	if err != nil {
		return "", refusef("%s: %v", path, err)
	}
	return real, d.checkResolved(path, real)
}

// checkResolved judges a resolved path (real) given as path.
func (d FileDirs) checkResolved(path, real string) error {
	shown := path
	if real != path {
		shown = fmt.Sprintf("%s (%s)", path, real)
	}
	for _, n := range d.denied {
		if within(n.path, real) {
			return refusef("%s is inside %s, %s: the file connectors may never use it, even when %s lists it", shown, n.path, n.what, FileDirsFlag)
		}
	}
	for _, a := range d.allowed {
		if within(a, real) {
			return nil
		}
	}
	return refusef("%s is outside the directories the file connectors may use (%s %s)", shown, FileDirsFlag, strings.Join(d.allowed, ","))
}

// within says whether path is dir or lies under it (both clean and absolute).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// maxLinks bounds the symbolic links followed in one path, as the kernel's ELOOP does.
const maxLinks = 40

// resolvePath is path with every symbolic link and "." and ".." resolved as the kernel
// would, component by component, for a path whose end need not exist yet: the
// components that exist are resolved, the missing rest appended (a missing directory
// has no links below it). A dangling link is followed to where it points, so a file
// created through it later is judged where it would land.
func resolvePath(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", errors.New("not an absolute path")
	}
	rest := strings.Split(path, string(filepath.Separator))
	cur := string(filepath.Separator)
	links := 0
	missing := false
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur has no links: its lexical parent is its parent
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		st, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			cur = next
			continue
		case err != nil:
			return "", err
		case st.Mode()&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		rest = append(strings.Split(target, string(filepath.Separator)), rest...)
	}
	return cur, nil
}

// openChecked opens a file for reading once Check allows its path, refusing anything
// but a regular file (a FIFO would block the open, a device is not a file of lines),
// and not following a link the last component became since; on Linux the opened file's
// own path is judged again, so a directory swapped for a link meanwhile is caught too.
func (d FileDirs) openChecked(path string) (*os.File, error) {
	real, err := d.Check(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, refusef("%s: not a regular file", path)
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := d.recheckOpened(path, f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// recheckOpened judges where an opened file or directory really is (Linux: its
// /proc/self/fd link); elsewhere it trusts the check made before opening.
func (d FileDirs) recheckOpened(path string, f *os.File) error {
	if runtime.GOOS != "linux" {
		return nil
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !filepath.IsAbs(real) {
		return nil // no /proc mounted: the check before opening stands
	}
	return d.checkResolved(path, real)
}
