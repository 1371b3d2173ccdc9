// Package cputime reads the CPU time this process has used, for benchmarks that report
// work per CPU-second: on a machine shared with other jobs, wall time does not hold.
package cputime

import "time"

// Self is the CPU time (user and system) this process has used; 0 where the platform
// does not say.
func Self() time.Duration { return self() }
