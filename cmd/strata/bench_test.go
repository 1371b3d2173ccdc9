package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--catalog", "postgres://x/y"}, "--catalog and --bucket go together"},
		{[]string{"bench", "--nodes", "0"}, "--nodes 0: want 1 to 16"},
		{[]string{"bench", "--in-process", "--nodes", "2"}, "--in-process runs one node of its own"},
		{[]string{"bench", "--paths", "grpc"}, `path "grpc": use binary, json, kafka or kafka-bare`},
		{[]string{"bench", "--paths", "kafka", "--no-kafka"}, "path kafka: the nodes serve no Kafka listener"},
		{[]string{"bench", "--duration", "10ms"}, "duration 10ms: at least 1s"},
		{[]string{"bench", "extra"}, `unexpected argument "extra"`},
		{[]string{"bench", "--against-kafka", "127.0.0.1:9092"}, "--against-kafka goes with --against"},
		{[]string{"bench", "--hedge-quantile", "0.2"}, "--hedge-quantile 0.2: want 0 (never hedge) or between 0.5 and 0.999"},
		{[]string{"bench", "--capacity-duration", "10ms"}, "capacity duration 10ms: at least 100ms"},
	} {
		code, _, stderr := runCLI(t, nil, "", tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	code, stdout, _ := runCLI(t, nil, "", "bench", "-h")
	if code != 0 || !strings.Contains(stdout, "--cpuprofile") {
		t.Errorf("bench -h: exit %d\n%s", code, stdout)
	}
}

// TestNodeMemoryLimit: the node processes the bench starts get a memory limit (the one
// given, else benchMemoryLimit); running nodes and an in-process node keep theirs.
func TestNodeMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		given              byteSize
		against, inProcess bool
		want               byteSize
	}{
		{0, false, false, benchMemoryLimit},
		{2 << 30, false, false, 2 << 30},
		{0, true, false, 0},
		{0, false, true, 0},
		{512 << 20, true, false, 512 << 20},
	} {
		if got := nodeMemoryLimit(c.given, c.against, c.inProcess); got != c.want {
			t.Errorf("nodeMemoryLimit(%d, against %v, in-process %v) = %d, want %d", c.given, c.against, c.inProcess, got, c.want)
		}
	}
}

// TestBenchInProcess runs the verb end to end, briefly, with an embedded node in this
// process, and checks what it writes.
func TestBenchInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every bench phase for a second")
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, nil, "", "bench", "--in-process", "--out", out, "--duration", "1s", "--floor-duration", "200ms",
		"--partitions", "2", "--producers", "2", "--max-flush-bytes", "1MiB", "--buffer-bytes", "8MiB", "--batch", "50", "--record-size", "100", "--overload-producers", "4",
		"--scale-records", "10000", "--scale-chunk-records", "50", "--capacity-duration", "100ms", "--cpuprofile", filepath.Join(out, "prof"),
		"--no-settle") // the page cache is the machine's, and other tests are using it
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"FLOOR", "PRODUCE", "FETCH", "SCALE", "CATALOG CAPACITY (sqlite", "TARGETS", "embedded (SQLite, files)", "hedged PUTs past p95", "PUT stage: p99"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Produce []struct{ Records int64 }
		Targets []struct{ Name string }
	}
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Produce) != 6 || rep.Produce[0].Records == 0 || len(rep.Targets) == 0 {
		t.Errorf("report.json: %v %+v", err, rep)
	}
	// The Kafka phases ran, through the in-process node's listener.
	for _, want := range []string{"produce-kafka", "produce-kafka-bare", "fetch-kafka-cached", "produce Kafka (franz-go) vs HTTP binary",
		"produce Kafka (bare client, the binary path's batches) vs HTTP binary", "cached fetch Kafka vs raw GET bandwidth"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"latency.svg", "table.txt", "node-0.log", "prof/produce-binary.prof", "prof/fetch-cached.prof", "prof/produce-kafka.prof", "prof/capacity.prof"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
