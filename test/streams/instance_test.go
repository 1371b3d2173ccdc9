package streams

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testkit/gobin"
	"github.com/strata-io/strata/internal/testkit/testsvc"
	"github.com/strata-io/strata/streams"
)

// instance is one application instance (retail, or the binary bin) that a test kills
// and restarts under the same id and state directory.
type instance struct {
	t        *testing.T
	bin      string // "": the retail example
	name     string
	server   string
	stateDir string
	metrics  string
	args     []string
	p        *proc
	restarts int
	last     streams.MetricsSnapshot // what the stopped incarnations counted
}

func newInstance(t *testing.T, server, name string, args ...string) *instance {
	in := &instance{t: t, name: name, server: server, stateDir: t.TempDir(), args: args,
		metrics: fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))}
	in.start()
	return in
}

// newShopInstance is newInstance of the shop example.
func newShopInstance(t *testing.T, server, name string, args ...string) *instance {
	in := &instance{t: t, bin: gobin.Build(t, "examples/shop"), name: name, server: server, stateDir: t.TempDir(), args: args,
		metrics: fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))}
	in.start()
	return in
}

func (in *instance) start() {
	args := append([]string{"--state-dir", in.stateDir, "--metrics-addr", in.metrics}, in.args...)
	if in.bin == "" {
		in.p = retailProc(in.t, in.server, in.name, args...)
		return
	}
	base := []string{"--server", in.server, "--instance", in.name, "--log-level", "info"}
	in.p = start(in.t, in.name, os.Environ(), in.bin, append(base, args...)...)
}

// restart kills the instance with SIGKILL and starts it again, wiping its state
// directory first when wipe is set.
func (in *instance) restart(wipe bool) {
	in.p.kill()
	in.restarts++
	if wipe {
		if err := os.RemoveAll(in.stateDir); err != nil {
			in.t.Fatal(err)
		}
	}
	in.start()
}

// snapshot reads the running incarnation's counters.
func (in *instance) snapshot() (streams.MetricsSnapshot, map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.metrics+"/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streams.MetricsSnapshot{}, nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Metrics streams.MetricsSnapshot
		Tasks   map[string]string
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	return out.Metrics, out.Tasks, err
}

// waitTasks waits until the instance runs at least n tasks.
func (in *instance) waitTasks(n int, within time.Duration) {
	in.t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, tasks, err := in.snapshot()
		running := 0
		for _, s := range tasks {
			if s == streams.TaskRunning {
				running++
			}
		}
		if err == nil && running >= n {
			return
		}
		if time.Now().After(deadline) {
			in.t.Fatalf("%s runs %d tasks after %s, want %d (%v)", in.name, running, within, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
