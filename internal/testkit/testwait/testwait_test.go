package testwait

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A condition that becomes true is seen soon after, whatever the deadline.
func TestWithinReturnsWhenTrue(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	if !Within(time.Minute, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("a condition true at its fifth poll was not seen")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v for five polls", d)
	}
	if !Within(0, func() bool { return true }) {
		t.Fatal("a condition already true needs no time")
	}
}

// A condition that never holds is polled until the deadline and reported false, with
// the polls spaced (not a busy loop) and the last one at or after the deadline.
func TestWithinGivesUp(t *testing.T) {
	var polls int
	start := time.Now()
	if Within(300*time.Millisecond, func() bool { polls++; return false }) {
		t.Fatal("a false condition held")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", d)
	}
	if polls < 3 || polls > 50 {
		t.Fatalf("%d polls in 300ms, want a few (backing off to %v)", polls, maxInterval)
	}
}

// fakeT records a failure instead of ending the goroutine.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestUntilAndNoErrorSayWhat(t *testing.T) {
	ft := &fakeT{}
	Until(ft, 20*time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(ft.failed, "waiting for the moon") {
		t.Fatalf("Until's failure %q does not say what it waited for", ft.failed)
	}
	ft = &fakeT{}
	NoError(ft, 20*time.Millisecond, "the sun", func() error { return errors.New("still night") })
	if !strings.Contains(ft.failed, "the sun: still night") {
		t.Fatalf("NoError's failure %q does not carry the last error", ft.failed)
	}
	ft = &fakeT{}
	calls := 0
	NoError(ft, time.Minute, "a retry", func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if ft.failed != "" || calls != 3 {
		t.Fatalf("NoError failed %q after %d calls, want success at the third", ft.failed, calls)
	}
}
