// Package testwait waits in tests for a condition that becomes true eventually: it
// polls the condition until it holds or a deadline passes, so a passing test waits
// only as long as the condition takes, and a broken one fails after the deadline
// with what it was waiting for. Use it instead of a sleep followed by a check: a
// fixed sleep is either too long on a quiet machine or too short on a loaded one.
//
// Until and NoError fail the test, so call them from the test's own goroutine;
// Within only reports, for other goroutines and for tests that fail with their own
// message.
package testwait

import (
	"testing"
	"time"
)

// Poll intervals: the first poll comes at once and the interval doubles up to
// maxInterval, so a condition that holds quickly is seen quickly and one that takes
// seconds is not polled thousands of times (conditions are often HTTP or SQL calls).
const (
	firstInterval = time.Millisecond
	maxInterval   = 100 * time.Millisecond
)

// Within polls cond until it holds, for at most d, and reports whether it held.
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for wait := firstInterval; ; wait = min(2*wait, maxInterval) {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(wait, left))
	}
}

// Until polls cond until it holds and returns how long that took, or fails t after d
// saying what it waited for.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !Within(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
	return time.Since(start)
}

// NoError polls fn until it returns nil and returns how long that took, or fails t
// after d with what it waited for and fn's last error.
func NoError(t testing.TB, d time.Duration, what string, fn func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	if !Within(d, func() bool { err = fn(); return err == nil }) {
		t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
	}
	return time.Since(start)
}
