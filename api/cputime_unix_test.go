//go:build unix

package api

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used: benchmarks divide
// work by it, so that their figure holds on a machine shared with other jobs, where
// wall time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
