package connect

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// byWorker counts a connector's RUNNING tasks per worker name (the id's prefix).
func byWorker(t testing.TB, base, name string) (map[string]int, int) {
	var st status
	rest(t, base, "GET", "/connectors/"+name+"/status", nil, 200, &st)
	out := map[string]int{}
	running := 0
	for _, task := range st.Tasks {
		if task.State == "RUNNING" {
			running++
			out[task.WorkerID[:strings.LastIndexByte(task.WorkerID, '-')]]++
		}
	}
	return out, running
}

// waitSpread waits until each connector's tasks all run, spread as want says (worker
// name → tasks), and answers how long that took.
func waitSpread(t *testing.T, base string, d time.Duration, want map[string]map[string]int) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		ok := true
		var last string
		for conn, w := range want {
			got, _ := byWorker(t, base, conn)
			if fmt.Sprint(got) != fmt.Sprint(w) {
				ok = false
				last = fmt.Sprintf("%s: %v, want %v", conn, got, w)
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks not spread as wanted after %s: %s", d, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTwoWorkers: two workers share the tasks — four source tasks (a file each) and two
// sink tasks — two and one each. One is SIGKILLed: its tasks move to the other within
// its lease. It comes back and the tasks spread again. Then one is SIGSTOPped past its
// lease, its tasks move, and it is SIGCONTed: its next commit is refused as a stale
// generation (its log says so), and nothing it sends afterwards is visible — the topic
// and the sink's files hold every line written exactly once.
func TestTwoWorkers(t *testing.T) {
	lease := 2 * time.Second
	c := newCluster(t, lease)
	a, b := c.start("a"), c.start("b")
	createTopic(t, a.url, "lines", 4)
	var files []string
	for i := range 4 {
		files = append(files, filepath.Join(c.dir, fmt.Sprintf("in%d.jsonl", i)))
	}
	out := filepath.Join(c.dir, "out")
	app := startAppender(t, files, 25, 20*time.Millisecond) // 5,000 lines/s over four files
	rest(t, a.url, "POST", "/connectors", map[string]any{"name": "src", "config": map[string]string{
		"connector.class": "FileSource", "files": strings.Join(files, ","), "topic": "lines", "tasks.max": "4", "batch.size": "200"}}, 201, nil)
	rest(t, b.url, "POST", "/connectors", map[string]any{"name": "sink", "config": map[string]string{
		"connector.class": "FileSink", "directory": out, "topics": "lines", "tasks.max": "2", "offset.flush.interval.ms": "100"}}, 201, nil)

	spread := map[string]map[string]int{"src": {"a": 2, "b": 2}, "sink": {"a": 1, "b": 1}}
	took := waitSpread(t, a.url, 30*time.Second, spread)
	t.Logf("tasks spread over both workers in %s", took.Round(time.Millisecond))

	// SIGKILL: the tasks move to the survivor within the lease (plus a beat or two).
	time.Sleep(time.Second) // the load runs a while on both, so the kill finds work in flight
	a.kill()
	killed := time.Now()
	took = waitSpread(t, b.url, 4*lease, map[string]map[string]int{"src": {"b": 4}, "sink": {"b": 2}})
	t.Logf("a SIGKILLed: all tasks running on b %s after the kill (lease %s)", time.Since(killed).Round(time.Millisecond), lease)
	if time.Since(killed) > lease+2*time.Second {
		t.Errorf("the tasks took %s to move, more than the lease %s and two beats", time.Since(killed).Round(time.Millisecond), lease)
	}
	a = c.start("a")
	waitSpread(t, b.url, 30*time.Second, spread)

	// SIGSTOP past the lease: b takes a's tasks; SIGCONT: a's commits are refused.
	time.Sleep(time.Second) // work in flight again, for the pause to catch
	a.signal(syscall.SIGSTOP)
	waitSpread(t, b.url, 4*lease, map[string]map[string]int{"src": {"b": 4}, "sink": {"b": 2}})
	time.Sleep(lease / 2) // b runs a's tasks a while before a wakes up and tries to commit
	a.signal(syscall.SIGCONT)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(a.out.String(), "stale_generation") {
		if time.Now().After(deadline) {
			t.Fatal("the resumed worker's next commit was not refused as a stale generation")
		}
		time.Sleep(100 * time.Millisecond)
	}
	refused := strings.Count(a.out.String(), "commit refused: this task instance is fenced (stale generation)")
	t.Logf("a SIGCONTed: %d of its commits refused as a stale generation", refused)
	if refused == 0 {
		t.Fatal("no commit refusal logged")
	}
	waitSpread(t, b.url, 30*time.Second, spread)

	time.Sleep(time.Second) // the load runs a while over the spread tasks before it stops
	app.halt()
	want := app.all()
	deadline = time.Now().Add(90 * time.Second)
	for {
		parts, n := sinkLines(t, out)
		if n >= len(want) || time.Now().After(deadline) {
			var got []string
			for _, ls := range parts {
				got = append(got, ls...)
			}
			if err := exactlyOnce("sink files", want, got); err != nil {
				t.Fatal(err)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var got []string
	for _, vs := range topicValues(t, b.url, "lines", 4) {
		got = append(got, vs...)
	}
	if err := exactlyOnce("topic", want, got); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lines, each exactly once in the topic and the files", len(want))
}
