package connect

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKillsExactlyOnce: a file source feeds a one-partition topic that a file sink
// writes out, on one worker, while the file grows. The worker is SIGKILLed at random
// moments (5 times; 20 with STRATA_LONG=1), then crashes once at each failure point —
// after a source poll before its commit, after a source commit before the task hears of
// it (its upstream acknowledgement), after the sink's files are written before its
// offsets commit — each time restarted. The topic then holds the file's lines exactly
// once, in order, and so do the sink's files: line for line, no duplicate, no gap.
func TestKillsExactlyOnce(t *testing.T) {
	kills := 5
	if long() {
		kills = 20
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	c := newCluster(t, 2*time.Second)
	w := c.start("w")
	createTopic(t, w.url, "lines", 1)
	in, out := filepath.Join(c.dir, "in.jsonl"), filepath.Join(c.dir, "out")
	app := startAppender(t, []string{in}, 100, 20*time.Millisecond) // 5,000 lines/s
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "src", "config": map[string]string{
		"connector.class": "FileSource", "file": in, "topic": "lines", "batch.size": "500"}}, 201, nil)
	rest(t, w.url, "POST", "/connectors", map[string]any{"name": "sink", "config": map[string]string{
		"connector.class": "FileSink", "directory": out, "topics": "lines", "offset.flush.interval.ms": "100", "flush.size": "250"}}, 201, nil)

	for k := range kills {
		time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))) // a kill at a random moment
		before := app.count()
		w.kill()
		t.Logf("kill %d: %d lines written so far", k+1, before)
		w = c.start("w")
	}
	for _, fp := range []string{"source.after_poll", "source.after_commit", "sink.after_put"} {
		n := 1 + rng.IntN(4)
		w.kill()
		w = c.start("w", fmt.Sprintf("STRATA_CONNECT_FAILPOINTS=%s=%d", fp, n))
		code, exited := w.exitCode(60 * time.Second)
		if !exited || code != 137 || !strings.Contains(w.out.String(), "failpoint "+fp+" reached") {
			t.Fatalf("failpoint %s=%d: exited %v with code %d", fp, n, exited, code)
		}
		t.Logf("failpoint %s: crashed at its pass %d", fp, n)
		w = c.start("w")
	}
	time.Sleep(500 * time.Millisecond) // the load runs a while on the last worker before it stops
	app.halt()
	want := app.all()
	t.Logf("%d lines written", len(want))

	deadline := time.Now().Add(90 * time.Second)
	for {
		files, n := sinkLines(t, out)
		if n >= len(want) || time.Now().After(deadline) {
			if err := exactlyOnce("sink files", want, files[0]); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(files[0], want) {
				t.Fatal("the sink's files hold every line once, but not in the file's order")
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := topicValues(t, w.url, "lines", 1)[0]
	if err := exactlyOnce("topic", want, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("the topic holds every line once, but not in the file's order")
	}
}
