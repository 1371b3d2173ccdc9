// Package gobin builds the project's commands for tests that run them as processes
// (`strata serve`, the examples): each package once per test binary, into a temporary
// directory that Cleanup removes.
package gobin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

const module = "github.com/strata-io/strata/"

var (
	mu    sync.Mutex
	dir   string
	built = map[string]result{}
)

type result struct {
	path string
	err  error
}

// Build builds pkg, a package path within the module ("cmd/strata",
// "examples/retail"), on its first call for pkg and answers the binary's path; a
// failed build fails t, with the compiler's output.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	r, ok := built[pkg]
	if !ok {
		r = build(pkg)
		built[pkg] = r
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.path
}

func build(pkg string) result {
	if dir == "" {
		d, err := os.MkdirTemp("", "strata-test-bin-")
		if err != nil {
			return result{err: fmt.Errorf("gobin: %w", err)}
		}
		dir = d
	}
	bin := filepath.Join(dir, path.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, module+pkg).CombinedOutput(); err != nil {
		return result{err: fmt.Errorf("go build ./%s: %v\n%s", pkg, err, out)}
	}
	return result{path: bin}
}

// Cleanup removes the binaries Build made; a package's TestMain calls it after m.Run.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir, built = "", map[string]result{}
	}
}
