package connect

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FailpointsEnv arms crash points for the SIGKILL tests (test/connect): a list of
// name=N, where the process exits at once (code 137, as SIGKILL leaves it) the Nth time
// it reaches the point. It is a test-only switch, never a flag: a worker that finds it
// set says so in its log at start. The points:
//
//	source.after_poll    a source batch was polled, not yet committed
//	source.after_commit  a source batch committed, its task not yet told (no upstream ack)
//	sink.after_put       a sink task's records are durable downstream, its offsets not committed
const FailpointsEnv = "STRATA_CONNECT_FAILPOINTS"

// The failpoints.
const (
	fpSourceAfterPoll   = "source.after_poll"
	fpSourceAfterCommit = "source.after_commit"
	fpSinkAfterPut      = "sink.after_put"
)

type failpoints struct {
	mu     sync.Mutex
	at     map[string]int
	counts map[string]int
}

// parseFailpoints reads FailpointsEnv's value.
func parseFailpoints(spec string) (*failpoints, error) {
	f := &failpoints{at: map[string]int{}, counts: map[string]int{}}
	for _, part := range splitList(spec) {
		name, n, ok := strings.Cut(part, "=")
		k, err := strconv.Atoi(n)
		if !ok || err != nil || k < 1 {
			return nil, fmt.Errorf("%s: %q: want name=N with N ≥ 1", FailpointsEnv, part)
		}
		switch name {
		case fpSourceAfterPoll, fpSourceAfterCommit, fpSinkAfterPut:
		default:
			return nil, fmt.Errorf("%s: unknown failpoint %q", FailpointsEnv, name)
		}
		f.at[name] = k
	}
	return f, nil
}

// loadFailpoints arms the points named in the environment, loudly.
func loadFailpoints(log *slog.Logger) *failpoints {
	spec := os.Getenv(FailpointsEnv)
	f, err := parseFailpoints(spec)
	if err != nil {
		log.Error("failpoints ignored", "err", err)
		return &failpoints{}
	}
	if len(f.at) > 0 {
		log.Warn("TEST FAILPOINTS ARMED: this worker will crash on purpose", "env", FailpointsEnv, "spec", spec)
	}
	return f
}

// hit counts a pass through point name and exits the process at the armed count.
func (f *failpoints) hit(name string) {
	if f == nil || len(f.at) == 0 {
		return
	}
	f.mu.Lock()
	f.counts[name]++
	crash := f.at[name] == f.counts[name]
	f.mu.Unlock()
	if crash {
		fmt.Fprintf(os.Stderr, "connect: failpoint %s reached (time %d): exiting\n", name, f.at[name])
		os.Exit(137)
	}
}
