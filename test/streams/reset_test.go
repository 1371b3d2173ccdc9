package streams

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/client"
	"github.com/strata-io/strata/internal/testkit/gobin"
	"github.com/strata-io/strata/streams"
	"github.com/strata-io/strata/streams/serde"
)

// resetTopology counts the records per value after re-keying by it (a repartition
// topic and a changelog) and writes every count: reprocessing the same inputs from
// a clean state writes the same counts; from a state left over, larger ones.
func resetTopology() *streams.Builder {
	b := streams.NewBuilder("rs")
	in := streams.From(b, "rs-in", serde.String, serde.String)
	counts := streams.Count(streams.GroupBy(in, func(_, v string) string { return v }, streams.With(serde.String, serde.String)), "counts")
	streams.MapValues(counts.Changes(), func(c streams.Change[int64]) string { return fmt.Sprint(*c.New) }).To("rs-out", serde.String, serde.String)
	return b
}

func strataReset(t *testing.T, server string, args ...string) (string, error) {
	t.Helper()
	bin := gobin.Build(t, "cmd/strata")
	out, err := exec.Command(bin, append([]string{"streams", "reset", "--server", server, "--application", "rs"}, args...)...).CombinedOutput()
	return string(out), err
}

func outputValues(t *testing.T, c *client.Client, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range readAll(t, c, topic) {
		k, _ := r.KeyBytes()
		v, _ := r.ValueBytes()
		out = append(out, string(k)+"="+string(v))
	}
	return out
}

// TestStreamsReset: the application runs over its inputs; `strata streams reset` is
// refused while it runs (and changes nothing); once it stopped, the reset deletes
// its group and internal topics and wipes its state directory, and the next run
// reprocesses every input from the start: it writes the same outputs again.
func TestStreamsReset(t *testing.T) {
	nd := startNode(t)
	c := client.New(nd.url)
	stringTopics(t, c, 3, "rs-in", "rs-out")
	rng := rand.New(rand.NewPCG(38, 2))
	// The first half an hour before the second, for a reset to a time between them.
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	var recs []client.Record
	secondHalf := map[string]int{} // value → records
	for i := range 600 {
		v := fmt.Sprintf("v%02d", rng.IntN(40))
		ts := base
		if i >= 300 {
			ts = base.Add(time.Hour)
			secondHalf[v]++
		}
		recs = append(recs, client.Record{Key: client.String(fmt.Sprintf("k%d", i)), Value: client.String(v), Timestamp: ts})
	}
	// Two requests, so that the halves are in separate record batches (a time inside
	// one batch was seen to resolve to the batch's first offset).
	produceAll(t, c, map[string][]client.Record{"rs-in": recs[:300]})
	produceAll(t, c, map[string][]client.Record{"rs-in": recs[300:]})
	stateDir := t.TempDir()
	cfg := streams.Config{Client: c, StateDir: stateDir, InstanceID: "rs-1", SessionTimeout: 3 * time.Second}

	_, stop := runBg(t, resetTopology(), cfg)
	waitAllDrained(t, c, "rs", 2*time.Minute)
	first := outputValues(t, c, "rs-out")
	if len(first) != len(recs) {
		t.Fatalf("first run wrote %d outputs for %d inputs", len(first), len(recs))
	}
	out, err := strataReset(t, nd.url, "--state-dir", stateDir)
	if err == nil || !strings.Contains(out, "live members") {
		t.Fatalf("reset while the application runs: err %v, output %q; want a refusal naming the live members", err, out)
	}
	if _, err := c.Topic(t.Context(), "rs-counts-changelog"); err != nil {
		t.Fatalf("the refused reset deleted the changelog: %v", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "rs")); err != nil {
		t.Fatalf("the refused reset touched the state directory: %v", err)
	}
	if _, err := streams.Reset(t.Context(), c, streams.ResetOptions{Application: "rs"}); !errors.Is(err, streams.ErrAppRunning) {
		t.Fatalf("streams.Reset while the application runs: %v, want ErrAppRunning", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}

	out, err = strataReset(t, nd.url, "--state-dir", stateDir)
	if err != nil {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	t.Logf("reset:\n%s", out)
	for _, topic := range []string{"rs-counts-changelog", "rs-counts-repartition"} {
		if !strings.Contains(out, topic) {
			t.Errorf("reset did not delete %s", topic)
		}
		if _, err := c.Topic(t.Context(), topic); !client.HasCode(err, "topic_not_found") {
			t.Errorf("%s after the reset: %v, want topic_not_found", topic, err)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "rs")); !os.IsNotExist(err) {
		t.Errorf("state directory after the reset: %v, want it gone", err)
	}

	_, stop = runBg(t, resetTopology(), cfg)
	waitAllDrained(t, c, "rs", 2*time.Minute)
	if err := stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	all := outputValues(t, c, "rs-out")
	if len(all) != 2*len(recs) {
		t.Fatalf("after the reset the topic holds %d outputs, want %d (the first run's, then the same again)", len(all), 2*len(recs))
	}
	// Per output partition, the first run's records come first: compare multisets.
	again := slices.Clone(all)
	slices.Sort(again)
	want := slices.Concat(first, first)
	slices.Sort(want)
	if missing, extra := compare(t, "outputs after the reset", again, want); missing+extra > 0 {
		t.Fatalf("reprocessing did not give the same outputs again: %d missing, %d extra", missing, extra)
	}

	// A reset to a time between the halves reprocesses the second half alone, from
	// empty state: each value counted again from 1.
	rep, err := streams.Reset(t.Context(), c, streams.ResetOptions{Application: "rs", ToTime: base.Add(30 * time.Minute), StateDir: stateDir})
	if err != nil {
		t.Fatalf("reset to a time: %v", err)
	}
	t.Logf("reset to %s: %+v", base.Add(30*time.Minute), rep.Inputs)
	if !slices.Equal(rep.InputTopics, []string{"rs-in"}) || len(rep.Inputs) != 3 {
		t.Errorf("reset to a time: inputs %v positioned %+v, want rs-in's 3 partitions", rep.InputTopics, rep.Inputs)
	}
	_, stop = runBg(t, resetTopology(), cfg)
	waitAllDrained(t, c, "rs", 2*time.Minute)
	if err := stop(); err != nil {
		t.Fatalf("third run: %v", err)
	}
	// What the third run added: every output now, less those before it.
	left := map[string]int{}
	for _, o := range all {
		left[o]++
	}
	var third []string
	for _, o := range outputValues(t, c, "rs-out") {
		if left[o] > 0 {
			left[o]--
			continue
		}
		third = append(third, o)
	}
	var wantThird []string
	for v, n := range secondHalf {
		for i := 1; i <= n; i++ {
			wantThird = append(wantThird, fmt.Sprintf("%s=%d", v, i))
		}
	}
	slices.Sort(third)
	slices.Sort(wantThird)
	if missing, extra := compare(t, "outputs after the reset to a time", third, wantThird); missing+extra > 0 {
		t.Fatalf("reprocessing from a time: %d missing, %d extra", missing, extra)
	}
}
