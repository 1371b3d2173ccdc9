package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
)

// startDevInProcess runs `strata dev` in this process (SQLite and the filesystem under
// a temporary directory) until the test ends, and returns its URL.
func startDevInProcess(t *testing.T) string {
	t.Helper()
	return startDevInProcessAt(t, t.TempDir())
}

// startDevInProcessAt is startDevInProcess with its data in dir, and more flags.
func startDevInProcessAt(t *testing.T, dir string, flags ...string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	e := &env{stdin: strings.NewReader(""), stdout: out, stderr: out, getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, e, append([]string{"dev", "--data", dir, "--listen", addr, "--log-level", "warn", "--kafka-listen", ""}, flags...))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("strata dev exited %d:\n%s", code, out.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("strata dev did not stop within 30s")
		}
	})
	url := "http://" + addr
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case code := <-done:
			t.Fatalf("strata dev exited %d before it was ready:\n%s", code, out.String())
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("strata dev not ready after 30s:\n%s", out.String())
		}
	}
}

// timedWriter keeps what is written and when the first write came.
type timedWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	first time.Time
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() {
		w.first = time.Now()
	}
	return w.b.Write(p)
}

func (w *timedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// runCLIFor runs one command line in-process until it returns or d passes (then as if
// interrupted), and says when it started.
func runCLIFor(t *testing.T, d time.Duration, args ...string) (code int, stdout string, stderr *timedWriter, started time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var out strings.Builder
	stderr = &timedWriter{}
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: stderr, getenv: func(string) string { return "" }}
	started = time.Now()
	code = run(ctx, e, args)
	return code, out.String(), stderr, started
}

// consume --group on a topic that does not exist exits at once with the server's words.
func TestConsumeGroupUnknownTopic(t *testing.T) {
	url := startDevInProcess(t)
	code, stdout, stderr, started := runCLIFor(t, 10*time.Second, "consume", "no-such-topic", "--group", "x", "--server", url)
	took := time.Since(started)
	// The API's title and detail (its code is for programs).
	if code != 1 || stdout != "" || !strings.Contains(stderr.String(), `Topic not found: topic "no-such-topic" does not exist`) {
		t.Fatalf("exit %d, stdout %q, stderr %q: want 1 and the API's topic_not_found", code, stdout, stderr.String())
	}
	if took > time.Second {
		t.Fatalf("took %v to fail, want under a second", took)
	}
	// Nothing was joined: no group was created for a typo.
	if gs, err := client.New(url).ListGroups(t.Context()); err != nil || len(gs) != 0 {
		t.Fatalf("groups after the failed consume: %v %v", gs, err)
	}
}

// consume --group against a server that is down says so on stderr at once, keeps
// retrying, and says why it made no progress when interrupted.
func TestConsumeGroupServerDown(t *testing.T) {
	dead := "http://" + freeAddr(t)
	code, stdout, stderr, started := runCLIFor(t, 2*time.Second, "consume", "t", "--group", "x", "--server", dead)
	msg := stderr.String()
	if stdout != "" || strings.Count(msg, "cannot reach the server at "+dead) != 1 || !strings.Contains(msg, "connection refused") {
		t.Fatalf("stdout %q, stderr %q: want one line saying the server at %s cannot be reached", stdout, msg, dead)
	}
	if at := stderr.first.Sub(started); at > time.Second {
		t.Fatalf("said it %v after the start, want at the first retry", at)
	}
	if code != 1 || !strings.Contains(msg, "stopped while failing") {
		t.Fatalf("interrupted while the server is down: exit %d, stderr %q; want 1 and the reason", code, msg)
	}
}

// printedOffsets parses consume's JSON lines into partition/offset pairs.
func printedOffsets(t *testing.T, stdout string) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		var r struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, [2]int64{int64(r.Partition), r.Offset})
	}
	return out
}

// Consecutive `consume --group G --max N` runs print every record exactly once: each
// commits exactly what it printed before leaving, and the next starts there. With
// several partitions, a run stopping at --max must not lose the commit of another
// partition's batch printed at the same time.
func TestConsumeGroupMaxRuns(t *testing.T) {
	url := startDevInProcess(t)
	c := client.New(url)
	for _, tc := range []struct {
		topic      string
		partitions int32
		max, runs  int
	}{
		{"one", 1, 3, 5},   // 15 records: offsets 0-14, three per run
		{"three", 3, 5, 3}, // 15 records over 3 partitions, five per run
	} {
		t.Run(tc.topic, func(t *testing.T) {
			if _, err := c.CreateTopic(t.Context(), tc.topic, tc.partitions, nil); err != nil {
				t.Fatal(err)
			}
			var recs []client.Record
			for i := range 15 {
				recs = append(recs, client.Record{Value: client.String(fmt.Sprint(i)), Partition: client.Int32(int32(i) % tc.partitions)})
			}
			if _, err := c.Produce(t.Context(), tc.topic, recs); err != nil {
				t.Fatal(err)
			}
			var all [][2]int64
			for run := range tc.runs {
				code, stdout, stderr, _ := runCLIFor(t, 30*time.Second, "consume", tc.topic, "--group", "G", "--max", fmt.Sprint(tc.max), "--server", url)
				got := printedOffsets(t, stdout)
				if code != 0 || len(got) != tc.max || strings.Contains(stderr.String(), "commit") {
					t.Fatalf("run %d: exit %d, printed %v, stderr %q: want %d records and no failed commit", run+1, code, got, stderr.String(), tc.max)
				}
				all = append(all, got...)
			}
			slices.SortFunc(all, func(a, b [2]int64) int {
				if a[0] != b[0] {
					return int(a[0] - b[0])
				}
				return int(a[1] - b[1])
			})
			var want [][2]int64
			for p := range int64(tc.partitions) {
				for off := range 15 / int64(tc.partitions) {
					want = append(want, [2]int64{p, off})
				}
			}
			if !slices.Equal(all, want) {
				t.Fatalf("%d runs printed (partition, offset) %v, want each of %v once", tc.runs, all, want)
			}
		})
	}
}
