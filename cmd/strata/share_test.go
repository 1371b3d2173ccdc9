package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
)

// TestShareCLI: share consume runs with --max divide a topic's records between them,
// each record printed once and accepted; --release prints without taking; share
// describe shows the start offsets; share reset (no live members) rewinds them.
func TestShareCLI(t *testing.T) {
	url := startDevInProcess(t)
	c := client.New(url)
	if _, err := c.CreateTopic(t.Context(), "jobs", 2, nil); err != nil {
		t.Fatal(err)
	}
	var recs []client.Record
	for i := range 10 {
		recs = append(recs, client.Record{Value: client.String(fmt.Sprint(i)), Partition: client.Int32(int32(i % 2))})
	}
	if _, err := c.Produce(t.Context(), "jobs", recs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConfigureShareGroup(t.Context(), "Q", map[string]string{"share.auto.offset.reset": "earliest"}); err != nil {
		t.Fatal(err)
	}
	consume := func(args ...string) []shareLine {
		t.Helper()
		code, stdout, stderr, _ := runCLIFor(t, 30*time.Second, append([]string{"share", "consume", "Q", "--topic", "jobs", "--server", url}, args...)...)
		if code != 0 {
			t.Fatalf("share consume %v: exit %d: %s", args, code, stderr.String())
		}
		var out []shareLine
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var sl shareLine
			if err := json.Unmarshal([]byte(l), &sl); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			out = append(out, sl)
		}
		return out
	}
	looked := consume("--max", "3", "--release")
	if len(looked) != 3 || looked[0].DeliveryCount != 1 {
		t.Fatalf("--release printed %+v, want 3 records at delivery 1", looked)
	}
	var seen []string
	for range 2 {
		for _, l := range consume("--max", "5") {
			seen = append(seen, fmt.Sprintf("%d/%d", l.Partition, l.Offset))
		}
	}
	slices.Sort(seen)
	want := []string{"0/0", "0/1", "0/2", "0/3", "0/4", "1/0", "1/1", "1/2", "1/3", "1/4"}
	if !slices.Equal(seen, want) {
		t.Fatalf("two runs of 5 printed %v, want every record once: %v", seen, want)
	}
	code, stdout, stderr := runCLI(t, nil, "", "share", "describe", "Q", "--server", url)
	if code != 0 || !strings.Contains(stdout, "jobs   0          5      0") || !strings.Contains(stdout, "Dead-lettered: 0\n") {
		t.Fatalf("share describe: exit %d:\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, nil, "", "share", "list", "--server", url)
	if code != 0 || !strings.Contains(stdout, "Q     empty  0") {
		t.Fatalf("share list: exit %d:\n%s%s", code, stdout, stderr)
	}
	// The consumers left on their way out: a reset (no live members) goes ahead.
	code, stdout, stderr = runCLI(t, nil, "", "share", "reset", "Q", "--topic", "jobs", "--to", "earliest", "--server", url)
	if code != 0 || !strings.Contains(stdout, "jobs   0          0") {
		t.Fatalf("share reset: exit %d:\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, nil, "", "share", "reset", "nope", "--topic", "jobs", "--to", "earliest", "--server", url)
	if code != 1 || !strings.Contains(stderr, "--create") {
		t.Fatalf("reset of an unknown share group: exit %d: %s", code, stderr)
	}
	if code, _, stderr = runCLI(t, nil, "", "share", "consume", "Q", "--server", url); code != 2 || !strings.Contains(stderr, "--topic is required") {
		t.Fatalf("consume without --topic: exit %d: %s", code, stderr)
	}
}
