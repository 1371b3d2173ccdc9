package cputime

import (
	"runtime"
	"testing"
	"time"
)

func TestSelfGrowsWithWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no rusage here")
	}
	before := Self()
	deadline := time.Now().Add(50 * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		n++
	}
	if after := Self(); after <= before {
		t.Errorf("CPU time %v after %d spins, %v before: want it to grow", after, n, before)
	}
}
