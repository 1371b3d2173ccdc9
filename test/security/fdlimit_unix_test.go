//go:build unix

package security_test

import (
	"syscall"
	"testing"
)

// needFiles raises the process's soft limit on open files to at least n (up to its
// hard limit) for tests that hold many connections at once — each one two descriptors
// in this process, the client's and the server's — and fails, naming the limit, when
// the hard limit is lower.
func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("open-files limit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Fatalf("this test holds %d descriptors at once; the hard open-files limit is %d (raise it: ulimit -Hn)", n, lim.Max)
	}
	old := lim.Cur
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("raise the open-files limit from %d to %d: %v", old, n, err)
	}
}
