package membudget

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Shares of the memory found, and of the limit, that the defaults take.
const (
	// CgroupShare of a container's cgroup memory limit is the default process limit:
	// the rest is for what the Go runtime does not see (the kernel's page cache charged
	// to the cgroup, thread stacks outside the heap).
	CgroupShare = 0.9
	// SystemShare of the machine's memory is the default process limit where no cgroup
	// limits the process: a node shares its machine with the catalog's or MinIO's
	// processes in development, and with the operating system everywhere.
	SystemShare = 0.5
	// BudgetShare of the process limit is accounted (the budget); the rest is the
	// collector's headroom — garbage between cycles, fragmentation — and what is too
	// small to account. Below about a third of headroom the collector runs without pause
	// once the accounted memory is in use (commit cf17f61: a soft limit at the live heap
	// cost a tenfold ack latency).
	BudgetShare = 0.6
)

// DefaultLimit is the process memory limit a node takes when none is given: CgroupShare
// of its cgroup's memory limit (v1 or v2, found through /proc/self/mountinfo by
// automemlimit, nested hierarchies included), or else SystemShare of the machine's
// memory. source says which, for the start-up log.
func DefaultLimit() (limit int64, source string, err error) {
	if n, err := memlimit.FromCgroup(); err == nil && n > 0 && n < math.MaxInt64 {
		return int64(float64(n) * CgroupShare), fmt.Sprintf("%.0f%% of the cgroup memory limit %d", 100*CgroupShare, n), nil
	}
	n, err := memlimit.FromSystem()
	if err != nil || n == 0 {
		return 0, "", errors.New("membudget: neither a cgroup memory limit nor the machine's memory could be read: set --memory-limit")
	}
	return int64(float64(n) * SystemShare), fmt.Sprintf("%.0f%% of the machine's memory %d", 100*SystemShare, n), nil
}

// BudgetFor is the accounted budget of a process limited to limit bytes.
func BudgetFor(limit int64) int64 { return int64(float64(limit) * BudgetShare) }

// RuntimeShare of the process limit is the Go runtime's soft limit (GOMEMLIMIT): the
// runtime counts what it maps, not the process's resident pages, which also hold the
// binary itself and what the kernel keeps per thread (about 40 MiB for strata; measured
// with the bench's slow-reader phase, a node at GOMEMLIMIT = limit was 20 MiB over it).
const RuntimeShare = 0.9

// SetProcessLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to RuntimeShare
// of limit, unless the GOMEMLIMIT environment variable set one, which is the operator's
// word. It returns the runtime's limit in force.
func SetProcessLimit(limit int64, getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	rt := int64(float64(limit) * RuntimeShare)
	debug.SetMemoryLimit(rt)
	return rt
}
